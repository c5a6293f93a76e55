/* What every kernel file shares (kernels/README.md): the backend's state (cu_priv), errors
 * and scratch buffers, the storage-type helpers, row selections, fixed-order block reductions
 * and the dropout decisions (dropout.cuh). Nothing here launches a kernel or declares shared
 * memory: emu-nvcc rewrites launches and __shared__ declarations only in .cu files. */
#ifndef TUPE_KERNELS_COMMON_CUH
#define TUPE_KERNELS_COMMON_CUH

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

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

/* ---- 16-byte accesses ----------------------------------------------------------------------
 * An element-wise kernel's thread takes VE consecutive elements: through 128-bit loads and
 * stores (ldve, stve: one for bf16, two for fp32) where the host found every pointer 16-byte
 * aligned (al16) and the run is whole, else element by element; the arithmetic per element is
 * the same either way (the same results, bit for bit). The emulated GPU faults on a misaligned
 * vector access, as the GPU does. */
#define VE 8
#ifdef __CUEMU__
#define TUPE_ALIGN16(p) ::cuemu::check_align((const void *)(p), 16, __FILE__, __LINE__)
#else
#define TUPE_ALIGN16(p) ((void)0)
#endif

static inline int al16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

/* v[0..VE) = p[0..VE) in fp32; p 16-byte aligned. */
__device__ __forceinline__ void ldve(float *v, const float *p)
{
    for (int q = 0; q < VE; q += 4) {
        TUPE_ALIGN16(p + q);
        uint4 u = *(const uint4 *)(p + q);
        memcpy(v + q, &u, 16);
    }
}
__device__ __forceinline__ void ldve(float *v, const __nv_bfloat16 *p)
{
    TUPE_ALIGN16(p);
    uint4 u = *(const uint4 *)p;
    __nv_bfloat16 h[VE];
    memcpy(h, &u, 16);
    for (int k = 0; k < VE; k++)
        v[k] = __bfloat162float(h[k]);
}
/* p[0..VE) = v[0..VE), each rounded once to p's type; p 16-byte aligned. */
__device__ __forceinline__ void stve(float *p, const float *v)
{
    for (int q = 0; q < VE; q += 4) {
        uint4 u;
        memcpy(&u, v + q, 16);
        TUPE_ALIGN16(p + q);
        *(uint4 *)(p + q) = u;
    }
}
__device__ __forceinline__ void stve(__nv_bfloat16 *p, const float *v)
{
    __nv_bfloat16 h[VE];
    for (int k = 0; k < VE; k++)
        h[k] = __float2bfloat16_rn(v[k]);
    uint4 u;
    memcpy(&u, h, 16);
    TUPE_ALIGN16(p);
    *(uint4 *)p = u;
}

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static const cudaDataType_t v = CUDA_R_32F; };
template <> struct dtype_of<bf16> { static const cudaDataType_t v = CUDA_R_16BF; };

/* ---- backend state ----------------------------------------------------------------------- */

enum { SC_SF, SC_PD, SC_COL, SC_K1, SC_K2, SC_V1, SC_V2, SC_CUB, SC_PART, SC_RUNS, SC_BG, SC_DONE, SC_N };

typedef struct gemm_key {
    int ta, tb, M, N, K, lda, ldb, ldc, batch;
    long long sa, sb, sc;
    int ab, c;                      /* cudaDataType_t of A/B and of C */
    unsigned ala, alb, alc;         /* pointer alignments */
    int ep;                         /* cublasLtEpilogue_t, 0 for none (matmul.cu: lt_gemm_ep) */
} gemm_key;

typedef struct gemm_plan {
    gemm_key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulAlgo_t algo;
    int legacy;                     /* cuBLASLt offers no algorithm: cublasGemmStridedBatchedEx */
} gemm_plan;

#define PLAN_CAP 256

/* Pinned host staging for uploads (buffers.cu): a ring of buffers, each reused once the copy
 * out of it is done (its event), so that an upload needs no host wait. */
