/* The CUDA backend (lib/backend/backend.h, lib/backend/backend_cuda.h): `cuda` (fp32 storage)
 * and `cuda-bf16` (bf16 real buffers, fp32 wide buffers). The kernels are written once over the
 * storage type T (float or __nv_bfloat16); arithmetic inside them is fp32, reductions that
 * return a value to the host are double. Every matrix product goes through cuBLASLt with fp32
 * accumulation.
 *
 * Semantics follow lib/backend/backend_cpu.c operation by operation (the CPU backend is the
 * reference): the same accumulate-or-overwrite rules, the same dropout decisions (pointwise.h,
 * indexed by the same logical element numbers), padded keys masked, [CLS] reset, bucket
 * gathers. Where the CPU computes only the unmasked part of a product (keys j < length), this
 * backend computes the whole T x T product and the softmax writes exact zeros at the masked
 * entries, so the products that follow get the same values.
 *
 * Determinism: no floating-point atomics. Column sums run in two passes (fixed row chunks,
 * then the chunks in order); scatters into embedding rows and relative-bucket gradients go
 * through a stable radix sort by destination row, then each destination is summed in token
 * order by one thread. sumsq, xent_fwd and mse_fwd reduce in a fixed tree. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <cub/cub.cuh>
#include <dlfcn.h>
#include <pthread.h>
/* NCCL is optional: with its header, the library is opened when ranks on GPUs first need it. */
#ifndef TUPE_HAVE_NCCL
#if __has_include(<nccl.h>)
#define TUPE_HAVE_NCCL 1
#else
#define TUPE_HAVE_NCCL 0
#endif
#endif
#if TUPE_HAVE_NCCL
#include <nccl.h>
#endif

extern "C" {
#include "backend/backend.h"
}
#include "backend/backend_cuda.h"

typedef __nv_bfloat16 bf16;

/* ---- storage type helpers ---------------------------------------------------------------- */

__device__ __forceinline__ float ldv(const float *p, size_t i) { return p[i]; }
__device__ __forceinline__ float ldv(const bf16 *p, size_t i) { return __bfloat162float(p[i]); }
__device__ __forceinline__ void stv(float *p, size_t i, float v) { p[i] = v; }
__device__ __forceinline__ void stv(bf16 *p, size_t i, float v) { p[i] = __float2bfloat16_rn(v); }
/* v as it reads back after a store into T: where a later kernel recomputes from the stored
 * value (an activation from its stored pre-activation, a dropped probability from the stored
 * probability), the first one rounds the same way. Nothing else is rounded before its one
 * store: an activation or a LayerNorm output that is dropped out is scaled in fp32 and
 * rounded once (a rounding before the scale would only add error: no kernel reads the
 * undropped value back). */
__device__ __forceinline__ float rnd(float v, const float *) { return v; }
__device__ __forceinline__ float rnd(float v, const bf16 *)
{
    return __bfloat162float(__float2bfloat16_rn(v));
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static const cudaDataType_t v = CUDA_R_32F; };
template <> struct dtype_of<bf16> { static const cudaDataType_t v = CUDA_R_16BF; };

/* ---- backend state ----------------------------------------------------------------------- */

enum { SC_SF, SC_PD, SC_COL, SC_K1, SC_K2, SC_V1, SC_V2, SC_CUB, SC_PART, SC_RUNS, SC_N };

typedef struct gemm_key {
    int ta, tb, M, N, K, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    int ab, c;                      /* cudaDataType_t of A/B and of C */
    unsigned ala, alb, alc;         /* pointer alignments */
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int legacy;                     /* cuBLASLt offers no algorithm: cublasGemmStridedBatchedEx */
} gemm_plan;

#define PLAN_CAP 256

typedef struct cu_priv {
    int dev, bf16, tf32;
    cudaStream_t s;
    cublasLtHandle_t lt;
    cublasHandle_t blas;            /* the fallback for shapes cuBLASLt has no algorithm for */
    struct nccl_link *nl;           /* NCCL between the ranks, after tupe_backend_cuda_nccl_init */
    void *ws;
    size_t ws_bytes;
    double *dres;                   /* device: reduction partials and results */
    double *hres;                   /* pinned host copy of the results */
    void *scr[SC_N];
    size_t scr_cap[SC_N];
    gemm_plan plans[PLAN_CAP];
    int nplans;
    long long gemm_lt, gemm_legacy; /* products run through each path */
    char legacy_shape[160];         /* the first product that had to take the legacy path */
    int err;
    char msg[512];
} cu_priv;

#define RED_PARTS 1024              /* blocks of the first pass of sumsq */

static cu_priv *PR(tupe_backend *be) { return (cu_priv *)be->priv; }

static void set_err(cu_priv *pr, const char *fmt, const char *a, const char *b)
{
    if (pr->err)
        return;
    pr->err = 1;
    snprintf(pr->msg, sizeof pr->msg, fmt, a, b);
}

static int ck(cu_priv *pr, cudaError_t r, const char *what)
{
    if (r == cudaSuccess)
        return 0;
    set_err(pr, "%s: %s", what, cudaGetErrorString(r));
    return 1;
}

static int ckb(cu_priv *pr, cublasStatus_t r, const char *what)
{
    if (r == CUBLAS_STATUS_SUCCESS)
        return 0;
    char code[32];
    snprintf(code, sizeof code, "cuBLAS status %d", (int)r);
    set_err(pr, "%s: %s", what, code);
    return 1;
}

#define CK(call) ck(pr, (call), #call)
#define CKB(call) ckb(pr, (call), #call)
#define LAUNCHED(name) ck(pr, cudaGetLastError(), name)

/* The host waits for stream st (the NCCL section: with NCCL joined, a wait can end early, when
 * a rank is gone or nothing moves for too long). 0, or 1 with the error kept. */
static int wait_stream(cu_priv *pr, cudaStream_t st, const char *what);
#define SYNC(pr) wait_stream((pr), (pr)->s, "cudaStreamSynchronize")

/* A scratch buffer of at least `bytes`, kept between calls (grown when too small). */
static void *scratch(cu_priv *pr, int slot, size_t bytes)
{
    if (pr->err)
        return NULL;
    if (bytes == 0)
        bytes = 256;
    if (pr->scr_cap[slot] >= bytes)
        return pr->scr[slot];
    /* The old buffer may still be read by queued work. */
    if (SYNC(pr))
        return NULL;
    if (pr->scr[slot])
        cudaFree(pr->scr[slot]);
    pr->scr[slot] = NULL;
    pr->scr_cap[slot] = 0;
    size_t want = bytes + bytes / 4;
    void *p = NULL;
    if (CK(cudaMalloc(&p, want)))
        return NULL;
    pr->scr[slot] = p;
    pr->scr_cap[slot] = want;
    return p;
}

static unsigned nblocks(size_t n, int bs)
{
    size_t b = (n + (size_t)bs - 1) / (size_t)bs;
    return (unsigned)(b ? b : 1);
}

/* ---- dropout (pointwise.h): element g of a site is kept per bit g % 8 of block g / 8 ------- */

struct dropk {
    uint64_t seed, base;
    uint32_t step, site, thr;
    float sc;
    int on;
};

static dropk mkdrop(const tupe_drop *d)
{
    dropk k;
    memset(&k, 0, sizeof k);
    k.sc = 1.0f;
    if (d && d->p > 0) {
        k.on = 1;
        k.seed = d->seed;
        k.base = d->base;
        k.step = d->step;
        k.site = d->site;
        k.thr = tupe_dropout_thr(d->p);
        k.sc = (float)tupe_dropout_scale(k.thr);
    }
    return k;
}

__device__ __forceinline__ bool keep(const dropk &d, uint64_t g)
{
    uint32_t bits = tupe_dropout_bits8(d.seed, d.step, d.site, g >> 3, d.thr);
    return (bits >> (unsigned)(g & 7u)) & 1u;
}

/* The dropout factor of logical element g: 1 without dropout, else 0 or the scale. */
__device__ __forceinline__ float dfac(const dropk &d, uint64_t g)
{
    if (!d.on)
        return 1.0f;
    return keep(d, g) ? d.sc : 0.0f;
}

/* drop(v) as the CPU's drop_apply computes it: v * scale when kept, else 0. */
__device__ __forceinline__ float dropv(const dropk &d, uint64_t g, float v)
{
    if (!d.on)
        return v;
    return keep(d, g) ? v * d.sc : 0.0f;
}

/* ---- block reductions (fixed order: deterministic) --------------------------------------- */

#define BS 256 /* threads of the row kernels */

struct op_sum {
    template <class V> __device__ V operator()(V a, V b) const { return a + b; }
};
struct op_max {
    __device__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct op_min {
    __device__ int operator()(int a, int b) const { return min(a, b); }
};

template <class V, class Op> __device__ __forceinline__ V warp_reduce(V v, Op op)
{
    for (int o = 16; o > 0; o >>= 1)
        v = op(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* Every thread of the block gets the reduction of v over the block: warps first, then the
 * warps' results in warp order. sh: 32 elements of shared memory. */
template <class V, class Op> __device__ V block_reduce(V v, V *sh, Op op)
{
    v = warp_reduce(v, op);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads(); /* sh may still be read by a previous call */
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    V t = sh[0];
    for (int i = 1; i < nw; i++)
        t = op(t, sh[i]);
    return t;
}

__device__ float block_sum(float v, float *sh) { return block_reduce(v, sh, op_sum()); }
__device__ double block_sum_d(double v, double *sh) { return block_reduce(v, sh, op_sum()); }
__device__ float block_max(float v, float *sh) { return block_reduce(v, sh, op_max()); }
__device__ int block_min_int(int v, int *sh) { return block_reduce(v, sh, op_min()); }
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, op_sum()); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, op_max()); }

/* ---- matrix products through cuBLASLt ---------------------------------------------------- */

static unsigned align_of(const void *p)
{
    uintptr_t a = (uintptr_t)p;
    unsigned al = 256;
    while (al > 1 && (a % al) != 0)
        al >>= 1;
    return al;
}

static unsigned min_align(unsigned al, size_t stride_bytes)
{
    unsigned b = align_of((const void *)(uintptr_t)stride_bytes);
    return stride_bytes == 0 ? al : (b < al ? b : al);
}

static void destroy_plan(gemm_plan *g)
{
    if (g->la)
        cublasLtMatrixLayoutDestroy(g->la);
    if (g->lb)
        cublasLtMatrixLayoutDestroy(g->lb);
    if (g->lc)
        cublasLtMatrixLayoutDestroy(g->lc);
    if (g->op)
        cublasLtMatmulDescDestroy(g->op);
    memset(g, 0, sizeof *g);
}

static int make_layout(cu_priv *pr, cublasLtMatrixLayout_t *l, cudaDataType_t t, int rows,
                       int cols, int ld, int batch, long long stride)
{
    if (CKB(cublasLtMatrixLayoutCreate(l, t, (uint64_t)rows, (uint64_t)cols, (int64_t)ld)))
        return 1;
    if (batch > 1) {
        int32_t bc = batch;
        int64_t st = stride;
        if (CKB(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc,
                                                 sizeof bc)) ||
            CKB(cublasLtMatrixLayoutSetAttribute(*l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                 &st, sizeof st)))
            return 1;
    }
    return 0;
}

static gemm_plan *find_plan(cu_priv *pr, const gemm_key *k)
{
    for (int i = 0; i < pr->nplans; i++)
        if (memcmp(&pr->plans[i].key, k, sizeof *k) == 0)
            return &pr->plans[i];
    if (pr->nplans == PLAN_CAP) { /* a new shape mix: start the cache over */
        for (int i = 0; i < pr->nplans; i++)
            destroy_plan(&pr->plans[i]);
        pr->nplans = 0;
    }
    gemm_plan *g = &pr->plans[pr->nplans];
    memset(g, 0, sizeof *g);
    g->key = *k;
    /* Row-major C[M,N] = op(A) op(B) is column-major C^T[N,M] = op(B)^T op(A)^T: cuBLASLt's
     * A is our B and its B is our A; the transposes carry over unchanged. */
    cudaDataType_t ab = (cudaDataType_t)k->ab, ct = (cudaDataType_t)k->c;
    cublasComputeType_t comp =
        (ab == CUDA_R_32F && pr->tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    cublasOperation_t opa = k->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = k->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulPreference_t pref = NULL;
    cublasLtMatmulHeuristicResult_t res;
    int nres = 0;
    int bad = CKB(cublasLtMatmulDescCreate(&g->op, comp, CUDA_R_32F)) ||
              CKB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                                 sizeof opa)) ||
              CKB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                                 sizeof opb)) ||
              make_layout(pr, &g->la, ab, k->tb ? k->K : k->N, k->tb ? k->N : k->K, k->ldb,
                          k->batch, k->sb) ||
              make_layout(pr, &g->lb, ab, k->ta ? k->M : k->K, k->ta ? k->K : k->M, k->lda,
                          k->batch, k->sa) ||
              make_layout(pr, &g->lc, ct, k->N, k->M, k->ldc, k->batch, k->sc) ||
              CKB(cublasLtMatmulPreferenceCreate(&pref));
    if (!bad) {
        uint64_t wsb = pr->ws_bytes;
        uint32_t a1 = k->alb, a2 = k->ala, a3 = k->alc;
        bad = CKB(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof wsb)) ||
              CKB(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &a1, sizeof a1)) ||
              CKB(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &a2, sizeof a2)) ||
              CKB(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &a3, sizeof a3)) ||
              CKB(cublasLtMatmulPreferenceSetAttribute(
                  pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &a3, sizeof a3));
    }
    /* No algorithm for the shape (NOT_SUPPORTED, or none returned) is not an error: such a
     * product (odd leading dimensions of bf16, say) goes through cuBLAS's general
     * strided-batched GEMM, and is counted (tupe_backend_cuda_gemm_counts). Any other status
     * is one: the descriptors are wrong, and the fallback would hide it. */
    if (!bad) {
        cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(pr->lt, g->op, g->la, g->lb, g->lc,
                                                           g->lc, pref, 1, &res, &nres);
        if (hs == CUBLAS_STATUS_NOT_SUPPORTED || (hs == CUBLAS_STATUS_SUCCESS && nres < 1))
            g->legacy = 1;
        else
            bad = ckb(pr, hs, "cublasLtMatmulAlgoGetHeuristic");
    }
    if (!bad && g->legacy && !pr->legacy_shape[0])
        snprintf(pr->legacy_shape, sizeof pr->legacy_shape,
                 "ta=%d tb=%d M=%d N=%d K=%d lda=%d ldb=%d ldc=%d batch=%d %s->%s, aligned "
                 "%u/%u/%u", k->ta, k->tb, k->M, k->N, k->K, k->lda, k->ldb, k->ldc, k->batch,
                 ab == CUDA_R_32F ? "fp32" : "bf16", ct == CUDA_R_32F ? "fp32" : "bf16", k->ala,
                 k->alb, k->alc);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (bad) {
        destroy_plan(g);
        return NULL;
    }
    if (!g->legacy)
        g->algo = res.algo;
    pr->nplans++;
    return g;
}

