/* The model's side of tests/bench/model.sh: training-step throughput (zero_grad, forward with
 * the MLM head on 15% of the positions, backward, clipping and AdamW; train mode with the
 * preset's dropout), peak memory, and the sgemm peak of this machine with the kernels chosen
 * (oneDNN's or OpenBLAS's, lib/backend/blas.h), each with its own threads, as JSON lines
 * in the form of tests/reference/bench_torch.py's:
 *
 *   model --preset small --position tupe-r --batch 16 --seq 128 --threads 2
 *   model --sgemm --threads 2
 */
#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/blas.h"
#include "base/progress.h"
#include "base/rng.h"
#include "cli/cli.h"
#include "model/model.h"
#include "model/optim.h"

void openblas_set_num_threads(int num_threads);

static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long a = 0, b = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &a, &b) != 2)
            b = 0;
        fclose(f);
    }
    return (double)b * 4096.0 / (1 << 20);
}

/* CPU time of the process (all threads): with OMP_WAIT_POLICY=passive, the work done,
 * whatever else the machine is running. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Matrix-product FLOPs of one training step (backward = twice the forward). */
static double step_flops(const tupe_config *c, int B, int T, int M)
{
    double N = (double)B * T, D = c->hidden_size, F = c->intermediate_size, H = c->num_heads,
           V = c->vocab_size, dh = D / H;
    double layer = 2 * N * D * 3 * D + 2 * N * D * D + 2 * 2 * N * D * F + 2 * 2 * B * H * T * T * dh;
    double f = c->num_layers * layer + 2.0 * M * D * D + 2.0 * M * D * V;
    if (tupe_cfg_tupe(c))
        f += 2 * 2 * (T + 1.0) * D * D + 2 * H * (T + 1.0) * (T + 1.0) * dh;
    if (c->position == TUPE_POS_BERT_AD)
        f += 2 * 2 * (double)T * D * D;
    return 3 * f;
}

/* ---- per-operation timings (--profile): the backend's table wrapped, each call timed ----
 * The CPU backend returns when an operation is done, so the wall time of each call is its
 * cost; the products' FLOPs are counted from their arguments. */
enum { P_GEMM, P_LIN_F, P_LIN_B, P_ACT_F, P_ACT_B, P_LN_F, P_LN_B, P_RLN_F, P_RLN_B, P_EMB_F,
       P_EMB_B, P_ATT_F, P_ATT_B, P_POS_F, P_POS_B, P_QK_A, P_QK_G, P_GATHER, P_SCATTER,
       P_XENT_F, P_XENT_B, P_XENT_FU, P_ADAMW, P_ZERO, P_SUMSQ, P_SCALE, P_NOPS };
static const char *const op_names[P_NOPS] = {
    "gemm", "linear_fwd", "linear_bwd", "act_fwd", "act_bwd", "ln_fwd", "ln_bwd", "resid_ln_fwd",
    "resid_ln_bwd", "embed_fwd", "embed_bwd", "attn_fwd", "attn_bwd", "pos_bias_fwd",
    "pos_bias_bwd", "qk_pos_add", "qk_pos_grad", "gather_rows", "scatter_rows", "xent_fwd",
    "xent_bwd", "xent_fused", "adamw", "zero", "sumsq", "scale"};
static struct {
    double s, cpu, flops;
    long calls;
} prof[P_NOPS];
static int profiling;
static tupe_backend orig;
/* The products by shape as well: "linear_fwd 2048x256x768" (rows x in x out). */
#define NSHAPES 64
static struct {
    char key[64];
    double s, cpu, flops;
    long calls;
} shape[NSHAPES];
static void shape_add(const char *op, int a, int b, int c, double s, double cpu, double flops)
{
    char key[64];
    snprintf(key, sizeof key, "%s %dx%dx%d", op, a, b, c);
    for (int i = 0; i < NSHAPES; i++)
        if (!shape[i].key[0] || strcmp(shape[i].key, key) == 0) {
            memcpy(shape[i].key, key, sizeof key);
            shape[i].s += s, shape[i].cpu += cpu, shape[i].flops += flops, shape[i].calls++;
            return;
        }
}

