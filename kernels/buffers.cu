/* Device memory (zeroed, 256-byte granules), host <-> device transfers with the conversions of
 * backend.h (fp32/f64 to bf16 rounded once), and element-wise operations on whole buffers. */
#include "buffers.cuh"

tupe_dev *cu_alloc(tupe_backend *be, size_t bytes)
{
    cu_priv *pr = PR(be);
    size_t n = (bytes + 255) / 256 * 256;
    if (n == 0)
        n = 256;
    void *p = NULL;
    if (cudaMalloc(&p, n) != cudaSuccess) {
        cudaGetLastError(); /* out of memory is reported by the NULL, not kept as an error */
        return NULL;
    }
    if (CK(cudaMemsetAsync(p, 0, n, pr->s))) {
        cudaFree(p);
        return NULL;
    }
    return (tupe_dev *)p;
}

void cu_free(tupe_backend *be, tupe_dev *p)
{
    cu_priv *pr = PR(be);
    if (!p)
        return;
    SYNC(pr);
    cudaFree(p);
}

static uint16_t f2bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u); /* NaN stays NaN */
    u += 0x7fffu + ((u >> 16) & 1u);          /* round to nearest even */
    return (uint16_t)(u >> 16);
}

/* d in fp32, rounded to odd (truncated, the last bit set when inexact): rounding that to bf16
 * rounds d once, as a direct conversion would (fp32 keeps more than 2 bits beyond bf16's 8);
 * d to fp32 to nearest, then to bf16, may round twice. */
static float f64_odd(double d)
{
    float f = (float)d;
    if ((double)f == d || f != f || isinf(f))
        return f;
    if (fabs((double)f) > fabs(d))
        f = nextafterf(f, 0.0f);
    uint32_t u;
    memcpy(&u, &f, 4);
    u |= 1u;
    memcpy(&f, &u, 4);
    return f;
}

static float bf2f(uint16_t b)
{
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Element size on the device of a transfer of this kind. */
static int dev_size(tupe_backend *be, int dt)
{
    if (dt == TUPE_I32)
        return 4;
    return (dt & TUPE_WIDE) ? be->wsize : be->esize;
}

void cu_upload(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int dt)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    int ds = dev_size(be, dt);
    int hd = dt & ~TUPE_WIDE;
    /* The caller may reuse `src` at once (backend.h), and the converted copy is freed below;
     * from pageable memory cudaMemcpyAsync may still be reading either after it returns (the
     * runtime's "API synchronization behavior": the staging may run on a worker thread), so
     * wait for the copy. The stream holds little here: the model checks (synchronizes) after
     * every forward and backward pass. */
    if (hd == TUPE_I32 || (hd == TUPE_F32 && ds == 4)) {
        if (!CK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyHostToDevice, pr->s)))
            SYNC(pr);
        return;
    }
    void *tmp = malloc(n * (size_t)ds);
    if (!tmp) {
        set_err(pr, "%s%s", "out of host memory for an upload", "");
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (ds == 4)
            ((float *)tmp)[i] = hd == TUPE_F64 ? (float)((const double *)src)[i]
                                               : ((const float *)src)[i];
        else
            ((uint16_t *)tmp)[i] = f2bf(hd == TUPE_F64 ? f64_odd(((const double *)src)[i])
                                                       : ((const float *)src)[i]);
    }
    if (!CK(cudaMemcpyAsync(dst, tmp, n * (size_t)ds, cudaMemcpyHostToDevice, pr->s)))
        SYNC(pr);
    free(tmp);
}

void cu_download(tupe_backend *be, void *dst, const tupe_dev *src, size_t n, int dt)
{
    cu_priv *pr = PR(be);
    int hd = dt & ~TUPE_WIDE;
    size_t hsz = hd == TUPE_F64 ? 8 : 4;
    if (n == 0)
        return;
    if (pr->err) {
        memset(dst, 0, n * hsz);
        return;
    }
    int ds = dev_size(be, dt);
    if (hd == TUPE_I32 || (hd == TUPE_F32 && ds == 4)) {
        if (!CK(cudaMemcpyAsync(dst, src, n * 4, cudaMemcpyDeviceToHost, pr->s)))
            SYNC(pr);
        if (pr->err)
            memset(dst, 0, n * hsz);
        return;
    }
    void *tmp = malloc(n * (size_t)ds);
    if (!tmp) {
        set_err(pr, "%s%s", "out of host memory for a download", "");
        memset(dst, 0, n * hsz);
        return;
    }
    if (!CK(cudaMemcpyAsync(tmp, src, n * (size_t)ds, cudaMemcpyDeviceToHost, pr->s)))
        SYNC(pr);
    if (pr->err) {
        memset(dst, 0, n * hsz);
        free(tmp);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        float f = ds == 4 ? ((const float *)tmp)[i] : bf2f(((const uint16_t *)tmp)[i]);
        if (hd == TUPE_F64)
            ((double *)dst)[i] = f;
        else
            ((float *)dst)[i] = f;
    }
    free(tmp);
}

void cu_zero(tupe_backend *be, tupe_dev *x, size_t n)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    CK(cudaMemsetAsync(x, 0, n * (size_t)be->esize, pr->s));
}

template <class T> __global__ void k_scale(T *x, size_t n, float s)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        stv(x, i, ldv(x, i) * s);
}

template <class T> static void scale_t(cu_priv *pr, tupe_dev *x, size_t n, double s)
{
    k_scale<T><<<nblocks(n, 256), 256, 0, pr->s>>>((T *)x, n, (float)s);
    LAUNCHED("k_scale");
}

void cu_scale(tupe_backend *be, tupe_dev *x, size_t n, double s)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        scale_t<bf16>(pr, x, n, s);
    else
        scale_t<float>(pr, x, n, s);
}
template <class T> __global__ void k_add(T *y, const T *x, size_t n, int acc)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        stv(y, i, acc ? ldv(y, i) + ldv(x, i) : ldv(x, i));
}

void cu_add(tupe_backend *be, tupe_dev *y, const tupe_dev *x, size_t n, int acc)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    if (!acc) {
        CK(cudaMemcpyAsync(y, x, n * (size_t)be->esize, cudaMemcpyDeviceToDevice, pr->s));
        return;
    }
    if (pr->bf16)
        k_add<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)y, (const bf16 *)x, n, acc);
    else
        k_add<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)y, (const float *)x, n, acc);
    LAUNCHED("k_add");
}