#define STAGE_SLOTS 16
typedef struct stage_buf {
    void *h;          /* pinned (cudaMallocHost) */
    size_t cap;
    cudaEvent_t done; /* recorded after the copy out of h */
    int busy;         /* `done` recorded and not yet seen complete */
} stage_buf;

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
    double *hsums;                  /* pinned: the step's sums to and from the device */
    size_t hsums_n;
    void *scr[SC_N];
    size_t scr_cap[SC_N];
    gemm_plan plans[PLAN_CAP];
    int nplans;
    long long gemm_lt, gemm_legacy; /* products run through each path */
    struct op_timing *tm;           /* per-operation timing (measure.cu), once asked for */
    stage_buf stage[STAGE_SLOTS];   /* upload staging, used in turn */
    int stage_next;
    struct drop_masks *dm;          /* dropout keep bits kept per site (dropout.cu) */
    char legacy_shape[160];         /* the first product that had to take the legacy path */
    int err;
    char msg[512];
} cu_priv;

#define RED_PARTS 1024              /* blocks of the first pass of sumsq */

static inline cu_priv *PR(tupe_backend *be) { return (cu_priv *)be->priv; }

/* The first error is kept (pr->err, pr->msg); every operation after it does nothing. */
void set_err(cu_priv *pr, const char *fmt, const char *a, const char *b);
int ck(cu_priv *pr, cudaError_t r, const char *what);
int ckb(cu_priv *pr, cublasStatus_t r, const char *what);

#define CK(call) ck(pr, (call), #call)
#define CKB(call) ckb(pr, (call), #call)
#define LAUNCHED(name) ck(pr, cudaGetLastError(), name)

/* The host waits for stream st (the NCCL section: with NCCL joined, a wait can end early, when
 * a rank is gone or nothing moves for too long). 0, or 1 with the error kept. */
int wait_stream(cu_priv *pr, cudaStream_t st, const char *what);
#define SYNC(pr) wait_stream((pr), (pr)->s, "cudaStreamSynchronize")

/* A scratch buffer of at least `bytes`, kept between calls (grown when too small). */
void *scratch(cu_priv *pr, int slot, size_t bytes);

/* A device count of finished blocks, 0 between launches (a kernel whose last block sums the
 * others' partials, in a fixed order, sets it back to 0 when done). */
unsigned *done_count(cu_priv *pr);

/* Copies `k` doubles of dres[off..] to the host and waits for them. */
int fetch_res(cu_priv *pr, int off, int k);

/* The table's `check`: 0, or the first device error since the backend was made. */
int cu_check(tupe_backend *be, tupe_err *e);

static inline unsigned nblocks(size_t n, int bs)
{
    size_t b = (n + (size_t)bs - 1) / (size_t)bs;
    return (unsigned)(b ? b : 1);
}

/* TUPE_DEV_COUNT(name, n): a counter of the emulated GPU (tests/cuemu: cuemu.h, "counters",
 * read through tupe_backend_cuda_counters), added to where a kernel does the work it counts;
 * nothing on a GPU. */
#ifdef __CUEMU__
#define TUPE_DEV_COUNT(name, n) CUEMU_COUNT(name, n)
#else
#define TUPE_DEV_COUNT(name, n) ((void)0)
#endif

#include "dropout.cuh"

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

static inline __device__ float block_sum(float v, float *sh)
{
    return block_reduce(v, sh, op_sum());
}
static inline __device__ double block_sum_d(double v, double *sh)
{
    return block_reduce(v, sh, op_sum());
}
static inline __device__ float block_max(float v, float *sh)
{
    return block_reduce(v, sh, op_max());
}
static inline __device__ int block_min_int(int v, int *sh)
{
    return block_reduce(v, sh, op_min());
}
__device__ __forceinline__ float warp_sum(float v) { return warp_reduce(v, op_sum()); }
__device__ __forceinline__ float warp_max(float v) { return warp_reduce(v, op_max()); }

/* ---- row selections --------------------------------------------------------------------- */

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

static inline rowsel all_rows(void)
{
    rowsel s = {NULL, 1, NULL, -1};
    return s;
}

#endif
