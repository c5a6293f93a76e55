/* The attention's softmax (one warp per row of scores, fp32 arithmetic, the key mask, the
 * additive bias of TUPE and BERT-R), the dropped probabilities, and the softmax's backward. */
#include "softmax.cuh"

/* One warp per row (b, h, i): P = softmax(S + bias[h,i]) over keys j < L, 0 beyond; probs = P;
 * pd = drop(P) when dropout is on. */
template <class T>
__global__ void k_softmax(T *probs, T *pd, const float *S, const float *bias, size_t bstride,
                          const int32_t *lens, int H, int T_, size_t rows, dropk d)
{
    dpar(d);
    size_t row = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) >> 5;
    int lane = threadIdx.x & 31;
    if (row >= rows)
        return;
    size_t bh = row / (size_t)T_;
    int i = (int)(row % (size_t)T_), h = (int)(bh % (size_t)H), b = (int)(bh / (size_t)H);
    int L = lens[b];
    const float *s = S + row * (size_t)T_;
    const float *bb = bias ? bias + (size_t)b * bstride + ((size_t)h * T_ + i) * T_ : NULL;
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
    dpar(d);
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
    dpar(d);
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
void softmax_fwd(cu_priv *pr, T *probs, T *pd, const float *S, const float *bias,
                 size_t bstride, const int32_t *lens, int H, int T_, size_t rows, dropk d)
{
    k_softmax<T><<<nblocks(rows * 32, 256), 256, 0, pr->s>>>(probs, pd, S, bias, bstride, lens, H, T_, rows, d);
    LAUNCHED("k_softmax");
}

template <class T>
void drop_probs(cu_priv *pr, T *pd, const T *probs, const int32_t *lens, int H, int T_, size_t n,
                dropk d)
{
    k_drop_probs<T><<<nblocks(n, 256), 256, 0, pr->s>>>(pd, probs, lens, H, T_, n, d);
    LAUNCHED("k_drop_probs");
}

template <class T>
void softmax_bwd(cu_priv *pr, T *probs, const float *dpd, const int32_t *lens, int H, int T_,
                 size_t rows, dropk d)
{
    k_softmax_bwd<T><<<nblocks(rows * 32, 256), 256, 0, pr->s>>>(probs, dpd, lens, H, T_,
                                                                  rows, d);
    LAUNCHED("k_softmax_bwd");
}

template void softmax_fwd<float>(cu_priv *, float *, float *, const float *, const float *,
                                 size_t, const int32_t *, int, int, size_t, dropk);
template void softmax_fwd<bf16>(cu_priv *, bf16 *, bf16 *, const float *, const float *, size_t,
                                const int32_t *, int, int, size_t, dropk);
template void drop_probs<float>(cu_priv *, float *, const float *, const int32_t *, int, int,
                                size_t, dropk);
template void drop_probs<bf16>(cu_priv *, bf16 *, const bf16 *, const int32_t *, int, int,
                               size_t, dropk);
template void softmax_bwd<float>(cu_priv *, float *, const float *, const int32_t *, int, int,
                                 size_t, dropk);
template void softmax_bwd<bf16>(cu_priv *, bf16 *, const float *, const int32_t *, int, int,
                                size_t, dropk);
