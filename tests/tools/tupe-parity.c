/* Backend parity and GPU benchmark tool (a test helper, not installed). Compares a device
 * backend against a reference backend on the same inputs and prints one line per comparison:
 *
 *   PARITY <op> <variant> <output> maxabs=X err=Y tol=Z PASS|FAIL
 *
 * (err: max |dev - ref| divided by the largest |ref| of the tensor). Exit status 1 when any
 * comparison fails, 2 on a usage or setup error.
 *
 *   tupe-parity ops   --ref cpu --dev cuda [--small] [--only GROUP]
 *                     every operation of lib/backend/backend.h (GROUP: memory, gemm, linear,
 *                     act, ln, embed, attn, pos, heads, adamw; and limits, only when named:
 *                     shapes at the CUDA backend's launch limits)
 *   tupe-parity step  --ref cpu --dev cuda --model tiny --position tupe-r [--tie-cls]
 *                     [--electra F]
 *                     one training step: loss, logits, gradient norm, every parameter gradient;
 *                     with --electra, of an ELECTRA pair whose generator is F of the model's
 *                     width: also the generator's samples and the discriminator's labels (the
 *                     same draws on both backends) and its scores
 *   tupe-parity curve --ref cpu --dev cuda --model small --steps 50
 *                     the loss curves of AdamW training from the same seed
 *   tupe-parity bench --dev cuda --model bert-base --position bert-a --batch 64 --seq 128
 *                     step time, real tokens/s (padding excluded) and their MFU (of --peak
 *                     TFLOP/s, default 989, at model/flops.h's FLOPs per token); with
 *                     --per-op, the device time of every backend operation per step (CUDA
 *                     events: tupe_backend_cuda_timing)
 *   tupe-parity counters --dev cuda-bf16 --model small --seq 256 --batch 8 --position bert-a
 *                     one JSON line: what the emulated GPU counted in a training step
 *                     (launches, host waits, dropout's Philox calls, memory, the products'
 *                     FLOPs; per layer too: tupe_backend_cuda_counters), and whether two steps
 *                     of different masked counts made the same launches of the same shapes
 *                     (the head over the capacity's rows; --unpadded: over each batch's M)
 *
 * --digest adds after every comparison a line "DIGEST <op> <variant> <output> <hash>", the
 * FNV-1a hash of the device's values (the loss of every step of a curve too): two builds of a
 * backend whose digests agree computed the same bits (a refactoring that must change no
 * result is checked with it).
 *
 * On a machine without a GPU, `--ref cpu64 --dev cpu` exercises the harness itself (make
 * check does). Inputs are pseudo-random from --seed; with a bf16 device the real-valued inputs
 * are rounded to bf16 first, so that both backends see the same values. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#if defined(TUPE_HAVE_CUDA)
#include "backend/backend_cuda.h"
#endif
#include "model/config.h"
#include "model/electra.h"
#include "model/flops.h"
#include "model/model.h"
#include "model/optim.h"

/* ---- pseudo-random inputs --------------------------------------------------------------- */

static uint64_t rng_state = 88172645463325252ull;

static uint64_t rnd64(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static double unif(void) { return (double)(rnd64() >> 11) * (1.0 / 9007199254740992.0); }
static int irand(int n) { return (int)(rnd64() % (uint64_t)n); }

static float bf16_round(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return f;
    u += 0x7fffu + ((u >> 16) & 1u);
    u &= 0xffff0000u;
    memcpy(&f, &u, 4);
    return f;
}

/* ---- the pair of backends ---------------------------------------------------------------- */

typedef struct pair {
    tupe_backend *be[2];    /* 0: reference, 1: device */
    int bf16;               /* the device stores bf16 */
    int tf32;
    int fails, checks;
    tupe_dev *blk;          /* the device's step parameter block of dropper(), or NULL */
} pair;

typedef struct buf {
    tupe_dev *d[2];
    size_t n;
    int wide;
} buf;

static void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "tupe-parity: out of memory\n");
        exit(2);
    }
    return p;
}

/* n random reals in [-a, a] (rounded to bf16 when the device stores bf16 and !wide). */
static float *randv(const pair *P, size_t n, double a, int wide)
{
    float *v = xmalloc(n * sizeof *v);
    for (size_t i = 0; i < n; i++) {
        v[i] = (float)((2 * unif() - 1) * a);
        if (P->bf16 && !wide)
            v[i] = bf16_round(v[i]);
    }
    return v;
}

/* n device doubles (TUPE_DBL) holding init */
static buf mkd(pair *P, const double *init, size_t n)
{
    buf b = {{NULL, NULL}, n, 0};
    for (int s = 0; s < 2; s++) {
        tupe_backend *be = P->be[s];
        if (!(b.d[s] = be->alloc(be, n * sizeof(double)))) {
            fprintf(stderr, "tupe-parity: out of device memory\n");
            exit(2);
        }
        be->upload(be, b.d[s], init, n, TUPE_DBL);
    }
    return b;
}

static buf mk(pair *P, size_t n, int wide, const float *init)
{
    buf b = {{NULL, NULL}, n, wide};
    for (int s = 0; s < 2; s++) {
        tupe_backend *be = P->be[s];
        b.d[s] = be->alloc(be, (n ? n : 1) * (size_t)(wide ? be->wsize : be->esize));
        if (!b.d[s]) {
            fprintf(stderr, "tupe-parity: out of device memory (%zu elements)\n", n);
            exit(2);
        }
        if (init)
            be->upload(be, b.d[s], init, n, TUPE_F32 | (wide ? TUPE_WIDE : 0));
    }
    return b;
}

static buf mkr(pair *P, size_t n, double a) /* random real buffer */
{
    float *v = randv(P, n, a, 0);
    buf b = mk(P, n, 0, v);
    free(v);
    return b;
}

static buf mkw(pair *P, size_t n, double a) /* random wide buffer */
{
    float *v = randv(P, n, a, 1);
    buf b = mk(P, n, 1, v);
    free(v);
    return b;
}

static buf mki(pair *P, const int32_t *v, size_t n)
{
    buf b = {{NULL, NULL}, n, 0};
    for (int s = 0; s < 2; s++) {
        tupe_backend *be = P->be[s];
        b.d[s] = be->alloc(be, (n ? n : 1) * 4);
        if (!b.d[s]) {
            fprintf(stderr, "tupe-parity: out of device memory\n");
            exit(2);
        }
        be->upload(be, b.d[s], v, n, TUPE_I32);
    }
    return b;
}

static void rel(pair *P, buf *b)
{
    for (int s = 0; s < 2; s++)
        if (b->d[s])
            P->be[s]->free(P->be[s], b->d[s]);
    b->d[0] = b->d[1] = NULL;
}

static int DIGEST; /* --digest */

/* The FNV-1a hash of the device's values of a comparison, when --digest. */
static void digest(const char *op, const char *var, const char *out, const void *p, size_t bytes)
{
    if (!DIGEST)
        return;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < bytes; i++)
        h = (h ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
    printf("DIGEST %-14s %-22s %-10s %016llx\n", op, var, out, (unsigned long long)h);
}

static void verdict(pair *P, const char *op, const char *var, const char *out, double maxabs,
                    double err, double tol)
{
    int bad = !(err <= tol);
    P->checks++;
    P->fails += bad;
    printf("PARITY %-14s %-22s %-10s maxabs=%-10.3g err=%-10.3g tol=%-8.2g %s\n", op, var, out,
           maxabs, err, tol, bad ? "FAIL" : "PASS");
    fflush(stdout);
}

static int backend_error(pair *P, const char *op)
{
    for (int s = 0; s < 2; s++) {
        tupe_err e;
        tupe_backend *be = P->be[s];
        if (be->check && be->check(be, &e)) {
            printf("PARITY %-14s backend %s error: %s FAIL\n", op, be->name, e.msg);
            P->fails++;
            return 1;
        }
    }
    return 0;
}

/* Compares the n floats of two host arrays; err is relative to the largest |r|, or to floor
 * when that is larger (tensors that are zero in exact arithmetic). */
static void cmp_floor(pair *P, const char *op, const char *var, const char *out, const float *r,
                      const float *d, size_t n, double tol, double floor)
{
    double big = 0, mabs = 0;
    for (size_t i = 0; i < n; i++) {
        double x = fabs((double)r[i]), y = fabs((double)d[i] - r[i]);
        big = x > big ? x : big;
        if (!(y <= mabs)) /* NaN counts as the worst */
            mabs = y == y ? y : INFINITY;
    }
    big = big > floor ? big : floor;
    verdict(P, op, var, out, mabs, big > 0 ? mabs / big : mabs, tol);
    digest(op, var, out, d, n * sizeof *d);
}

static void cmp_host(pair *P, const char *op, const char *var, const char *out, const float *r,
                     const float *d, size_t n, double tol)
{
    cmp_floor(P, op, var, out, r, d, n, tol, 0);
}

static void cmp(pair *P, const char *op, const char *var, const char *out, const buf *b,
                double tol)
{
    if (backend_error(P, op))
        return;
    float *h[2];
    for (int s = 0; s < 2; s++) {
        h[s] = xmalloc(b->n * sizeof(float));
        P->be[s]->download(P->be[s], h[s], b->d[s], b->n, TUPE_F32 | (b->wide ? TUPE_WIDE : 0));
    }
    cmp_host(P, op, var, out, h[0], h[1], b->n, tol);
    free(h[0]);
    free(h[1]);
}

static void cmp_val(pair *P, const char *op, const char *var, const char *out, double r, double d,
                    double tol)
{
    if (backend_error(P, op))
        return;
    double a = fabs(d - r);
    verdict(P, op, var, out, a, fabs(r) > 0 ? a / fabs(r) : a, tol);
    digest(op, var, out, &d, sizeof d);
}

/* Tolerances: fp32 storage (exact fp32 products unless TF32), or bf16 storage. */
static double TOL(const pair *P, double f32, double bf)
{
    if (P->bf16)
        return bf;
    return P->tf32 ? fmax(f32, 5e-3) : f32;
}

#define BOTH(...) \
    do { \
        for (int s_ = 0; s_ < 2; s_++) { \
            tupe_backend *be = P->be[s_]; \
            __VA_ARGS__; \
        } \
    } while (0)
#define D(b) ((b).d[s_])
#define IP(b) ((const int32_t *)(b).d[s_])

/* A dropout stream; the device reads its step and base from a step parameter block (backend.h's
 * TUPE_PAR_*: micro-batch slot 1, one element per sample) as the trainer's steps do, the CPU the
 * values themselves. The block is written in stream order, so each operation sees the values
 * of the last dropper() before it. */
static tupe_drop dropper(pair *P, double p, uint32_t site, uint64_t base)
{
    tupe_drop d = {.p = p, .seed = 0x1234567890abcdefull, .step = 7, .site = site, .base = base};
    tupe_backend *be = P->be[1];
    double v[TUPE_PAR_OFFSET + 2] = {[TUPE_PAR_STEP] = 7, [TUPE_PAR_OFFSET] = 3,
                                     [TUPE_PAR_OFFSET + 1] = (double)base};
    if (!P->blk && !(P->blk = be->alloc(be, sizeof v))) {
        fprintf(stderr, "tupe-parity: out of device memory\n");
        exit(2);
    }
    be->upload(be, P->blk, v, TUPE_PAR_OFFSET + 2, TUPE_DBL);
    d.par = P->blk, d.slot = 1, d.per = 1;
    return d;
}

