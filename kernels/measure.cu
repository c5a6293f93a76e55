/* Measurement. Per-operation timing (tupe_backend_cuda_timing): every operation of the table
 * is wrapped so that a pair of CUDA events on the compute stream brackets its work; the pairs
 * are read when the times are asked for (or when the pool of events is full), so the timing
 * adds no host wait to a step. Counters (tupe_backend_cuda_counters): what the emulated GPU
 * counted (tests/cuemu: cuemu.h, "counters"); on a GPU there are none. */
#include <type_traits>
#include <utility>

#include "measure.cuh"

/* The operations timed: every one of the table that queues work on the device. */
#define TIMED_OPS(X)                                                                             \
    X(upload) X(download) X(zero) X(scale) X(sumsq) X(sumsq_parts) X(add) X(gemm)             \
    X(linear_fwd) X(linear_bwd) X(act_fwd) X(act_bwd) X(ln_fwd) X(ln_bwd) X(resid_ln_fwd)      \
    X(resid_ln_bwd) X(embed_fwd) X(embed_bwd) X(attn_fwd) X(attn_bwd)                          \
    X(pos_bias_fwd) X(pos_bias_bwd) X(qk_pos_add) X(qk_pos_grad) X(rope) X(gather_rows)        \
    X(scatter_rows) X(xent_fwd) X(xent_bwd) X(xent_fused) X(mse_fwd) X(mse_bwd) X(adamw)

enum {
#define X(op) OP_##op,
    TIMED_OPS(X)
#undef X
    OP_N
};
static const char *const op_names[OP_N] = {
#define X(op) #op,
    TIMED_OPS(X)
#undef X
};

#define POOL 8192 /* event pairs read at once */

struct op_timing {
    tupe_backend orig;              /* the table as it was: what the wrappers call */
    int on;
    cudaEvent_t ev[2 * POOL];
    int op[POOL];
    int nev;                        /* events created */
    int used;                       /* pairs recorded since the last read */
    long long calls[OP_N];
    double ms[OP_N];
};

/* Adds the recorded pairs to the sums (waits for the last one). 0, or 1 with the error kept. */
static int fold(cu_priv *pr, op_timing *tm)
{
    if (tm->used == 0)
        return 0;
    if (CK(cudaEventSynchronize(tm->ev[2 * tm->used - 1])))
        return 1;
    for (int i = 0; i < tm->used; i++) {
        float ms = 0;
        if (CK(cudaEventElapsedTime(&ms, tm->ev[2 * i], tm->ev[2 * i + 1])))
            return 1;
        tm->ms[tm->op[i]] += ms;
        tm->calls[tm->op[i]]++;
    }
    tm->used = 0;
    return 0;
}

/* The events around one call of operation `op` (nothing once the backend has failed). */
struct op_span {
    cu_priv *pr;
    op_timing *tm;
    int slot;
    op_span(tupe_backend *be, int op) : pr(PR(be)), tm(PR(be)->tm), slot(-1)
    {
        if (pr->err || (tm->used == POOL && fold(pr, tm)))
            return;
        slot = tm->used;
        while (tm->nev < 2 * (slot + 1))
            if (CK(cudaEventCreate(&tm->ev[tm->nev++]))) {
                tm->nev--;
                slot = -1;
                return;
            }
        if (CK(cudaEventRecord(tm->ev[2 * slot], pr->s)))
            slot = -1;
        else
            tm->op[slot] = op;
    }
    ~op_span()
    {
        if (slot >= 0 && !CK(cudaEventRecord(tm->ev[2 * slot + 1], pr->s)))
            tm->used = slot + 1;
    }
};

/* The wrapper of table entry M (a pointer to a member of tupe_backend): times the call of the
 * original entry. */
template <auto M, int Op, class F = std::remove_reference_t<decltype(std::declval<tupe_backend &>().*M)>>
struct timed;
template <auto M, int Op, class R, class... A> struct timed<M, Op, R (*)(tupe_backend *, A...)> {
    static R call(tupe_backend *be, A... a)
    {
        op_span s(be, Op);
        return (PR(be)->tm->orig.*M)(be, a...);
    }
};

void measure_destroy(cu_priv *pr)
{
    op_timing *tm = pr->tm;
    if (!tm)
        return;
    for (int i = 0; i < tm->nev; i++)
        cudaEventDestroy(tm->ev[i]);
    free(tm);
    pr->tm = NULL;
}

static int is_cuda(tupe_backend *be) { return be && be->name && strncmp(be->name, "cuda", 4) == 0; }

