/* DeBERTa's disentangled terms: the content-to-position and position-to-content scores
 * (c2p[h] = Q_h PK_h^T, p2c[h] = K_h PQ_h^T, products of matmul.cu) gathered by relative row
 * into the attention's per-sequence bias, and the transpose of that gather into their
 * gradients. The gather's transpose sums, for one row of c2p (one query), the scores of that
 * query whose keys fall in each relative row: one thread per (row, relative row), its keys in
 * order, so the sums are in a fixed order without atomics. */
#include "disentangled.cuh"

template <class T>
__global__ void k_dis_bias_fwd(float *bias, const T *c2p, const T *p2c, const int32_t *idx,
                               int B, int T_, int H, int W, float s)
{
    size_t n = (size_t)B * H * T_ * T_;
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    size_t BT = (size_t)B * T_;
    int j = (int)(x % T_), i = (int)(x / T_ % T_), h = (int)(x / ((size_t)T_ * T_) % H);
    int b = (int)(x / ((size_t)H * T_ * T_));
    int c = idx[(size_t)i * T_ + j];
    float q = ldv(c2p, ((size_t)h * BT + (size_t)b * T_ + i) * W + c);
    float k = ldv(p2c, ((size_t)h * BT + (size_t)b * T_ + j) * W + c);
    bias[x] = s * (q + k);
}

/* dc2p[h, b*T+t, c] = s sum_j [idx(t, j) = c] G[b,h,t,j]; dp2c[h, b*T+t, c] = s sum_i
 * [idx(i, t) = c] G[b,h,i,t]. */
template <class T>
__global__ void k_dis_bias_bwd(T *dc2p, T *dp2c, const float *G, const int32_t *idx, int B,
                               int T_, int H, int W, float s)
{
    size_t n = (size_t)H * B * T_ * W;
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    int c = (int)(x % W);
    size_t row = x / W;                    /* h * B*T + b*T + t */
    int t = (int)(row % T_), b = (int)(row / T_ % B), h = (int)(row / ((size_t)B * T_));
    const float *g = G + ((size_t)b * H + h) * T_ * T_;
    float q = 0, k = 0;
    for (int j = 0; j < T_; j++)
        if (idx[(size_t)t * T_ + j] == c)
            q += g[(size_t)t * T_ + j];
    for (int i = 0; i < T_; i++)
        if (idx[(size_t)i * T_ + t] == c)
            k += g[(size_t)i * T_ + t];
    stv(dc2p, x, s * q);
    stv(dp2c, x, s * k);
}

void cu_dis_bias_fwd(tupe_backend *be, tupe_dev *bias, const tupe_dev *c2p, const tupe_dev *p2c,
                     const int32_t *idx, int B, int T, int H, int W, double s)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)B * H * T * T;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_dis_bias_fwd<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)bias, (const bf16 *)c2p, (const bf16 *)p2c, idx, B, T, H, W, (float)s);
    else
        k_dis_bias_fwd<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)bias, (const float *)c2p, (const float *)p2c, idx, B, T, H, W, (float)s);
    LAUNCHED("k_dis_bias_fwd");
}

void cu_dis_bias_bwd(tupe_backend *be, tupe_dev *dc2p, tupe_dev *dp2c, const tupe_dev *G,
                     const int32_t *idx, int B, int T, int H, int W, double s)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)H * B * T * W;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_dis_bias_bwd<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)dc2p, (bf16 *)dp2c, (const float *)G, idx, B, T, H, W, (float)s);
    else
        k_dis_bias_bwd<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)dc2p, (float *)dp2c, (const float *)G, idx, B, T, H, W, (float)s);
    LAUNCHED("k_dis_bias_bwd");
}
