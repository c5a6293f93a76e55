/* Flash attention: the attention without its [B,H,T,T] tensors. The forward pass keeps the
 * log-sum-exp of every row (lse [B,H,T], fp32) in place of the probabilities; the backward
 * pass recomputes them tile by tile. Per (b, h): S = alpha Q K^T + bias (TUPE's and BERT-R's
 * additive per-head bias, bias_bstride apart between sequences, 0 when shared), keys
 * j >= lengths[b] masked (their tiles skipped), P = softmax(S), ctx = drop(P) V, the dropout
 * decisions the CPU's (element ((b H + h) T + i) T + j of the site, one Philox call per 8).
 * Deterministic without atomics: dQ is summed over the key tiles by the block of its query
 * rows; dK, dV and the bias gradient by the block of their key tiles, which takes the
 * sequences one after the other, so G[h] += dS[0] + dS[1] + ... in the order of b (as the
 * materialised path's bias_grad); with a per-sequence bias, G[b] += dS[b].
 *
 * Tiles of t query rows and t keys, t = 16 for heads up to 125 wide (smaller beyond), in
 * shared memory through tile.cuh; one block of FL_THREADS threads per tile. */
#include "attention.cuh"
#include "tile.cuh"

#define FL_THREADS 128

/* Shared memory of each kernel for tiles of side t and heads of dh (floats, below). */
static size_t fl_fwd_smem(int t, int dh) { return (size_t)(4 * t * dh + t * t + 3 * t) * 4; }
static size_t fl_bwd_q_smem(int t, int dh) { return (size_t)(5 * t * dh + 2 * t * t + 2 * t) * 4; }
static size_t fl_bwd_kv_smem(int t, int dh) { return (size_t)(6 * t * dh + 2 * t * t + 2 * t) * 4; }

/* The tile side for heads of dh, such that the backward's tiles fit in 48 KiB. */
static int fl_tile(int dh)
{
    int t = 16;
    while (t > 1 && fl_bwd_kv_smem(t, dh) > 48 * 1024)
        t /= 2;
    return t;
}

/* S[r][c] += bias of (i0 + r, j0 + c) for r < nr, c < nc; -inf for keys c >= nc (beyond the
 * sequence or the tile); rows r >= nr are left (their Q rows are zero). */
__device__ inline void fl_bias_mask(float *S, int t, const float *bias, int T_, int i0, int j0,
                                    int nr, int nc)
{
    for (int x = threadIdx.x; x < t * t; x += blockDim.x) {
        int r = x / t, c = x % t;
        if (c >= nc)
            S[x] = -INFINITY;
        else if (bias && r < nr)
            S[x] += bias[(size_t)(i0 + r) * T_ + j0 + c];
    }
}

/* The dropout of a tile: A[r][c] *= the dropout factor of element g0 + r T + c for r < nr,
 * c < nc; one Philox call per block of 8 elements. */
__device__ inline void fl_drop(float *A, int t, const dropk &d, uint64_t g0, int T_,
                               int nr, int nc)
{
    int nq = t / 8 + 2; /* blocks of 8 a row of t elements can touch */
    for (int x = threadIdx.x; x < nr * nq; x += blockDim.x) {
        int r = x / nq, q = x % nq;
        uint64_t gr = g0 + (uint64_t)r * T_, blk = (gr >> 3) + (uint64_t)q;
        if (blk * 8 >= gr + (uint64_t)nc)
            continue;
        uint32_t bits = keep8(d, blk);
        for (int k = 0; k < 8; k++) {
            uint64_t g = blk * 8 + (uint64_t)k;
            if (g < gr || g >= gr + (uint64_t)nc)
                continue;
            TUPE_DEV_COUNT("dropout_decisions", 1);
            float f = (bits >> k) & 1u ? d.sc : 0.0f;
            int c = (int)(g - gr);
            A[r * t + c] *= f;
        }
    }
}

/* With dropout, per element of a tile: dS = P (drop'(dP) - dot) in dP, from the undropped P,
 * then P = drop(P) (for dV); the same Philox call decides both. Outside the rows and keys P is
 * 0, and so is dS. */
