/* Matrix products and their epilogues: every product through cuBLASLt (a cached plan per
 * shape; cuBLAS's strided-batched GEMM where cuBLASLt has no algorithm), the bias and
 * activation after a linear layer, the column sums of bias gradients (also LayerNorm's dgamma
 * and dbeta), the activations and their gradients. */
#include "matmul.cuh"

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

void destroy_plan(gemm_plan *g)
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
              (k->ep && CKB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                                           &k->ep, sizeof k->ep))) ||
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
    if (!bad && g->legacy && !pr->legacy_shape[0] && !k->ep)
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

/* lt_gemm, and with ep (a cuBLASLt epilogue, vector `bias`) the epilogue in the same product:
 * 1 when it was applied, 0 when the caller applies it (an empty product; cuBLASLt has no
 * algorithm for the shape with that epilogue: the product is then made without it). */
static int gemm_ep(cu_priv *pr, int ta, int tb, int M, int N, int K, float alpha, const void *A,
                   int lda, long long sa, const void *B, int ldb, long long sb, float beta,
                   void *C, int ldc, long long sc, int batch, cudaDataType_t ab, cudaDataType_t ct,
                   int ep, void *bias)
{
    if (pr->err || M <= 0 || N <= 0 || batch <= 0)
        return 0;
    if (K <= 0) { /* an empty sum: C = beta C */
        dim3 grid(nblocks((size_t)M * N, 256), (unsigned)(batch < 65535 ? batch : 65535));
        k_scale2d<<<grid, 256, 0, pr->s>>>(ct == CUDA_R_32F ? (float *)C : NULL,
                                           ct == CUDA_R_32F ? NULL : (bf16 *)C, M, N, ldc, sc,
                                           batch, beta);
        LAUNCHED("k_scale2d");
        return 0;
    }
    gemm_key k;
    memset(&k, 0, sizeof k);
    k.ta = ta, k.tb = tb, k.M = M, k.N = N, k.K = K, k.lda = lda, k.ldb = ldb, k.ldc = ldc;
    k.batch = batch;
    if (batch > 1)
        k.sa = sa, k.sb = sb, k.sc = sc;
    k.ab = (int)ab, k.c = (int)ct;
    k.ep = batch == 1 ? ep : 0;
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
        return 0;
    if (k.ep && g->legacy) /* no algorithm with the epilogue: without it */
        k.ep = 0, g = find_plan(pr, &k);
    if (!g)
        return 0;
    if (!g->legacy) {
        pr->gemm_lt++;
        if (k.ep && CKB(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                       &bias, sizeof bias)))
            return 0;
        CKB(cublasLtMatmul(pr->lt, g->op, &alpha, B, g->la, A, g->lb, &beta, C, g->lc, C, g->lc,
                           &g->algo, pr->ws, pr->ws_bytes, pr->s));
        return k.ep != 0 && !pr->err;
    }
    /* The same column-major product as above: cuBLAS's A is our B, its B our A. */
    pr->gemm_legacy++;
    cublasComputeType_t comp =
        (ab == CUDA_R_32F && pr->tf32) ? CUBLAS_COMPUTE_32F_FAST_TF32 : CUBLAS_COMPUTE_32F;
    CKB(cublasGemmStridedBatchedEx(pr->blas, tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                                   ta ? CUBLAS_OP_T : CUBLAS_OP_N, N, M, K, &alpha, B, ab, ldb,
                                   batch > 1 ? sb : 0, A, ab, lda, batch > 1 ? sa : 0, &beta, C,
                                   ct, ldc, batch > 1 ? sc : 0, batch, comp, CUBLAS_GEMM_DEFAULT));
    return 0;
}

void lt_gemm(cu_priv *pr, int ta, int tb, int M, int N, int K, float alpha, const void *A, int lda,
             long long sa, const void *B, int ldb, long long sb, float beta, void *C, int ldc,
             long long sc, int batch, cudaDataType_t ab, cudaDataType_t ct)
{
    gemm_ep(pr, ta, tb, M, N, K, alpha, A, lda, sa, B, ldb, sb, beta, C, ldc, sc, batch, ab, ct, 0,
            NULL);
}