#define TIMED_SHAPE(which, nflop, call, a, b, c)                                                  \
    do {                                                                                          \
        double t0_ = tupe_now(), c0_ = profiling ? cpu_seconds() : 0;                             \
        call;                                                                                     \
        if (profiling) {                                                                          \
            double dt_ = tupe_now() - t0_, dc_ = cpu_seconds() - c0_;                             \
            prof[which].s += dt_;                                                                 \
            prof[which].cpu += dc_;                                                               \
            prof[which].flops += (nflop);                                                         \
            prof[which].calls++;                                                                  \
            if ((nflop) > 0)                                                                      \
                shape_add(op_names[which], a, b, c, dt_, dc_, nflop);                             \
        }                                                                                         \
    } while (0)
#define TIMED(which, nflop, call) TIMED_SHAPE(which, nflop, call, 0, 0, 0)

static void w_gemm(tupe_backend *be, int ta, int tb, int M, int N, int K, double alpha,
                   const tupe_dev *A, int lda, const tupe_dev *B, int ldb, double beta, tupe_dev *C, int ldc)
{
    TIMED_SHAPE(P_GEMM, 2.0 * M * N * K,
                orig.gemm(be, ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc), M, N, K);
}
static void w_lin_f(tupe_backend *be, tupe_dev *y, tupe_dev *a, const tupe_dev *x, const tupe_dev *W,
                    const tupe_dev *b, int N, int in, int out, int act, const tupe_drop *drop)
{
    TIMED_SHAPE(P_LIN_F, 2.0 * N * in * out, orig.linear_fwd(be, y, a, x, W, b, N, in, out, act, drop),
                N, in, out);
}
static void w_lin_b(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dW, tupe_dev *db,
                    const tupe_dev *dy, const tupe_dev *x, const tupe_dev *W, int N, int in, int out)
{
    TIMED_SHAPE(P_LIN_B, 2.0 * N * in * out * ((dW != NULL) + (dx != NULL)),
                orig.linear_bwd(be, dx, dx_beta, dW, db, dy, x, W, N, in, out), N, in, out);
}
static void w_act_f(tupe_backend *be, tupe_dev *a, const tupe_dev *y, size_t n, int act, const tupe_drop *d)
{
    TIMED(P_ACT_F, 0, orig.act_fwd(be, a, y, n, act, d));
}
static void w_act_b(tupe_backend *be, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                    const tupe_drop *drop)
{
    TIMED(P_ACT_B, 0, orig.act_bwd(be, d, a, y, n, act, drop));
}
static void w_ln_f(tupe_backend *be, tupe_dev *y, tupe_dev *xh, tupe_dev *rs, const tupe_dev *x,
                   const tupe_dev *g, const tupe_dev *b, int N, int D, double eps)
{
    TIMED(P_LN_F, 0, orig.ln_fwd(be, y, xh, rs, x, g, b, N, D, eps));
}
static void w_ln_b(tupe_backend *be, tupe_dev *dx, double beta, tupe_dev *dg, tupe_dev *db,
                   const tupe_dev *dy, const tupe_dev *xh, const tupe_dev *rs, const tupe_dev *g, int N, int D)
{
    TIMED(P_LN_B, 0, orig.ln_bwd(be, dx, beta, dg, db, dy, xh, rs, g, N, D));
}
static void w_rln_f(tupe_backend *be, tupe_dev *y, tupe_dev *xh, tupe_dev *rs, const tupe_dev *res,
                    const tupe_dev *a, const tupe_dev *bias, const tupe_dev *g, const tupe_dev *b, int N,
                    int D, double eps, const tupe_drop *drop)
{
    TIMED(P_RLN_F, 0, orig.resid_ln_fwd(be, y, xh, rs, res, a, bias, g, b, N, D, eps, drop));
}
static void w_rln_b(tupe_backend *be, tupe_dev *dsum, tupe_dev *dbr, tupe_dev *dg, tupe_dev *db,
                    const tupe_dev *dy, const tupe_dev *xh, const tupe_dev *rs, const tupe_dev *g, int N,
                    int D, const tupe_drop *drop)
{
    TIMED(P_RLN_B, 0, orig.resid_ln_bwd(be, dsum, dbr, dg, db, dy, xh, rs, g, N, D, drop));
}
static void w_emb_f(tupe_backend *be, tupe_dev *y, tupe_dev *xh, tupe_dev *rs, const int32_t *ids,
                    const int32_t *types, const int32_t *lengths, const tupe_dev *word, const tupe_dev *pos,
                    const tupe_dev *tt, const tupe_dev *g, const tupe_dev *b, int B, int T, int D,
                    double eps, const tupe_drop *drop)
{
    TIMED(P_EMB_F, 0, orig.embed_fwd(be, y, xh, rs, ids, types, lengths, word, pos, tt, g, b, B, T, D, eps, drop));
}
static void w_emb_b(tupe_backend *be, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt, tupe_dev *dg,
                    tupe_dev *db, const tupe_dev *dy, const tupe_dev *xh, const tupe_dev *rs,
                    const tupe_dev *g, const int32_t *ids, const int32_t *types, const int32_t *lengths,
                    int B, int T, int D, int V, int ntypes, const tupe_drop *drop, tupe_dev *scratch)
{
    TIMED(P_EMB_B, 0, orig.embed_bwd(be, dword, dpos, dtt, dg, db, dy, xh, rs, g, ids, types, lengths, B,
                                     T, D, V, ntypes, drop, scratch));
}
static void w_att_f(tupe_backend *be, tupe_dev *ctx, tupe_dev *probs, tupe_dev *lse,
                    const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
                    const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                    const tupe_drop *drop, tupe_dev *scratch)
{
    TIMED_SHAPE(P_ATT_F, 4.0 * B * H * T * T * dh,
                orig.attn_fwd(be, ctx, probs, lse, qkv, bias, bstride, lengths, B, T, H, dh, alpha,
                              drop, scratch),
                B * H, T, dh);
}
static void w_att_b(tupe_backend *be, tupe_dev *dqkv, tupe_dev *G, tupe_dev *probs,
                    const tupe_dev *lse, const tupe_dev *ctx, const tupe_dev *dctx,
                    const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
                    const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                    const tupe_drop *drop, tupe_dev *scratch)
{
    TIMED_SHAPE(P_ATT_B, 8.0 * B * H * T * T * dh,
                orig.attn_bwd(be, dqkv, G, probs, lse, ctx, dctx, qkv, bias, bstride, lengths, B,
                              T, H, dh, alpha, drop, scratch),
                B * H, T, dh);
}
static void w_pos_f(tupe_backend *be, tupe_dev *bias, const tupe_dev *A, const tupe_dev *rel,
                    const int32_t *buckets, int ldb, int T, int H, int reset)
{
    TIMED(P_POS_F, 0, orig.pos_bias_fwd(be, bias, A, rel, buckets, ldb, T, H, reset));
}
static void w_pos_b(tupe_backend *be, tupe_dev *dA, tupe_dev *drel, const tupe_dev *G,
                    const int32_t *buckets, int ldb, int T, int H, int reset)
{
    TIMED(P_POS_B, 0, orig.pos_bias_bwd(be, dA, drel, G, buckets, ldb, T, H, reset));
}
static void w_qk_a(tupe_backend *be, tupe_dev *qkv, const tupe_dev *pq, const tupe_dev *pk, int B,
                   int T, int D)
{
    TIMED(P_QK_A, 0, orig.qk_pos_add(be, qkv, pq, pk, B, T, D));
}
static void w_qk_g(tupe_backend *be, tupe_dev *dpq, tupe_dev *dpk, const tupe_dev *dqkv, int B, int T,
                   int D)
{
    TIMED(P_QK_G, 0, orig.qk_pos_grad(be, dpq, dpk, dqkv, B, T, D));
}
static void w_gather(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx, int M, int D)
{
    TIMED(P_GATHER, 0, orig.gather_rows(be, dst, src, idx, M, D));
}
static void w_scatter(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx, int M, int D)
{
    TIMED(P_SCATTER, 0, orig.scatter_rows(be, dst, src, idx, M, D));
}
static void w_xent_f(tupe_backend *be, tupe_dev *lse, const tupe_dev *logits, const int32_t *labels,
                     int M, int V, int ld, tupe_dev *loss, tupe_dev *correct)
{
    TIMED(P_XENT_F, 0, orig.xent_fwd(be, lse, logits, labels, M, V, ld, loss, correct));
}
static void w_xent_b(tupe_backend *be, tupe_dev *d, const tupe_dev *logits, const tupe_dev *lse,
                     const int32_t *labels, int M, int V, int ld, double scale)
{
    TIMED(P_XENT_B, 0, orig.xent_bwd(be, d, logits, lse, labels, M, V, ld, scale));
}
static void w_xent_fu(tupe_backend *be, tupe_dev *d, const tupe_dev *logits,
                      const int32_t *labels, int M, int V, int ld, double scale,
                      const tupe_dev *snorm, tupe_dev *loss, tupe_dev *correct)
{
    TIMED(P_XENT_FU, 0, orig.xent_fused(be, d, logits, labels, M, V, ld, scale, snorm, loss, correct));
}
static void w_adamw(tupe_backend *be, tupe_dev *p, const tupe_dev *g, tupe_dev *m, tupe_dev *v,
                    tupe_dev *master, size_t n, const tupe_adamw_args *a, const tupe_dev *sumsq)
{
    TIMED(P_ADAMW, 0, orig.adamw(be, p, g, m, v, master, n, a, sumsq));
}
static void w_zero(tupe_backend *be, tupe_dev *x, size_t n) { TIMED(P_ZERO, 0, orig.zero(be, x, n)); }
static void w_scale(tupe_backend *be, tupe_dev *x, size_t n, double f) { TIMED(P_SCALE, 0, orig.scale(be, x, n, f)); }
static double w_sumsq(tupe_backend *be, const tupe_dev *x, size_t n)
{
    double r = 0;
    TIMED(P_SUMSQ, 0, r = orig.sumsq(be, x, n));
    return r;
}