__device__ inline void fl_drop_grad(float *P, float *dP, const float *dr, int t, const dropk &d,
                                    uint64_t g0, int T_, int nr, int nc)
{
    for (int x = threadIdx.x; x < t * t; x += blockDim.x)
        if (x / t >= nr || x % t >= nc)
            dP[x] = 0.0f;
    int nq = t / 8 + 2;
    for (int x = threadIdx.x; x < nr * nq; x += blockDim.x) {
        int r = x / nq, q = x % nq;
        uint64_t gr = g0 + (uint64_t)r * T_, blk = (gr >> 3) + (uint64_t)q;
        if (blk * 8 >= gr + (uint64_t)nc)
            continue;
        uint32_t bits = keep8(d, blk);
        for (int k = 0; k < 8; k++) {
            uint64_t g = blk * 8 + (uint64_t)k;
            if (g < gr || g >= gr + (uint64_t)nc)
                continue;
            TUPE_DEV_COUNT("dropout_decisions", 1);
            float f = (bits >> k) & 1u ? d.sc : 0.0f;
            int e = r * t + (int)(g - gr);
            dP[e] = P[e] * (dP[e] * f - dr[r]);
            P[e] *= f;
        }
    }
}

/* ---- forward ------------------------------------------------------------------------------ */

/* One block per (query tile, h, b). */
template <class T>
__global__ void k_flash_fwd(T *ctx, float *lse, const T *qkv, const float *bias,
                            size_t bstride, const int32_t *lens, int H, int T_, int dh, int t,
                            float alpha, dropk d)
{
    dpar(d);
    extern __shared__ float sm[];
    float *Qs = sm, *Ks = Qs + t * dh, *Vs = Ks + t * dh, *Os = Vs + t * dh, *S = Os + t * dh;
    float *mr = S + t * t, *lr = mr + t, *cr = lr + t;
    int i0 = blockIdx.x * t, h = blockIdx.y, b = blockIdx.z;
    int D = H * dh, ld = 3 * D, L = lens[b], nr = min(t, T_ - i0);
    const T *q = qkv + (size_t)b * T_ * ld + (size_t)h * dh;
    const float *bb = bias ? bias + (size_t)b * bstride + (size_t)h * T_ * T_ : NULL;
    tile_copy(Qs, dh, q + (size_t)i0 * ld, (size_t)ld, t, nr, dh);
    for (int x = threadIdx.x; x < t * dh; x += blockDim.x)
        Os[x] = 0;
    if ((int)threadIdx.x < t) {
        mr[threadIdx.x] = -INFINITY;
        lr[threadIdx.x] = 0;
    }
    uint64_t g0 = d.base + (((size_t)b * H + h) * T_ + i0) * (size_t)T_;
    for (int j0 = 0; j0 < L; j0 += t) { /* key tiles past the sequence's length: skipped */
        int nc = min(t, L - j0);
        tile_copy(Ks, dh, q + D + (size_t)j0 * ld, (size_t)ld, t, nc, dh);
        tile_copy(Vs, dh, q + 2 * D + (size_t)j0 * ld, (size_t)ld, t, nc, dh);
        tile_wait();
        tile_mma_nt(S, t, Qs, dh, Ks, dh, t, t, dh, alpha, false);
        tile_wait();
        fl_bias_mask(S, t, bb, T_, i0, j0, nr, nc);
        tile_wait();
        if ((int)threadIdx.x < t) { /* the online softmax, a thread per row */
            int r = threadIdx.x;
            float *s = S + r * t, mx = mr[r], sum = 0;
            for (int c = 0; c < nc; c++)
                mx = fmaxf(mx, s[c]);
            for (int c = 0; c < t; c++) {
                float p = c < nc ? tupe_expf(s[c] - mx) : 0.0f;
                s[c] = p;
                sum += p;
            }
            float corr = tupe_expf(mr[r] - mx);
            lr[r] = lr[r] * corr + sum;
            mr[r] = mx;
            cr[r] = corr;
        }
        tile_wait();
        if (d.on) {
            fl_drop(S, t, d, g0 + (size_t)j0, T_, nr, nc);
            tile_wait();
        }
        tile_mma_nn(Os, dh, cr, S, t, Vs, dh, t, dh, t, 1.0f);
        tile_wait();
    }
    tile_wait(); /* no key tile at all: the rows' sums are another thread's */
    T *o = ctx + ((size_t)b * T_ + i0) * D + (size_t)h * dh;
    for (int x = threadIdx.x; x < nr * dh; x += blockDim.x) {
        int r = x / dh, c = x % dh;
        float l = lr[r];
        stv(o, (size_t)r * D + c, l > 0 ? Os[x] / l : 0.0f);
    }
    if ((int)threadIdx.x < nr) {
        float l = lr[threadIdx.x];
        lse[((size_t)b * H + h) * T_ + i0 + threadIdx.x] = l > 0 ? mr[threadIdx.x] + logf(l) : 0.0f;
    }
}

