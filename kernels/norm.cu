/* Sums of squares in double, in a fixed tree (the gradient norm; deterministic): of a whole
 * buffer, and of each run of a buffer. */
#include "norm.cuh"

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

double cu_sumsq(tupe_backend *be, const tupe_dev *x, size_t n)
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

void sumsq_runs_dev(cu_priv *pr, const tupe_dev *x, size_t n, size_t part, double *d)
{
    size_t np = part ? (n + part - 1) / part : 0;
    if (pr->err || np == 0)
        return;
    if (pr->bf16)
        k_sumsq_runs<bf16><<<(unsigned)np, BS, 0, pr->s>>>((const bf16 *)x, n, part, d);
    else
        k_sumsq_runs<float><<<(unsigned)np, BS, 0, pr->s>>>((const float *)x, n, part, d);
    LAUNCHED("k_sumsq_runs");
}

void cu_sumsq_parts(tupe_backend *be, const tupe_dev *x, size_t n, size_t part, double *out)
{
    cu_priv *pr = PR(be);
    size_t np = part ? (n + part - 1) / part : 0;
    if (np == 0)
        return;
    double *d = (double *)scratch(pr, SC_RUNS, np * sizeof(double));
    sumsq_runs_dev(pr, x, n, part, d);
    if (pr->err || CK(cudaMemcpyAsync(out, d, np * sizeof(double), cudaMemcpyDeviceToHost, pr->s)) ||
        SYNC(pr))
        memset(out, 0, np * sizeof(double));
}

/* *out = v[0] + ... + v[n-1] by tupe_tree_sum_d's tree (pointwise.h), in place: level by
 * level, the same additions as the host's, so the same bits. One block. */
__global__ void k_tree_sum_d(double *v, int n, double *out)
{
    int m = 1;
    while (m < n)
        m <<= 1;
    for (m >>= 1; m >= 1; m >>= 1) {
        for (int c = threadIdx.x; c < m && c + m < n; c += blockDim.x)
            v[c] = v[c] + v[c + m];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        out[0] = n > 0 ? v[0] : 0.0;
}

void tree_sum_dev(cu_priv *pr, double *v, int n, double *out)
{
    if (pr->err)
        return;
    k_tree_sum_d<<<1, 1024, 0, pr->s>>>(v, n, out);
    LAUNCHED("k_tree_sum_d");
}