static void profile_install(tupe_backend *be)
{
    orig = *be;
    be->gemm = w_gemm, be->linear_fwd = w_lin_f, be->linear_bwd = w_lin_b, be->act_fwd = w_act_f;
    be->act_bwd = w_act_b, be->ln_fwd = w_ln_f, be->ln_bwd = w_ln_b, be->resid_ln_fwd = w_rln_f;
    be->resid_ln_bwd = w_rln_b, be->embed_fwd = w_emb_f, be->embed_bwd = w_emb_b;
    be->attn_fwd = w_att_f, be->attn_bwd = w_att_b;
    be->pos_bias_fwd = w_pos_f, be->pos_bias_bwd = w_pos_b, be->qk_pos_add = w_qk_a;
    be->qk_pos_grad = w_qk_g, be->gather_rows = w_gather, be->scatter_rows = w_scatter;
    be->xent_fwd = w_xent_f, be->xent_bwd = w_xent_b, be->xent_fused = w_xent_fu;
    be->adamw = w_adamw, be->zero = w_zero;
    be->scale = w_scale, be->sumsq = w_sumsq;
}

/* "ops": per operation the milliseconds per step, the share of the step, the calls per step
 * and, for the products, GFLOP/s. */
static void profile_print(int steps, double step_s)
{
    printf(", \"ops\": {");
    int first = 1;
    double total = 0;
    for (int i = 0; i < P_NOPS; i++) {
        if (!prof[i].calls)
            continue;
        total += prof[i].s;
        printf("%s\"%s\": {\"ms\": %.2f, \"share\": %.3f, \"cpu_ms\": %.2f, \"calls\": %.0f",
               first ? "" : ", ", op_names[i], 1e3 * prof[i].s / steps, prof[i].s / steps / step_s,
               1e3 * prof[i].cpu / steps, (double)prof[i].calls / steps);
        if (prof[i].flops > 0)
            printf(", \"gflops\": %.1f, \"gflops_per_cpu_s\": %.1f", prof[i].flops / prof[i].s / 1e9,
                   prof[i].flops / prof[i].cpu / 1e9);
        printf("}");
        first = 0;
    }
    printf("%s\"other\": {\"ms\": %.2f, \"share\": %.3f}}", first ? "" : ", ",
           1e3 * (step_s - total / steps), 1 - total / steps / step_s);
    printf(", \"shapes\": {");
    for (int i = 0; i < NSHAPES && shape[i].key[0]; i++)
        printf("%s\"%s\": {\"ms\": %.2f, \"cpu_ms\": %.2f, \"calls\": %.0f, \"gflops\": %.1f, "
               "\"gflops_per_cpu_s\": %.1f}", i ? ", " : "", shape[i].key, 1e3 * shape[i].s / steps,
               1e3 * shape[i].cpu / steps, (double)shape[i].calls / steps,
               shape[i].flops / shape[i].s / 1e9, shape[i].flops / shape[i].cpu / 1e9);
    printf("}");
}