/* ---- operations ---------------------------------------------------------------------------- */

typedef struct shape {
    int B, T, H, dh, D, F, V, Vemb, M, nb;
} shape;

static void lengths_of(const shape *S, int32_t *len)
{
    for (int b = 0; b < S->B; b++) /* the first full, then shorter ones, the last of length 1 */
        len[b] = b == 0 ? S->T : b == S->B - 1 ? 1 : S->T - (S->T * b) / S->B - 1;
}

static void ops_memory(pair *P)
{
    size_t n = 100003;
    float *v = randv(P, n, 3, 0);
    buf x = mk(P, n, 0, v);
    cmp(P, "upload", "f32", "x", &x, 0);
    double *w = xmalloc(n * sizeof *w);
    for (size_t i = 0; i < n; i++)
        w[i] = v[i];
    BOTH(be->upload(be, D(x), w, n, TUPE_F64));
    cmp(P, "upload", "f64", "x", &x, 0);
    double ss[2];
    BOTH(ss[s_] = be->sumsq(be, D(x), n));
    cmp_val(P, "sumsq", "n=100003", "sum", ss[0], ss[1], TOL(P, 1e-6, 1e-6));
    BOTH(be->scale(be, D(x), n, 0.37));
    cmp(P, "scale", "0.37", "x", &x, TOL(P, 1e-6, 8e-3));
    BOTH(be->zero(be, D(x), n / 2));
    cmp(P, "zero", "half", "x", &x, TOL(P, 1e-6, 8e-3));
    buf wb = mkw(P, 1001, 2);
    cmp(P, "upload", "wide", "x", &wb, 0);
    int32_t iv[777];
    for (int i = 0; i < 777; i++)
        iv[i] = (int32_t)rnd64();
    buf ib = mki(P, iv, 777);
    int32_t back[777];
    int same = 1;
    for (int s = 0; s < 2; s++) {
        P->be[s]->download(P->be[s], back, ib.d[s], 777, TUPE_I32);
        same &= memcmp(back, iv, sizeof iv) == 0;
    }
    verdict(P, "upload", "i32", "x", same ? 0 : 1, same ? 0 : 1, 0);
    /* Doubles that fall on a bf16 tie once rounded to fp32: the device rounds them once. */
    static const double tie[4] = {1 + 0x1p-8 + 0x1p-30, 1 + 0x1p-8 - 0x1p-30,
                                  -(1 + 0x1p-8 + 0x1p-30), 1 + 0x3p-8 + 0x1p-40};
    static const float once[4] = {1 + 0x1p-7f, 1.0f, -(1 + 0x1p-7f), 1 + 0x1p-6f};
    tupe_backend *dev = P->be[1];
    tupe_dev *t = dev->alloc(dev, 4 * (size_t)dev->esize);
    float got[4], want[4];
    dev->upload(dev, t, tie, 4, TUPE_F64);
    dev->download(dev, got, t, 4, TUPE_F32);
    dev->free(dev, t);
    for (int i = 0; i < 4; i++)
        want[i] = P->bf16 ? once[i] : (float)tie[i];
    if (!backend_error(P, "upload"))
        cmp_host(P, "upload", "f64 rounds once", "x", want, got, 4, 0);
    rel(P, &x), rel(P, &wb), rel(P, &ib);
    free(v);
    free(w);
}

static void ops_gemm(pair *P)
{
    int M = 77, N = 96, K = 64;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++) {
            int lda = (ta ? M : K) + 3, ldb = (tb ? K : N) + 5, ldc = N + 1;
            buf A = mkr(P, (size_t)(ta ? K : M) * lda, 1);
            buf Bm = mkr(P, (size_t)(tb ? N : K) * ldb, 1);
            buf C = mkr(P, (size_t)M * ldc, 1);
            BOTH(be->gemm(be, ta, tb, M, N, K, 0.5, D(A), lda, D(Bm), ldb, 1.0, D(C), ldc));
            char var[64];
            snprintf(var, sizeof var, "ta=%d tb=%d beta=1", ta, tb);
            cmp(P, "gemm", var, "C", &C, TOL(P, 1e-5, 8e-3));
            BOTH(be->gemm(be, ta, tb, M, N, K, 1.0, D(A), lda, D(Bm), ldb, 0.0, D(C), ldc));
            snprintf(var, sizeof var, "ta=%d tb=%d beta=0", ta, tb);
            cmp(P, "gemm", var, "C", &C, TOL(P, 1e-5, 8e-3));
            rel(P, &A), rel(P, &Bm), rel(P, &C);
        }
    /* K = 0: an empty sum, C = beta C (the CUDA backend's own kernel, not the library) */
    for (int k = 0; k < 2; k++) {
        int ldc = N + 3;
        buf A = mkr(P, 8, 1), Bm = mkr(P, 8, 1), C = mkr(P, (size_t)M * ldc, 1);
        double beta = k ? 0.0 : 0.5;
        BOTH(be->gemm(be, 0, 0, M, N, 0, 1.0, D(A), 1, D(Bm), N, beta, D(C), ldc));
        cmp(P, "gemm", k ? "K=0 beta=0" : "K=0 beta=0.5", "C", &C, TOL(P, 1e-7, 8e-3));
        rel(P, &A), rel(P, &Bm), rel(P, &C);
    }
}

/* The bf16 tolerances of linear_fwd's y and a, derived from its roundings. u = 2^-8 bounds the
 * relative error of one rounding to bf16 (to nearest even, 8 significant bits). Both backends
 * compute g = x W^T alike (exact products of the same bf16 inputs, fp32 sums in different
 * orders: ~1e-7). The reference keeps y = g + b and a = s f(y) in fp32 (f the activation, s
 * the dropout scale of a kept element, 1 without dropout); the device stores
 *   y' = rnd(rnd(g) + b)   (y is a bf16 buffer, and the activation is computed from it,
 *                           since the backward recomputes a from the stored y)
 *   a' = rnd(s f(y'))      (one rounding: s multiplies in fp32),
 * so |y' - y| <= u (|g| + |y|) (u |y| without a bias: y' = rnd(g)) and
 * |a' - a| <= s |f'(y)| |y' - y| + u |a|, to first order. The
 * parity error divides by the largest |reference|, hence over the reference's elements
 *   tol_y = u max(|g| + |y|) / max|y|
 *   tol_a = u (s max(|f'(y)| (|g| + |y|)) + max|a|) / max|a|
 * times 1 + 4u for the second-order terms, plus 1e-6 for the fp32 arithmetic: with the inputs
 * below about 1.9u and 3.1u (errors seen: up to 1.5u and 2.1u). The kernels used to round
 * f(y') to bf16 before the dropout scale, a third rounding that nothing needs: errors up to
 * 2.6u against a fixed 8e-3 = 2.05u (finding R1). */
static void linear_fwd_tols(pair *P, const buf *y, const buf *a, const float *b, int out,
                            int act, double p, double *ty, double *ta)
{
    size_t n = y->n;
    float *yr = xmalloc(n * sizeof *yr), *ar = xmalloc(n * sizeof *ar);
    P->be[0]->download(P->be[0], yr, y->d[0], n, TUPE_F32);
    if (act != TUPE_ACT_NONE)
        P->be[0]->download(P->be[0], ar, a->d[0], n, TUPE_F32);
    double u = 1.0 / 256, s = p > 0 ? tupe_dropout_scale(tupe_dropout_thr(p)) : 1;
    double my = 0, gy = 0, fg = 0, ma = 0;
    for (size_t i = 0; i < n; i++) {
        double yv = yr[i], g = b ? yv - b[i % (size_t)out] : yv;
        double e = b ? fabs(g) + fabs(yv) : fabs(yv); /* without a bias, y' = rnd(g) */
        my = fmax(my, fabs(yv));
        gy = fmax(gy, e);
        if (act == TUPE_ACT_NONE)
            continue;
        double d = act == TUPE_ACT_GELU ? tupe_gelu_grad_d(yv) : 1 - tanh(yv) * tanh(yv);
        fg = fmax(fg, fabs(d) * e);
        ma = fmax(ma, fabs((double)ar[i]));
    }
    *ty = u * gy / my * (1 + 4 * u) + 1e-6;
    *ta = act == TUPE_ACT_NONE ? *ty : u * (s * fg + ma) / ma * (1 + 4 * u) + 1e-6;
    free(yr);
    free(ar);
}

static void ops_linear(pair *P, const shape *S)
{
    int N = S->B * S->T, in = S->D, out = S->F;
    static const struct { int act, bias; double p; const char *name; } v[] = {
        {TUPE_ACT_GELU, 1, 0.1, "gelu+bias+drop"},
        {TUPE_ACT_NONE, 0, 0, "none,no-bias"},
        {TUPE_ACT_TANH, 1, 0, "tanh+bias"},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        buf x = mkr(P, (size_t)N * in, 1), W = mkr(P, (size_t)out * in, 0.05);
        float *bv = randv(P, (size_t)out, 0.5, 0);
        buf b = mk(P, (size_t)out, 0, bv), y = mk(P, (size_t)N * out, 0, NULL);
        buf a = mk(P, (size_t)N * out, 0, NULL);
        tupe_drop d = dropper(P, v[k].p, 3, 1000);
        BOTH(be->linear_fwd(be, D(y), D(a), D(x), D(W), v[k].bias ? D(b) : NULL, N, in, out,
                            v[k].act, &d));
        double ty = TOL(P, 1e-5, 0), ta = ty;
        if (P->bf16)
            linear_fwd_tols(P, &y, &a, v[k].bias ? bv : NULL, out, v[k].act, v[k].p, &ty, &ta);
        cmp(P, "linear_fwd", v[k].name, "y", &y, ty);
        if (v[k].act != TUPE_ACT_NONE)
            cmp(P, "linear_fwd", v[k].name, "a", &a, ta);
        rel(P, &x), rel(P, &W), rel(P, &b), rel(P, &y), rel(P, &a);
        free(bv);
    }
    for (int k = 0; k < 3; k++) {
        static const char *names[] = {"dx_beta=0", "dx_beta=1", "no-db,no-dx"};
        buf dy = mkr(P, (size_t)N * out, 1), x = mkr(P, (size_t)N * in, 1);
        buf W = mkr(P, (size_t)out * in, 0.05), dW = mkr(P, (size_t)out * in, 0.1);
        buf db = mkr(P, (size_t)out, 0.1), dx = mkr(P, (size_t)N * in, 1);
        BOTH(be->linear_bwd(be, k == 2 ? NULL : D(dx), k == 1 ? 1.0 : 0.0, D(dW),
                            k == 2 ? NULL : D(db), D(dy), D(x), D(W), N, in, out));
        cmp(P, "linear_bwd", names[k], "dW", &dW, TOL(P, 1e-5, 8e-3));
        if (k != 2) {
            cmp(P, "linear_bwd", names[k], "db", &db, TOL(P, 1e-5, 8e-3));
            cmp(P, "linear_bwd", names[k], "dx", &dx, TOL(P, 1e-5, 8e-3));
        }
        rel(P, &dy), rel(P, &x), rel(P, &W), rel(P, &dW), rel(P, &db), rel(P, &dx);
    }
}