/* Batches blockIdx.y, + gridDim.y, ...: grid.y stops at 65535. */
__global__ void k_scale2d(float *cf, bf16 *cb, int M, int N, int ldc, long long sc, int batch,
                          float beta)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t n = (size_t)M * N;
    if (i >= n)
        return;
    for (int q = blockIdx.y; q < batch; q += gridDim.y) {
        size_t o = (size_t)q * (size_t)sc + (i / (size_t)N) * (size_t)ldc + i % (size_t)N;
        if (cf)
            cf[o] = beta == 0.0f ? 0.0f : cf[o] * beta;
        else
            cb[o] = __float2bfloat16_rn(beta == 0.0f ? 0.0f : __bfloat162float(cb[o]) * beta);
    }
}

/* C = alpha op(A) op(B) + beta C, row-major, `batch` products at the given element strides.
 * A and B have type ab, C type ct. */
static void lt_gemm(cu_priv *pr, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                    int lda, long long sa, const void *B, int ldb, long long sb, float beta,
                    void *C, int ldc, long long sc, int batch, cudaDataType_t ab,
                    cudaDataType_t ct)
{
    if (pr->err || M <= 0 || N <= 0 || batch <= 0)
        return;
    if (K <= 0) { /* an empty sum: C = beta C */
        dim3 grid(nblocks((size_t)M * N, 256), (unsigned)(batch < 65535 ? batch : 65535));
        k_scale2d<<<grid, 256, 0, pr->s>>>(ct == CUDA_R_32F ? (float *)C : NULL,
                                           ct == CUDA_R_32F ? NULL : (bf16 *)C, M, N, ldc, sc,
                                           batch, beta);
        LAUNCHED("k_scale2d");
        return;
    }
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.ta = ta, k.tb = tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.batch = batch;
    if (batch > 1)
        k.sa = sa, k.sb = sb, k.sc = sc;
    k.ab = (int)ab, k.c = (int)ct;
    /* The alignment every batch's pointer has: the base pointer's and its stride's. */
    size_t es = ab == CUDA_R_32F ? 4 : 2, cs = ct == CUDA_R_32F ? 4 : 2;
    k.ala = align_of(A), k.alb = align_of(B), k.alc = align_of(C);
    if (batch > 1) {
        k.ala = min_align(k.ala, (size_t)sa * es);
        k.alb = min_align(k.alb, (size_t)sb * es);
        k.alc = min_align(k.alc, (size_t)sc * cs);
    }
    gemm_plan *g = find_plan(pr, &k);
    if (!g)
        return;
    if (!g->legacy) {
        pr->gemm_lt++;
        CKB(cublasLtMatmul(pr->lt, g->op, &alpha, B, g->la, A, g->lb, &beta, C, g->lc, C, g->lc,
                           &g->algo, pr->ws, pr->ws_bytes, pr->s));
        return;
    }
    /* The same column-major product as above: cuBLAS's A is our B, its B our A. */
    pr->gemm_legacy++;
    cublasComputeType_t comp =
        (ab == CUDA_R_32F && pr->tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CKB(cublasGemmStridedBatchedEx(pr->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ab, ldb,
                                   batch > 1 ? sb : 0, A, ab, lda, batch > 1 ? sa : 0, &beta, C,
                                   ct, ldc, batch > 1 ? sc : 0, batch, comp, CUBLAS_GEMM_DEFAULT));
}

/* ---- memory and transfers ---------------------------------------------------------------- */

static tupe_dev *cu_alloc(tupe_backend *be, size_t bytes)
{
    cu_priv *pr = PR(be);
    size_t n = (bytes + 255) / 256 * 256;
    if (n == 0)
        n = 256;
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is reported by the NULL, not kept as an error */
        return NULL;
    }
    if (CK(cudaMemsetAsync(p, 0, n, pr->s))) {
        cudaFree(p);
        return NULL;
    }
    return (tupe_dev *)p;
}

static void cu_free(tupe_backend *be, tupe_dev *p)
{
    cu_priv *pr = PR(be);
    if (!p)
        return;
    SYNC(pr);
    cudaFree(p);
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* d in fp32, rounded to odd (truncated, the last bit set when inexact): rounding that to bf16
 * rounds d once, as a direct conversion would (fp32 keeps more than 2 bits beyond bf16's 8);
 * d to fp32 to nearest, then to bf16, may round twice. */
static float f64_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || f != f || isinf(f))
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1u;
    memcpy(&f, &u, 4);
    return f;
}

static float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element size on the device of a transfer of this kind. */
static int dev_size(tupe_backend *be, int dt)
{
    if (dt == TUPE_I32)
        return 4;
    return (dt & TUPE_WIDE) ? be->wsize : be->esize;
}

static void cu_upload(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int dt)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    int ds = dev_size(be, dt);
    int hd = dt & ~TUPE_WIDE;
    /* The caller may reuse `src` at once (backend.h), and the converted copy is freed below;
     * from pageable memory cudaMemcpyAsync may still be reading either after it returns (the
     * runtime's "API synchronization behavior": the staging may run on a worker thread), so
     * wait for the copy. The stream holds little here: the model checks (synchronizes) after
     * every forward and backward pass. */
    if (hd == TUPE_I32 || (hd == TUPE_F32 && ds == 4)) {
        if (!CK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyHostToDevice, pr->s)))
            SYNC(pr);
        return;
    }
    void *tmp = malloc(n * (size_t)ds);
    if (!tmp) {
        set_err(pr, "%s%s", "out of host memory for an upload", "");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ds == 4)
            ((float *)tmp)[i] = hd == TUPE_F64 ? (float)((const double *)src)[i]
                                               : ((const float *)src)[i];
        else
            ((uint16_t *)tmp)[i] = f2bf(hd == TUPE_F64 ? f64_odd(((const double *)src)[i])
                                                       : ((const float *)src)[i]);
    }
    if (!CK(cudaMemcpyAsync(dst, tmp, n * (size_t)ds, cudaMemcpyHostToDevice, pr->s)))
        SYNC(pr);
    free(tmp);
}

static void cu_download(tupe_backend *be, void *dst, const tupe_dev *src, size_t n, int dt)
{
    cu_priv *pr = PR(be);
    int hd = dt & ~TUPE_WIDE;
    size_t hsz = hd == TUPE_F64 ? 8 : 4;
    if (n == 0)
        return;
    if (pr->err) {
        memset(dst, 0, n * hsz);
        return;
    }
    int ds = dev_size(be, dt);
    if (hd == TUPE_I32 || (hd == TUPE_F32 && ds == 4)) {
        if (!CK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToHost, pr->s)))
            SYNC(pr);
        if (pr->err)
            memset(dst, 0, n * hsz);
        return;
    }
    void *tmp = malloc(n * (size_t)ds);
    if (!tmp) {
        set_err(pr, "%s%s", "out of host memory for a download", "");
        memset(dst, 0, n * hsz);
        return;
    }
    if (!CK(cudaMemcpyAsync(tmp, src, n * (size_t)ds, cudaMemcpyDeviceToHost, pr->s)))
        SYNC(pr);
    if (pr->err) {
        memset(dst, 0, n * hsz);
        free(tmp);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float f = ds == 4 ? ((const float *)tmp)[i] : bf2f(((const uint16_t *)tmp)[i]);
        if (hd == TUPE_F64)
            ((double *)dst)[i] = f;
        else
            ((float *)dst)[i] = f;
    }
    free(tmp);
}

static void cu_zero(tupe_backend *be, tupe_dev *x, size_t n)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    CK(cudaMemsetAsync(x, 0, n * (size_t)be->esize, pr->s));
}

template <class T> __global__ void k_scale(T *x, size_t n, float s)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        stv(x, i, ldv(x, i) * s);
}

template <class T> static void scale_t(cu_priv *pr, tupe_dev *x, size_t n, double s)
{
    k_scale<T><<<nblocks(n, 256), 256, 0, pr->s>>>((T *)x, n, (float)s);
    LAUNCHED("k_scale");
}

static void cu_scale(tupe_backend *be, tupe_dev *x, size_t n, double s)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        scale_t<bf16>(pr, x, n, s);
    else
        scale_t<float>(pr, x, n, s);
}

/* Pass 1: part[blk] = sum of squares of elements blk*BS + tid + k*grid*BS, in a fixed tree. */
template <class T> __global__ void k_sumsq_part(const T *x, size_t n, double *part)
{
    __shared__ double sh[32];
    double acc = 0;
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        double v = ldv(x, i);
        acc += v * v;
    }
    double t = block_sum_d(acc, sh);
    if (threadIdx.x == 0)
        part[blockIdx.x] = t;
}

/* Pass 2: out[0] = sum of part[0..np) in a fixed tree. */
__global__ void k_sum_parts(const double *part, int np, double *out)
{
    __shared__ double sh[32];
    double acc = 0;
    for (int i = threadIdx.x; i < np; i += blockDim.x)
        acc += part[i];
    double t = block_sum_d(acc, sh);
    if (threadIdx.x == 0)
        out[0] = t;
}

/* Copies `k` doubles of dres[off..] to the host and waits for them. */
static int fetch_res(cu_priv *pr, int off, int k)
{
    if (CK(cudaMemcpyAsync(pr->hres, pr->dres + off, (size_t)k * sizeof(double),
                           cudaMemcpyDeviceToHost, pr->s)) ||
        SYNC(pr))
        return 1;
    return 0;
}

template <class T> static double sumsq_t(cu_priv *pr, const tupe_dev *x, size_t n)
{
    unsigned np = nblocks(n, BS);
    if (np > RED_PARTS)
        np = RED_PARTS;
    k_sumsq_part<T><<<np, BS, 0, pr->s>>>((const T *)x, n, pr->dres);
    LAUNCHED("k_sumsq_part");
    k_sum_parts<<<1, BS, 0, pr->s>>>(pr->dres, (int)np, pr->dres + RED_PARTS);
    LAUNCHED("k_sum_parts");
    if (pr->err || fetch_res(pr, RED_PARTS, 1))
        return 0;
    return pr->hres[0];
}

static double cu_sumsq(tupe_backend *be, const tupe_dev *x, size_t n)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return 0;
    return pr->bf16 ? sumsq_t<bf16>(pr, x, n) : sumsq_t<float>(pr, x, n);
}

/* out[blk] = sum of squares of run blk (`part` elements from blk * part), in a fixed tree: a
 * function of the run's values only. */
template <class T> __global__ void k_sumsq_runs(const T *x, size_t n, size_t part, double *out)
{
    __shared__ double sh[32];
    size_t lo = (size_t)blockIdx.x * part, hi = lo + part < n ? lo + part : n;
    double acc = 0;
    for (size_t i = lo + threadIdx.x; i < hi; i += blockDim.x) {
        double v = ldv(x, i);
        acc += v * v;
    }
    double t = block_sum_d(acc, sh);
    if (threadIdx.x == 0)
        out[blockIdx.x] = t;
}

static void cu_sumsq_parts(tupe_backend *be, const tupe_dev *x, size_t n, size_t part, double *out)
{
    cu_priv *pr = PR(be);
    size_t np = part ? (n + part - 1) / part : 0;
    if (np == 0)
        return;
    double *d = (double *)scratch(pr, SC_RUNS, np * sizeof(double));
    if (!pr->err) {
        if (pr->bf16)
            k_sumsq_runs<bf16><<<(unsigned)np, BS, 0, pr->s>>>((const bf16 *)x, n, part, d);
        else
            k_sumsq_runs<float><<<(unsigned)np, BS, 0, pr->s>>>((const float *)x, n, part, d);
        LAUNCHED("k_sumsq_runs");
    }
    if (pr->err || CK(cudaMemcpyAsync(out, d, np * sizeof(double), cudaMemcpyDeviceToHost, pr->s)) ||
        SYNC(pr))
        memset(out, 0, np * sizeof(double));
}

template <class T> __global__ void k_add(T *y, const T *x, size_t n, int acc)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        stv(y, i, acc ? ldv(y, i) + ldv(x, i) : ldv(x, i));
}

