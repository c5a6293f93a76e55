/* Positional terms: the [H,T,T] attention bias from TUPE's absolute correlation (with the
 * [CLS] reset) and from relative buckets, and its transpose into their gradients (buckets
 * through the sorted scatter-add of scatter.cu); BERT-Ad's positions added to Q and K; RoPE's
 * rotation of Q and K (and its inverse for the gradient). */
#include "position.cuh"
#include "scatter.cuh"

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

void cu_pos_bias_fwd(tupe_backend *be, tupe_dev *bias, const tupe_dev *A,
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

void cu_pos_bias_bwd(tupe_backend *be, tupe_dev *dA, tupe_dev *drel, const tupe_dev *G,
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

void cu_qk_pos_add(tupe_backend *be, tupe_dev *qkv, const tupe_dev *pq, const tupe_dev *pk,
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

void cu_qk_pos_grad(tupe_backend *be, tupe_dev *dpq, tupe_dev *dpk, const tupe_dev *dqkv,
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

/* One thread per rotated pair (row, Q or K head, pair): the angle's cosine and sine are
 * read from the wide table; the pair is rotated in fp32 and stored back. */
template <class T>
__global__ void k_rope(T *qkv, const float *rot, int T_, int D, int dh, int interleaved,
                       float sgn, size_t n)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= n)
        return;
    int half = dh / 2, pairs = D; /* 2D columns of Q and K hold D pairs */
    size_t r = x / pairs;
    int k = (int)(x % pairs), c0 = k / half * dh, t = k % half;
    const float *cs = rot + (r % T_) * dh;
    T *row = qkv + r * 3 * D;
    size_t i = (size_t)c0 + (interleaved ? 2 * t : t), j = i + (interleaved ? 1 : half);
    float a = ldv(row, i), b = ldv(row, j), c = cs[t], s = sgn * cs[half + t];
    stv(row, i, a * c - b * s);
    stv(row, j, b * c + a * s);
}

void cu_rope(tupe_backend *be, tupe_dev *qkv, const tupe_dev *rot, int B, int T, int D, int dh,
             int interleaved, int inverse)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)B * T * D;
    if (pr->err || n == 0)
        return;
    float sgn = inverse ? -1.0f : 1.0f;
    if (pr->bf16)
        k_rope<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)qkv, (const float *)rot, T, D,
                                                         dh, interleaved, sgn, n);
    else
        k_rope<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)qkv, (const float *)rot, T, D,
                                                          dh, interleaved, sgn, n);
    LAUNCHED("k_rope");
}