static void ops_act(pair *P)
{
    size_t n = 50021;
    static const struct { int act; double p; int with_a; const char *name; } v[] = {
        {TUPE_ACT_GELU, 0.1, 1, "gelu+drop"},
        {TUPE_ACT_TANH, 0, 0, "tanh"},
        {TUPE_ACT_NONE, 0.2, 1, "none+drop"},
        {TUPE_ACT_GELU, 0, 0, "gelu"},
    };
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        buf y = mkr(P, n, 4), a = mk(P, n, 0, NULL), d = mkr(P, n, 1);
        tupe_drop dr = dropper(P, v[k].p, 9, 12345);
        BOTH(be->act_fwd(be, D(a), D(y), n, v[k].act, &dr));
        cmp(P, "act_fwd", v[k].name, "a", &a, TOL(P, 1e-6, 8e-3));
        BOTH(be->zero(be, D(a), n));
        BOTH(be->act_bwd(be, D(d), v[k].with_a ? D(a) : NULL, D(y), n, v[k].act, &dr));
        cmp(P, "act_bwd", v[k].name, "d", &d, TOL(P, 1e-6, 8e-3));
        if (v[k].with_a)
            cmp(P, "act_bwd", v[k].name, "a", &a, TOL(P, 1e-6, 8e-3));
        rel(P, &y), rel(P, &a), rel(P, &d);
    }
}

static void ops_ln(pair *P, const shape *S)
{
    int N = S->B * S->T, Dd = S->D;
    size_t n = (size_t)N * Dd;
    buf x = mkr(P, n, 2), g = mkr(P, (size_t)Dd, 1), b = mkr(P, (size_t)Dd, 0.5);
    buf y = mk(P, n, 0, NULL), xh = mk(P, n, 0, NULL), rs = mk(P, (size_t)N, 1, NULL);
    BOTH(be->ln_fwd(be, D(y), D(xh), D(rs), D(x), D(g), D(b), N, Dd, 1e-5));
    cmp(P, "ln_fwd", "", "y", &y, TOL(P, 1e-5, 8e-3));
    cmp(P, "ln_fwd", "", "xhat", &xh, TOL(P, 1e-5, 8e-3));
    cmp(P, "ln_fwd", "", "rstd", &rs, TOL(P, 1e-5, 1e-4));
    for (int k = 0; k < 2; k++) {
        buf dy = mkr(P, n, 1), dx = mkr(P, n, 1), dg = mkr(P, (size_t)Dd, 1), db = mkr(P, (size_t)Dd, 1);
        BOTH(be->ln_bwd(be, D(dx), k, D(dg), D(db), D(dy), D(xh), D(rs), D(g), N, Dd));
        const char *var = k ? "dx_beta=1" : "dx_beta=0";
        cmp(P, "ln_bwd", var, "dx", &dx, TOL(P, 1e-5, 2e-2));
        cmp(P, "ln_bwd", var, "dgamma", &dg, TOL(P, 1e-5, 8e-3));
        cmp(P, "ln_bwd", var, "dbeta", &db, TOL(P, 1e-5, 8e-3));
        rel(P, &dy), rel(P, &dx), rel(P, &dg), rel(P, &db);
    }
    for (int k = 0; k < 2; k++) {
        const char *var = k ? "no-bias,no-drop" : "bias+drop";
        buf res = mkr(P, n, 1), a = mkr(P, n, 1), bias = mkr(P, (size_t)Dd, 0.5);
        tupe_drop dr = dropper(P, k ? 0 : 0.1, 21, 77);
        BOTH(be->resid_ln_fwd(be, D(y), D(xh), D(rs), D(res), D(a), k ? NULL : D(bias), D(g), D(b),
                              N, Dd, 1e-5, &dr));
        cmp(P, "resid_ln_fwd", var, "y", &y, TOL(P, 1e-5, 8e-3));
        cmp(P, "resid_ln_fwd", var, "xhat", &xh, TOL(P, 1e-5, 8e-3));
        cmp(P, "resid_ln_fwd", var, "rstd", &rs, TOL(P, 1e-5, 1e-2));
        buf dy = mkr(P, n, 1), dsum = mk(P, n, 0, NULL), dbr = mk(P, n, 0, NULL);
        buf dg = mkr(P, (size_t)Dd, 1), db = mkr(P, (size_t)Dd, 1);
        BOTH(be->resid_ln_bwd(be, D(dsum), D(dbr), D(dg), D(db), D(dy), D(xh), D(rs), D(g), N, Dd,
                              &dr));
        cmp(P, "resid_ln_bwd", var, "dsum", &dsum, TOL(P, 1e-5, 2e-2));
        cmp(P, "resid_ln_bwd", var, "dbranch", &dbr, TOL(P, 1e-5, 2e-2));
        cmp(P, "resid_ln_bwd", var, "dgamma", &dg, TOL(P, 1e-5, 8e-3));
        cmp(P, "resid_ln_bwd", var, "dbeta", &db, TOL(P, 1e-5, 8e-3));
        rel(P, &res), rel(P, &a), rel(P, &bias), rel(P, &dy), rel(P, &dsum), rel(P, &dbr);
        rel(P, &dg), rel(P, &db);
    }
    rel(P, &x), rel(P, &g), rel(P, &b), rel(P, &y), rel(P, &xh), rel(P, &rs);
}

static void ops_embed(pair *P, const shape *S)
{
    int B = S->B, T = S->T, Dd = S->D, N = B * T, V = S->Vemb, nt = 2;
    size_t n = (size_t)N * Dd;
    int32_t *ids = xmalloc((size_t)N * 4), *types = xmalloc((size_t)N * 4), len[64];
    for (int r = 0; r < N; r++) {
        ids[r] = irand(V / 4 + 1) * 4 % V; /* repeated ids: the scatter must sum them */
        types[r] = irand(nt);
    }
    lengths_of(S, len);
    buf bids = mki(P, ids, (size_t)N), btypes = mki(P, types, (size_t)N), blen = mki(P, len, (size_t)B);
    buf word = mkr(P, (size_t)V * Dd, 1), pos = mkr(P, (size_t)T * Dd, 1), tt = mkr(P, (size_t)nt * Dd, 1);
    buf g = mkr(P, (size_t)Dd, 1), b = mkr(P, (size_t)Dd, 0.5);
    for (int k = 0; k < 2; k++) {
        const char *var = k ? "word-only" : "pos+types+drop";
        buf y = mkr(P, n, 1), xh = mkr(P, n, 1), rs = mk(P, (size_t)N, 1, NULL);
        tupe_drop dr = dropper(P, k ? 0 : 0.1, 1, 0);
        BOTH(be->embed_fwd(be, D(y), D(xh), D(rs), IP(bids), k ? NULL : IP(btypes), IP(blen), D(word),
                           k ? NULL : D(pos), k ? NULL : D(tt), D(g), D(b), B, T, Dd, 1e-5, &dr));
        cmp(P, "embed_fwd", var, "y", &y, TOL(P, 1e-5, 8e-3));
        cmp(P, "embed_fwd", var, "xhat", &xh, TOL(P, 1e-5, 8e-3));
        cmp(P, "embed_fwd", var, "rstd", &rs, TOL(P, 1e-5, 1e-2));
        buf dy = mkr(P, n, 1), scr = mk(P, n, 0, NULL);
        buf dw = mkr(P, (size_t)V * Dd, 0.1), dp = mkr(P, (size_t)T * Dd, 0.1);
        buf dt = mkr(P, (size_t)nt * Dd, 0.1), dg = mkr(P, (size_t)Dd, 0.1), db = mkr(P, (size_t)Dd, 0.1);
        BOTH(be->embed_bwd(be, D(dw), k ? NULL : D(dp), k ? NULL : D(dt), D(dg), D(db), D(dy), D(xh),
                           D(rs), D(g), IP(bids), k ? NULL : IP(btypes), IP(blen), B, T, Dd, V, nt,
                           &dr, D(scr)));
        cmp(P, "embed_bwd", var, "dword", &dw, TOL(P, 1e-5, 2e-2));
        if (!k) {
            cmp(P, "embed_bwd", var, "dpos", &dp, TOL(P, 1e-5, 2e-2));
            cmp(P, "embed_bwd", var, "dtt", &dt, TOL(P, 1e-5, 2e-2));
        }
        cmp(P, "embed_bwd", var, "dgamma", &dg, TOL(P, 1e-5, 8e-3));
        cmp(P, "embed_bwd", var, "dbeta", &db, TOL(P, 1e-5, 8e-3));
        rel(P, &y), rel(P, &xh), rel(P, &rs), rel(P, &dy), rel(P, &scr), rel(P, &dw), rel(P, &dp);
        rel(P, &dt), rel(P, &dg), rel(P, &db);
    }
    rel(P, &bids), rel(P, &btypes), rel(P, &blen), rel(P, &word), rel(P, &pos), rel(P, &tt);
    rel(P, &g), rel(P, &b);
    free(ids);
    free(types);
}

/* Device only (flash): the bias gradient of the batch is its sequences' dS added in their order,
 * and dqkv is each sequence's: bit for bit the same as the sequences one at a time. */
static void attn_order(pair *P, const char *var, const buf *qkv, const buf *bias, const buf *ctx,
                       const buf *lse, const buf *dctx, const buf *dqkv, const buf *G,
                       const float *G0, const buf *blen, int B, int T, int H, int dh,
                       double alpha, const tupe_drop *dr)
{
    tupe_backend *be = P->be[1];
    size_t D3 = (size_t)T * 3 * H * dh, Dd = (size_t)T * H * dh, HT = (size_t)H * T;
    size_t nG = HT * T, nq = (size_t)B * D3;
    tupe_dev *g = be->alloc(be, nG * (size_t)be->wsize), *dq = be->alloc(be, nq * (size_t)be->esize);
    be->upload(be, g, G0, nG, TUPE_F32 | TUPE_WIDE);
    for (int b = 0; b < B; b++) {
        tupe_drop d1 = *dr;
        d1.base += (uint64_t)b * HT * T;
        d1.par = NULL; /* its base by value, not the block's */
        be->attn_bwd(be, tupe_dev_at(be, dq, b * D3), g, NULL, tupe_dev_wat(be, lse->d[1], b * HT),
                     tupe_dev_at(be, ctx->d[1], b * Dd), tupe_dev_at(be, dctx->d[1], b * Dd),
                     tupe_dev_at(be, qkv->d[1], b * D3), bias->d[1], 0,
                     (const int32_t *)blen->d[1] + b, 1, T, H, dh, alpha, &d1, NULL);
    }
    float *h[4];
    h[0] = xmalloc(nG * sizeof(float)), h[1] = xmalloc(nG * sizeof(float));
    h[2] = xmalloc(nq * sizeof(float)), h[3] = xmalloc(nq * sizeof(float));
    be->download(be, h[0], G->d[1], nG, TUPE_F32 | TUPE_WIDE);
    be->download(be, h[1], g, nG, TUPE_F32 | TUPE_WIDE);
    be->download(be, h[2], dqkv->d[1], nq, TUPE_F32);
    be->download(be, h[3], dq, nq, TUPE_F32);
    if (!backend_error(P, "attn_bwd")) {
        verdict(P, "attn_bwd", var, "G order", 0, memcmp(h[0], h[1], nG * sizeof(float)) ? 1 : 0, 0);
        verdict(P, "attn_bwd", var, "dqkv/seq", 0, memcmp(h[2], h[3], nq * sizeof(float)) ? 1 : 0, 0);
    }
    for (int i = 0; i < 4; i++)
        free(h[i]);
    be->free(be, g);
    be->free(be, dq);
}