static void cu_add(tupe_backend *be, tupe_dev *y, const tupe_dev *x, size_t n, int acc)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    if (!acc) {
        CK(cudaMemcpyAsync(y, x, n * (size_t)be->esize, cudaMemcpyDeviceToDevice, pr->s));
        return;
    }
    if (pr->bf16)
        k_add<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)y, (const bf16 *)x, n, acc);
    else
        k_add<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)y, (const float *)x, n, acc);
    LAUNCHED("k_add");
}

/* ---- matrix products (interface) --------------------------------------------------------- */

static void cu_gemm(tupe_backend *be, int ta, int tb, int M, int N, int K, double alpha,
                    const tupe_dev *A, int lda, const tupe_dev *B, int ldb, double beta,
                    tupe_dev *C, int ldc)
{
    cu_priv *pr = PR(be);
    cudaDataType_t t = pr->bf16 ? CUDA_R_16BF : CUDA_R_32F;
    lt_gemm(pr, ta, tb, M, N, K, (float)alpha, A, lda, 0, B, ldb, 0, (float)beta, C, ldc, 0, 1,
            t, t);
}

__device__ __forceinline__ float act_f(float v, int act)
{
    if (act == TUPE_ACT_GELU)
        return tupe_gelu_f(v);
    if (act == TUPE_ACT_TANH)
        return tanhf(v);
    return v;
}

/* y[r,c] += b[c] (b may be NULL); with a: a = drop(act(y)) at logical element base + r*out + c. */
template <class T>
__global__ void k_bias_act(T *y, T *a, const T *b, size_t n, int out, int act, dropk d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float v = ldv(y, i);
    if (b) {
        v = rnd(v + ldv(b, i % (size_t)out), y);
        stv(y, i, v);
    }
    if (a)
        stv(a, i, dropv(d, d.base + i, act_f(v, act)));
}

template <class T>
static void linear_fwd_t(cu_priv *pr, tupe_dev *y, tupe_dev *a, const tupe_dev *x,
                         const tupe_dev *W, const tupe_dev *b, int N, int in, int out, int act,
                         const tupe_drop *drop)
{
    cudaDataType_t t = dtype_of<T>::v;
    lt_gemm(pr, 0, 1, N, out, in, 1.0f, x, in, 0, W, in, 0, 0.0f, y, out, 0, 1, t, t);
    T *av = (act != TUPE_ACT_NONE && a) ? (T *)a : NULL;
    if (pr->err || (!b && !av))
        return;
    size_t n = (size_t)N * out;
    k_bias_act<T><<<nblocks(n, 256), 256, 0, pr->s>>>((T *)y, av, (const T *)b, n, out, act,
                                                      mkdrop(drop));
    LAUNCHED("k_bias_act");
}

static void cu_linear_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *a, const tupe_dev *x,
                          const tupe_dev *W, const tupe_dev *b, int N, int in, int out, int act,
                          const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (pr->err || N <= 0 || out <= 0)
        return;
    if (pr->bf16)
        linear_fwd_t<bf16>(pr, y, a, x, W, b, N, in, out, act, drop);
    else
        linear_fwd_t<float>(pr, y, a, x, W, b, N, in, out, act, drop);
}

/* ---- column sums: two passes over fixed row chunks ----------------------------------------- */

#define COL_ROWS 64 /* rows per chunk of the first pass */

/* Which rows a column sum takes: all, or (lens) only tokens t < lens[r / T], and (ty >= 0)
 * only those whose type (types[r], 0 when types is NULL) is ty. */
struct rowsel {
    const int32_t *lens;
    int T;
    const int32_t *types;
    int ty;
};

__device__ __forceinline__ bool row_in(const rowsel &s, int r)
{
    if (s.lens && r % s.T >= s.lens[r / s.T])
        return false;
    if (s.ty >= 0 && (s.types ? s.types[r] : 0) != s.ty)
        return false;
    return true;
}

/* part_g[c,col] = sum over rows of chunk c of dy*xh, part_b[c,col] = sum of dy. Block (32, 8);
 * the chunk is blockIdx.x (up to 2^31 - 1 of them), the 32 columns blockIdx.y (grid.y stops at
 * 65535: 2,097,120 columns). */
template <class T>
__global__ void k_colsum_part(float *pg, float *pb, const T *dy, const T *xh, int N, int D,
                              rowsel sel)
{
    __shared__ float sg[8][33], sb[8][33];
    int col = blockIdx.y * 32 + threadIdx.x, c = blockIdx.x;
    float ag = 0, ab = 0;
    if (col < D) {
        int r1 = min(N, (c + 1) * COL_ROWS);
        for (int r = c * COL_ROWS + threadIdx.y; r < r1; r += 8) {
            if (!row_in(sel, r))
                continue;
            size_t o = (size_t)r * D + col;
            float v = ldv(dy, o);
            ab += v;
            if (pg)
                ag += v * ldv(xh, o);
        }
    }
    sg[threadIdx.y][threadIdx.x] = ag;
    sb[threadIdx.y][threadIdx.x] = ab;
    __syncthreads();
    if (threadIdx.y == 0 && col < D) {
        float tg = 0, tb = 0;
        for (int k = 0; k < 8; k++) {
            tg += sg[k][threadIdx.x];
            tb += sb[k][threadIdx.x];
        }
        if (pg)
            pg[(size_t)c * D + col] = tg;
        pb[(size_t)c * D + col] = tb;
    }
}

/* dg[col] += sum over chunks of pg (when dg), db[col] += sum of pb, chunks in order. */
template <class T>
__global__ void k_colsum_fin(T *dg, T *db, const float *pg, const float *pb, int nc, int D)
{
    int col = blockIdx.x * blockDim.x + threadIdx.x;
    if (col >= D)
        return;
    float tg = 0, tb = 0;
    for (int c = 0; c < nc; c++) {
        if (dg)
            tg += pg[(size_t)c * D + col];
        tb += pb[(size_t)c * D + col];
    }
    if (dg)
        stv(dg, col, ldv(dg, col) + tg);
    stv(db, col, ldv(db, col) + tb);
}

/* db += column sums of dy over the selected rows; dg += column sums of dy*xh when dg. */
template <class T>
static void colsums(cu_priv *pr, T *dg, T *db, const T *dy, const T *xh, int N, int D,
                    rowsel sel)
{
    if (pr->err || N <= 0 || D <= 0 || !db)
        return;
    int nc = (N + COL_ROWS - 1) / COL_ROWS;
    if (nblocks((size_t)D, 32) > 65535) {
        set_err(pr, "%s%s", "column sums over more than 2097120 columns", "");
        return;
    }
    float *part = (float *)scratch(pr, SC_COL, 2 * (size_t)nc * D * sizeof(float));
    if (!part)
        return;
    float *pg = dg ? part : NULL, *pb = part + (size_t)nc * D;
    dim3 grid((unsigned)nc, nblocks((size_t)D, 32)), blk(32, 8);
    k_colsum_part<T><<<grid, blk, 0, pr->s>>>(pg, pb, dy, xh, N, D, sel);
    LAUNCHED("k_colsum_part");
    k_colsum_fin<T><<<nblocks((size_t)D, 256), 256, 0, pr->s>>>(dg, db, pg, pb, nc, D);
    LAUNCHED("k_colsum_fin");
}

static rowsel all_rows(void)
{
    rowsel s = {NULL, 1, NULL, -1};
    return s;
}

template <class T>
static void linear_bwd_t(cu_priv *pr, tupe_dev *dx, double dx_beta, tupe_dev *dW, tupe_dev *db,
                         const tupe_dev *dy, const tupe_dev *x, const tupe_dev *W, int N, int in,
                         int out)
{
    cudaDataType_t t = dtype_of<T>::v;
    if (dW)
        lt_gemm(pr, 1, 0, out, in, N, 1.0f, dy, out, 0, x, in, 0, 1.0f, dW, in, 0, 1, t, t);
    if (db)
        colsums<T>(pr, NULL, (T *)db, (const T *)dy, NULL, N, out, all_rows());
    if (dx)
        lt_gemm(pr, 0, 0, N, in, out, 1.0f, dy, out, 0, W, in, 0, (float)dx_beta, dx, in, 0, 1,
                t, t);
}

static void cu_linear_bwd(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dW,
                          tupe_dev *db, const tupe_dev *dy, const tupe_dev *x, const tupe_dev *W,
                          int N, int in, int out)
{
    cu_priv *pr = PR(be);
    if (pr->err)
        return;
    if (pr->bf16)
        linear_bwd_t<bf16>(pr, dx, dx_beta, dW, db, dy, x, W, N, in, out);
    else
        linear_bwd_t<float>(pr, dx, dx_beta, dW, db, dy, x, W, N, in, out);
}

/* ---- element-wise ------------------------------------------------------------------------- */

template <class T> __global__ void k_act_fwd(T *a, const T *y, size_t n, int act, dropk d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        stv(a, i, dropv(d, d.base + i, act_f(ldv(y, i), act)));
}

template <class T>
__global__ void k_act_bwd(T *dd, T *a, const T *y, size_t n, int act, dropk d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float k = dfac(d, d.base + i), yv = ldv(y, i), dv = ldv(dd, i);
    if (act == TUPE_ACT_GELU) {
        float g, v = tupe_gelu_fg_f(yv, &g);
        if (a)
            stv(a, i, v * k);
        stv(dd, i, dv * (g * k));
    } else if (act == TUPE_ACT_TANH) {
        float t = tanhf(yv);
        stv(dd, i, dv * ((1.0f - t * t) * k));
        if (a)
            stv(a, i, t * k);
    } else {
        stv(dd, i, dv * k);
        if (a)
            stv(a, i, yv * k);
    }
}

template <class T>
static void act_fwd_t(cu_priv *pr, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                      const tupe_drop *drop)
{
    k_act_fwd<T><<<nblocks(n, 256), 256, 0, pr->s>>>((T *)a, (const T *)y, n, act, mkdrop(drop));
    LAUNCHED("k_act_fwd");
}

template <class T>
static void act_bwd_t(cu_priv *pr, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                      const tupe_drop *drop)
{
    k_act_bwd<T><<<nblocks(n, 256), 256, 0, pr->s>>>((T *)d, (T *)a, (const T *)y, n, act,
                                                     mkdrop(drop));
    LAUNCHED("k_act_bwd");
}

static void cu_act_fwd(tupe_backend *be, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                       const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        act_fwd_t<bf16>(pr, a, y, n, act, drop);
    else
        act_fwd_t<float>(pr, a, y, n, act, drop);
}

static void cu_act_bwd(tupe_backend *be, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n,
                       int act, const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        act_bwd_t<bf16>(pr, d, a, y, n, act, drop);
    else
        act_bwd_t<float>(pr, d, a, y, n, act, drop);
}

/* ---- layer normalization ------------------------------------------------------------------- */

/* The LayerNorm of row r, whose D inputs (fp32) are in buf and sum to s: xhat, rstd, and
 * y = drop(xhat gamma + beta) (dropout here only on the embeddings' output). Every thread of
 * the block calls it. */
template <class T>
__device__ void ln_row(T *y, T *xh, float *rs, int r, const float *buf, float s, const T *g,
                       const T *b, int D, float eps, float *red, const dropk &d)
{
    size_t o = (size_t)r * D;
    float mean = block_sum(s, red) / (float)D;
    float q = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float t = buf[j] - mean;
        q += t * t;
    }
    float var = block_sum(q, red) / (float)D;
    float rsv = 1.0f / sqrtf(var + eps);
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float h = (buf[j] - mean) * rsv;
        stv(xh, o + j, h);
        stv(y, o + j, dropv(d, d.base + o + j, h * ldv(g, j) + ldv(b, j)));
    }
    if (threadIdx.x == 0)
        rs[r] = rsv;
}

/* One block per row; the row's input in shared memory (fp32), D floats.
 * Input v = x (plain LN), or drop(a + bias) + res (post-LN residual). */
template <class T>
__global__ void k_ln_fwd(T *y, T *xh, float *rs, const T *x, const T *res, const T *bias,
                         const T *g, const T *b, int D, float eps, dropk d)
{
    extern __shared__ float buf[];
    __shared__ float red[32];
    int r = blockIdx.x;
    size_t o = (size_t)r * D;
    float s = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float v;
        if (res) {
            v = dropv(d, d.base + o + j, ldv(x, o + j) + (bias ? ldv(bias, j) : 0.0f));
            v = v + ldv(res, o + j);
        } else {
            v = ldv(x, o + j);
        }
        buf[j] = v;
        s += v;
    }
    dropk none;
    none.on = 0;
    ln_row(y, xh, rs, r, buf, s, g, b, D, eps, red, none);
}

/* One block per row: v = rstd (dy*gamma - mean(dy*gamma) - xhat mean(dy*gamma*xhat));
 * dx = beta dx + v. With dbr: dbr = drop(v) (the branch of a residual). With sel.lens, rows
 * of padding are skipped (left as they are). dx may be dy. */
template <class T>
__global__ void k_ln_bwd(T *dx, float beta, T *dbr, const T *dy, const T *xh, const float *rs,
                         const T *g, int D, dropk d, rowsel sel)
{
    __shared__ float red[32];
    int r = blockIdx.x;
    if (!row_in(sel, r))
        return;
    size_t o = (size_t)r * D;
    float sg = 0, sgx = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float gv = ldv(dy, o + j) * ldv(g, j);
        sg += gv;
        sgx += gv * ldv(xh, o + j);
    }
    float mg = block_sum(sg, red) / (float)D;
    float mgx = block_sum(sgx, red) / (float)D;
    float rsv = rs[r];
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float v = rsv * (ldv(dy, o + j) * ldv(g, j) - mg - ldv(xh, o + j) * mgx);
        if (beta != 0.0f)
            v = beta * ldv(dx, o + j) + v;
        stv(dx, o + j, v);
        if (dbr)
            stv(dbr, o + j, dropv(d, d.base + o + j, v));
    }
}

