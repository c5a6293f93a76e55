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
    if (dt == TUPE_DBL)
        return 8;
    return (dt & TUPE_WIDE) ? be->wsize : be->esize;
}

/* The next staging buffer, with room for `bytes`: waits only if the copy out of it (16 uploads
 * ago) is still running. NULL with the error kept. */
static void *stage_get(cu_priv *pr, size_t bytes, stage_buf **out)
{
    stage_buf *b = &pr->stage[pr->stage_next];
    pr->stage_next = (pr->stage_next + 1) % STAGE_SLOTS;
    if (b->busy) {
        cudaError_t q = cudaEventQuery(b->done);
        if (q == cudaErrorNotReady)
            q = cudaEventSynchronize(b->done);
        if (CK(q))
            return NULL;
        b->busy = 0;
    }
    if (!b->done && CK(cudaEventCreateWithFlags(&b->done, cudaEventDisableTiming)))
        return NULL;
    if (b->cap < bytes) {
        if (b->h)
            cudaFreeHost(b->h);
        b->h = NULL, b->cap = 0;
        size_t want = bytes < 4096 ? 4096 : bytes + bytes / 4;
        if (CK(cudaMallocHost(&b->h, want)))
            return NULL;
        b->cap = want;
    }
    *out = b;
    return b->h;
}

void stage_destroy(cu_priv *pr)
{
    for (int i = 0; i < STAGE_SLOTS; i++) {
        stage_buf *b = &pr->stage[i];
        if (b->done)
            cudaEventDestroy(b->done);
        if (b->h)
            cudaFreeHost(b->h);
        memset(b, 0, sizeof *b);
    }
}

/* Host values in the device's type (fp32 or f64 to bf16 rounded once, f64 to fp32). */
static void convert_up(void *tmp, const void *src, size_t n, int hd, int ds)
{
    if (hd == TUPE_I32 || hd == TUPE_DBL || (hd == TUPE_F32 && ds == 4)) {
        memcpy(tmp, src, n * (size_t)ds);
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
}

#define STAGE_MAX ((size_t)8 << 20) /* larger uploads (weights, once) wait for their copy */

void cu_upload(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int dt)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    int ds = dev_size(be, dt);
    int hd = dt & ~TUPE_WIDE;
    size_t bytes = n * (size_t)ds;
    /* The caller may reuse `src` at once (backend.h): the values (converted) go into a pinned
     * staging buffer, from which the copy runs on the stream while the host goes on (a step's
     * uploads: ids, lengths, masks). From pageable memory cudaMemcpyAsync may still be
     * reading after it returns (the runtime's "API synchronization behavior"), so a large
     * upload through a host buffer of its own waits for its copy. */
    if (bytes <= STAGE_MAX) {
        stage_buf *b = NULL;
        void *tmp = stage_get(pr, bytes, &b);
        if (!tmp)
            return;
        convert_up(tmp, src, n, hd, ds);
        if (!CK(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyHostToDevice, pr->s)) &&
            !CK(cudaEventRecord(b->done, pr->s)))
            b->busy = 1;
        return;
    }
    void *tmp = malloc(bytes);
    if (!tmp) {
        set_err(pr, "%s%s", "out of host memory for an upload", "");
        return;
    }
    convert_up(tmp, src, n, hd, ds);
    if (!CK(cudaMemcpyAsync(dst, tmp, bytes, cudaMemcpyHostToDevice, pr->s)))
        SYNC(pr);
    free(tmp);
}

void cu_download(tupe_backend *be, void *dst, const tupe_dev *src, size_t n, int dt)
{
    cu_priv *pr = PR(be);
    int hd = dt & ~TUPE_WIDE;
    size_t hsz = hd == TUPE_F64 || hd == TUPE_DBL ? 8 : 4;
    if (n == 0)
        return;
    if (pr->err) {
        memset(dst, 0, n * hsz);
        return;
    }
    int ds = dev_size(be, dt);
    if (hd == TUPE_I32 || hd == TUPE_DBL || (hd == TUPE_F32 && ds == 4)) {
        if (!CK(cudaMemcpyAsync(dst, src, n * hsz, cudaMemcpyDeviceToHost, pr->s)))
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

/* VE elements per thread (common.cuh: 16-byte accesses when vec). */
template <class T> __global__ void k_scale(T *x, size_t n, float s, int vec)
{
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (i0 >= n)
        return;
    if (vec && i0 + VE <= n) {
        float v[VE];
        ldve(v, x + i0);
        for (int k = 0; k < VE; k++)
            v[k] = v[k] * s;
        stve(x + i0, v);
        return;
    }
    for (size_t i = i0; i < n && i < i0 + VE; i++)
        stv(x, i, ldv(x, i) * s);
}

template <class T> static void scale_t(cu_priv *pr, tupe_dev *x, size_t n, double s)
{
    k_scale<T><<<nblocks((n + VE - 1) / VE, 256), 256, 0, pr->s>>>((T *)x, n, (float)s, al16(x));
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
/* y += x, VE elements per thread (16-byte accesses when vec). */
template <class T> __global__ void k_add(T *y, const T *x, size_t n, int vec)
{
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (i0 >= n)
        return;
    if (vec && i0 + VE <= n) {
        float a[VE], b[VE];
        ldve(a, y + i0);
        ldve(b, x + i0);
        for (int k = 0; k < VE; k++)
            a[k] = a[k] + b[k];
        stve(y + i0, a);
        return;
    }
    for (size_t i = i0; i < n && i < i0 + VE; i++)
        stv(y, i, ldv(y, i) + ldv(x, i));
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
    int vec = al16(y) && al16(x);
    unsigned nb = nblocks((n + VE - 1) / VE, 256);
    if (pr->bf16)
        k_add<bf16><<<nb, 256, 0, pr->s>>>((bf16 *)y, (const bf16 *)x, n, vec);
    else
        k_add<float><<<nb, 256, 0, pr->s>>>((float *)y, (const float *)x, n, vec);
    LAUNCHED("k_add");
}