/* One n x n x n product with the single-precision kernels chosen, on `threads` threads of the
 * library's own (the step splits its products over its threads instead). */
static void peak_product(const tupe_blas_info *bi, int n, int threads, const float *a,
                         const float *b, float *c)
{
    if (bi->sgemm[0]) {
        omp_set_num_threads(threads);
        (void)dnnl_sgemm('N', 'N', n, n, n, 1, a, n, b, n, 0, c, n);
    } else {
        openblas_set_num_threads(threads);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    }
}

static int sgemm_peak(int threads)
{
    /* The library's own threading on one large product: the machine's sgemm peak. */
    const tupe_blas_info *bi = tupe_blas_info_get();
    int n = 2048;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.01f;
    }
    peak_product(bi, n, threads, a, b, c);
    /* The best of the products done in 4 seconds: the peak, not the average of a busy box. */
    /* Also per CPU-second (all threads): what the kernels do with the time they get. */
    double best = 0, best_cpu = 0, start = tupe_now();
    while (tupe_now() - start < 4.0) {
        double t0 = tupe_now(), c0 = cpu_seconds();
        peak_product(bi, n, threads, a, b, c);
        double g = 2.0 * n * n * n / (tupe_now() - t0) / 1e9;
        double gc = 2.0 * n * n * n / (cpu_seconds() - c0) / 1e9;
        best = g > best ? g : best;
        best_cpu = gc > best_cpu ? gc : best_cpu;
    }
    printf("{\"sgemm_gflops\": %.1f, \"sgemm_gflops_per_cpu_s\": %.1f, \"n\": %d, \"threads\": %d, "
           "\"sgemm_library\": \"%s\", \"blas_core\": \"%s\", \"blas_best\": \"%s\", \"blas\": \"%s\"}\n",
           best, best_cpu, n, threads, bi->sgemm[0] ? bi->sgemm : bi->library, bi->core, bi->best,
           bi->line);
    free(a), free(b), free(c);
    return 0;
}