static size_t ln_smem(int D) { return (size_t)D * sizeof(float); }

template <class T>
static void ln_fwd_t(cu_priv *pr, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd, const tupe_dev *x,
                     const tupe_dev *res, const tupe_dev *bias, const tupe_dev *g,
                     const tupe_dev *b, int N, int D, double eps, const tupe_drop *drop)
{
    k_ln_fwd<T><<<(unsigned)N, BS, ln_smem(D), pr->s>>>(
        (T *)y, (T *)xhat, (float *)rstd, (const T *)x, (const T *)res, (const T *)bias,
        (const T *)g, (const T *)b, D, (float)eps, mkdrop(drop));
    LAUNCHED("k_ln_fwd");
}

static int ln_ok(cu_priv *pr, int N, int D)
{
    if (pr->err || N <= 0 || D <= 0)
        return 0;
    /* 48 KiB without the opt-in holds the dynamic buffer and the static red[32] together */
    if (ln_smem(D) + 32 * sizeof(float) > 48 * 1024) {
        set_err(pr, "%s%s", "layer normalization over more than 12256 features", "");
        return 0;
    }
    return 1;
}

static void cu_ln_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                      const tupe_dev *x, const tupe_dev *gamma, const tupe_dev *beta, int N, int D,
                      double eps)
{
    cu_priv *pr = PR(be);
    if (!ln_ok(pr, N, D))
        return;
    if (pr->bf16)
        ln_fwd_t<bf16>(pr, y, xhat, rstd, x, NULL, NULL, gamma, beta, N, D, eps, NULL);
    else
        ln_fwd_t<float>(pr, y, xhat, rstd, x, NULL, NULL, gamma, beta, N, D, eps, NULL);
}

static void cu_resid_ln_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                            const tupe_dev *res, const tupe_dev *a, const tupe_dev *bias,
                            const tupe_dev *gamma, const tupe_dev *beta, int N, int D, double eps,
                            const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (!ln_ok(pr, N, D))
        return;
    if (pr->bf16)
        ln_fwd_t<bf16>(pr, y, xhat, rstd, a, res, bias, gamma, beta, N, D, eps, drop);
    else
        ln_fwd_t<float>(pr, y, xhat, rstd, a, res, bias, gamma, beta, N, D, eps, drop);
}

template <class T>
static void ln_bwd_t(cu_priv *pr, tupe_dev *dx, double dx_beta, tupe_dev *dbr, tupe_dev *dg,
                     tupe_dev *db, const tupe_dev *dy, const tupe_dev *xhat, const tupe_dev *rstd,
                     const tupe_dev *g, int N, int D, const tupe_drop *drop)
{
    /* Parameter gradients first: dx may be dy. */
    if (db)
        colsums<T>(pr, (T *)dg, (T *)db, (const T *)dy, (const T *)xhat, N, D, all_rows());
    if (!dx || pr->err)
        return;
    k_ln_bwd<T><<<(unsigned)N, BS, 0, pr->s>>>((T *)dx, (float)dx_beta, (T *)dbr, (const T *)dy,
                                               (const T *)xhat, (const float *)rstd,
                                               (const T *)g, D, mkdrop(drop), all_rows());
    LAUNCHED("k_ln_bwd");
}

static void cu_ln_bwd(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dgamma,
                      tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                      const tupe_dev *rstd, const tupe_dev *gamma, int N, int D)
{
    cu_priv *pr = PR(be);
    if (pr->err || N <= 0 || D <= 0)
        return;
    if (pr->bf16)
        ln_bwd_t<bf16>(pr, dx, dx_beta, NULL, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, NULL);
    else
        ln_bwd_t<float>(pr, dx, dx_beta, NULL, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, NULL);
}

static void cu_resid_ln_bwd(tupe_backend *be, tupe_dev *dsum, tupe_dev *dbranch, tupe_dev *dgamma,
                            tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                            const tupe_dev *rstd, const tupe_dev *gamma, int N, int D,
                            const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (pr->err || N <= 0 || D <= 0)
        return;
    if (pr->bf16)
        ln_bwd_t<bf16>(pr, dsum, 0, dbranch, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, drop);
    else
        ln_bwd_t<float>(pr, dsum, 0, dbranch, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, drop);
}

/* ---- embeddings ---------------------------------------------------------------------------- */

template <class T>
__global__ void k_embed_fwd(T *y, T *xh, float *rs, const int32_t *ids, const int32_t *types,
                            const int32_t *lens, const T *word, const T *pos, const T *tt,
                            const T *g, const T *b, int T_, int D, float eps, dropk d)
{
    extern __shared__ float buf[];
    __shared__ float red[32];
    int r = blockIdx.x, bi = r / T_, t = r % T_;
    size_t o = (size_t)r * D;
    if (t >= lens[bi]) {
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            stv(y, o + j, 0.0f);
            stv(xh, o + j, 0.0f);
        }
        if (threadIdx.x == 0)
            rs[r] = 0;
        return;
    }
    size_t wo = (size_t)ids[r] * D, to = (size_t)(types ? types[r] : 0) * D;
    float s = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float v = ldv(word, wo + j);
        if (pos)
            v += ldv(pos, (size_t)t * D + j);
        if (tt)
            v += ldv(tt, to + j);
        buf[j] = v;
        s += v;
    }
    ln_row(y, xh, rs, r, buf, s, g, b, D, eps, red, d);
}

template <class T>
static void embed_fwd_t(cu_priv *pr, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                        const int32_t *ids, const int32_t *types, const int32_t *lengths,
                        const tupe_dev *word, const tupe_dev *pos, const tupe_dev *tt,
                        const tupe_dev *gamma, const tupe_dev *beta, int B, int T_, int D,
                        double eps, const tupe_drop *drop)
{
    k_embed_fwd<T><<<(unsigned)(B * T_), BS, ln_smem(D), pr->s>>>(
        (T *)y, (T *)xhat, (float *)rstd, ids, types, lengths, (const T *)word, (const T *)pos,
        (const T *)tt, (const T *)gamma, (const T *)beta, T_, D, (float)eps, mkdrop(drop));
    LAUNCHED("k_embed_fwd");
}

static void cu_embed_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                         const int32_t *ids, const int32_t *types, const int32_t *lengths,
                         const tupe_dev *word, const tupe_dev *pos, const tupe_dev *tt,
                         const tupe_dev *gamma, const tupe_dev *beta, int B, int T, int D,
                         double eps, const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (!ln_ok(pr, B * T, D))
        return;
    if (pr->bf16)
        embed_fwd_t<bf16>(pr, y, xhat, rstd, ids, types, lengths, word, pos, tt, gamma, beta, B,
                          T, D, eps, drop);
    else
        embed_fwd_t<float>(pr, y, xhat, rstd, ids, types, lengths, word, pos, tt, gamma, beta, B,
                           T, D, eps, drop);
}

/* s = drop(dy) on tokens, 0 on padding. */
template <class T>
__global__ void k_embed_s(T *s, const T *dy, const int32_t *lens, int T_, int D, size_t n,
                          dropk d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int r = (int)(i / (size_t)D);
    if (r % T_ >= lens[r / T_])
        stv(s, i, 0.0f);
    else
        stv(s, i, dropv(d, d.base + i, ldv(dy, i)));
}

/* Sort keys of the rows: the destination row, or `none` for rows that add nothing. */
__global__ void k_embed_keys(unsigned *keys, unsigned *vals, const int32_t *ids,
                             const int32_t *lens, int T_, int N, int V)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N)
        return;
    int id = ids[r];
    bool use = r % T_ < lens[r / T_] && id >= 0 && id < V;
    keys[r] = use ? (unsigned)id : (unsigned)V;
    vals[r] = (unsigned)r;
}

/* Segmented sums after a stable sort by key: dst[key, w] += the sum over the run of entries q
 * with that key (key < none) of src[vals[q] * sv + w * sw], w < W, in sorted order. Runs can
 * be long (a far relative bucket holds ~70k of the 262k (i, j) at T = 512; [MASK] ~12% of the
 * tokens), so no thread adds a whole run: pass 1 sums each piece (the part of a run inside one
 * chunk of SEG_CH sorted entries) into part[start, w]; pass 2 adds a run's pieces, chunk by
 * chunk. Both passes run in a fixed order: the result does not depend on scheduling. */
#define SEG_CH 64

template <class S>
__global__ void k_seg_part(float *part, const S *src, size_t sv, size_t sw, const unsigned *keys,
                           const unsigned *vals, int n, int W, unsigned none)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int nch = (n + SEG_CH - 1) / SEG_CH;
    if (x >= (size_t)nch * W)
        return;
    int c = (int)(x / W), w = (int)(x % W);
    int q0 = c * SEG_CH, q1 = q0 + SEG_CH < n ? q0 + SEG_CH : n, start = q0;
    float acc = 0;
    for (int q = q0; q < q1 && keys[q] < none; q++) {
        if (q > q0 && keys[q] != keys[q - 1]) {
            part[(size_t)start * W + w] = acc;
            acc = 0;
            start = q;
        }
        acc += ldv(src, (size_t)vals[q] * sv + (size_t)w * sw);
    }
    part[(size_t)start * W + w] = acc;
}

template <class T>
__global__ void k_seg_sum(T *dst, const float *part, const unsigned *keys, int n, int W,
                          unsigned none)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)n * W)
        return;
    int p = (int)(x / W), w = (int)(x % W);
    unsigned k = keys[p];
    if (k >= none || (p > 0 && keys[p - 1] == k))
        return;
    size_t o = (size_t)k * W + w;
    float acc = ldv(dst, o);
    for (int q = p; q < n && keys[q] == k; q = (q / SEG_CH + 1) * SEG_CH)
        acc += part[(size_t)q * W + w];
    stv(dst, o, acc);
}

/* The two passes over n sorted entries (keys k2, values v2), W columns; part is scratch. */
template <class T, class S>
static void seg_sums(cu_priv *pr, T *dst, const S *src, size_t sv, size_t sw,
                     const unsigned *k2, const unsigned *v2, int n, int W, unsigned none)
{
    float *part = (float *)scratch(pr, SC_PART, (size_t)n * W * sizeof(float));
    if (!part)
        return;
    size_t nch = ((size_t)n + SEG_CH - 1) / SEG_CH;
    k_seg_part<S><<<nblocks(nch * W, 128), 128, 0, pr->s>>>(part, src, sv, sw, k2, v2, n, W,
                                                              none);
    LAUNCHED("k_seg_part");
    k_seg_sum<T><<<nblocks((size_t)n * W, 256), 256, 0, pr->s>>>(dst, part, k2, n, W, none);
    LAUNCHED("k_seg_sum");
}

/* dpos[t] += sum over b of s[b, t] (padding rows of s are 0), b in order. */
template <class T> __global__ void k_dpos(T *dpos, const T *s, int B, int T_, int D)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T_ * D)
        return;
    float acc = ldv(dpos, i);
    for (int b = 0; b < B; b++)
        acc += ldv(s, (size_t)b * T_ * D + i);
    stv(dpos, i, acc);
}

/* Stable sort of n (key, value) pairs; keys below 2^bits. Results in SC_K2 / SC_V2. */
static int sort_pairs(cu_priv *pr, const unsigned *k1, const unsigned *v1, unsigned **k2,
                      unsigned **v2, int n, int bits)
{
    *k2 = (unsigned *)scratch(pr, SC_K2, (size_t)n * 4);
    *v2 = (unsigned *)scratch(pr, SC_V2, (size_t)n * 4);
    if (!*k2 || !*v2)
        return 1;
    size_t tb = 0;
    if (CK(cub::DeviceRadixSort::SortPairs(NULL, tb, k1, *k2, v1, *v2, n, 0, bits, pr->s)))
        return 1;
    void *tmp = scratch(pr, SC_CUB, tb);
    if (!tmp)
        return 1;
    return CK(cub::DeviceRadixSort::SortPairs(tmp, tb, k1, *k2, v1, *v2, n, 0, bits, pr->s));
}

static int bits_for(unsigned v)
{
    int b = 1;
    while (b < 32 && (v >> b) != 0)
        b++;
    return b;
}

template <class T>
static void embed_bwd_t(cu_priv *pr, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt,
                        tupe_dev *dg, tupe_dev *db, const tupe_dev *dy, const tupe_dev *xhat,
                        const tupe_dev *rstd, const tupe_dev *g, const int32_t *ids,
                        const int32_t *types, const int32_t *lengths, int B, int T_, int D, int V,
                        int ntypes, const tupe_drop *drop, tupe_dev *scr)
{
    int N = B * T_;
    size_t n = (size_t)N * D;
    T *s = (T *)scr;
    k_embed_s<T><<<nblocks(n, 256), 256, 0, pr->s>>>(s, (const T *)dy, lengths, T_, D, n,
                                                     mkdrop(drop));
    LAUNCHED("k_embed_s");
    colsums<T>(pr, (T *)dg, (T *)db, s, (const T *)xhat, N, D, all_rows());
    rowsel tok = {lengths, T_, NULL, -1};
    if (pr->err)
        return;
    dropk none = mkdrop(NULL);
    k_ln_bwd<T><<<(unsigned)N, BS, 0, pr->s>>>(s, 0.0f, NULL, s, (const T *)xhat,
                                               (const float *)rstd, (const T *)g, D, none, tok);
    LAUNCHED("k_ln_bwd");
    if (dword) {
        unsigned *k1 = (unsigned *)scratch(pr, SC_K1, (size_t)N * 4);
        unsigned *v1 = (unsigned *)scratch(pr, SC_V1, (size_t)N * 4);
        unsigned *k2, *v2;
        if (!k1 || !v1)
            return;
        k_embed_keys<<<nblocks((size_t)N, 256), 256, 0, pr->s>>>(k1, v1, ids, lengths, T_, N, V);
        LAUNCHED("k_embed_keys");
        if (sort_pairs(pr, k1, v1, &k2, &v2, N, bits_for((unsigned)V)))
            return;
        seg_sums<T, T>(pr, (T *)dword, s, (size_t)D, 1, k2, v2, N, D, (unsigned)V);
    }
    if (dtt)
        for (int ty = 0; ty < ntypes; ty++) {
            rowsel sel = {lengths, T_, types, ty};
            colsums<T>(pr, NULL, (T *)dtt + (size_t)ty * D, s, NULL, N, D, sel);
        }
    if (dpos) {
        k_dpos<T><<<nblocks((size_t)T_ * D, 256), 256, 0, pr->s>>>((T *)dpos, s, B, T_, D);
        LAUNCHED("k_dpos");
    }
}