/* ---- matrix products (interface) --------------------------------------------------------- */

void cu_gemm(tupe_backend *be, int ta, int tb, int M, int N, int K, double alpha,
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

/* y[r,c] += b[c] (b may be NULL); with a: a = drop(act(y)) at logical element base + r*out + c.
 * VE elements per thread (16-byte accesses of y and a when vec). */
template <class T>
__global__ void k_bias_act(T *y, T *a, const T *b, size_t n, int out, int act, dropk d, int vec)
{
    dpar(d);
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (i0 >= n)
        return;
    if (vec && i0 + VE <= n) {
        float v[VE];
        ldve(v, y + i0);
        if (b) {
            for (int k = 0; k < VE; k++)
                v[k] = rnd(v[k] + ldv(b, (i0 + k) % (size_t)out), y);
            stve(y + i0, v);
        }
        if (a) {
            for (int k = 0; k < VE; k++)
                v[k] = dropv(d, d.base + i0 + k, act_f(v[k], act));
            stve(a + i0, v);
        }
        return;
    }
    for (size_t i = i0; i < n && i < i0 + VE; i++) {
        float v = ldv(y, i);
        if (b) {
            v = rnd(v + ldv(b, i % (size_t)out), y);
            stv(y, i, v);
        }
        if (a)
            stv(a, i, dropv(d, d.base + i, act_f(v, act)));
    }
}

template <class T>
static void linear_fwd_t(cu_priv *pr, tupe_dev *y, tupe_dev *a, const tupe_dev *x,
                         const tupe_dev *W, const tupe_dev *b, int N, int in, int out, int act,
                         const tupe_drop *drop)
{
    cudaDataType_t t = dtype_of<T>::v;
    /* The bias in the product's epilogue (in fp32, before y's one rounding) where cuBLASLt
     * has it; the activation (erf GELU, which cuBLASLt's tanh-form GELU epilogue is not) and
     * dropout in k_bias_act. */
    if (gemm_ep(pr, 0, 1, N, out, in, 1.0f, x, in, 0, W, in, 0, 0.0f, y, out, 0, 1, t, t,
                b ? CUBLASLT_EPILOGUE_BIAS : 0, (void *)b))
        b = NULL;
    T *av = (act != TUPE_ACT_NONE && a) ? (T *)a : NULL;
    if (pr->err || (!b && !av))
        return;
    size_t n = (size_t)N * out;
    dropk dk = av ? drop_bits(pr, drop, n) : mkdrop(NULL);
    int vec = al16(y) && (!av || al16(av));
    k_bias_act<T><<<nblocks((n + VE - 1) / VE, 256), 256, 0, pr->s>>>((T *)y, av, (const T *)b, n, out, act, dk, vec);
    LAUNCHED("k_bias_act");
}

void cu_linear_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *a, const tupe_dev *x,
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

template <class T>
void colsums(cu_priv *pr, T *dg, T *db, const T *dy, const T *xh, int N, int D, rowsel sel)
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

template void colsums<float>(cu_priv *, float *, float *, const float *, const float *, int, int,
                             rowsel);
template void colsums<bf16>(cu_priv *, bf16 *, bf16 *, const bf16 *, const bf16 *, int, int,
                            rowsel);

/* y[i] += x[i] (x a bias gradient from an epilogue, rounded once to T there). */
template <class T> __global__ void k_add_vec(T *y, const T *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        stv(y, i, ldv(y, i) + ldv(x, i));
}

template <class T>
static void linear_bwd_t(cu_priv *pr, tupe_dev *dx, double dx_beta, tupe_dev *dW, tupe_dev *db,
                         const tupe_dev *dy, const tupe_dev *x, const tupe_dev *W, int N, int in,
                         int out)
{
    cudaDataType_t t = dtype_of<T>::v;
    /* With dW, the bias gradient comes from the product's BGRADB epilogue (the column sums of
     * dy, which the product reads anyway) into scratch, then db += it; else column sums. */
    T *g = dW && db ? (T *)scratch(pr, SC_BG, (size_t)out * sizeof(T)) : NULL;
    if (dW && db && !g)
        return;
    int fused = dW && gemm_ep(pr, 1, 0, out, in, N, 1.0f, dy, out, 0, x, in, 0, 1.0f, dW, in, 0, 1,
                              t, t, db ? CUBLASLT_EPILOGUE_BGRADB : 0, g);
    if (fused) {
        k_add_vec<T><<<nblocks((size_t)out, 256), 256, 0, pr->s>>>((T *)db, g, out);
        LAUNCHED("k_add_vec");
    } else if (db) {
        colsums<T>(pr, NULL, (T *)db, (const T *)dy, NULL, N, out, all_rows());
    }
    if (dx)
        lt_gemm(pr, 0, 0, N, in, out, 1.0f, dy, out, 0, W, in, 0, (float)dx_beta, dx, in, 0, 1,
                t, t);
}

void cu_linear_bwd(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dW,
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

/* VE elements per thread (16-byte accesses when vec). */
template <class T> __global__ void k_act_fwd(T *a, const T *y, size_t n, int act, dropk d, int vec)
{
    dpar(d);
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (i0 >= n)
        return;
    if (vec && i0 + VE <= n) {
        float v[VE];
        ldve(v, y + i0);
        for (int k = 0; k < VE; k++)
            v[k] = dropv(d, d.base + i0 + k, act_f(v[k], act));
        stve(a + i0, v);
        return;
    }
    for (size_t i = i0; i < n && i < i0 + VE; i++)
        stv(a, i, dropv(d, d.base + i, act_f(ldv(y, i), act)));
}

/* The gradient of one element: returns d * act'(y) * k (k the dropout factor), *av the dropped
 * activation. */
__device__ __forceinline__ float act_grad(float dv, float yv, float k, int act, float *av)
{
    if (act == TUPE_ACT_GELU) {
        float g, v = tupe_gelu_fg_f(yv, &g);
        *av = v * k;
        return dv * (g * k);
    }
    if (act == TUPE_ACT_TANH) {
        float t = tanhf(yv);
        *av = t * k;
        return dv * ((1.0f - t * t) * k);
    }
    *av = yv * k;
    return dv * k;
}

template <class T>
__global__ void k_act_bwd(T *dd, T *a, const T *y, size_t n, int act, dropk d, int vec)
{
    dpar(d);
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (i0 >= n)
        return;
    if (vec && i0 + VE <= n) {
        float dv[VE], yv[VE], av[VE];
        ldve(dv, dd + i0);
        ldve(yv, y + i0);
        for (int k = 0; k < VE; k++)
            dv[k] = act_grad(dv[k], yv[k], dfac(d, d.base + i0 + k), act, &av[k]);
        if (a)
            stve(a + i0, av);
        stve(dd + i0, dv);
        return;
    }
    for (size_t i = i0; i < n && i < i0 + VE; i++) {
        float av, g = act_grad(ldv(dd, i), ldv(y, i), dfac(d, d.base + i), act, &av);
        if (a)
            stv(a, i, av);
        stv(dd, i, g);
    }
}

template <class T>
static void act_fwd_t(cu_priv *pr, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                      const tupe_drop *drop)
{
    dropk dk = drop_bits(pr, drop, n);
    int vec = al16(a) && al16(y);
    k_act_fwd<T><<<nblocks((n + VE - 1) / VE, 256), 256, 0, pr->s>>>((T *)a, (const T *)y, n, act, dk, vec);
    LAUNCHED("k_act_fwd");
}

template <class T>
static void act_bwd_t(cu_priv *pr, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                      const tupe_drop *drop)
{
    dropk dk = drop_bits(pr, drop, n);
    int vec = al16(d) && al16(y) && (!a || al16(a));
    k_act_bwd<T><<<nblocks((n + VE - 1) / VE, 256), 256, 0, pr->s>>>((T *)d, (T *)a, (const T *)y, n, act, dk, vec);
    LAUNCHED("k_act_bwd");
}

void cu_act_fwd(tupe_backend *be, tupe_dev *a, const tupe_dev *y, size_t n, int act,
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

void cu_act_bwd(tupe_backend *be, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n,
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