int main(int argc, char **argv)
{
    const char *preset = "small", *position = "tupe-r";
    int untie = 1, B = 16, T = 128, steps = 5, warmup = 2, V = 32769, threads = 2, sgemm = 0,
        profile = 0;
    double mask_rate = 0.15;
    static const struct option opts[] = {
        {"preset", 1, 0, 'p'}, {"position", 1, 0, 'o'}, {"tie", 0, 0, 'i'}, {"batch", 1, 0, 'b'},
        {"seq", 1, 0, 's'}, {"steps", 1, 0, 'n'}, {"warmup", 1, 0, 'w'}, {"vocab-size", 1, 0, 'V'},
        {"threads", 1, 0, 't'}, {"mask-rate", 1, 0, 'm'}, {"sgemm", 0, 0, 'g'},
        {"profile", 0, 0, 'P'}, {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'p': preset = optarg; break;
        case 'o': position = optarg; break;
        case 'i': untie = 0; break;
        case 'b': B = atoi(optarg); break;
        case 's': T = atoi(optarg); break;
        case 'n': steps = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'V': V = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'm': mask_rate = atof(optarg); break;
        case 'g': sgemm = 1; break;
        case 'P': profile = 1; break;
        default:
            fprintf(stderr, "usage: model [--preset P] [--position V] [--tie] [--batch B] [--seq T] "
                            "[--steps N] [--warmup N] [--vocab-size V] [--threads N] [--sgemm] "
                            "[--profile]\n");
            return 2;
        }
    }
    tupe_threads_apply(threads);
    tupe_err e;
    if (tupe_blas_select(&e)) {
        fprintf(stderr, "model: %s\n", e.msg);
        return 1;
    }
    if (sgemm)
        return sgemm_peak(threads);
    double base = rss_mib();
    tupe_config c;
    if (tupe_config_load(&c, preset, &e) || (c.position = tupe_position_parse(position)) < 0) {
        fprintf(stderr, "model: %s\n", c.position < 0 ? "bad position" : e.msg);
        return 1;
    }
    c.untie_cls = untie;
    c.vocab_size = V;
    int M = (int)lround(mask_rate * B * T);
    if (M < 1)
        M = 1;
    tupe_backend *be;
    tupe_model *m;
    tupe_adamw *o;
    tupe_capacity cap = {B, T, M};
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    if (tupe_backend_create(&be, "cpu", threads, &e) || tupe_model_create(&m, &c, be, &cap, &e) ||
        tupe_model_init(m, 1, &e) || tupe_adamw_create(&o, m, &oc, &e)) {
        fprintf(stderr, "model: %s\n", e.msg);
        return 1;
    }
    if (profile)
        profile_install(be);
    int32_t *ids = malloc(sizeof(int32_t) * B * T), *len = malloc(sizeof(int32_t) * B);
    int32_t *pos = malloc(sizeof(int32_t) * B * T), *lab = malloc(sizeof(int32_t) * M);
    tupe_rng r;
    tupe_rng_init(&r, 1, 0, 0, TUPE_RNG_USER);
    for (int i = 0; i < B * T; i++) {
        ids[i] = 7 + (int32_t)tupe_rng_below(&r, (uint32_t)(V - 7));
        pos[i] = i;
    }
    for (int i = 0; i < B; i++) {
        len[i] = T;
        ids[i * T] = 0;
    }
    /* M distinct positions, ascending */
    tupe_rng_shuffle_u32(&r, (uint32_t *)pos, (size_t)B * T);
    qsort(pos, (size_t)M, sizeof *pos, cmp_i32);
    for (int i = 0; i < M; i++)
        lab[i] = 7 + (int32_t)tupe_rng_below(&r, (uint32_t)(V - 7));
    tupe_batch b = {B, T, ids, len, NULL, M, pos, lab, NULL, NULL, 0, 0, .rtd_label = NULL};
    tupe_schedule sch = {1e-4, 0, 10000, 1000000, 1, 0};
    double *times = malloc(sizeof(double) * (size_t)(steps > 0 ? steps : 1) * 2);
    double *cpus = times + (steps > 0 ? steps : 1);
    double cpu0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup) {
            cpu0 = cpu_seconds();
            profiling = profile;
        }
        double t0 = tupe_now(), c0 = cpu_seconds();
        tupe_step st = {.seed = 1, .step = (uint32_t)s};
        tupe_model_zero_grad(m);
        if (tupe_model_forward(m, &b, &st, NULL, &e) || tupe_model_backward(m, &e)) {
            fprintf(stderr, "model: %s\n", e.msg);
            return 1;
        }
        tupe_adamw_step(o, tupe_lr_at(&sch, s + 1), -1);
        if (s >= warmup) {
            times[s - warmup] = tupe_now() - t0;
            cpus[s - warmup] = cpu_seconds() - c0;
        }
    }
    double cpu = (cpu_seconds() - cpu0) / steps;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak = (double)ru.ru_maxrss / 1024.0;
    double mn = times[0], mean = 0;
    for (int s = 0; s < steps; s++) {
        mn = times[s] < mn ? times[s] : mn;
        mean += times[s] / steps;
    }
    qsort(times, (size_t)steps, sizeof *times, cmp_d);
    qsort(cpus, (size_t)steps, sizeof *cpus, cmp_d);
    double med = times[steps / 2];
    double fl = step_flops(&c, B, T, M);
    char variant[32];
    snprintf(variant, sizeof variant, "%s%s", position,
             tupe_cfg_tupe(&c) && !untie ? "-tie" : "");
    printf("{\"preset\": \"%s\", \"variant\": \"%s\", \"batch\": %d, \"seq\": %d, \"threads\": %d, "
           "\"steps\": %d, \"step_s\": %.4f, \"step_s_min\": %.4f, \"tokens_per_s\": %.1f, "
           "\"tokens_per_s_best\": %.1f, \"peak_rss_mib\": %.1f, \"base_rss_mib\": %.1f, "
           "\"params\": %zu, \"gflop_per_step\": %.1f, \"gflops\": %.1f, \"gflops_best\": %.1f, "
           "\"cpu_s\": %.4f, \"cpu_s_min\": %.4f, \"step_gflops_per_cpu_s\": %.1f",
           preset, variant, B, T, threads, steps, med, mn, B * T / med, B * T / mn, peak, base,
           tupe_model_layout(m)->nparams, fl / 1e9, fl / med / 1e9, fl / mn / 1e9, cpu, cpus[0],
           fl / cpus[0] / 1e9);
    printf(", \"blas\": \"%s\"", tupe_blas_info_get()->line);
    if (profile)
        profile_print(steps, mean);
    printf("}\n");
    free(times), free(ids), free(len), free(pos), free(lab);
    tupe_adamw_free(o);
    tupe_model_free(m);
    tupe_backend_destroy(be);
    return 0;
}