/* ---- backward ----------------------------------------------------------------------------- */

/* The gradient of a tile's scores: with Qs, dOs, Ks, Vs loaded, lr the rows' lse and dr their
 * dot(dO, O): P = exp(S - lse) (0 beyond the keys), dP = dO V^T, both dropped as the forward
 * dropped P (Pd = drop(P), dPd = drop'(dP)); dS = P (dPd - dot), in dP; P becomes Pd. */
__device__ inline void fl_scores_grad(float *P, float *dP, const float *Qs, const float *dOs,
                                      const float *Ks, const float *Vs, const float *lr,
                                      const float *dr, const float *bb, int T_, int i0, int j0,
                                      int nr, int nc, int t, int dh, float alpha, const dropk &d,
                                      uint64_t g0)
{
    tile_mma_nt(P, t, Qs, dh, Ks, dh, t, t, dh, alpha, false);
    tile_mma_nt(dP, t, dOs, dh, Vs, dh, t, t, dh, 1.0f, false);
    tile_wait();
    fl_bias_mask(P, t, bb, T_, i0, j0, nr, nc);
    tile_wait();
    for (int x = threadIdx.x; x < t * t; x += blockDim.x) {
        int r = x / t, c = x % t;
        P[x] = r < nr && c < nc ? tupe_expf(P[x] - lr[r]) : 0.0f;
    }
    tile_wait();
    if (d.on) {
        fl_drop_grad(P, dP, dr, t, d, g0, T_, nr, nc);
    } else {
        for (int x = threadIdx.x; x < t * t; x += blockDim.x)
            dP[x] = P[x] * (dP[x] - dr[x / t]);
    }
    tile_wait();
}

/* The rows' lse and dot(dO, O) of query tile i0 of (b, h). */
template <class T>
__device__ inline void fl_rows(float *lr, float *dr, const float *lse, const T *ctx,
                               const T *dctx, int b, int h, int H, int T_, int dh, int i0, int nr,
                               int t)
{
    int D = H * dh;
    if ((int)threadIdx.x < t) {
        int r = threadIdx.x;
        float s = 0, l = 0;
        if (r < nr) {
            size_t o = ((size_t)b * T_ + i0 + r) * D + (size_t)h * dh;
            for (int c = 0; c < dh; c++)
                s += ldv(dctx, o + c) * ldv(ctx, o + c);
            l = lse[((size_t)b * H + h) * T_ + i0 + r];
        }
        dr[r] = s;
        lr[r] = l;
    }
}

/* dQ: one block per (query tile, h, b), summing over the key tiles in order. */
template <class T>
__global__ void k_flash_dq(T *dqkv, const float *lse, const T *ctx, const T *dctx, const T *qkv,
                           const float *bias, size_t bstride, const int32_t *lens, int H, int T_,
                           int dh, int t, float alpha, dropk d)
{
    dpar(d);
    extern __shared__ float sm[];
    float *Qs = sm, *dOs = Qs + t * dh, *Ks = dOs + t * dh, *Vs = Ks + t * dh;
    float *dQs = Vs + t * dh, *P = dQs + t * dh, *dP = P + t * t, *lr = dP + t * t, *dr = lr + t;
    int i0 = blockIdx.x * t, h = blockIdx.y, b = blockIdx.z;
    int D = H * dh, ld = 3 * D, L = lens[b], nr = min(t, T_ - i0);
    const T *q = qkv + (size_t)b * T_ * ld + (size_t)h * dh;
    const float *bb = bias ? bias + (size_t)b * bstride + (size_t)h * T_ * T_ : NULL;
    tile_copy(Qs, dh, q + (size_t)i0 * ld, (size_t)ld, t, nr, dh);
    tile_copy(dOs, dh, dctx + ((size_t)b * T_ + i0) * D + (size_t)h * dh, (size_t)D, t, nr, dh);
    for (int x = threadIdx.x; x < t * dh; x += blockDim.x)
        dQs[x] = 0;
    fl_rows(lr, dr, lse, ctx, dctx, b, h, H, T_, dh, i0, nr, t);
    uint64_t g0 = d.base + (((size_t)b * H + h) * T_ + i0) * (size_t)T_;
    for (int j0 = 0; j0 < L; j0 += t) {
        int nc = min(t, L - j0);
        tile_copy(Ks, dh, q + D + (size_t)j0 * ld, (size_t)ld, t, nc, dh);
        tile_copy(Vs, dh, q + 2 * D + (size_t)j0 * ld, (size_t)ld, t, nc, dh);
        tile_wait();
        fl_scores_grad(P, dP, Qs, dOs, Ks, Vs, lr, dr, bb, T_, i0, j0, nr, nc, t, dh, alpha, d,
                       g0 + (size_t)j0);
        tile_mma_nn(dQs, dh, NULL, dP, t, Ks, dh, t, dh, t, alpha);
        tile_wait();
    }
    T *o = dqkv + ((size_t)b * T_ + i0) * ld + (size_t)h * dh;
    for (int x = threadIdx.x; x < nr * dh; x += blockDim.x)
        stv(o, (size_t)(x / dh) * ld + x % dh, dQs[x]);
}