static void cu_embed_bwd(tupe_backend *be, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt,
                         tupe_dev *dgamma, tupe_dev *dbeta, const tupe_dev *dy,
                         const tupe_dev *xhat, const tupe_dev *rstd, const tupe_dev *gamma,
                         const int32_t *ids, const int32_t *types, const int32_t *lengths, int B,
                         int T, int D, int V, int ntypes, const tupe_drop *drop,
                         tupe_dev *scratch_)
{
    cu_priv *pr = PR(be);
    if (pr->err || B * T <= 0 || D <= 0)
        return;
    if (pr->bf16)
        embed_bwd_t<bf16>(pr, dword, dpos, dtt, dgamma, dbeta, dy, xhat, rstd, gamma, ids, types,
                          lengths, B, T, D, V, ntypes, drop, scratch_);
    else
        embed_bwd_t<float>(pr, dword, dpos, dtt, dgamma, dbeta, dy, xhat, rstd, gamma, ids,
                           types, lengths, B, T, D, V, ntypes, drop, scratch_);
}

/* ---- attention ------------------------------------------------------------------------------
 * Per head h, one strided-batched product over the B sequences (the stride between sequences
 * is uniform; between heads it is not, once probs is [B,H,T,T]). Scores and their gradients
 * are produced in fp32 (scratch SC_SF) even when the operands are bf16. */

/* One warp per row (b, h, i): P = softmax(S + bias[h,i]) over keys j < L, 0 beyond; probs = P;
 * pd = drop(P) when dropout is on. */
template <class T>
__global__ void k_softmax(T *probs, T *pd, const float *S, const float *bias,
                          const int32_t *lens, int H, int T_, size_t rows, dropk d)
{
    size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    size_t bh = row / (size_t)T_;
    int i = (int)(row % (size_t)T_), h = (int)(bh % (size_t)H), b = (int)(bh / (size_t)H);
    int L = lens[b];
    const float *s = S + row * (size_t)T_;
    const float *bb = bias ? bias + ((size_t)h * T_ + i) * T_ : NULL;
    float mx = -INFINITY;
    for (int j = lane; j < L; j += 32)
        mx = fmaxf(mx, s[j] + (bb ? bb[j] : 0.0f));
    mx = warp_max(mx);
    float sum = 0;
    for (int j = lane; j < L; j += 32)
        sum += tupe_expf(s[j] + (bb ? bb[j] : 0.0f) - mx);
    float inv = 1.0f / warp_sum(sum);
    T *p = probs + row * (size_t)T_;
    T *q = pd ? pd + row * (size_t)T_ : NULL;
    for (int j = lane; j < T_; j += 32) {
        float v = j < L ? tupe_expf(s[j] + (bb ? bb[j] : 0.0f) - mx) * inv : 0.0f;
        stv(p, j, v);
        if (q)
            stv(q, j, j < L ? dropv(d, d.base + row * (size_t)T_ + j, rnd(v, p)) : 0.0f);
    }
}

/* pd = drop(P) (the backward's recomputation of the dropped probabilities). */
template <class T>
__global__ void k_drop_probs(T *pd, const T *probs, const int32_t *lens, int H, int T_, size_t n,
                             dropk d)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    size_t row = i / (size_t)T_;
    int j = (int)(i % (size_t)T_), b = (int)(row / (size_t)T_ / (size_t)H);
    stv(pd, i, j < lens[b] ? dropv(d, d.base + i, ldv(probs, i)) : 0.0f);
}

/* One warp per row: dp = drop'(dPd); probs <- P (dp - sum_j P dp) over j < L, 0 beyond. */
template <class T>
__global__ void k_softmax_bwd(T *probs, const float *dpd, const int32_t *lens, int H, int T_,
                              size_t rows, dropk d)
{
    size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    int b = (int)(row / (size_t)T_ / (size_t)H), L = lens[b];
    T *p = probs + row * (size_t)T_;
    const float *g = dpd + row * (size_t)T_;
    size_t g0 = d.base + row * (size_t)T_;
    float dot = 0;
    for (int j = lane; j < L; j += 32)
        dot += ldv(p, j) * (g[j] * dfac(d, g0 + j));
    dot = warp_sum(dot);
    for (int j = lane; j < T_; j += 32) {
        float v = 0;
        if (j < L)
            v = ldv(p, j) * (g[j] * dfac(d, g0 + j) - dot);
        stv(p, j, v);
    }
}

template <class T>
static void attn_fwd_t(cu_priv *pr, tupe_dev *ctx, tupe_dev *probs, const tupe_dev *qkv,
                       const tupe_dev *bias, const int32_t *lengths, int B, int T_, int H, int dh,
                       double alpha, const tupe_drop *drop)
{
    cudaDataType_t t = dtype_of<T>::v;
    int D = H * dh, ld = 3 * D;
    size_t TT = (size_t)T_ * T_, n = (size_t)B * H * TT;
    float *S = (float *)scratch(pr, SC_SF, n * sizeof(float));
    dropk dk = mkdrop(drop);
    T *pd = dk.on ? (T *)scratch(pr, SC_PD, n * sizeof(T)) : NULL;
    if (!S || (dk.on && !pd))
        return;
    const T *Q = (const T *)qkv;
    for (int h = 0; h < H; h++) /* S[b,h] = alpha Q K^T */
        lt_gemm(pr, 0, 1, T_, T_, dh, (float)alpha, Q + (size_t)h * dh, ld, (long long)T_ * ld,
                Q + D + (size_t)h * dh, ld, (long long)T_ * ld, 0.0f, S + (size_t)h * TT, T_,
                (long long)H * TT, B, t, CUDA_R_32F);
    size_t rows = (size_t)B * H * T_;
    k_softmax<T><<<nblocks(rows * 32, 256), 256, 0, pr->s>>>(
        (T *)probs, pd, S, (const float *)bias, lengths, H, T_, rows, dk);
    LAUNCHED("k_softmax");
    const T *P = pd ? pd : (const T *)probs;
    for (int h = 0; h < H; h++) /* ctx[b,:,h] = drop(P) V */
        lt_gemm(pr, 0, 0, T_, dh, T_, 1.0f, P + (size_t)h * TT, T_, (long long)H * TT,
                Q + 2 * D + (size_t)h * dh, ld, (long long)T_ * ld, 0.0f,
                (T *)ctx + (size_t)h * dh, D, (long long)T_ * D, B, t, t);
}

template <class T>
static void attn_bwd_t(cu_priv *pr, tupe_dev *dqkv, tupe_dev *probs, const tupe_dev *dctx,
                       const tupe_dev *qkv, const int32_t *lengths, int B, int T_, int H, int dh,
                       double alpha, const tupe_drop *drop)
{
    cudaDataType_t t = dtype_of<T>::v;
    int D = H * dh, ld = 3 * D;
    size_t TT = (size_t)T_ * T_, n = (size_t)B * H * TT;
    float *S = (float *)scratch(pr, SC_SF, n * sizeof(float));
    dropk dk = mkdrop(drop);
    T *pd = dk.on ? (T *)scratch(pr, SC_PD, n * sizeof(T)) : NULL;
    if (!S || (dk.on && !pd))
        return;
    const T *Q = (const T *)qkv, *dC = (const T *)dctx;
    T *dQ = (T *)dqkv;
    if (pd) {
        k_drop_probs<T><<<nblocks(n, 256), 256, 0, pr->s>>>(pd, (const T *)probs, lengths, H, T_,
                                                             n, dk);
        LAUNCHED("k_drop_probs");
    }
    const T *P = pd ? pd : (const T *)probs;
    for (int h = 0; h < H; h++) {
        /* dV = drop(P)^T dctx */
        lt_gemm(pr, 1, 0, T_, dh, T_, 1.0f, P + (size_t)h * TT, T_, (long long)H * TT,
                dC + (size_t)h * dh, D, (long long)T_ * D, 0.0f, dQ + 2 * D + (size_t)h * dh, ld,
                (long long)T_ * ld, B, t, t);
        /* dPd = dctx V^T (fp32) */
        lt_gemm(pr, 0, 1, T_, T_, dh, 1.0f, dC + (size_t)h * dh, D, (long long)T_ * D,
                Q + 2 * D + (size_t)h * dh, ld, (long long)T_ * ld, 0.0f, S + (size_t)h * TT, T_,
                (long long)H * TT, B, t, CUDA_R_32F);
    }
    size_t rows = (size_t)B * H * T_;
    k_softmax_bwd<T><<<nblocks(rows * 32, 256), 256, 0, pr->s>>>((T *)probs, S, lengths, H, T_,
                                                                  rows, dk);
    LAUNCHED("k_softmax_bwd");
    const T *dS = (const T *)probs;
    for (int h = 0; h < H; h++) {
        /* dQ = alpha dS K */
        lt_gemm(pr, 0, 0, T_, dh, T_, (float)alpha, dS + (size_t)h * TT, T_, (long long)H * TT,
                Q + D + (size_t)h * dh, ld, (long long)T_ * ld, 0.0f, dQ + (size_t)h * dh, ld,
                (long long)T_ * ld, B, t, t);
        /* dK = alpha dS^T Q */
        lt_gemm(pr, 1, 0, T_, dh, T_, (float)alpha, dS + (size_t)h * TT, T_, (long long)H * TT,
                Q + (size_t)h * dh, ld, (long long)T_ * ld, 0.0f, dQ + D + (size_t)h * dh, ld,
                (long long)T_ * ld, B, t, t);
    }
}

static void cu_attn_fwd(tupe_backend *be, tupe_dev *ctx, tupe_dev *probs, const tupe_dev *qkv,
                        const tupe_dev *bias, const int32_t *lengths, int B, int T, int H, int dh,
                        double alpha, const tupe_drop *drop, tupe_dev *scratch_)
{
    (void)scratch_;
    cu_priv *pr = PR(be);
    if (pr->err || B <= 0 || T <= 0 || H <= 0)
        return;
    if (pr->bf16)
        attn_fwd_t<bf16>(pr, ctx, probs, qkv, bias, lengths, B, T, H, dh, alpha, drop);
    else
        attn_fwd_t<float>(pr, ctx, probs, qkv, bias, lengths, B, T, H, dh, alpha, drop);
}

static void cu_attn_bwd(tupe_backend *be, tupe_dev *dqkv, tupe_dev *probs, const tupe_dev *dctx,
                        const tupe_dev *qkv, const int32_t *lengths, int B, int T, int H, int dh,
                        double alpha, const tupe_drop *drop, tupe_dev *scratch_)
{
    (void)scratch_;
    cu_priv *pr = PR(be);
    if (pr->err || B <= 0 || T <= 0 || H <= 0)
        return;
    if (pr->bf16)
        attn_bwd_t<bf16>(pr, dqkv, probs, dctx, qkv, lengths, B, T, H, dh, alpha, drop);
    else
        attn_bwd_t<float>(pr, dqkv, probs, dctx, qkv, lengths, B, T, H, dh, alpha, drop);
}

/* The attention's working buffers are the backend's own (they grow with B, not only T). */
static size_t cu_attn_scratch(tupe_backend *be, int T)
{
    (void)be, (void)T;
    return 0;
}

/* G[h,i,j] += dS[b,h,i,j] for b in order. */
template <class T> __global__ void k_bias_grad(float *G, const T *dS, int B, int H, size_t HTT)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= HTT)
        return;
    float g = G[i];
    for (int b = 0; b < B; b++)
        g += ldv(dS, (size_t)b * HTT + i);
    G[i] = g;
}

static void cu_bias_grad(tupe_backend *be, tupe_dev *G, const tupe_dev *dS, int B, int H, int T)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)H * T * T;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_bias_grad<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)G, (const bf16 *)dS, B, H,
                                                                n);
    else
        k_bias_grad<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)G, (const float *)dS, B,
                                                                 H, n);
    LAUNCHED("k_bias_grad");
}

/* ---- positional terms ---------------------------------------------------------------------- */

template <class T>
__global__ void k_pos_bias_fwd(float *bias, const T *A, const T *rel, const int32_t *buckets,
                               int ldb, int T_, int H, int reset)
{
    size_t n = (size_t)H * T_ * T_;
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    int h = (int)(x / ((size_t)T_ * T_)), i = (int)(x / T_ % T_), j = (int)(x % T_);
    int T1 = T_ + 1;
    float v = 0;
    if (A) {
        const T *a = A + (size_t)h * T1 * T1;
        if (reset && i == 0)
            v = ldv(a, 0);
        else if (reset && j == 0)
            v = ldv(a, (size_t)T1 + 1);
        else
            v = ldv(a, (size_t)(i + 1) * T1 + j + 1);
    }
    if (rel)
        v += ldv(rel, (size_t)buckets[(size_t)i * ldb + j] * H + h);
    bias[x] = v;
}