/* The attention in each form the device has, against the reference's (materialised, the CPU's
 * form): materialised (probs kept) and, where the device has it, flash (the rows' log-sum-exp
 * kept); with a bias shared by the batch, one per sequence (bias_bstride) and none. */
static void ops_attn(pair *P, const shape *S)
{
    int B = S->B, T = S->T, H = S->H, dh = S->dh, Dd = H * dh, N = B * T;
    int32_t len[64];
    lengths_of(S, len);
    buf blen = mki(P, len, (size_t)B);
    double alpha = 1.0 / sqrt((double)dh);
    size_t HTT = (size_t)H * T * T;
    tupe_dev *scr[2];
    for (int s = 0; s < 2; s++) {
        tupe_backend *be = P->be[s];
        scr[s] = be->alloc(be, (be->attn_scratch(be, T) + 1) * (size_t)be->esize);
    }
    static const struct { int bias, seq; double p; const char *name; } v[] = {
        {1, 0, 0.1, "bias+drop"}, {0, 0, 0, "no-bias,no-drop"}, {1, 1, 0.1, "seq-bias+drop"}};
    for (int flash = 0; flash < 2; flash++) {
        if (flash && !P->be[1]->attn_flash)
            continue;
        for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
            char var[40];
            snprintf(var, sizeof var, "%s%s", flash ? "flash," : "", v[k].name);
            size_t bs = v[k].seq ? HTT : 0, nb = v[k].seq ? (size_t)B * HTT : HTT;
            buf qkv = mkr(P, (size_t)N * 3 * Dd, 2), bias = mkw(P, nb, 1);
            buf ctx = mk(P, (size_t)N * Dd, 0, NULL), probs = mk(P, (size_t)B * HTT, 0, NULL);
            buf lse = mk(P, (size_t)B * H * T, 1, NULL);
            tupe_drop dr = dropper(P, v[k].p, 33, 5);
#define PROBS (flash && s_ == 1 ? NULL : D(probs))
#define BIAS (v[k].bias ? D(bias) : NULL)
            BOTH(be->attn_fwd(be, D(ctx), PROBS, D(lse), D(qkv), BIAS, bs, IP(blen), B, T, H, dh,
                              alpha, &dr, scr[s_]));
            if (!flash)
                cmp(P, "attn_fwd", var, "probs", &probs, TOL(P, 1e-5, 1e-2));
            cmp(P, "attn_fwd", var, "ctx", &ctx, TOL(P, 1e-5, 1e-2));
            buf dctx = mkr(P, (size_t)N * Dd, 1), dqkv = mkr(P, (size_t)N * 3 * Dd, 1);
            float *G0 = randv(P, nb, 0.1, 1);
            buf G = mk(P, nb, 1, G0);
            BOTH(be->attn_bwd(be, D(dqkv), v[k].bias ? D(G) : NULL, PROBS, D(lse), D(ctx), D(dctx),
                              D(qkv), BIAS, bs, IP(blen), B, T, H, dh, alpha, &dr, scr[s_]));
#undef PROBS
#undef BIAS
            if (!flash)
                cmp(P, "attn_bwd", var, "dS", &probs, TOL(P, 1e-5, 3e-2));
            cmp(P, "attn_bwd", var, "dqkv", &dqkv, TOL(P, 1e-5, 3e-2));
            if (v[k].bias)
                cmp(P, "attn_bwd", var, "G", &G, TOL(P, 1e-5, 3e-2));
            if (flash && v[k].bias && !v[k].seq)
                attn_order(P, var, &qkv, &bias, &ctx, &lse, &dctx, &dqkv, &G, G0, &blen, B, T, H,
                           dh, alpha, &dr);
            free(G0);
            rel(P, &qkv), rel(P, &bias), rel(P, &ctx), rel(P, &probs), rel(P, &lse);
            rel(P, &dctx), rel(P, &dqkv), rel(P, &G);
        }
    }
    for (int s = 0; s < 2; s++)
        P->be[s]->free(P->be[s], scr[s]);
    rel(P, &blen);
}

static void ops_pos(pair *P, const shape *S)
{
    int T = S->T, H = S->H, T1 = T + 1, ldb = T + 5, nb = S->nb, Dd = S->D, B = S->B;
    int32_t *bk = xmalloc((size_t)T * ldb * 4);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < ldb; j++) /* bucket by distance, capped: many entries per bucket */
            bk[(size_t)i * ldb + j] = abs(i - j) < nb ? abs(i - j) : nb - 1;
    buf bb = mki(P, bk, (size_t)T * ldb);
    static const struct { int A, rel, reset; const char *name; } v[] = {
        {1, 0, 1, "A,reset"}, {1, 0, 0, "A"}, {0, 1, 0, "rel"}, {1, 1, 1, "A+rel,reset"}};
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        buf A = mkr(P, (size_t)H * T1 * T1, 1), R = mkr(P, (size_t)nb * H, 1);
        buf bias = mkw(P, (size_t)H * T * T, 1);
        BOTH(be->pos_bias_fwd(be, D(bias), v[k].A ? D(A) : NULL, v[k].rel ? D(R) : NULL, IP(bb), ldb,
                              T, H, v[k].reset));
        cmp(P, "pos_bias_fwd", v[k].name, "bias", &bias, TOL(P, 1e-6, 1e-2));
        buf G = mkw(P, (size_t)H * T * T, 1), dA = mkr(P, (size_t)H * T1 * T1, 1);
        buf dR = mkr(P, (size_t)nb * H, 1);
        BOTH(be->pos_bias_bwd(be, v[k].A ? D(dA) : NULL, v[k].rel ? D(dR) : NULL, D(G), IP(bb), ldb,
                              T, H, v[k].reset));
        if (v[k].A)
            cmp(P, "pos_bias_bwd", v[k].name, "dA", &dA, TOL(P, 1e-5, 1e-2));
        if (v[k].rel)
            cmp(P, "pos_bias_bwd", v[k].name, "drel", &dR, TOL(P, 1e-5, 2e-2));
        rel(P, &A), rel(P, &R), rel(P, &bias), rel(P, &G), rel(P, &dA), rel(P, &dR);
    }
    free(bk);
    rel(P, &bb);
    size_t n = (size_t)B * T * 3 * Dd;
    buf qkv = mkr(P, n, 1), pq = mkr(P, (size_t)T * Dd, 1), pk = mkr(P, (size_t)T * Dd, 1);
    BOTH(be->qk_pos_add(be, D(qkv), D(pq), D(pk), B, T, Dd));
    cmp(P, "qk_pos_add", "", "qkv", &qkv, TOL(P, 1e-7, 8e-3));
    BOTH(be->qk_pos_grad(be, D(pq), D(pk), D(qkv), B, T, Dd));
    cmp(P, "qk_pos_grad", "", "dpq", &pq, TOL(P, 1e-6, 2e-2));
    cmp(P, "qk_pos_grad", "", "dpk", &pk, TOL(P, 1e-6, 2e-2));
    rel(P, &qkv), rel(P, &pq), rel(P, &pk);
    /* RoPE, both layouts, the rotation and its inverse (any table: the op is bilinear in it). */
    int dh = Dd / H;
    buf rot = mkw(P, (size_t)T * dh, 1);
    for (int il = 0; il < 2; il++)
        for (int inv = 0; inv < 2; inv++) {
            buf x = mkr(P, n, 1);
            BOTH(be->rope(be, D(x), D(rot), B, T, Dd, dh, il, inv));
            cmp(P, "rope", il ? (inv ? "interleaved,inverse" : "interleaved")
                              : (inv ? "half,inverse" : "half"), "qkv", &x, TOL(P, 1e-6, 1e-2));
            rel(P, &x);
        }
    rel(P, &rot);
    /* DeBERTa's gather by relative row and its transpose: rows clamped at both ends (several
     * keys of a query on one row), as the log buckets past max_rel_pos do. */
    int W = 2 * (T / 3) + 1;
    int32_t *ix = xmalloc((size_t)T * T * 4);
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            int c = i - j + W / 2;
            ix[(size_t)i * T + j] = c < 0 ? 0 : c > W - 1 ? W - 1 : c;
        }
    buf bix = mki(P, ix, (size_t)T * T);
    size_t nc = (size_t)H * B * T * W, nt = (size_t)B * H * T * T;
    buf c2p = mkr(P, nc, 1), p2c = mkr(P, nc, 1), dbias = mkw(P, nt, 1);
    double s = 1.0 / sqrt(3.0 * dh);
    BOTH(be->dis_bias_fwd(be, D(dbias), D(c2p), D(p2c), IP(bix), B, T, H, W, s));
    cmp(P, "dis_bias_fwd", "", "bias", &dbias, TOL(P, 1e-6, 1e-2));
    buf dG = mkw(P, nt, 1);
    BOTH(be->dis_bias_bwd(be, D(c2p), D(p2c), D(dG), IP(bix), B, T, H, W, s));
    cmp(P, "dis_bias_bwd", "", "dc2p", &c2p, TOL(P, 1e-5, 2e-2));
    cmp(P, "dis_bias_bwd", "", "dp2c", &p2c, TOL(P, 1e-5, 2e-2));
    rel(P, &c2p), rel(P, &p2c), rel(P, &dbias), rel(P, &dG), rel(P, &bix);
    free(ix);
}