/* dK, dV and the bias gradient: one block per (key tile, h), over the sequences in order and,
 * in each, over its query tiles in order. */
template <class T>
__global__ void k_flash_dkv(T *dqkv, float *G, const float *lse, const T *ctx, const T *dctx,
                            const T *qkv, const float *bias, size_t bstride,
                            const int32_t *lens, int B, int H, int T_, int dh, int t, float alpha,
                            dropk d)
{
    dpar(d);
    extern __shared__ float sm[];
    float *Ks = sm, *Vs = Ks + t * dh, *dKs = Vs + t * dh, *dVs = dKs + t * dh;
    float *Qs = dVs + t * dh, *dOs = Qs + t * dh, *P = dOs + t * dh, *dP = P + t * t;
    float *lr = dP + t * t, *dr = lr + t;
    int j0 = blockIdx.x * t, h = blockIdx.y;
    int D = H * dh, ld = 3 * D, nk = min(t, T_ - j0);
    for (int b = 0; b < B; b++) {
        int L = lens[b], nc = min(nk, L - j0);
        const T *q = qkv + (size_t)b * T_ * ld + (size_t)h * dh;
        T *dk = dqkv + ((size_t)b * T_ + j0) * ld + D + (size_t)h * dh;
        if (nc <= 0) { /* keys past the sequence's length: no gradient */
            for (int x = threadIdx.x; x < nk * dh; x += blockDim.x) {
                stv(dk, (size_t)(x / dh) * ld + x % dh, 0.0f);
                stv(dk + D, (size_t)(x / dh) * ld + x % dh, 0.0f);
            }
            continue;
        }
        const float *bb = bias ? bias + (size_t)b * bstride + (size_t)h * T_ * T_ : NULL;
        float *g = G ? G + (size_t)b * bstride + (size_t)h * T_ * T_ : NULL;
        tile_wait(); /* the previous sequence's tiles are read out */
        tile_copy(Ks, dh, q + D + (size_t)j0 * ld, (size_t)ld, t, nc, dh);
        tile_copy(Vs, dh, q + 2 * D + (size_t)j0 * ld, (size_t)ld, t, nc, dh);
        for (int x = threadIdx.x; x < t * dh; x += blockDim.x)
            dKs[x] = dVs[x] = 0;
        for (int i0 = 0; i0 < T_; i0 += t) {
            int nr = min(t, T_ - i0);
            tile_wait();
            tile_copy(Qs, dh, q + (size_t)i0 * ld, (size_t)ld, t, nr, dh);
            tile_copy(dOs, dh, dctx + ((size_t)b * T_ + i0) * D + (size_t)h * dh, (size_t)D, t, nr,
                      dh);
            fl_rows(lr, dr, lse, ctx, dctx, b, h, H, T_, dh, i0, nr, t);
            tile_wait();
            uint64_t g0 = d.base + (((size_t)b * H + h) * T_ + i0) * (size_t)T_ + (size_t)j0;
            fl_scores_grad(P, dP, Qs, dOs, Ks, Vs, lr, dr, bb, T_, i0, j0, nr, nc, t, dh, alpha,
                           d, g0);
            tile_mma_tn(dVs, dh, P, t, dOs, dh, t, dh, t, 1.0f);
            tile_mma_tn(dKs, dh, dP, t, Qs, dh, t, dh, t, alpha);
            if (g)
                for (int x = threadIdx.x; x < nr * nc; x += blockDim.x) {
                    int r = x / nc, c = x % nc;
                    size_t o = (size_t)(i0 + r) * T_ + j0 + c;
                    g[o] += dP[r * t + c];
                }
        }
        tile_wait();
        for (int x = threadIdx.x; x < nk * dh; x += blockDim.x) {
            int r = x / dh, c = x % dh;
            stv(dk, (size_t)r * ld + c, r < nc ? dKs[x] : 0.0f);
            stv(dk + D, (size_t)r * ld + c, r < nc ? dVs[x] : 0.0f);
        }
    }
}