/* dA[h] ((T+1) x (T+1), overwritten) from G: the transpose of k_pos_bias_fwd's A part. */
template <class T> __global__ void k_pos_bias_dA(T *dA, const float *G, int T_, int H, int reset)
{
    int T1 = T_ + 1;
    size_t n = (size_t)H * T1 * T1;
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    int h = (int)(x / ((size_t)T1 * T1)), r = (int)(x / T1 % T1), c = (int)(x % T1);
    const float *g = G + (size_t)h * T_ * T_;
    float v = 0;
    if (reset) {
        if (r == 0 && c == 0) {
            for (int j = 0; j < T_; j++) /* row 0 of the scores */
                v += g[j];
        } else if (r == 1 && c == 1) {
            for (int i = 1; i < T_; i++) /* column 0, rows i >= 1 */
                v += g[(size_t)i * T_];
        } else if (r >= 2 && c >= 2) {
            v = g[(size_t)(r - 1) * T_ + c - 1];
        }
    } else if (r >= 1 && c >= 1) {
        v = g[(size_t)(r - 1) * T_ + c - 1];
    }
    stv(dA, x, v);
}

__global__ void k_bucket_keys(unsigned *keys, unsigned *vals, const int32_t *buckets, int ldb,
                              int T_)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)T_ * T_)
        return;
    int i = (int)(x / T_), j = (int)(x % T_);
    keys[x] = (unsigned)buckets[(size_t)i * ldb + j];
    vals[x] = (unsigned)x;
}

static void cu_pos_bias_fwd(tupe_backend *be, tupe_dev *bias, const tupe_dev *A,
                            const tupe_dev *rel, const int32_t *buckets, int ldb, int T, int H,
                            int reset)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)H * T * T;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_pos_bias_fwd<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (float *)bias, (const bf16 *)A, (const bf16 *)rel, buckets, ldb, T, H, reset);
    else
        k_pos_bias_fwd<float><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (float *)bias, (const float *)A, (const float *)rel, buckets, ldb, T, H, reset);
    LAUNCHED("k_pos_bias_fwd");
}

template <class T>
static void pos_bias_bwd_t(cu_priv *pr, tupe_dev *dA, tupe_dev *drel, const tupe_dev *G,
                           const int32_t *buckets, int ldb, int T_, int H, int reset)
{
    if (dA) {
        size_t n = (size_t)H * (T_ + 1) * (T_ + 1);
        k_pos_bias_dA<T><<<nblocks(n, 256), 256, 0, pr->s>>>((T *)dA, (const float *)G, T_, H,
                                                             reset);
        LAUNCHED("k_pos_bias_dA");
    }
    if (drel) {
        int n = T_ * T_;
        unsigned *k1 = (unsigned *)scratch(pr, SC_K1, (size_t)n * 4);
        unsigned *v1 = (unsigned *)scratch(pr, SC_V1, (size_t)n * 4);
        unsigned *k2, *v2;
        if (!k1 || !v1)
            return;
        k_bucket_keys<<<nblocks((size_t)n, 256), 256, 0, pr->s>>>(k1, v1, buckets, ldb, T_);
        LAUNCHED("k_bucket_keys");
        if (sort_pairs(pr, k1, v1, &k2, &v2, n, 32))
            return;
        /* drel[bucket, h] += G[h, i, j]: entry (i, j) of head h is at h * n + (i T + j). */
        seg_sums<T, float>(pr, (T *)drel, (const float *)G, 1, (size_t)n, k2, v2, n, H, ~0u);
    }
}

static void cu_pos_bias_bwd(tupe_backend *be, tupe_dev *dA, tupe_dev *drel, const tupe_dev *G,
                            const int32_t *buckets, int ldb, int T, int H, int reset)
{
    cu_priv *pr = PR(be);
    if (pr->err || T <= 0 || H <= 0)
        return;
    if (pr->bf16)
        pos_bias_bwd_t<bf16>(pr, dA, drel, G, buckets, ldb, T, H, reset);
    else
        pos_bias_bwd_t<float>(pr, dA, drel, G, buckets, ldb, T, H, reset);
}

template <class T>
__global__ void k_qk_pos_add(T *qkv, const T *pq, const T *pk, int T_, int D, size_t n)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    size_t r = x / D;
    int j = (int)(x % D), t = (int)(r % T_);
    T *q = qkv + r * 3 * D;
    stv(q, j, ldv(q, j) + ldv(pq, (size_t)t * D + j));
    stv(q, (size_t)D + j, ldv(q, (size_t)D + j) + ldv(pk, (size_t)t * D + j));
}

template <class T>
__global__ void k_qk_pos_grad(T *dpq, T *dpk, const T *dqkv, int B, int T_, int D)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)T_ * D)
        return;
    int t = (int)(x / D), j = (int)(x % D);
    float a = ldv(dpq, x), b = ldv(dpk, x);
    for (int bi = 0; bi < B; bi++) {
        const T *q = dqkv + ((size_t)bi * T_ + t) * 3 * D;
        a += ldv(q, j);
        b += ldv(q, (size_t)D + j);
    }
    stv(dpq, x, a);
    stv(dpk, x, b);
}

static void cu_qk_pos_add(tupe_backend *be, tupe_dev *qkv, const tupe_dev *pq, const tupe_dev *pk,
                          int B, int T, int D)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)B * T * D;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_qk_pos_add<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (bf16 *)qkv, (const bf16 *)pq, (const bf16 *)pk, T, D, n);
    else
        k_qk_pos_add<float><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (float *)qkv, (const float *)pq, (const float *)pk, T, D, n);
    LAUNCHED("k_qk_pos_add");
}

static void cu_qk_pos_grad(tupe_backend *be, tupe_dev *dpq, tupe_dev *dpk, const tupe_dev *dqkv,
                           int B, int T, int D)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)T * D;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_qk_pos_grad<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (bf16 *)dpq, (bf16 *)dpk, (const bf16 *)dqkv, B, T, D);
    else
        k_qk_pos_grad<float><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (float *)dpq, (float *)dpk, (const float *)dqkv, B, T, D);
    LAUNCHED("k_qk_pos_grad");
}

/* ---- heads and losses ------------------------------------------------------------------------ */

template <class T>
__global__ void k_rows(T *dst, const T *src, const int32_t *idx, int M, int D, int scatter)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)M * D)
        return;
    int m = (int)(x / D), j = (int)(x % D);
    size_t r = (size_t)idx[m] * D + j;
    if (scatter) /* indices are distinct: no two threads write one element */
        stv(dst, r, ldv(dst, r) + ldv(src, x));
    else
        dst[x] = src[r];
}

static void rows_op(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx,
                    int M, int D, int scatter)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)M * D;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_rows<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)dst, (const bf16 *)src, idx, M,
                                                          D, scatter);
    else
        k_rows<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)dst, (const float *)src, idx,
                                                           M, D, scatter);
    LAUNCHED("k_rows");
}

static void cu_gather_rows(tupe_backend *be, tupe_dev *dst, const tupe_dev *src,
                           const int32_t *idx, int M, int D)
{
    rows_op(be, dst, src, idx, M, D, 0);
}

static void cu_scatter_rows(tupe_backend *be, tupe_dev *dst, const tupe_dev *src,
                            const int32_t *idx, int M, int D)
{
    rows_op(be, dst, src, idx, M, D, 1);
}

/* One block per row: lse = max + log sum exp; loss[m] = lse - logit[label]; ok[m] = the first
 * maximal logit is the label. */
template <class T>
__global__ void k_xent_rows(float *lse, double *loss, double *ok, const T *logits,
                            const int32_t *labels, int V)
{
    __shared__ float red[32];
    __shared__ int redi[32];
    int m = blockIdx.x;
    const T *l = logits + (size_t)m * V;
    float mx = -INFINITY;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        mx = fmaxf(mx, ldv(l, v));
    mx = block_max(mx, red);
    int arg = V - 1;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        if (ldv(l, v) == mx && v < arg)
            arg = v;
    arg = block_min_int(arg, redi);
    float s = 0;
    for (int v = threadIdx.x; v < V; v += blockDim.x)
        s += tupe_expf(ldv(l, v) - mx);
    s = block_sum(s, red);
    if (threadIdx.x == 0) {
        float z = mx + logf(s);
        lse[m] = z;
        loss[m] = (double)z - (double)ldv(l, labels[m]);
        ok[m] = arg == labels[m] ? 1.0 : 0.0;
    }
}

/* out[0] = sum of a[0..n), out[1] = sum of b[0..n) (b may be NULL), fixed tree. */
__global__ void k_sum2(const double *a, const double *b, int n, double *out)
{
    __shared__ double sh[32];
    double sa = 0, sb = 0;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        sa += a[i];
        if (b)
            sb += b[i];
    }
    double ta = block_sum_d(sa, sh);
    double tb = block_sum_d(sb, sh);
    if (threadIdx.x == 0) {
        out[0] = ta;
        out[1] = tb;
    }
}

static double cu_xent_fwd(tupe_backend *be, tupe_dev *lse, const tupe_dev *logits,
                          const int32_t *labels, int M, int V, int64_t *correct)
{
    cu_priv *pr = PR(be);
    if (correct)
        *correct = 0;
    if (pr->err || M <= 0 || V <= 0)
        return 0;
    double *tmp = (double *)scratch(pr, SC_COL, 2 * (size_t)M * sizeof(double));
    if (!tmp)
        return 0;
    if (pr->bf16)
        k_xent_rows<bf16><<<(unsigned)M, BS, 0, pr->s>>>((float *)lse, tmp, tmp + M,
                                                         (const bf16 *)logits, labels, V);
    else
        k_xent_rows<float><<<(unsigned)M, BS, 0, pr->s>>>((float *)lse, tmp, tmp + M,
                                                          (const float *)logits, labels, V);
    LAUNCHED("k_xent_rows");
    k_sum2<<<1, BS, 0, pr->s>>>(tmp, tmp + M, M, pr->dres + RED_PARTS);
    LAUNCHED("k_sum2");
    if (pr->err || fetch_res(pr, RED_PARTS, 2))
        return 0;
    if (correct)
        *correct = (int64_t)llround(pr->hres[1]);
    return pr->hres[0];
}

/* dlogits = scale softmax - scale onehot; in place allowed. */
template <class T>
__global__ void k_xent_bwd(T *d, const T *logits, const float *lse, const int32_t *labels, int V,
                           size_t n, float s)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    int m = (int)(x / V), v = (int)(x % V);
    float o = __fmul_rn(s, tupe_expf(ldv(logits, x) - lse[m]));
    if (v == labels[m])
        o = o - s;
    stv(d, x, o);
}

static void cu_xent_bwd(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                        const tupe_dev *lse, const int32_t *labels, int M, int V, double scale)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)M * V;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_xent_bwd<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (bf16 *)dlogits, (const bf16 *)logits, (const float *)lse, labels, V, n, (float)scale);
    else
        k_xent_bwd<float><<<nblocks(n, 256), 256, 0, pr->s>>>(
            (float *)dlogits, (const float *)logits, (const float *)lse, labels, V, n,
            (float)scale);
    LAUNCHED("k_xent_bwd");
}

template <class T> __global__ void k_mse(const T *p, const float *t, int M, double *out)
{
    __shared__ double sh[32];
    double s = 0;
    for (int m = threadIdx.x; m < M; m += blockDim.x) {
        double e = (double)ldv(p, m) - (double)t[m];
        s += e * e;
    }
    double tot = block_sum_d(s, sh);
    if (threadIdx.x == 0)
        out[0] = tot;
}

static double cu_mse_fwd(tupe_backend *be, const tupe_dev *pred, const tupe_dev *target, int M)
{
    cu_priv *pr = PR(be);
    if (pr->err || M <= 0)
        return 0;
    if (pr->bf16)
        k_mse<bf16><<<1, BS, 0, pr->s>>>((const bf16 *)pred, (const float *)target, M,
                                         pr->dres + RED_PARTS);
    else
        k_mse<float><<<1, BS, 0, pr->s>>>((const float *)pred, (const float *)target, M,
                                          pr->dres + RED_PARTS);
    LAUNCHED("k_mse");
    if (pr->err || fetch_res(pr, RED_PARTS, 1))
        return 0;
    return pr->hres[0];
}

template <class T>
__global__ void k_mse_bwd(T *d, const T *p, const float *t, int M, double scale)
{
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < M)
        stv(d, m, (float)(scale * 2.0 * ((double)ldv(p, m) - (double)t[m])));
}

static void cu_mse_bwd(tupe_backend *be, tupe_dev *dpred, const tupe_dev *pred,
                       const tupe_dev *target, int M, double scale)
{
    cu_priv *pr = PR(be);
    if (pr->err || M <= 0)
        return;
    if (pr->bf16)
        k_mse_bwd<bf16><<<nblocks((size_t)M, 256), 256, 0, pr->s>>>(
            (bf16 *)dpred, (const bf16 *)pred, (const float *)target, M, scale);
    else
        k_mse_bwd<float><<<nblocks((size_t)M, 256), 256, 0, pr->s>>>(
            (float *)dpred, (const float *)pred, (const float *)target, M, scale);
    LAUNCHED("k_mse_bwd");
}

/* ---- optimizer ------------------------------------------------------------------------------- */

/* AdamW of one element (pointwise.h) on the fp32 master when there is one, else on p; p then
 * receives the (rounded) result. */
