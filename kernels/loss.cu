/* Losses: the cross-entropy over the vocabulary (one block per row, read once: log-sum-exp,
 * first argmax) and its gradient; the squared error of regression. Sums in a fixed tree. */
#include "loss.cuh"

#include <limits.h>

/* The columns [0, V) of one row read once, VE consecutive elements per thread (16-byte loads
 * when vec): each thread keeps its running maximum, the sum of exp(l - maximum) rescaled
 * whenever the maximum grows, and the first column holding its maximum. The maximum is exact,
 * the sum within a few ulp of a two-pass one. */
template <class T>
__device__ __forceinline__ void xent_scan(const T *l, int V, int vec, float &mx, float &s,
                                          int &arg)
{
    mx = -INFINITY, s = 0, arg = V;
    size_t nread = 0;
    for (int c0 = threadIdx.x * VE; c0 < V; c0 += blockDim.x * VE) {
        float x[VE];
        int n = min(VE, V - c0);
        if (vec && n == VE)
            ldve(x, l + c0);
        else
            for (int k = 0; k < n; k++)
                x[k] = ldv(l, (size_t)(c0 + k));
        nread += (size_t)n;
        float cm = x[0];
        int ca = c0;
        for (int k = 1; k < n; k++)
            if (x[k] > cm)
                cm = x[k], ca = c0 + k;
        if (cm > mx) { /* a tie keeps the earlier column: a thread's columns increase */
            s = __fmul_rn(s, tupe_expf(mx - cm));
            mx = cm, arg = ca;
        }
        if (mx > -INFINITY)
            for (int k = 0; k < n; k++)
                s += tupe_expf(x[k] - mx);
    }
    TUPE_DEV_COUNT("xent_read_bytes", nread * sizeof(T));
}

/* The block's log-sum-exp and first argmax from the threads' (maximum, sum, column), combined
 * in a fixed tree: the maximum, then each sum rescaled to it, then the first column among the
 * threads holding it. */
__device__ __forceinline__ void xent_combine(float mx, float s, int arg, float *red, int *redi,
                                             float &z, int &first)
{
    float M = block_max(mx, red);
    float t = mx == M ? s : __fmul_rn(s, tupe_expf(mx - M));
    z = M + logf(block_sum(t, red));
    first = block_min_int(mx == M ? arg : INT_MAX, redi);
}

/* dlogits = scale softmax - scale onehot in columns [0, V) of rows of ld, 0 in [V, ld). */
__device__ __forceinline__ float xent_g(float l, int v, float z, int label, int V, float s)
{
    if (v >= V || label < 0) /* a pad column, or an ignored row (backend.h) */
        return 0.0f;
    float o = __fmul_rn(s, tupe_expf(l - z));
    return v == label ? o - s : o;
}

/* One block per row: the row's loss, whether its first maximal column is the label, and lse
 * (when not NULL). With d, the fused classifier: the gradient too, written over columns
 * [0, ld) of row m of d (which may be the logits) by a second pass of each thread over the
 * columns it read in the first, which the block has just read (from cache on a GPU): HBM
 * sees one read of each logit and one write of its gradient. */