/* ---- host side ------------------------------------------------------------------------------ */

template <class T>
static void flash_fwd_t(cu_priv *pr, tupe_dev *ctx, tupe_dev *lse, const tupe_dev *qkv,
                        const tupe_dev *bias, size_t bstride, const int32_t *lengths, int B,
                        int T_, int H, int dh, double alpha, const tupe_drop *drop)
{
    int t = fl_tile(dh);
    dim3 grid((unsigned)((T_ + t - 1) / t), (unsigned)H, (unsigned)B);
    dropk dk = mkdrop(drop); /* decided in the kernel, one Philox call per 8 */
    k_flash_fwd<T><<<grid, FL_THREADS, fl_fwd_smem(t, dh), pr->s>>>((T *)ctx, (float *)lse, (const T *)qkv, (const float *)bias, bstride, lengths, H, T_, dh, t, (float)alpha, dk);
    LAUNCHED("k_flash_fwd");
}

template <class T>
static void flash_bwd_t(cu_priv *pr, tupe_dev *dqkv, tupe_dev *G, const tupe_dev *lse,
                        const tupe_dev *ctx, const tupe_dev *dctx, const tupe_dev *qkv,
                        const tupe_dev *bias, size_t bstride, const int32_t *lengths, int B,
                        int T_, int H, int dh, double alpha, const tupe_drop *drop)
{
    int t = fl_tile(dh);
    unsigned nt = (unsigned)((T_ + t - 1) / t);
    dropk dk = mkdrop(drop);
    dim3 gq(nt, (unsigned)H, (unsigned)B), gk(nt, (unsigned)H, 1);
    k_flash_dq<T><<<gq, FL_THREADS, fl_bwd_q_smem(t, dh), pr->s>>>((T *)dqkv, (const float *)lse, (const T *)ctx, (const T *)dctx, (const T *)qkv, (const float *)bias, bstride, lengths, H, T_, dh, t, (float)alpha, dk);
    if (LAUNCHED("k_flash_dq"))
        return;
    k_flash_dkv<T><<<gk, FL_THREADS, fl_bwd_kv_smem(t, dh), pr->s>>>((T *)dqkv, (float *)G, (const float *)lse, (const T *)ctx, (const T *)dctx, (const T *)qkv, (const float *)bias, bstride, lengths, B, H, T_, dh, t, (float)alpha, dk);
    LAUNCHED("k_flash_dkv");
}

void flash_fwd(cu_priv *pr, tupe_dev *ctx, tupe_dev *lse, const tupe_dev *qkv,
               const tupe_dev *bias, size_t bstride, const int32_t *lengths, int B, int T, int H,
               int dh, double alpha, const tupe_drop *drop)
{
    if (pr->bf16)
        flash_fwd_t<bf16>(pr, ctx, lse, qkv, bias, bstride, lengths, B, T, H, dh, alpha, drop);
    else
        flash_fwd_t<float>(pr, ctx, lse, qkv, bias, bstride, lengths, B, T, H, dh, alpha, drop);
}

void flash_bwd(cu_priv *pr, tupe_dev *dqkv, tupe_dev *G, const tupe_dev *lse, const tupe_dev *ctx,
               const tupe_dev *dctx, const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
               const int32_t *lengths, int B, int T, int H, int dh, double alpha,
               const tupe_drop *drop)
{
    if (pr->bf16)
        flash_bwd_t<bf16>(pr, dqkv, G, lse, ctx, dctx, qkv, bias, bstride, lengths, B, T, H, dh,
                          alpha, drop);
    else
        flash_bwd_t<float>(pr, dqkv, G, lse, ctx, dctx, qkv, bias, bstride, lengths, B, T, H, dh,
                           alpha, drop);
}