template <class T>
__global__ void k_adamw(T *p, const T *g, float *m, float *v, float *master, size_t n, float b1,
                        float b2, float eps, float gs, float decay, float step)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float w = master ? master[i] : ldv(p, i);
    tupe_adamw_f(&w, m + i, v + i, ldv(g, i) * gs, b1, b2, eps, decay, step);
    if (master)
        master[i] = w;
    stv(p, i, w);
}

static void cu_adamw(tupe_backend *be, tupe_dev *p, const tupe_dev *g, tupe_dev *m, tupe_dev *v,
                     tupe_dev *master, size_t n, const tupe_adamw_args *a)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    float b1 = (float)a->beta1, b2 = (float)a->beta2, eps = (float)a->eps, gs = (float)a->gscale;
    float decay = (float)(a->lr * a->wd), step = (float)a->step_size;
    if (pr->bf16)
        k_adamw<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)p, (const bf16 *)g, (float *)m,
                                                          (float *)v, (float *)master, n, b1, b2,
                                                          eps, gs, decay, step);
    else
        k_adamw<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)p, (const float *)g,
                                                           (float *)m, (float *)v,
                                                           (float *)master, n, b1, b2, eps, gs,
                                                           decay, step);
    LAUNCHED("k_adamw");
}

/* ---- errors, creation, destruction ---------------------------------------------------------- */

static int cu_check(tupe_backend *be, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (!pr->err) {
        SYNC(pr);
        CK(cudaGetLastError());
    }
    if (pr->err)
        return tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", pr->dev, pr->msg);
    return 0;
}

static void nccl_destroy(cu_priv *pr);

static void cu_destroy(tupe_backend *be)
{
    if (!be)
        return;
    cu_priv *pr = PR(be);
    if (pr) {
        cudaSetDevice(pr->dev);
        if (pr->s)
            SYNC(pr);
        nccl_destroy(pr); /* before anything it may still use is freed */
        for (int i = 0; i < pr->nplans; i++)
            destroy_plan(&pr->plans[i]);
        for (int i = 0; i < SC_N; i++)
            if (pr->scr[i])
                cudaFree(pr->scr[i]);
        if (pr->ws)
            cudaFree(pr->ws);
        if (pr->dres)
            cudaFree(pr->dres);
        if (pr->hres)
            cudaFreeHost(pr->hres);
        if (pr->lt)
            cublasLtDestroy(pr->lt);
        if (pr->blas)
            cublasDestroy(pr->blas);
        if (pr->s)
            cudaStreamDestroy(pr->s);
        free(pr);
    }
    free(be);
}

extern "C" int tupe_backend_cuda_devices(char *why, size_t cap)
{
    int drv = 0, rt = 0, n = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    if (drv == 0) {
        if (cap)
            snprintf(why, cap, "no NVIDIA driver found");
        cudaGetLastError();
        return 0;
    }
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r != cudaSuccess) {
        if (cap)
            snprintf(why, cap, "%s; driver supports CUDA %d.%d, this build needs %d.%d",
                     cudaGetErrorString(r), drv / 1000, drv % 1000 / 10, rt / 1000,
                     rt % 1000 / 10);
        cudaGetLastError();
        return 0;
    }
    if (n <= 0 && cap)
        snprintf(why, cap, "no CUDA device found");
    return n > 0 ? n : 0;
}

extern "C" int tupe_backend_cuda_create(tupe_backend **out, int bf16_, int gpu, tupe_err *e)
{
    *out = NULL;
    char why[256] = "";
    int n = tupe_backend_cuda_devices(why, sizeof why);
    if (n <= 0)
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': no usable GPU (%s)", why);
    int dev = (gpu < 0 ? 0 : gpu) % n;
    cudaDeviceProp prop;
    cudaError_t r = cudaSetDevice(dev);
    if (r == cudaSuccess)
        r = cudaGetDeviceProperties(&prop, dev);
    if (r != cudaSuccess) {
        cudaGetLastError();
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': GPU %d: %s", dev, cudaGetErrorString(r));
    }
    if (prop.major < 8)
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': GPU %d (%s) has compute capability "
                         "%d.%d; this build needs 8.0 or later", dev, prop.name, prop.major,
                         prop.minor);
    tupe_backend *be = (tupe_backend *)calloc(1, sizeof *be);
    cu_priv *pr = (cu_priv *)calloc(1, sizeof *pr);
    if (!be || !pr) {
        free(be);
        free(pr);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    be->priv = pr;
    pr->dev = dev;
    pr->bf16 = bf16_ != 0;
    const char *tf = getenv("TUPE_CUDA_TF32");
    pr->tf32 = tf && strcmp(tf, "1") == 0;
    pr->ws_bytes = (size_t)32 << 20;
    CK(cudaStreamCreateWithFlags(&pr->s, cudaStreamNonBlocking));
    CKB(cublasLtCreate(&pr->lt));
    if (!CKB(cublasCreate(&pr->blas)))
        CKB(cublasSetStream(pr->blas, pr->s));
    CK(cudaMalloc(&pr->ws, pr->ws_bytes));
    CK(cudaMalloc((void **)&pr->dres, (RED_PARTS + 8) * sizeof(double)));
    CK(cudaMallocHost((void **)&pr->hres, 8 * sizeof(double)));
    if (pr->err) {
        int rc = tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", dev, pr->msg);
        cu_destroy(be);
        return rc;
    }
    be->name = pr->bf16 ? "cuda-bf16" : "cuda";
    be->esize = pr->bf16 ? 2 : 4;
    be->wsize = 4;
    be->nthreads = 1;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->upload = cu_upload;
    be->download = cu_download;
    be->zero = cu_zero;
    be->scale = cu_scale;
    be->sumsq = cu_sumsq;
    be->sumsq_parts = cu_sumsq_parts;
    be->add = cu_add;
    be->gemm = cu_gemm;
    be->linear_fwd = cu_linear_fwd;
    be->linear_bwd = cu_linear_bwd;
    be->act_fwd = cu_act_fwd;
    be->act_bwd = cu_act_bwd;
    be->ln_fwd = cu_ln_fwd;
    be->ln_bwd = cu_ln_bwd;
    be->resid_ln_fwd = cu_resid_ln_fwd;
    be->resid_ln_bwd = cu_resid_ln_bwd;
    be->embed_fwd = cu_embed_fwd;
    be->embed_bwd = cu_embed_bwd;
    be->attn_fwd = cu_attn_fwd;
    be->attn_bwd = cu_attn_bwd;
    be->attn_scratch = cu_attn_scratch;
    be->bias_grad = cu_bias_grad;
    be->pos_bias_fwd = cu_pos_bias_fwd;
    be->pos_bias_bwd = cu_pos_bias_bwd;
    be->qk_pos_add = cu_qk_pos_add;
    be->qk_pos_grad = cu_qk_pos_grad;
    be->gather_rows = cu_gather_rows;
    be->scatter_rows = cu_scatter_rows;
    be->xent_fwd = cu_xent_fwd;
    be->xent_bwd = cu_xent_bwd;
    be->mse_fwd = cu_mse_fwd;
    be->mse_bwd = cu_mse_bwd;
    be->adamw = cu_adamw;
    be->check = cu_check;
    be->destroy = cu_destroy;
    *out = be;
    return 0;
}

extern "C" void *tupe_backend_cuda_stream(tupe_backend *be)
{
    if (!be || !be->name || strncmp(be->name, "cuda", 4) != 0)
        return NULL;
    return (void *)PR(be)->s;
}

extern "C" int tupe_backend_cuda_device(tupe_backend *be)
{
    if (!be || !be->name || strncmp(be->name, "cuda", 4) != 0)
        return -1;
    return PR(be)->dev;
}

extern "C" void tupe_backend_cuda_gemm_counts(tupe_backend *be, long long *lt,
                                              long long *legacy, char *first, size_t cap)
{
    int cuda = be && be->name && strncmp(be->name, "cuda", 4) == 0;
    *lt = cuda ? PR(be)->gemm_lt : 0;
    *legacy = cuda ? PR(be)->gemm_legacy : 0;
    if (cap)
        snprintf(first, cap, "%s", cuda ? PR(be)->legacy_shape : "");
}

/* ---- NCCL ------------------------------------------------------------------------------------ */

/* libnccl is opened at run time, not linked: the programs start on machines whose CUDA has no
 * NCCL (it ships apart from the toolkit), and single-GPU runs never need it. The table is
 * filled once per process and never changes after.
 *
 * Collectives run on a second stream of the backend (cs), so that the gradients of one part
 * of the model travel while the backward pass computes the next: each operation first makes
 * cs wait for the work queued so far on the compute stream (an event), and
 * tupe_backend_cuda_comm_join makes the compute stream wait for cs. The communicator is
 * initialized non-blocking and polled, so that no wait on another rank is ever without end:
 * tupe_backend_cuda_nccl_abort (any thread: the collectives module calls it when a rank is
 * known gone) aborts it, and every host wait polls, giving up after the timeout. */
#if TUPE_HAVE_NCCL
static_assert(sizeof(ncclUniqueId) == TUPE_NCCL_ID_BYTES, "NCCL unique id size");

typedef struct nccl_api {
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*finalize)(ncclComm_t);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*abort)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    char why[300];      /* empty when loaded */
} nccl_api;

static nccl_api NCCL;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void nccl_load(void)
{
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(NCCL.why, sizeof NCCL.why, "cannot load libnccl.so.2 (%s)", dlerror());
        return;
    }
    struct {
        void **p;
        const char *name;
    } syms[] = {{(void **)&NCCL.get_unique_id, "ncclGetUniqueId"},
                {(void **)&NCCL.init_config, "ncclCommInitRankConfig"},
                {(void **)&NCCL.async_error, "ncclCommGetAsyncError"},
                {(void **)&NCCL.finalize, "ncclCommFinalize"},
                {(void **)&NCCL.destroy, "ncclCommDestroy"},
                {(void **)&NCCL.abort, "ncclCommAbort"},
                {(void **)&NCCL.error_string, "ncclGetErrorString"},
                {(void **)&NCCL.all_reduce, "ncclAllReduce"},
                {(void **)&NCCL.all_gather, "ncclAllGather"},
                {(void **)&NCCL.broadcast, "ncclBroadcast"},
                {(void **)&NCCL.send, "ncclSend"},
                {(void **)&NCCL.recv, "ncclRecv"},
                {(void **)&NCCL.group_start, "ncclGroupStart"},
                {(void **)&NCCL.group_end, "ncclGroupEnd"}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].p = dlsym(h, syms[i].name))) {
            snprintf(NCCL.why, sizeof NCCL.why, "libnccl.so.2 has no %s (NCCL 2.18 or later "
                     "is needed)", syms[i].name);
            return;
        }
}

/* The loaded library, or NULL with the reason in e. */
static const nccl_api *nccl(tupe_err *e)
{
    pthread_once(&nccl_once, nccl_load);
    if (NCCL.why[0]) {
        tupe_fail(e, TUPE_EFAIL, "NCCL: %s; install NCCL (libnccl2) or set TUPE_NCCL=0 to sum "
                  "gradients through host copies", NCCL.why);
        return NULL;
    }
    return &NCCL;
}