static void ops_heads(pair *P, const shape *S)
{
    int M = S->M, V = S->V, Dd = S->D, N = S->B * S->T;
    int32_t *idx = xmalloc((size_t)N * 4);
    for (int i = 0; i < N; i++)
        idx[i] = i;
    for (int i = N - 1; i > 0; i--) { /* a random permutation: distinct indices */
        int j = irand(i + 1), t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    buf bi = mki(P, idx, (size_t)M), src = mkr(P, (size_t)N * Dd, 1), dst = mkr(P, (size_t)M * Dd, 1);
    BOTH(be->gather_rows(be, D(dst), D(src), IP(bi), M, Dd));
    cmp(P, "gather_rows", "", "dst", &dst, 0);
    BOTH(be->scatter_rows(be, D(src), D(dst), IP(bi), M, Dd));
    cmp(P, "scatter_rows", "", "dst", &src, TOL(P, 1e-7, 8e-3));
    rel(P, &bi);
    /* the masked-LM head's padding rows (index -1, model.h's tupe_batch.rows), the last
     * quarter and one in the middle: gathered as zeros, scattered as nothing */
    int32_t *pidx = xmalloc((size_t)M * 4);
    for (int m = 0; m < M; m++)
        pidx[m] = m >= M - M / 4 || m == M / 2 ? -1 : idx[m];
    bi = mki(P, pidx, (size_t)M);
    BOTH(be->gather_rows(be, D(dst), D(src), IP(bi), M, Dd));
    cmp(P, "gather_rows", "padding-rows", "dst", &dst, 0);
    BOTH(be->scatter_rows(be, D(src), D(dst), IP(bi), M, Dd));
    cmp(P, "scatter_rows", "padding-rows", "dst", &src, TOL(P, 1e-7, 8e-3));
    rel(P, &bi), rel(P, &src), rel(P, &dst);

    int32_t *lab = xmalloc((size_t)M * 4), *ilab = xmalloc((size_t)M * 4);
    for (int m = 0; m < M; m++)
        lab[m] = irand(V);
    /* ignored rows (label -1: the head's padding rows) where the index above is -1 */
    for (int m = 0; m < M; m++)
        ilab[m] = pidx[m] < 0 ? -1 : lab[m];
    free(pidx);
    buf bl = mki(P, lab, (size_t)M), bil = mki(P, ilab, (size_t)M);
    /* rows of V, and rows padded to the masked-LM head's leading dimension (model/params.h)
     * whose pad columns hold values that would win the maximum, the argmax and the sum if a
     * kernel read them: every result the same, the gradient's pad columns 0 */
    int ldp = (V + 127) / 128 * 128 + (V % 128 == 0 ? 128 : 0);
    /* the sums are added to device doubles that already hold something */
    const double start[2] = {0.25, 3};
    buf sl;
    for (int pass = 0; pass < 3; pass++) {
        /* pass 2: padded rows with ignored ones, whose logits are NaN: never read */
        int ld = pass ? ldp : V;
        const char *var = pass == 2 ? "ignored-rows" : pass ? "padded-rows" : "";
        buf bl_ = pass == 2 ? bil : bl;
        float *lg = randv(P, (size_t)M * ld, 4, 0);
        for (int m = 0; m < M; m++) {
            float *row = lg + (size_t)m * ld;
            if (m % 3 == 0) /* a tie for the maximum: the first one counts */
                row[lab[m]] = row[(lab[m] + 1) % V] = 9;
            if (m % 3 == 1)
                row[lab[m]] = 8;
            for (int v = V; v < ld; v++)
                row[v] = 50;
            for (int v = 0; pass == 2 && ilab[m] < 0 && v < ld; v++)
                row[v] = NAN;
        }
        buf logits = mk(P, (size_t)M * ld, 0, lg), lse = mk(P, (size_t)M, 1, NULL);
        double got[2][2], loss[2], ok[2], floss[2], fok[2];
        sl = mkd(P, start, 2);
        BOTH(be->xent_fwd(be, D(lse), D(logits), IP(bl_), M, V, ld, D(sl), tupe_dev_dat(D(sl), 1)));
        BOTH(be->download(be, got[s_], D(sl), 2, TUPE_DBL));
        for (int k = 0; k < 2; k++)
            loss[k] = got[k][0], ok[k] = got[k][1];
        rel(P, &sl);
        cmp_val(P, "xent_fwd", var, "loss", loss[0], loss[1], TOL(P, 1e-6, 1e-4));
        cmp_val(P, "xent_fwd", var, "correct", ok[0], ok[1], 0);
        cmp(P, "xent_fwd", var, "lse", &lse, TOL(P, 1e-6, 1e-4));
        /* the fused classifier, in place: the same loss and count, and on each backend the
         * same gradient as xent_fwd's then xent_bwd's, bit for bit */
        buf fused = mk(P, (size_t)M * ld, 0, lg);
        sl = mkd(P, start, 2);
        /* the second pass takes the divisor from a device double (a step's parameter block) */
        double nd = (double)M;
        buf nrm = mkd(P, &nd, 1);
        BOTH(be->xent_fused(be, D(fused), D(fused), IP(bl_), M, V, ld, 1.0 / M,
                            pass ? D(nrm) : NULL, D(sl), tupe_dev_dat(D(sl), 1)));
        rel(P, &nrm);
        BOTH(be->download(be, got[s_], D(sl), 2, TUPE_DBL));
        for (int k = 0; k < 2; k++)
            floss[k] = got[k][0], fok[k] = got[k][1];
        rel(P, &sl);
        cmp_val(P, "xent_fused", var, "loss", floss[0], floss[1], TOL(P, 1e-6, 1e-4));
        cmp_val(P, "xent_fused", var, "correct", fok[0], fok[1], 0);
        BOTH(be->xent_bwd(be, D(logits), D(logits), D(lse), IP(bl_), M, V, ld, 1.0 / M));
        cmp(P, "xent_bwd", pass == 2 ? "in-place,ignored-rows" : pass ? "in-place,padded-rows"
                                                                     : "in-place", "dlogits", &logits,
            TOL(P, 1e-5, 1e-2));
        cmp(P, "xent_fused", var, "dlogits", &fused, TOL(P, 1e-5, 1e-2));
        if (!backend_error(P, "xent_fused")) {
            size_t nb = (size_t)M * ld * sizeof(float);
            float *h[2] = {xmalloc(nb), xmalloc(nb)};
            double differ = 0;
            for (int s_ = 0; s_ < 2; s_++) {
                P->be[s_]->download(P->be[s_], h[0], logits.d[s_], (size_t)M * ld, TUPE_F32);
                P->be[s_]->download(P->be[s_], h[1], fused.d[s_], (size_t)M * ld, TUPE_F32);
                differ += memcmp(h[0], h[1], nb) != 0;
                differ += floss[s_] != loss[s_] || fok[s_] != ok[s_];
            }
            verdict(P, "xent_fused", var, "=fwd+bwd", differ, differ, 0);
            free(h[0]);
            free(h[1]);
        }
        rel(P, &fused);
        if (pass && !backend_error(P, "xent_bwd")) {
            /* the pad columns exactly 0 on both, and the ignored rows' every column */
            float *h = xmalloc((size_t)M * ld * sizeof *h);
            double nz = 0;
            for (int s_ = 0; s_ < 2; s_++) {
                P->be[s_]->download(P->be[s_], h, logits.d[s_], (size_t)M * ld, TUPE_F32);
                for (int m = 0; m < M; m++)
                    for (int v = pass == 2 && ilab[m] < 0 ? 0 : V; v < ld; v++)
                        nz += h[(size_t)m * ld + v] != 0;
            }
            verdict(P, "xent_bwd", var, pass == 2 ? "pad cols,ignored rows" : "pad cols", nz, nz, 0);
            free(h);
        }
        rel(P, &logits), rel(P, &lse);
        free(lg);
    }
    rel(P, &bl), rel(P, &bil);
    free(lab);
    free(ilab);
    free(idx);

    int Mm = 64;
    buf pred = mkr(P, (size_t)Mm, 2), tgt = mkw(P, (size_t)Mm, 2), dp = mk(P, (size_t)Mm, 0, NULL);
    double se[2];
    sl = mkd(P, start, 1);
    BOTH(be->mse_fwd(be, D(pred), D(tgt), Mm, D(sl)));
    BOTH(be->download(be, &se[s_], D(sl), 1, TUPE_DBL));
    rel(P, &sl);
    cmp_val(P, "mse_fwd", "", "sum", se[0], se[1], TOL(P, 1e-12, 1e-12));
    BOTH(be->mse_bwd(be, D(dp), D(pred), D(tgt), Mm, 0.25));
    cmp(P, "mse_bwd", "", "dpred", &dp, TOL(P, 1e-7, 8e-3));
    rel(P, &pred), rel(P, &tgt), rel(P, &dp);
}

static void ops_adamw(pair *P)
{
    size_t n = 10001;
    float *p0 = randv(P, n, 1, 0);
    buf p = mk(P, n, 0, p0), g = mkr(P, n, 1), m = mkw(P, n, 0.1), v = mkw(P, n, 0);
    float *vv = randv(P, n, 0.01, 1);
    for (size_t i = 0; i < n; i++)
        vv[i] = vv[i] * vv[i];
    BOTH(be->upload(be, D(v), vv, n, TUPE_F32 | TUPE_WIDE));
    /* The device keeps a master copy when its parameters are narrower. */
    tupe_dev *master = NULL;
    tupe_backend *dev = P->be[1];
    if (dev->wsize > dev->esize) {
        master = dev->alloc(dev, n * (size_t)dev->wsize);
        dev->upload(dev, master, p0, n, TUPE_F32 | TUPE_WIDE);
    }
    tupe_adamw_args a = {1e-3, 0.01, 0.9, 0.999, 1e-6, 1e-3 * sqrt(1 - 0.999 * 0.999) / (1 - 0.9 * 0.9),
                         0.5, 0, 0, NULL, 1.0};
    BOTH(be->adamw(be, D(p), D(g), D(m), D(v), s_ ? master : NULL, n, &a, NULL));
    /* the second's lr and step size from a step parameter block on the device, as the
     * trainer's (the same doubles: the same bits) */
    double pv[TUPE_PAR_OFFSET] = {[TUPE_PAR_LR] = a.lr, [TUPE_PAR_STEP_SIZE] = a.step_size};
    buf blk = mkd(P, pv, TUPE_PAR_OFFSET);
    tupe_adamw_args a2 = a;
    BOTH(a2.par = D(blk); be->adamw(be, D(p), D(g), D(m), D(v), s_ ? master : NULL, n, &a2, NULL));
    rel(P, &blk);
    /* a third whose clipping factor the device computes from a sum of squares it holds (norm
     * 2.5, clip 1), the reference's from the host's norm */
    const double ss = 6.25;
    buf dss = mkd(P, &ss, 1);
    a.clip = 1.0;
    a.clip_tf = 0;
    a.gscale = tupe_clip_scale(sqrt(ss), a.clip, a.clip_tf);
    BOTH(be->adamw(be, D(p), D(g), D(m), D(v), s_ ? master : NULL, n, &a, s_ ? D(dss) : NULL));
    rel(P, &dss);
    cmp(P, "adamw", "3 steps", "p", &p, TOL(P, 1e-6, 8e-3));
    cmp(P, "adamw", "3 steps", "m", &m, TOL(P, 1e-4, 1e-4));
    cmp(P, "adamw", "3 steps", "v", &v, TOL(P, 1e-4, 1e-4));
    if (master) {
        float *h[2] = {xmalloc(n * 4), xmalloc(n * 4)};
        P->be[0]->download(P->be[0], h[0], p.d[0], n, TUPE_F32);
        dev->download(dev, h[1], master, n, TUPE_F32 | TUPE_WIDE);
        cmp_host(P, "adamw", "3 steps", "master", h[0], h[1], n, 1e-6);
        free(h[0]);
        free(h[1]);
        dev->free(dev, master);
    }
    rel(P, &p), rel(P, &g), rel(P, &m), rel(P, &v);
    free(p0);
    free(vv);
}

/* Shapes at the CUDA backend's launch limits: a column sum over 4,194,305 rows, whose chunks
 * of 64 rows once were grid.y (at most 65535: finding R3). Only with --only limits. */
static void ops_limits(pair *P)
{
    int N = 4194305, in = 1, out = 3;
    buf dy = mkr(P, (size_t)N * out, 1), x = mkr(P, (size_t)N * in, 1);
    buf W = mkr(P, (size_t)out * in, 0.5), dW = mkr(P, (size_t)out * in, 0.1);
    buf db = mkr(P, (size_t)out, 0.1), dx = mkr(P, (size_t)N * in, 1);
    BOTH(be->linear_bwd(be, D(dx), 0, D(dW), D(db), D(dy), D(x), D(W), N, in, out));
    cmp(P, "linear_bwd", "N=4194305", "db", &db, TOL(P, 1e-3, 8e-3));
    cmp(P, "linear_bwd", "N=4194305", "dW", &dW, TOL(P, 1e-3, 8e-3));
    cmp(P, "linear_bwd", "N=4194305", "dx", &dx, TOL(P, 1e-5, 8e-3));
    rel(P, &dy), rel(P, &x), rel(P, &W), rel(P, &dW), rel(P, &db), rel(P, &dx);
}

static int cmd_ops(pair *P, int small, const char *only)
{
    shape full = {4, 77, 12, 64, 768, 3072, 30522, 2000, 46, 32};
    shape tiny = {3, 13, 2, 8, 16, 40, 97, 50, 7, 6};
    const shape *S = small ? &tiny : &full;
    static const char *const groups[] = {"memory", "gemm", "linear", "act", "ln", "embed",
                                         "attn", "pos", "heads", "adamw", "limits"};
    int any = 0;
    for (int g = 0; g < 11; g++) {
        if (only ? strcmp(only, groups[g]) != 0 : g == 10)
            continue;
        any = 1;
        switch (g) {
        case 0: ops_memory(P); break;
        case 1: ops_gemm(P); break;
        case 2: ops_linear(P, S); break;
        case 3: ops_act(P); break;
        case 4: ops_ln(P, S); break;
        case 5: ops_embed(P, S); break;
        case 6: ops_attn(P, S); break;
        case 7: ops_pos(P, S); break;
        case 8: ops_heads(P, S); break;
        case 9: ops_adamw(P); break;
        default: ops_limits(P); break;
        }
    }
    if (!any) {
        fprintf(stderr, "tupe-parity: --only: memory, gemm, linear, act, ln, embed, attn, pos, "
                        "heads, adamw or limits\n");
        return 2;
    }
    return 0;
}

/* ---- model steps ----------------------------------------------------------------------------- */

typedef struct mbatch {
    int B, T, M;
    int rows;   /* the head's rows, as tupe-pretrain's: its capacity, M or more (model.h) */
    int32_t *ids, *len, *mpos, *mlab;
} mbatch;

static void make_batch(mbatch *b, int B, int T, int V, uint64_t seed)
{
    uint64_t keep = rng_state;
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    b->B = B, b->T = T;
    b->ids = xmalloc((size_t)B * T * 4);
    b->len = xmalloc((size_t)B * 4);
    b->mpos = xmalloc((size_t)B * T * 4);
    b->mlab = xmalloc((size_t)B * T * 4);
    b->M = 0;
    for (int s = 0; s < B; s++) {
        b->len[s] = s == 0 ? T : T - 1 - irand(T / 2);
        for (int t = 0; t < T; t++) {
            int id = t == 0 ? 2 : 5 + irand(V - 5);
            b->ids[s * T + t] = t < b->len[s] ? id : 0;
            if (t < b->len[s] && unif() < 0.15) {
                b->mpos[b->M] = s * T + t;
                b->mlab[b->M++] = id;
                b->ids[s * T + t] = 4;
            }
        }
    }
    /* padding rows up to the capacity train_capacity gives (15% of each sequence and one) */
    int per_seq = (int)floor(0.15 * T) + 1;
    b->rows = B * per_seq > b->M ? B * per_seq : b->M;
    for (int k = b->M; k < b->rows; k++)
        b->mpos[k] = b->mlab[k] = -1;
    rng_state = keep;
}

/* The capacity tupe-pretrain gives a model for a batch of this shape (masked positions: 15% of
 * each sequence and one, as lib/train/pretrain.c bounds them), enough for b. */
static tupe_capacity train_capacity(const mbatch *b)
{
    tupe_capacity cap = {b->B, b->T, b->rows};
    return cap;
}

static void free_batch(mbatch *b)
{
    free(b->ids), free(b->len), free(b->mpos), free(b->mlab);
}

static int ROPE_HALF; /* --rope-half: RoPE's half-split layout instead of the interleaved */
static double ELECTRA; /* --electra F: an ELECTRA pair, the generator F of the model's width */
static int UNPADDED; /* counters --unpadded: the head over each batch's M rows (for comparison) */

static int load_cfg(tupe_config *c, const char *model, const char *position, int tie_cls, int V)
{
    tupe_err e;
    if (tupe_config_load(c, model, &e)) {
        fprintf(stderr, "tupe-parity: %s\n", e.msg);
        return 2;
    }
    if (position) {
        int p = tupe_position_parse(position);
        if (p < 0) {
            fprintf(stderr, "tupe-parity: unknown position '%s'\n", position);
            return 2;
        }
        c->position = p;
    }
    if (tie_cls)
        c->untie_cls = 0;
    if (ROPE_HALF)
        c->rope_layout = TUPE_ROPE_HALF;
    c->generator_hidden_size = ELECTRA;
    c->vocab_size = V;
    return 0;
}

static int make_models(pair *P, const tupe_config *c, int B, int T, int M, tupe_model *m[2],
                       uint64_t seed)
{
    tupe_capacity cap = {B, T, M};
    for (int s = 0; s < 2; s++) {
        tupe_err e;
        if (tupe_model_create(&m[s], c, P->be[s], &cap, &e) || tupe_model_init(m[s], seed, &e)) {
            fprintf(stderr, "tupe-parity: %s: %s\n", P->be[s]->name, e.msg);
            return 2;
        }
    }
    return 0;
}

/* A step parameter block (backend.h's TUPE_PAR_*) of one micro-batch on be, for fwd_bwd; NULL
 * when out of device memory (said). */
static tupe_dev *par_block(tupe_backend *be)
{
    tupe_dev *p = be->alloc(be, (TUPE_PAR_OFFSET + 1) * sizeof(double));
    if (!p)
        fprintf(stderr, "tupe-parity: out of device memory\n");
    return p;
}

/* A training step's forward and backward; with blk (par_block), its step, sample offset and
 * loss divisor written there first (one upload) as the trainer passes them. */
static int fwd_bwd(tupe_model *m, const mbatch *b, uint32_t step, tupe_dev *blk, double *loss)
{
    tupe_batch tb;
    memset(&tb, 0, sizeof tb);
    tb.B = b->B, tb.T = b->T, tb.ids = b->ids, tb.lengths = b->len;
    tb.M = b->M, tb.mask_pos = b->mpos, tb.mask_label = b->mlab, tb.rows = b->rows;
    tb.loss_norm = b->M > 0 ? (double)b->M : 0; /* the default divisor, given */
    tupe_backend *be = tupe_model_backend(m);
    double v[TUPE_PAR_OFFSET + 1] = {[TUPE_PAR_STEP] = step, [TUPE_PAR_LOSS_NORM] = tb.loss_norm};
    if (blk)
        be->upload(be, blk, v, TUPE_PAR_OFFSET + 1, TUPE_DBL);
    tupe_step st = {.seed = 42, .step = step, .par = blk, .slot = 0};
    tupe_fwd_out out;
    tupe_err e;
    tupe_model_zero_grad(m);
    if (tupe_model_forward(m, &tb, &st, &out, &e) || tupe_model_backward(m, &e)) {
        fprintf(stderr, "tupe-parity: %s\n", e.msg);
        return 2;
    }
    *loss = out.loss;
    return 0;
}

/* An ELECTRA step's draws (model/electra.h): on each backend, every masked position holds the
 * Gumbel-max sample of that backend's own generator logits with the noise named by the batch
 * (the host's tupe_electra_sample: the same noise on both), and its label says whether it
 * differs from the original; unmasked positions are the input, labelled 0. Across the backends
 * the draws agree, except that bf16's logits may swap a near-tie (a draw can differ only where
 * two scores lie within the logits' error, which the logits' comparison bounds): at most 1 in
 * 10 there. Returns how many draws differ. */
static int electra_draws(pair *P, const char *var, const mbatch *b, int V, float *const lg[2],
                         int32_t *const cor[2], int32_t *const lab[2])
{
    size_t N = (size_t)b->B * (size_t)b->T;
    int own = 0, differ = 0, badlab = 0;
    char *masked = calloc(N, 1);
    for (int k = 0; k < b->M; k++)
        masked[b->mpos[k]] = 1;
    for (int s = 0; s < 2; s++)
        for (int k = 0; k < b->M; k++) {
            int pos = b->mpos[k];
            own += cor[s][pos] != tupe_electra_sample(lg[s] + (size_t)k * V, V, 0, 0,
                                                      (uint64_t)(pos / b->T), pos % b->T);
            badlab += lab[s][pos] != (cor[s][pos] != b->mlab[k]);
        }
    for (size_t i = 0; i < N; i++) {
        differ += cor[0][i] != cor[1][i];
        for (int s = 0; s < 2; s++)
            badlab += !masked[i] && (lab[s][i] != 0 || cor[s][i] != b->ids[i]);
    }
    free(masked);
    verdict(P, "step-draws", var, "own", own, own, 0);
    verdict(P, "step-draws", var, "labels", badlab, badlab, 0);
    verdict(P, "step-draws", var, "differ", differ, (double)differ / (b->M > 0 ? b->M : 1),
            P->bf16 ? 0.1 : 0);
    return differ;
}

static int cmd_step(pair *P, const char *model, const char *position, int tie_cls, int B, int T)
{
    tupe_config c;
    int V = 1000, rc;
    if ((rc = load_cfg(&c, model, position, tie_cls, V)))
        return rc;
    mbatch b;
    make_batch(&b, B, T, V, 1);
    tupe_model *m[2];
    if ((rc = make_models(P, &c, B, T, B * T, m, 7)))
        return rc;
    char var[64];
    snprintf(var, sizeof var, "%s/%s%s%s", model, tupe_position_name(c.position),
             tie_cls ? "+tie-cls" : "", tupe_cfg_rope(&c) && ROPE_HALF ? "+half" : "");
    if (ELECTRA > 0)
        snprintf(var + strlen(var), sizeof var - strlen(var), "+electra");
    double loss[2];
    float *lg[2], *pr[2] = {NULL, NULL}, *sc[2] = {NULL, NULL};
    int32_t *cor[2] = {NULL, NULL}, *lab[2] = {NULL, NULL};
    size_t nl = 0, np = 0, N = (size_t)B * (size_t)T;
    int cfg_layers = c.num_layers;
    tupe_dev *blk[2];
    for (int s = 0; s < 2; s++) {
        tupe_batch tb;
        memset(&tb, 0, sizeof tb);
        tb.B = B, tb.T = T, tb.ids = b.ids, tb.lengths = b.len, tb.M = b.M;
        tb.mask_pos = b.mpos, tb.mask_label = b.mlab, tb.rows = b.rows;
        /* the dropout's step from a step parameter block, as the trainer's */
        const double pv[TUPE_PAR_OFFSET + 1] = {[TUPE_PAR_STEP] = 3};
        if (!(blk[s] = par_block(P->be[s])))
            return 2;
        P->be[s]->upload(P->be[s], blk[s], pv, TUPE_PAR_OFFSET + 1, TUPE_DBL);
        tupe_step st = {.seed = 42, .step = 3, .par = blk[s]};
        tupe_fwd_out out;
        tupe_err e;
        tupe_model_zero_grad(m[s]);
        if (tupe_model_forward(m[s], &tb, &st, &out, &e)) {
            fprintf(stderr, "tupe-parity: %s\n", e.msg);
            return 2;
        }
        loss[s] = out.loss;
        nl = (size_t)b.M * V;
        lg[s] = xmalloc(nl * 4);
        /* an ELECTRA pair: its generator's logits, its draws, the discriminator's scores */
        tupe_electra *ep = tupe_model_pair(m[s]);
        if (ep) {
            sc[s] = xmalloc(N * 4);
            cor[s] = xmalloc(N * 4);
            lab[s] = xmalloc(N * 4);
            memcpy(cor[s], tupe_electra_corrupted(ep), N * 4);
            memcpy(lab[s], tupe_electra_labels(ep), N * 4);
        } else {
            /* the last layer's attention probabilities: on a device whose forward kept only the
             * log-sum-exp (flash), the probe computes them again */
            np = tupe_model_probe_size(m[s], TUPE_PROBE_ATTN_PROBS);
            pr[s] = xmalloc(np * 4);
        }
        if (tupe_model_probe(ep ? tupe_electra_generator(ep) : m[s], TUPE_PROBE_LOGITS, 0, lg[s],
                             nl, &e) ||
            (!ep && tupe_model_probe(m[s], TUPE_PROBE_ATTN_PROBS, cfg_layers - 1, pr[s], np, &e)) ||
            (ep && tupe_electra_scores(ep, sc[s], N, &e)) || tupe_model_backward(m[s], &e)) {
            fprintf(stderr, "tupe-parity: %s\n", e.msg);
            return 2;
        }
    }
    cmp_val(P, "step", var, "loss", loss[0], loss[1], TOL(P, 1e-5, 1e-2));
    cmp_host(P, "step", var, "logits", lg[0], lg[1], nl, TOL(P, 1e-4, 3e-2));
    if (np)
        cmp_host(P, "step", var, "attn_probs", pr[0], pr[1], np, TOL(P, 1e-5, 1e-2));
    free(pr[0]);
    free(pr[1]);
    int differ = sc[0] ? electra_draws(P, var, &b, V, lg, cor, lab) : 0;
    if (sc[0] && !differ)
        cmp_host(P, "step", var, "rtd_scores", sc[0], sc[1], N, TOL(P, 1e-4, 3e-2));
    cmp_val(P, "step", var, "grad_norm", tupe_grad_norm(m[0]), tupe_grad_norm(m[1]),
            TOL(P, 1e-4, 3e-2));
    const tupe_layout *lay = tupe_model_layout(m[0]);
    float *g[2];
    for (int s = 0; s < 2; s++) {
        g[s] = xmalloc(lay->total * 4);
        P->be[s]->download(P->be[s], g[s], tupe_model_grads(m[s]), lay->total, TUPE_F32);
    }
    /* Some gradients vanish in exact arithmetic (the key biases: softmax rows are invariant
     * to them); their errors are measured against the largest gradient of the model. */
    double gmax = 0;
    for (size_t i = 0; i < lay->total; i++)
        gmax = fmax(gmax, fabs((double)g[0][i]));
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        /* draws that differ (near-ties, bf16 only) feed the discriminator other inputs: then
         * only the generator's own tensors can be compared */
        if (differ && strncmp(p->name, "generator", 9) != 0)
            continue;
        cmp_floor(P, "step-grad", var, p->name, g[0] + p->offset, g[1] + p->offset, p->numel,
                  TOL(P, 1e-3, 6e-2), 1e-2 * gmax);
    }
    for (int s = 0; s < 2; s++) {
        free(g[s]);
        free(lg[s]);
        free(sc[s]), free(cor[s]), free(lab[s]);
        tupe_model_free(m[s]);
        P->be[s]->free(P->be[s], blk[s]);
    }
    free_batch(&b);
    return 0;
}

