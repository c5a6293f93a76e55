/* Attention: the table's operations, which take the flash attention (attention_flash.cu) when
 * the caller keeps the log-sum-exp, and the materialised one when it keeps the probabilities
 * (probes, the reference: TUPE_ATTN=materialised makes the backend ask for them).
 * Materialised: per head h, one strided-batched product over the B sequences (the stride
 * between sequences is uniform; between heads it is not, once probs is [B,H,T,T]). Scores and
 * their gradients are produced in fp32 (scratch SC_SF) even when the operands are bf16; the
 * softmax is softmax.cu's. The bias gradient sums dS over the batch in order. */
#include "attention.cuh"
#include "matmul.cuh"
#include "softmax.cuh"

template <class T>
static void attn_fwd_t(cu_priv *pr, tupe_dev *ctx, tupe_dev *probs, const tupe_dev *qkv,
                       const tupe_dev *bias, size_t bstride, const int32_t *lengths, int B,
                       int T_, int H, int dh, double alpha, const tupe_drop *drop)
{
    cudaDataType_t t = dtype_of<T>::v;
    int D = H * dh, ld = 3 * D;
    size_t TT = (size_t)T_ * T_, n = (size_t)B * H * TT;
    float *S = (float *)scratch(pr, SC_SF, n * sizeof(float));
    dropk dk = drop_bits(pr, drop, n);
    T *pd = dk.on ? (T *)scratch(pr, SC_PD, n * sizeof(T)) : NULL;
    if (!S || (dk.on && !pd))
        return;
    const T *Q = (const T *)qkv;
    for (int h = 0; h < H; h++) /* S[b,h] = alpha Q K^T */
        lt_gemm(pr, 0, 1, T_, T_, dh, (float)alpha, Q + (size_t)h * dh, ld, (long long)T_ * ld,
                Q + D + (size_t)h * dh, ld, (long long)T_ * ld, 0.0f, S + (size_t)h * TT, T_,
                (long long)H * TT, B, t, CUDA_R_32F);
    size_t rows = (size_t)B * H * T_;
    softmax_fwd<T>(pr, (T *)probs, pd, S, (const float *)bias, bstride, lengths, H, T_, rows, dk);
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
    dropk dk = drop_bits(pr, drop, n);
    T *pd = dk.on ? (T *)scratch(pr, SC_PD, n * sizeof(T)) : NULL;
    if (!S || (dk.on && !pd))
        return;
    const T *Q = (const T *)qkv, *dC = (const T *)dctx;
    T *dQ = (T *)dqkv;
    if (pd) {
        drop_probs<T>(pr, pd, (const T *)probs, lengths, H, T_, n, dk);
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
    softmax_bwd<T>(pr, (T *)probs, S, lengths, H, T_, rows, dk);
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

void cu_attn_fwd(tupe_backend *be, tupe_dev *ctx, tupe_dev *probs, tupe_dev *lse,
                 const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
                 const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                 const tupe_drop *drop, tupe_dev *scratch_)
{
    (void)scratch_;
    cu_priv *pr = PR(be);
    if (pr->err || B <= 0 || T <= 0 || H <= 0)
        return;
    if (!probs)
        flash_fwd(pr, ctx, lse, qkv, bias, bstride, lengths, B, T, H, dh, alpha, drop);
    else if (pr->bf16)
        attn_fwd_t<bf16>(pr, ctx, probs, qkv, bias, bstride, lengths, B, T, H, dh, alpha, drop);
    else
        attn_fwd_t<float>(pr, ctx, probs, qkv, bias, bstride, lengths, B, T, H, dh, alpha, drop);
}

static void bias_grad(cu_priv *pr, tupe_dev *G, const tupe_dev *dS, int B, int H, int T,
                      size_t bstride);

void cu_attn_bwd(tupe_backend *be, tupe_dev *dqkv, tupe_dev *G, tupe_dev *probs,
                 const tupe_dev *lse, const tupe_dev *ctx, const tupe_dev *dctx,
                 const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
                 const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                 const tupe_drop *drop, tupe_dev *scratch_)
{
    (void)scratch_;
    cu_priv *pr = PR(be);
    if (pr->err || B <= 0 || T <= 0 || H <= 0)
        return;
    if (!probs) {
        flash_bwd(pr, dqkv, G, lse, ctx, dctx, qkv, bias, bstride, lengths, B, T, H, dh, alpha,
                  drop);
        return;
    }
    if (pr->bf16)
        attn_bwd_t<bf16>(pr, dqkv, probs, dctx, qkv, lengths, B, T, H, dh, alpha, drop);
    else
        attn_bwd_t<float>(pr, dqkv, probs, dctx, qkv, lengths, B, T, H, dh, alpha, drop);
    if (G)
        bias_grad(pr, G, probs, B, H, T, bstride);
}

/* The attention's working buffers are the backend's own (they grow with B, not only T). */
size_t cu_attn_scratch(tupe_backend *be, int T)
{
    (void)be, (void)T;
    return 0;
}

/* G[h,i,j] += dS[b,h,i,j] for b in order (bstride 0); or G[b,h,i,j] += dS[b,h,i,j] at
 * G + b * bstride: n elements (H T T, or B H T T). */
template <class T>
__global__ void k_bias_grad(float *G, const T *dS, int B, size_t HTT, size_t bstride, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    if (bstride) {
        size_t b = i / HTT, e = i % HTT;
        G[b * bstride + e] += ldv(dS, i);
        return;
    }
    float g = G[i];
    for (int b = 0; b < B; b++)
        g += ldv(dS, (size_t)b * HTT + i);
    G[i] = g;
}

static void bias_grad(cu_priv *pr, tupe_dev *G, const tupe_dev *dS, int B, int H, int T,
                      size_t bstride)
{
    size_t HTT = (size_t)H * T * T, n = bstride ? (size_t)B * HTT : HTT;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_bias_grad<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)G, (const bf16 *)dS, B, HTT, bstride, n);
    else
        k_bias_grad<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)G, (const float *)dS, B, HTT, bstride, n);
    LAUNCHED("k_bias_grad");
}