struct nccl_link {
    ncclComm_t comm;
    int rank, world;
    cudaStream_t cs;                /* the communication stream */
    cudaEvent_t after_compute, after_comm;
    void *scr;                      /* the pieces received from the other ranks */
    size_t scr_bytes;
    double timeout;                 /* seconds a host wait may last */
    tupe_nccl_hint_fn hint;         /* what the other ranks are doing, for a timeout's message */
    void *hint_ctx;
    pthread_mutex_t mu;             /* NCCL calls against an abort from another thread */
    volatile int aborted;
    char why[400];
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* Aborts the communicator once, keeping the first reason (nl->mu held). */
static void abort_locked(nccl_link *nl, const char *why)
{
    if (nl->aborted)
        return;
    snprintf(nl->why, sizeof nl->why, "%s", why);
    nl->aborted = 1;
    if (nl->comm)
        NCCL.abort(nl->comm);
    nl->comm = NULL;
}

/* A result of an NCCL call on a non-blocking communicator: ncclInProgress means "poll until it
 * is done". 0, or 1 with the reason in pr's error (nl->mu held). */
static int nccl_done(cu_priv *pr, ncclResult_t r, const char *what)
{
    nccl_link *nl = pr->nl;
    double t0 = now_s();
    while (r == ncclInProgress && nl->comm) {
        if (NCCL.async_error(nl->comm, &r) != ncclSuccess)
            break;
        if (r == ncclInProgress) {
            if (now_s() - t0 > nl->timeout) {
                abort_locked(nl, "NCCL: an operation did not start in time");
                break;
            }
            sleep_us(50);
        }
    }
    if (r == ncclSuccess)
        return 0;
    char msg[300];
    snprintf(msg, sizeof msg, "NCCL %s: %s", what, NCCL.error_string(r));
    abort_locked(nl, msg);
    set_err(pr, "%s%s", nl->why, "");
    return 1;
}

static int wait_stream(cu_priv *pr, cudaStream_t st, const char *what)
{
    nccl_link *nl = pr->nl;
    if (!nl)
        return ck(pr, cudaStreamSynchronize(st), what);
    double t0 = now_s();
    for (long i = 0;; i++) {
        cudaError_t r = cudaStreamQuery(st);
        if (r == cudaSuccess)
            break;
        if (r != cudaErrorNotReady)
            return ck(pr, r, what);
        if (nl->aborted)
            break;
        ncclResult_t ae = ncclSuccess;
        pthread_mutex_lock(&nl->mu);
        if (nl->comm && NCCL.async_error(nl->comm, &ae) == ncclSuccess && ae != ncclSuccess &&
            ae != ncclInProgress) {
            char msg[300];
            snprintf(msg, sizeof msg, "NCCL: %s", NCCL.error_string(ae));
            abort_locked(nl, msg);
        } else if (now_s() - t0 > nl->timeout) {
            char msg[400], h[240] = "";
            if (nl->hint)
                nl->hint(nl->hint_ctx, h, sizeof h);
            snprintf(msg, sizeof msg, "rank %d: the GPU work waiting on the other ranks did not "
                     "finish within %.0f s (TUPE_COMM_TIMEOUT)%s%s", nl->rank, nl->timeout,
                     h[0] ? ": " : "", h);
            abort_locked(nl, msg);
        }
        pthread_mutex_unlock(&nl->mu);
        sleep_us(i < 100 ? 20 : i < 1000 ? 100 : 1000);
    }
    if (nl->aborted) {
        /* the aborted collectives have left the streams: what they wrote is not to be used */
        cudaStreamSynchronize(st);
        set_err(pr, "%s%s", nl->why, "");
        return 1;
    }
    return 0;
}

static void nccl_destroy(cu_priv *pr)
{
    nccl_link *nl = pr->nl;
    if (!nl)
        return;
    if (!pr->err)
        wait_stream(pr, nl->cs, "cudaStreamSynchronize (communication)");
    pthread_mutex_lock(&nl->mu);
    if (nl->comm) {
        if (!pr->err) {
            ncclResult_t r = NCCL.finalize(nl->comm);
            double t0 = now_s();
            while (r == ncclInProgress && now_s() - t0 < nl->timeout &&
                   NCCL.async_error(nl->comm, &r) == ncclSuccess)
                if (r == ncclInProgress)
                    sleep_us(100);
            if (r == ncclSuccess)
                NCCL.destroy(nl->comm);
            else
                NCCL.abort(nl->comm);
        } else {
            NCCL.abort(nl->comm);
        }
        nl->comm = NULL;
    }
    pthread_mutex_unlock(&nl->mu);
    cudaStreamSynchronize(nl->cs);
    cudaEventDestroy(nl->after_compute);
    cudaEventDestroy(nl->after_comm);
    if (nl->scr)
        cudaFree(nl->scr);
    cudaStreamDestroy(nl->cs);
    pthread_mutex_destroy(&nl->mu);
    free(nl);
    pr->nl = NULL;
}

extern "C" int tupe_backend_cuda_nccl_load(tupe_err *e) { return nccl(e) ? 0 : TUPE_EFAIL; }

extern "C" int tupe_backend_cuda_nccl_id(void *id, tupe_err *e)
{
    const nccl_api *nc = nccl(e);
    if (!nc)
        return TUPE_EFAIL;
    ncclUniqueId u;
    ncclResult_t r = nc->get_unique_id(&u);
    if (r != ncclSuccess)
        return tupe_fail(e, TUPE_EFAIL, "NCCL: cannot make a unique id: %s",
                         nc->error_string(r));
    memcpy(id, &u, sizeof u);
    return 0;
}

extern "C" int tupe_backend_cuda_nccl_init(tupe_backend *be, const void *id, int rank, int world,
                                           double timeout, tupe_nccl_hint_fn hint,
                                           void *hint_ctx, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (pr->nl)
        return 0;
    if (pr->err)
        return cu_check(be, e);
    const nccl_api *nc = nccl(e);
    if (!nc)
        return TUPE_EFAIL;
    nccl_link *nl = (nccl_link *)calloc(1, sizeof *nl);
    if (!nl)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    pthread_mutex_init(&nl->mu, NULL);
    nl->rank = rank;
    nl->world = world;
    nl->timeout = timeout > 0 ? timeout : 600;
    nl->hint = hint;
    nl->hint_ctx = hint_ctx;
    cudaSetDevice(pr->dev);
    if (CK(cudaStreamCreateWithFlags(&nl->cs, cudaStreamNonBlocking)) ||
        CK(cudaEventCreateWithFlags(&nl->after_compute, cudaEventDisableTiming)) ||
        CK(cudaEventCreateWithFlags(&nl->after_comm, cudaEventDisableTiming))) {
        pthread_mutex_destroy(&nl->mu);
        free(nl);
        return cu_check(be, e);
    }
    pr->nl = nl;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* polled below, so that a rank that never comes ends in a message */
    ncclResult_t r = nc->init_config(&nl->comm, world, u, rank, &cfg);
    double t0 = now_s();
    while (r == ncclInProgress) {
        if (nc->async_error(nl->comm, &r) != ncclSuccess)
            break;
        if (r != ncclInProgress)
            break;
        if (nl->aborted) {
            r = ncclRemoteError;
            break;
        }
        if (now_s() - t0 > nl->timeout) {
            pthread_mutex_lock(&nl->mu);
            abort_locked(nl, "");
            pthread_mutex_unlock(&nl->mu);
            nccl_destroy(pr);
            return tupe_fail(e, TUPE_EFAIL, "NCCL: rank %d of %d on GPU %d: the other ranks did "
                             "not join within %.0f s (TUPE_COMM_TIMEOUT)", rank, world, pr->dev,
                             timeout);
        }
        sleep_us(1000);
    }
    if (r != ncclSuccess) {
        char why[400];
        snprintf(why, sizeof why, "%s", nl->aborted ? nl->why : nc->error_string(r));
        nccl_destroy(pr);
        return tupe_fail(e, TUPE_EFAIL, "NCCL: rank %d of %d on GPU %d cannot join: %s", rank,
                         world, pr->dev, why);
    }
    return 0;
}

extern "C" void tupe_backend_cuda_nccl_abort(tupe_backend *be, const char *why)
{
    nccl_link *nl = be ? PR(be)->nl : NULL;
    if (!nl)
        return;
    pthread_mutex_lock(&nl->mu);
    abort_locked(nl, why);
    pthread_mutex_unlock(&nl->mu);
}

/* Starts a communication: cs waits for the compute stream's work queued so far. 0, or 1 (the
 * error kept; nl->mu held either way). */
static int comm_begin(cu_priv *pr, const char *what)
{
    nccl_link *nl = pr->nl;
    pthread_mutex_lock(&nl->mu);
    if (nl->aborted) {
        set_err(pr, "%s%s", nl->why, "");
        return 1;
    }
    if (pr->err)
        return 1;
    (void)what;
    return CK(cudaEventRecord(nl->after_compute, pr->s)) ||
           CK(cudaStreamWaitEvent(nl->cs, nl->after_compute, 0));
}

static int comm_end(cu_priv *pr, tupe_err *e)
{
    pthread_mutex_unlock(&pr->nl->mu);
    if (pr->err)
        return tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", pr->dev, pr->msg);
    return 0;
}

static int no_link(cu_priv *pr, tupe_err *e)
{
    if (pr->err)
        return tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", pr->dev, pr->msg);
    return tupe_fail(e, TUPE_EFAIL, "NCCL used before tupe_backend_cuda_nccl_init");
}

/* nl->scr of at least `bytes` (growing it waits for cs, which may still read the old one). */
static void *comm_scratch(cu_priv *pr, size_t bytes)
{
    nccl_link *nl = pr->nl;
    if (nl->scr_bytes >= bytes)
        return nl->scr;
    pthread_mutex_unlock(&nl->mu);
    int bad = wait_stream(pr, nl->cs, "cudaStreamSynchronize (communication)");
    pthread_mutex_lock(&nl->mu);
    if (bad || nl->aborted)
        return NULL;
    if (nl->scr)
        cudaFree(nl->scr);
    nl->scr = NULL;
    nl->scr_bytes = 0;
    if (CK(cudaMalloc(&nl->scr, bytes)))
        return NULL;
    nl->scr_bytes = bytes;
    return nl->scr;
}

/* Each element i of this rank's piece: the ranks' values summed by tupe_tree_sum_f's tree, in
 * place over the pieces (slot q is rank q's piece as received; this rank's own is `own`),
 * each sum rounded to T as stored. */
template <class T>
__global__ void k_tree_pieces(T *own, T *slots, int world, int rank, size_t piece)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= piece)
        return;
    int m = 1;
    while (m < world)
        m <<= 1;
    for (m >>= 1; m >= 1; m >>= 1)
        for (int c = 0; c < m && c + m < world; c++) {
            T *a = c == rank ? own : slots + (size_t)c * piece;
            T *b = c + m == rank ? own : slots + (size_t)(c + m) * piece;
            stv(a, i, ldv(a, i) + ldv(b, i));
        }
    if (rank != 0)
        own[i] = slots[i];
}

extern "C" int tupe_backend_cuda_reduce_pieces(tupe_backend *be, tupe_dev *buf, size_t piece,
                                               tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = pr->nl;
    if (!nl)
        return no_link(pr, e);
    if (comm_begin(pr, "reduce") || piece == 0)
        return comm_end(pr, e);
    size_t es = (size_t)be->esize;
    char *scr = (char *)comm_scratch(pr, (size_t)nl->world * piece * es);
    if (!scr)
        return comm_end(pr, e);
    ncclDataType_t t = pr->bf16 ? ncclBfloat16 : ncclFloat32;
    char *b = (char *)buf;
    int bad = nccl_done(pr, NCCL.group_start(), "group");
    for (int q = 0; q < nl->world && !bad; q++) {
        if (q == nl->rank)
            continue;
        bad = nccl_done(pr, NCCL.send(b + (size_t)q * piece * es, piece, t, q, nl->comm, nl->cs),
                        "send") ||
              nccl_done(pr, NCCL.recv(scr + (size_t)q * piece * es, piece, t, q, nl->comm, nl->cs),
                        "receive");
    }
    if (!bad)
        bad = nccl_done(pr, NCCL.group_end(), "group");
    if (!bad) {
        char *own = b + (size_t)nl->rank * piece * es;
        if (pr->bf16)
            k_tree_pieces<bf16><<<nblocks(piece, 256), 256, 0, nl->cs>>>(
                (bf16 *)own, (bf16 *)scr, nl->world, nl->rank, piece);
        else
            k_tree_pieces<float><<<nblocks(piece, 256), 256, 0, nl->cs>>>(
                (float *)own, (float *)scr, nl->world, nl->rank, piece);
        LAUNCHED("k_tree_pieces");
    }
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_gather_pieces(tupe_backend *be, tupe_dev *buf, size_t piece,
                                               size_t elem, tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = pr->nl;
    if (!nl)
        return no_link(pr, e);
    if (comm_begin(pr, "gather") || piece == 0)
        return comm_end(pr, e);
    size_t bytes = piece * elem;
    char *b = (char *)buf;
    nccl_done(pr, NCCL.all_gather(b + (size_t)nl->rank * bytes, b, bytes, ncclUint8, nl->comm,
                                  nl->cs), "all-gather");
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_bcast(tupe_backend *be, tupe_dev *buf, size_t bytes, int root,
                                       tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = pr->nl;
    if (!nl)
        return no_link(pr, e);
    if (comm_begin(pr, "broadcast") || bytes == 0)
        return comm_end(pr, e);
    nccl_done(pr, NCCL.broadcast(buf, buf, bytes, ncclUint8, root, nl->comm, nl->cs), "broadcast");
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_allreduce(tupe_backend *be, tupe_dev *buf, size_t n,
                                           tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = pr->nl;
    if (!nl)
        return no_link(pr, e);
    if (comm_begin(pr, "all-reduce") || n == 0)
        return comm_end(pr, e);
    nccl_done(pr, NCCL.all_reduce(buf, buf, n, pr->bf16 ? ncclBfloat16 : ncclFloat32, ncclSum,
                                  nl->comm, nl->cs), "all-reduce");
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_comm_join(tupe_backend *be, tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = pr->nl;
    if (!nl)
        return no_link(pr, e);
    pthread_mutex_lock(&nl->mu);
    if (nl->aborted)
        set_err(pr, "%s%s", nl->why, "");
    else if (!pr->err && !CK(cudaEventRecord(nl->after_comm, nl->cs)))
        CK(cudaStreamWaitEvent(pr->s, nl->after_comm, 0));
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_comm_wait(tupe_backend *be, tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = pr->nl;
    if (!nl)
        return no_link(pr, e);
    wait_stream(pr, nl->cs, "cudaStreamSynchronize (communication)");
    if (pr->err)
        return tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", pr->dev, pr->msg);
    return 0;
}
#else
static void nccl_destroy(cu_priv *) {}

static int wait_stream(cu_priv *pr, cudaStream_t st, const char *what)
{
    return ck(pr, cudaStreamSynchronize(st), what);
}

static int no_nccl(tupe_err *e)
{
    return tupe_fail(e, TUPE_EUSAGE, "NCCL: this build has none (nccl.h was not found when it "
                     "was compiled); set TUPE_NCCL=0 to sum gradients through host copies");
}

extern "C" int tupe_backend_cuda_nccl_load(tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_nccl_id(void *, tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_nccl_init(tupe_backend *, const void *, int, int, double,
                                           tupe_nccl_hint_fn, void *, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" void tupe_backend_cuda_nccl_abort(tupe_backend *, const char *) {}
extern "C" int tupe_backend_cuda_reduce_pieces(tupe_backend *, tupe_dev *, size_t, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_gather_pieces(tupe_backend *, tupe_dev *, size_t, size_t,
                                               tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_bcast(tupe_backend *, tupe_dev *, size_t, int, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_allreduce(tupe_backend *, tupe_dev *, size_t, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_comm_join(tupe_backend *, tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_comm_wait(tupe_backend *, tupe_err *e) { return no_nccl(e); }
#endif