extern "C" int tupe_backend_cuda_timing(tupe_backend *be, int on, tupe_err *e)
{
    if (!is_cuda(be))
        return tupe_fail(e, TUPE_EUSAGE, "per-operation timing is the CUDA backend's");
    cu_priv *pr = PR(be);
    if (!pr->tm) {
        pr->tm = (op_timing *)calloc(1, sizeof *pr->tm);
        if (!pr->tm)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    op_timing *tm = pr->tm;
    if (on && !tm->on) {
        tm->orig = *be;
#define X(op) be->op = timed<&tupe_backend::op, OP_##op>::call;
        TIMED_OPS(X)
#undef X
    } else if (!on && tm->on) {
#define X(op) be->op = tm->orig.op;
        TIMED_OPS(X)
#undef X
    }
    if (on) { /* the times start over */
        fold(pr, tm);
        memset(tm->calls, 0, sizeof tm->calls);
        memset(tm->ms, 0, sizeof tm->ms);
    }
    tm->on = on;
    return cu_check(be, e);
}

extern "C" int tupe_backend_cuda_op_times(tupe_backend *be, tupe_cuda_op_time *t, int cap,
                                          tupe_err *e)
{
    if (!is_cuda(be) || !PR(be)->tm) {
        tupe_fail(e, TUPE_EUSAGE, "no per-operation timing was started");
        return -1;
    }
    cu_priv *pr = PR(be);
    op_timing *tm = pr->tm;
    fold(pr, tm);
    if (cu_check(be, e))
        return -1;
    int n = 0;
    for (int i = 0; i < OP_N; i++)
        if (tm->calls[i]) {
            if (n < cap) {
                t[n].name = op_names[i];
                t[n].calls = tm->calls[i];
                t[n].ms = tm->ms[i];
            }
            n++;
        }
    return n;
}

/* ---- counters ------------------------------------------------------------------------------ */

#ifdef __CUEMU__
static long long cnt(const char *name) { return (long long)::cuemu::counter_get(name); }

extern "C" int tupe_backend_cuda_counters_reset(tupe_backend *be, tupe_err *e)
{
    if (!is_cuda(be))
        return tupe_fail(e, TUPE_EUSAGE, "the counters are the CUDA backend's");
    if (cu_check(be, e)) /* what was queued before is not counted */
        return TUPE_EFAIL;
    ::cuemu::counters_reset();
    return 0;
}

extern "C" int tupe_backend_cuda_counters(tupe_backend *be, tupe_cuda_counters *c, tupe_err *e)
{
    if (!is_cuda(be))
        return tupe_fail(e, TUPE_EUSAGE, "the counters are the CUDA backend's");
    memset(c, 0, sizeof *c);
    /* what the host did, before the wait below adds to it; then what the device did */
    c->kernels = cnt("kernels");
    c->gemms = cnt("gemms");
    c->memsets = cnt("memsets");
    c->copies = cnt("copies");
    c->sorts = cnt("sorts");
    c->transfers = cnt("transfers");
    c->host_syncs = cnt("host_syncs");
    c->launches = c->kernels + c->gemms + c->memsets + c->copies + c->sorts;
    c->launch_digest = (unsigned long long)::cuemu::counter_get("launch_digest");
    c->gemm_flops = cnt("gemm_flops");
    if (cu_check(be, e))
        return TUPE_EFAIL;
    c->philox_calls = cnt("philox_calls");
    c->dropout_decisions = cnt("dropout_decisions");
    c->peak_device_bytes = cnt("peak_device_bytes");
    c->largest_buffer_bytes = cnt("largest_buffer_bytes");
    c->xent_read_bytes = cnt("xent_read_bytes");
    c->xent_reread_bytes = cnt("xent_reread_bytes");
    c->xent_write_bytes = cnt("xent_write_bytes");
    return 0;
}
#else
static int no_counters(tupe_err *e)
{
    return tupe_fail(e, TUPE_EUSAGE, "the counters of the device's work are the emulated GPU's "
                     "(a build with CUDA=emu, tests/cuemu/README.md); a GPU has none");
}

extern "C" int tupe_backend_cuda_counters_reset(tupe_backend *be, tupe_err *e)
{
    (void)be;
    return no_counters(e);
}

extern "C" int tupe_backend_cuda_counters(tupe_backend *be, tupe_cuda_counters *c, tupe_err *e)
{
    (void)be;
    memset(c, 0, sizeof *c);
    return no_counters(e);
}
#endif
