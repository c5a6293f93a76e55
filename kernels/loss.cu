/* Losses: the cross-entropy over the vocabulary (one block per row: log-sum-exp, first
 * argmax) and its gradient; the squared error of regression. Sums in a fixed tree. */
#include "loss.cuh"

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

/* *oa += sum of a[0..n), *ob += sum of b[0..n) (ob may be NULL), fixed tree: the step's sums
 * stay on the device (backend.h). */
__global__ void k_sum2(const double *a, const double *b, int n, double *oa, double *ob)
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
        *oa += ta;
        if (ob)
            *ob += tb;
    }
}

void cu_xent_fwd(tupe_backend *be, tupe_dev *lse, const tupe_dev *logits, const int32_t *labels,
                 int M, int V, tupe_dev *loss, tupe_dev *correct)
{
    cu_priv *pr = PR(be);
    if (pr->err || M <= 0 || V <= 0)
        return;
    double *tmp = (double *)scratch(pr, SC_COL, 2 * (size_t)M * sizeof(double));
    if (!tmp)
        return;
    if (pr->bf16)
        k_xent_rows<bf16><<<(unsigned)M, BS, 0, pr->s>>>((float *)lse, tmp, tmp + M,
                                                         (const bf16 *)logits, labels, V);
    else
        k_xent_rows<float><<<(unsigned)M, BS, 0, pr->s>>>((float *)lse, tmp, tmp + M,
                                                          (const float *)logits, labels, V);
    LAUNCHED("k_xent_rows");
    k_sum2<<<1, BS, 0, pr->s>>>(tmp, tmp + M, M, (double *)loss, (double *)correct);
    LAUNCHED("k_sum2");
}

/* dlogits = scale softmax - scale onehot; in place allowed. */
__device__ __forceinline__ float xent_grad(float l, size_t x, const float *lse,
                                           const int32_t *labels, int V, float s)
{
    int m = (int)(x / V), v = (int)(x % V);
    float o = __fmul_rn(s, tupe_expf(l - lse[m]));
    return v == labels[m] ? o - s : o;
}

/* VE elements per thread (16-byte accesses when vec). */
template <class T>
__global__ void k_xent_bwd(T *d, const T *logits, const float *lse, const int32_t *labels, int V,
                           size_t n, float s, int vec)
{
    size_t x0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (x0 >= n)
        return;
    if (vec && x0 + VE <= n) {
        float l[VE];
        ldve(l, logits + x0);
        for (int k = 0; k < VE; k++)
            l[k] = xent_grad(l[k], x0 + k, lse, labels, V, s);
        stve(d + x0, l);
        return;
    }
    for (size_t x = x0; x < n && x < x0 + VE; x++)
        stv(d, x, xent_grad(ldv(logits, x), x, lse, labels, V, s));
}

void cu_xent_bwd(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                        const tupe_dev *lse, const int32_t *labels, int M, int V, double scale)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)M * V;
    if (pr->err || n == 0)
        return;
    int vec = al16(dlogits) && al16(logits);
    unsigned nb = nblocks((n + VE - 1) / VE, 256);
    if (pr->bf16)
        k_xent_bwd<bf16><<<nb, 256, 0, pr->s>>>((bf16 *)dlogits, (const bf16 *)logits, (const float *)lse, labels, V, n, (float)scale, vec);
    else
        k_xent_bwd<float><<<nb, 256, 0, pr->s>>>((float *)dlogits, (const float *)logits, (const float *)lse, labels, V, n, (float)scale, vec);
    LAUNCHED("k_xent_bwd");
}

/* *out += the summed squared error (a step's sum stays on the device) */
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
        *out += tot;
}

void cu_mse_fwd(tupe_backend *be, const tupe_dev *pred, const tupe_dev *target, int M,
                tupe_dev *loss)
{
    cu_priv *pr = PR(be);
    if (pr->err || M <= 0)
        return;
    if (pr->bf16)
        k_mse<bf16><<<1, BS, 0, pr->s>>>((const bf16 *)pred, (const float *)target, M,
                                         (double *)loss);
    else
        k_mse<float><<<1, BS, 0, pr->s>>>((const float *)pred, (const float *)target, M,
                                          (double *)loss);
    LAUNCHED("k_mse");
}

template <class T>
__global__ void k_mse_bwd(T *d, const T *p, const float *t, int M, double scale)
{
    int m = blockIdx.x * blockDim.x + threadIdx.x;
    if (m < M)
        stv(d, m, (float)(scale * 2.0 * ((double)ldv(p, m) - (double)t[m])));
}

void cu_mse_bwd(tupe_backend *be, tupe_dev *dpred, const tupe_dev *pred,
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