template <class T>
__global__ void k_xent_rows(float *lse, double *loss, double *ok, T *d, const T *logits,
                            const int32_t *labels, int V, int ld, float sc, const double *snorm,
                            int vec)
{
    __shared__ float red[32];
    __shared__ int redi[32];
    int m = blockIdx.x, lab = labels[m];
    const T *l = logits + (size_t)m * ld;
    if (lab < 0) { /* an ignored row (backend.h): nothing read, loss 0, a gradient row of 0 */
        if (threadIdx.x == 0) {
            if (lse)
                lse[m] = 0.0f;
            loss[m] = 0.0;
            ok[m] = 0.0;
        }
        size_t nw = 0;
        for (int c = threadIdx.x; d && c < ld; c += blockDim.x, nw++)
            stv(d + (size_t)m * ld, (size_t)c, 0.0f);
        TUPE_DEV_COUNT("xent_write_bytes", nw * sizeof(T));
        return;
    }
    float mx, s, z;
    int arg;
    xent_scan(l, V, vec, mx, s, arg);
    /* the label's logit before any thread overwrites it (the barriers of xent_combine) */
    float ll = threadIdx.x == 0 ? ldv(l, (size_t)lab) : 0.0f;
    xent_combine(mx, s, arg, red, redi, z, arg);
    if (threadIdx.x == 0) {
        if (lse)
            lse[m] = z;
        loss[m] = (double)z - (double)ll;
        ok[m] = arg == lab ? 1.0 : 0.0;
    }
    if (!d)
        return;
    if (snorm) /* the divisor from the step's parameter block, as the host's 1.0 / norm */
        sc = (float)(1.0 / *snorm);
    T *o = d + (size_t)m * ld;
    size_t nread = 0, nw = 0;
    for (int c0 = threadIdx.x * VE; c0 < ld; c0 += blockDim.x * VE) {
        float x[VE];
        int n = min(VE, ld - c0), nv = max(0, min(n, V - c0));
        if (vec && nv == VE)
            ldve(x, l + c0);
        else
            for (int k = 0; k < nv; k++)
                x[k] = ldv(l, (size_t)(c0 + k));
        for (int k = 0; k < n; k++)
            x[k] = xent_g(k < nv ? x[k] : 0.0f, c0 + k, z, lab, V, sc);
        if (vec && n == VE)
            stve(o + c0, x);
        else
            for (int k = 0; k < n; k++)
                stv(o, (size_t)(c0 + k), x[k]);
        nread += (size_t)nv, nw += (size_t)n;
    }
    TUPE_DEV_COUNT("xent_reread_bytes", nread * sizeof(T));
    TUPE_DEV_COUNT("xent_write_bytes", nw * sizeof(T));
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

/* k_xent_rows over the M rows, then the sums of their losses and of their correct answers
 * added to the device's *loss and *correct. */
static void xent_rows(cu_priv *pr, tupe_dev *lse, tupe_dev *d, const tupe_dev *logits,
                      const int32_t *labels, int M, int V, int ld, double scale,
                      const tupe_dev *snorm, tupe_dev *loss, tupe_dev *correct)
{
    if (pr->err || M <= 0 || V <= 0)
        return;
    double *tmp = (double *)scratch(pr, SC_COL, 2 * (size_t)M * sizeof(double));
    if (!tmp)
        return;
    size_t es = pr->bf16 ? 2 : 4;
    int vec = al16(logits) && (!d || al16(d)) && (size_t)ld * es % 16 == 0;
    float *z = (float *)lse, sc = (float)scale;
    if (pr->bf16)
        k_xent_rows<bf16><<<(unsigned)M, BS, 0, pr->s>>>(z, tmp, tmp + M, (bf16 *)d, (const bf16 *)logits, labels, V, ld, sc, (const double *)snorm, vec);
    else
        k_xent_rows<float><<<(unsigned)M, BS, 0, pr->s>>>(z, tmp, tmp + M, (float *)d, (const float *)logits, labels, V, ld, sc, (const double *)snorm, vec);
    LAUNCHED("k_xent_rows");
    k_sum2<<<1, BS, 0, pr->s>>>(tmp, tmp + M, M, (double *)loss, (double *)correct);
    LAUNCHED("k_sum2");
}

void cu_xent_fwd(tupe_backend *be, tupe_dev *lse, const tupe_dev *logits, const int32_t *labels,
                 int M, int V, int ld, tupe_dev *loss, tupe_dev *correct)
{
    xent_rows(PR(be), lse, NULL, logits, labels, M, V, ld, 0, NULL, loss, correct);
}

void cu_xent_fused(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                   const int32_t *labels, int M, int V, int ld, double scale,
                   const tupe_dev *snorm, tupe_dev *loss, tupe_dev *correct)
{
    xent_rows(PR(be), NULL, dlogits, logits, labels, M, V, ld, scale, snorm, loss, correct);
}

/* xent_g at flat element x of rows of ld; in place allowed. */
__device__ __forceinline__ float xent_grad(float l, size_t x, const float *lse,
                                           const int32_t *labels, int V, int ld, float s)
{
    size_t m = x / (size_t)ld;
    return xent_g(l, (int)(x % (size_t)ld), lse[m], labels[m], V, s);
}

/* VE elements per thread (16-byte accesses when vec); the pad columns are written, not read. */
template <class T>
__global__ void k_xent_bwd(T *d, const T *logits, const float *lse, const int32_t *labels, int V,
                           int ld, size_t n, float s, int vec)
{
    size_t x0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (x0 >= n)
        return;
    int v0 = (int)(x0 % (size_t)ld);
    if (vec && x0 + VE <= n) {
        float l[VE];
        if (v0 + VE <= V)
            ldve(l, logits + x0);
        else
            for (int k = 0; k < VE; k++)
                l[k] = v0 + k < V ? ldv(logits, x0 + k) : 0.0f;
        for (int k = 0; k < VE; k++)
            l[k] = xent_grad(l[k], x0 + k, lse, labels, V, ld, s);
        TUPE_DEV_COUNT("xent_read_bytes", (size_t)max(0, min(VE, V - v0)) * sizeof(T));
        stve(d + x0, l);
        return;
    }
    for (size_t x = x0; x < n && x < x0 + VE; x++) {
        int v = (int)(x % (size_t)ld);
        if (v < V)
            TUPE_DEV_COUNT("xent_read_bytes", sizeof(T));
        stv(d, x, xent_grad(v < V ? ldv(logits, x) : 0.0f, x, lse, labels, V, ld, s));
    }
}

void cu_xent_bwd(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                 const tupe_dev *lse, const int32_t *labels, int M, int V, int ld, double scale)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)M * ld;
    if (pr->err || n == 0)
        return;
    /* whole 16-byte runs stay inside a row when ld is a multiple of VE */
    int vec = al16(dlogits) && al16(logits) && ld % VE == 0;
    unsigned nb = nblocks((n + VE - 1) / VE, 256);
    if (pr->bf16)
        k_xent_bwd<bf16><<<nb, 256, 0, pr->s>>>((bf16 *)dlogits, (const bf16 *)logits, (const float *)lse, labels, V, ld, n, (float)scale, vec);
    else
        k_xent_bwd<float><<<nb, 256, 0, pr->s>>>((float *)dlogits, (const float *)logits, (const float *)lse, labels, V, ld, n, (float)scale, vec);
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