static int cmd_curve(pair *P, const char *model, const char *position, int steps, int B, int T)
{
    tupe_config c;
    int V = 1000, rc;
    if ((rc = load_cfg(&c, model, position, 0, V)))
        return rc;
    tupe_model *m[2];
    if ((rc = make_models(P, &c, B, T, B * T, m, 11)))
        return rc;
    tupe_adamw *o[2];
    tupe_adamw_cfg ac;
    tupe_adamw_defaults(&ac);
    for (int s = 0; s < 2; s++) {
        tupe_err e;
        if (tupe_adamw_create(&o[s], m[s], &ac, &e)) {
            fprintf(stderr, "tupe-parity: %s\n", e.msg);
            return 2;
        }
    }
    double worst = 0, first[2] = {0, 0}, last[2] = {0, 0};
    tupe_dev *blk[2] = {par_block(P->be[0]), par_block(P->be[1])};
    if (!blk[0] || !blk[1])
        return 2;
    for (int t = 1; t <= steps; t++) {
        mbatch b;
        make_batch(&b, B, T, V, 100 + (uint64_t)t);
        double loss[2];
        for (int s = 0; s < 2; s++) {
            if ((rc = fwd_bwd(m[s], &b, (uint32_t)t, blk[s], &loss[s])))
                return rc;
            tupe_adamw_step(o[s], 5e-4, tupe_grad_norm(m[s]));
        }
        double d = fabs(loss[1] - loss[0]) / fabs(loss[0]);
        worst = d > worst ? d : worst;
        if (t == 1)
            first[0] = loss[0], first[1] = loss[1];
        last[0] = loss[0], last[1] = loss[1];
        printf("CURVE %s step %d ref %.6f dev %.6f\n", model, t, loss[0], loss[1]);
        digest("curve", model, "loss", &loss[1], sizeof loss[1]);
        free_batch(&b);
    }
    char var[64];
    snprintf(var, sizeof var, "%s/%d steps", model, steps);
    verdict(P, "curve", var, "loss", worst, worst, TOL(P, 2e-3, 3e-2));
    printf("CURVE %s loss %.4f -> %.4f (ref), %.4f -> %.4f (dev)\n", model, first[0], last[0],
           first[1], last[1]);
    for (int s = 0; s < 2; s++) {
        tupe_adamw_free(o[s]);
        tupe_model_free(m[s]);
        P->be[s]->free(P->be[s], blk[s]);
    }
    return 0;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The device's per-operation times of the steps since timing started (--per-op): one line per
 * operation, the slowest first. */
static int print_op_times(tupe_backend *be, int steps, double step_s)
{
#if defined(TUPE_HAVE_CUDA)
    tupe_cuda_op_time t[64];
    tupe_err e;
    int n = tupe_backend_cuda_op_times(be, t, 64, &e);
    if (n < 0) {
        fprintf(stderr, "tupe-parity: %s\n", e.msg);
        return 2;
    }
    n = n < 64 ? n : 64;
    for (int i = 1; i < n; i++) /* by time, the largest first */
        for (int j = i; j > 0 && t[j].ms > t[j - 1].ms; j--) {
            tupe_cuda_op_time x = t[j];
            t[j] = t[j - 1], t[j - 1] = x;
        }
    double sum = 0;
    for (int i = 0; i < n; i++) {
        double ms = t[i].ms / steps;
        sum += ms;
        printf("OPTIME %s %-13s ms_per_step=%.3f share=%.1f%% calls_per_step=%.1f\n", be->name,
               t[i].name, ms, 100 * ms / (step_s * 1e3), (double)t[i].calls / steps);
    }
    printf("OPTIME %s %-13s ms_per_step=%.3f share=%.1f%% (between operations: host time, "
           "launch gaps)\n", be->name, "(rest)", step_s * 1e3 - sum,
           100 * (1 - sum / (step_s * 1e3)));
    return 0;
#else
    (void)be, (void)steps, (void)step_s;
    fprintf(stderr, "tupe-parity: --per-op times a CUDA device: this build has none\n");
    return 2;
#endif
}

static int cmd_bench(tupe_backend *be, const char *model, const char *position, int B, int T,
                     int steps, double peak, int per_op)
{
    tupe_config c;
    tupe_err e;
    int rc;
    if ((rc = load_cfg(&c, model, position, 0, 30522)))
        return rc;
    mbatch b;
    make_batch(&b, B, T, 30522, 5);
    tupe_capacity cap = train_capacity(&b);
    tupe_model *m = NULL;
    tupe_adamw *o = NULL;
    tupe_adamw_cfg ac;
    tupe_adamw_defaults(&ac);
    /* the loss stays on the device, as in a trainer's step (model.h), read after the last */
    tupe_dev *sl = be->alloc(be, TUPE_NSUMS * sizeof(double)), *blk = par_block(be);
    if (!sl || !blk || tupe_model_create(&m, &c, be, &cap, &e) || tupe_model_init(m, 1, &e) ||
        tupe_adamw_create(&o, m, &ac, &e)) {
        fprintf(stderr, "tupe-parity: %s\n", sl ? e.msg : "out of device memory");
        rc = 2;
        goto done;
    }
    tupe_model_sums_target(m, sl, 1);
    double t0 = 0, loss = 0;
    for (int t = 0; t < steps + 2; t++) {
        if (t == 2) {
#if defined(TUPE_HAVE_CUDA)
            if (per_op && tupe_backend_cuda_timing(be, 1, &e)) {
                fprintf(stderr, "tupe-parity: --per-op: %s\n", e.msg);
                rc = 2;
                goto done;
            }
#endif
            t0 = now();
        }
        be->zero(be, sl, tupe_dbl_reals(be)); /* the last step's loss */
        if ((rc = fwd_bwd(m, &b, (uint32_t)t, blk, &loss)))
            goto done;
        tupe_adamw_step(o, 1e-4, tupe_grad_norm(m)); /* the norm waits for the device */
    }
    double dt = (now() - t0) / steps;
    be->download(be, &loss, sl, 1, TUPE_DBL);
    loss /= b.M > 0 ? b.M : 1;
    /* MFU of the real tokens (padding excluded) at the model's FLOPs per token (model/flops.h) */
    double real = 0;
    for (int s = 0; s < B; s++)
        real += b.len[s];
    double fpt = tupe_flops_per_token(&c, T, 0.15), flops = fpt * real;
    printf("BENCH %s %s %s seq=%d batch=%d step_ms=%.2f tokens_per_s=%.0f padded_tokens_per_s=%.0f "
           "mflop_per_token=%.1f tflops=%.1f mfu=%.1f%% loss=%.3f\n", be->name, model,
           tupe_position_name(c.position), T, B, dt * 1e3, real / dt, (double)B * T / dt,
           fpt / 1e6, flops / dt / 1e12, 100 * flops / dt / (peak * 1e12), loss);
    rc = per_op ? print_op_times(be, steps, dt) : 0;
done: /* every path frees what it made (the suite runs under LeakSanitizer) */
    free_batch(&b);
    if (o)
        tupe_adamw_free(o);
    if (m)
        tupe_model_free(m);
    if (sl)
        be->free(be, sl);
    if (blk)
        be->free(be, blk);
    return rc;
}

#if defined(TUPE_HAVE_CUDA)
/* The emulated GPU's counters of a training step (forward, backward, the gradient norm,
 * AdamW) of a model of configuration c: the first step grows the scratch buffers, the next
 * are steps as every later one is. With digest, three steps, the second and the third of
 * batches with different numbers of masked positions (masked[0..1]), both with the head over
 * the capacity's rows as tupe-pretrain's: digest[0..1] their launch digests (equal: the same
 * launches of the same shapes), n the third's counters; without, two steps of one batch. The
 * loss stays on the device (a trainer reads it with the norm: the step's one host wait). */
static int count_step(tupe_backend *be, const tupe_config *c, int B, int T, tupe_cuda_counters *n,
                      int *masked, unsigned long long *digest)
{
    mbatch b[2];
    make_batch(&b[0], B, T, c->vocab_size, 5);
    make_batch(&b[1], B, T, c->vocab_size, 6);
    masked[0] = b[1].M, masked[1] = b[0].M;
    tupe_capacity cap = train_capacity(&b[0]);
    tupe_model *m;
    tupe_adamw *o;
    tupe_adamw_cfg ac;
    tupe_err e;
    tupe_adamw_defaults(&ac);
    if (b[1].rows > cap.masked) {
        fprintf(stderr, "tupe-parity: counters: %d masked positions, more than the capacity's %d\n",
                b[1].rows, cap.masked);
        return 2;
    }
    b[1].rows = cap.masked; /* (make_batch's rows: the capacity's, unless M was more) */
    if (UNPADDED) /* the steps before the head's fixed rows: launches of M rows */
        b[0].rows = b[1].rows = 0;
    if (tupe_model_create(&m, c, be, &cap, &e) || tupe_model_init(m, 1, &e) ||
        tupe_adamw_create(&o, m, &ac, &e)) {
        fprintf(stderr, "tupe-parity: %s\n", e.msg);
        return 2;
    }
    double loss;
    int rc = 0, steps = digest ? 3 : 2;
    tupe_dev *sl = be->alloc(be, TUPE_NSUMS * sizeof(double)), *blk = par_block(be);
    if (!sl || !blk) {
        fprintf(stderr, "tupe-parity: out of device memory\n");
        rc = 2;
    }
    tupe_model_sums_target(m, sl, 1);
    for (int t = 1; t <= steps && !rc; t++) {
        if (t >= 2 && tupe_backend_cuda_counters_reset(be, &e)) {
            fprintf(stderr, "tupe-parity: counters: %s\n", e.msg);
            rc = 2;
        }
        if (!rc)
            rc = fwd_bwd(m, &b[digest && t == 2], (uint32_t)t, blk, &loss);
        if (!rc)
            tupe_adamw_step(o, 1e-4, tupe_grad_norm(m));
        if (!rc && t >= 2 && tupe_backend_cuda_counters(be, n, &e)) {
            fprintf(stderr, "tupe-parity: counters: %s\n", e.msg);
            rc = 2;
        }
        if (!rc && digest && t >= 2)
            digest[t - 2] = n->launch_digest;
    }
    free_batch(&b[0]);
    free_batch(&b[1]);
    tupe_adamw_free(o);
    tupe_model_free(m);
    if (sl)
        be->free(be, sl);
    if (blk)
        be->free(be, blk);
    return rc;
}
#endif

/* One JSON line: the counters of a training step on the emulated GPU, and per layer (the step
 * of the same model with one layer more, less this one's). */
static int cmd_counters(tupe_backend *be, const char *model, const char *position, int B, int T)
{
#if defined(TUPE_HAVE_CUDA)
    tupe_config c;
    int rc;
    if ((rc = load_cfg(&c, model, position, 0, 30522)))
        return rc;
    tupe_cuda_counters n, n1;
    memset(&n, 0, sizeof n);
    int M[2], M1[2];
    unsigned long long dg[2];
    if ((rc = count_step(be, &c, B, T, &n, M, dg)))
        return rc;
    tupe_config c1 = c;
    c1.num_layers++;
    if ((rc = count_step(be, &c1, B, T, &n1, M1, NULL)))
        return rc;
    /* the masked-LM logits the loss reads, M rows of V: its passes over them */
    double logit_bytes = (double)M[1] * c.vocab_size * be->esize;
    printf("{\"dev\":\"%s\",\"model\":\"%s\",\"position\":\"%s\",\"seq\":%d,\"batch\":%d,"
           "\"layers\":%d,\"launches\":%lld,\"launches_per_layer\":%lld,\"kernels\":%lld,"
           "\"gemms\":%lld,\"gemms_per_layer\":%lld,\"memsets\":%lld,\"copies\":%lld,"
           "\"sorts\":%lld,\"transfers\":%lld,\"host_syncs\":%lld,\"philox_calls\":%lld,"
           "\"dropout_decisions\":%lld,\"decisions_per_philox_call\":%.2f,"
           "\"peak_device_bytes\":%lld,\"largest_buffer_bytes\":%lld,"
           "\"xent_read_bytes\":%lld,\"xent_reread_bytes\":%lld,\"xent_write_bytes\":%lld,"
           "\"xent_reads_per_logit\":%.2f,\"xent_writes_per_logit\":%.2f,"
           "\"gemm_flops\":%lld,\"masked\":[%d,%d],\"head_rows\":%d,\"launch_digests\":[\"%016llx\",\"%016llx\"],"
           "\"same_launches\":%s}\n",
           be->name, model, tupe_position_name(c.position), T, B, c.num_layers, n.launches,
           n1.launches - n.launches, n.kernels, n.gemms, n1.gemms - n.gemms, n.memsets, n.copies,
           n.sorts, n.transfers, n.host_syncs, n.philox_calls, n.dropout_decisions,
           n.philox_calls ? (double)n.dropout_decisions / (double)n.philox_calls : 0.0,
           n.peak_device_bytes, n.largest_buffer_bytes, n.xent_read_bytes, n.xent_reread_bytes,
           n.xent_write_bytes, logit_bytes > 0 ? n.xent_read_bytes / logit_bytes : 0.0,
           logit_bytes > 0 ? n.xent_write_bytes / logit_bytes : 0.0, n.gemm_flops, M[0], M[1],
           B * ((int)floor(0.15 * T) + 1), dg[0], dg[1], dg[0] == dg[1] ? "true" : "false");
    return 0;
#else
    (void)be, (void)model, (void)position, (void)B, (void)T;
    fprintf(stderr, "tupe-parity: counters: this build has no CUDA backend\n");
    return 2;
#endif
}

/* ---- command line --------------------------------------------------------------------------- */

static void usage(void)
{
    fprintf(stderr, "usage: tupe-parity ops|step|curve|bench|counters [--ref NAME] [--dev NAME]\n"
                    "       [--small] [--per-op] [--unpadded]\n"
                    "       [--only GROUP]\n"
                    "       [--model M] [--position P] [--tie-cls] [--rope-half] [--electra F]\n"
                    "       [--batch B] [--seq T]\n"
                    "       [--steps N] [--peak TFLOPS] [--seed N] [--digest]\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage();
        return 2;
    }
    const char *cmd = argv[1], *ref = "cpu", *dev = "cpu", *model = "tiny", *position = NULL;
    const char *only = NULL;
    int small = 0, tie = 0, B = 4, T = 77, steps = 50, per_op = 0;
    double peak = 989;
    for (int i = 2; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--small") == 0)
            small = 1;
        else if (strcmp(a, "--tie-cls") == 0)
            tie = 1;
        else if (strcmp(a, "--digest") == 0)
            DIGEST = 1;
        else if (strcmp(a, "--rope-half") == 0)
            ROPE_HALF = 1;
        else if (strcmp(a, "--per-op") == 0)
            per_op = 1;
        else if (strcmp(a, "--unpadded") == 0)
            UNPADDED = 1;
        else if (!v) {
            usage();
            return 2;
        } else {
            i++;
            if (strcmp(a, "--ref") == 0) ref = v;
            else if (strcmp(a, "--dev") == 0) dev = v;
            else if (strcmp(a, "--model") == 0) model = v;
            else if (strcmp(a, "--only") == 0) only = v;
            else if (strcmp(a, "--position") == 0) position = v;
            else if (strcmp(a, "--electra") == 0) ELECTRA = atof(v);
            else if (strcmp(a, "--batch") == 0) B = atoi(v);
            else if (strcmp(a, "--seq") == 0) T = atoi(v);
            else if (strcmp(a, "--steps") == 0) steps = atoi(v);
            else if (strcmp(a, "--peak") == 0) peak = atof(v);
            else if (strcmp(a, "--seed") == 0) rng_state ^= strtoull(v, NULL, 10) * 0x9E3779B97F4A7C15ull;
            else {
                usage();
                return 2;
            }
        }
    }
    if (B < 1 || B > 256 || T < 2 || steps < 1) {
        usage();
        return 2;
    }
    pair P;
    memset(&P, 0, sizeof P);
    const char *tf = getenv("TUPE_CUDA_TF32");
    P.tf32 = tf && strcmp(tf, "1") == 0;
    tupe_err e;
    if (tupe_backend_create(&P.be[1], dev, 0, &e)) {
        fprintf(stderr, "tupe-parity: --dev %s: %s\n", dev, e.msg);
        return 2;
    }
    if (strcmp(cmd, "bench") == 0) {
        int rc = cmd_bench(P.be[1], model, position, B, T, steps, peak, per_op);
        tupe_backend_destroy(P.be[1]);
        return rc;
    }
    if (strcmp(cmd, "counters") == 0) {
        int rc = cmd_counters(P.be[1], model, position, B, T);
        tupe_backend_destroy(P.be[1]);
        return rc;
    }
    if (tupe_backend_create(&P.be[0], ref, 0, &e)) {
        fprintf(stderr, "tupe-parity: --ref %s: %s\n", ref, e.msg);
        tupe_backend_destroy(P.be[1]);
        return 2;
    }
    P.bf16 = P.be[1]->esize == 2;
    int rc;
    if (strcmp(cmd, "ops") == 0)
        rc = cmd_ops(&P, small, only);
    else if (strcmp(cmd, "step") == 0)
        rc = cmd_step(&P, model, position, tie, B, T);
    else if (strcmp(cmd, "curve") == 0)
        rc = cmd_curve(&P, model, position, steps, B, T);
    else {
        usage();
        rc = 2;
    }
    printf("SUMMARY %s %s vs %s: %d checks, %d failed\n", cmd, P.be[1]->name, P.be[0]->name,
           P.checks, P.fails);
#if defined(TUPE_HAVE_CUDA)
    /* Products that cuBLASLt had no algorithm for ran through cuBLAS's general GEMM: shown,
     * so that a run says which path its products took. */
    long long lt, legacy;
    char first[200];
    tupe_backend_cuda_gemm_counts(P.be[1], &lt, &legacy, first, sizeof first);
    if (lt || legacy)
        printf("GEMM %s: %lld products through cuBLASLt, %lld through cuBLAS%s%s\n",
               P.be[1]->name, lt, legacy, legacy ? " (no cuBLASLt algorithm), the first: " : "",
               first);
#endif
    if (P.blk)
        P.be[1]->free(P.be[1], P.blk);
    tupe_backend_destroy(P.be[0]);
    tupe_backend_destroy(P.be[1]);
    return rc ? rc : P.fails ? 1 : 0;
}
