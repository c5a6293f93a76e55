/* cuemu: cuBLASLt and cuBLAS matrix products through OpenBLAS sgemm, with the argument checks
 * of cublasLt.h. Arguments are checked when the call is made (as the library returns its
 * status then); the product runs on the call's stream. */
#include "cublasLt.h"
#include "cublas_v2.h"
#include "internal.h"

#include <cblas.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <mutex>
#include <set>
#include <vector>

struct cuemu_lt_handle {
    int device;
};
struct cuemu_blas_handle {
    int device;
    cudaStream_t s;
};
struct cuemu_lt_desc {
    cublasComputeType_t comp;
    cudaDataType_t scale;
    int ta, tb;
    int ep;           /* cublasLtEpilogue_t */
    const void *bias; /* BIAS_POINTER */
    int bias_t;       /* BIAS_DATA_TYPE: -1 (D's type) or a cudaDataType_t */
};
struct cuemu_lt_layout {
    cudaDataType_t t;
    uint64_t rows, cols;
    int64_t ld;
    int32_t batch;
    int64_t stride;
};
struct cuemu_lt_pref {
    uint64_t ws;
    uint32_t align[4]; /* promised pointer alignment of A, B, C, D */
};

namespace cuemu {

/* Live objects of every kind, so that a destroyed or foreign handle is reported. */
static std::mutex mu;
static std::set<const void *> live;

static void *keep(void *p)
{
    std::lock_guard<std::mutex> g(mu);
    live.insert(p);
    return p;
}
static bool alive(const void *p)
{
    std::lock_guard<std::mutex> g(mu);
    return p && live.count(p);
}
static void drop(const void *p)
{
    std::lock_guard<std::mutex> g(mu);
    live.erase(p);
}

static cublasStatus_t bad(cublasStatus_t st, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static cublasStatus_t bad(cublasStatus_t st, const char *file, int line, const char *fmt, ...)
{
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    report_error(file, line, "%s (status %d)", msg, (int)st);
    return st;
}

static size_t esize(cudaDataType_t t) { return t == CUDA_R_32F ? 4 : t == CUDA_R_16BF ? 2 : 0; }

/* fp32 to TF32 as the tensor cores take it: round to nearest, ties away, at 10 mantissa bits. */
static float tf32(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) != 0x7f800000u)
        u = (u + 0x1000u) & 0xffffe000u;
    memcpy(&f, &u, 4);
    return f;
}

static float rd(const void *p, cudaDataType_t t, size_t i)
{
    if (t == CUDA_R_32F)
        return ((const float *)p)[i];
    uint32_t u = (uint32_t)((const uint16_t *)p)[i] << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static void wr(void *p, cudaDataType_t t, size_t i, float f)
{
    if (t == CUDA_R_32F) {
        ((float *)p)[i] = f;
        return;
    }
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        u = 0x7fff0000u;
    else
        u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    ((uint16_t *)p)[i] = (uint16_t)(u >> 16);
}

/* A column-major matrix operand: rows x cols at ld, `batch` of them `stride` elements apart. */
struct mat {
    const void *p;
    cudaDataType_t t;
    int64_t rows, cols, ld, stride;
};

/* Elements from the first to the last one of all batches (0 for an empty matrix). */
static uint64_t span(const mat &x, int batch)
{
    if (x.rows == 0 || x.cols == 0)
        return 0;
    int64_t s = x.stride < 0 ? -x.stride : x.stride;
    return (uint64_t)((batch - 1) * s + (x.cols - 1) * x.ld + x.rows);
}

static const char *lowest(const mat &x, int batch)
{
    return (const char *)x.p + (x.stride < 0 ? (batch - 1) * x.stride : 0) * (int64_t)esize(x.t);
}

/* Marks the bytes of x's elements in `seen` (covering [lo, lo + seen.size())): returns 1 at
 * the first byte marked already. With `test`, only looks: 1 when one of them is marked. */
static int mark_elems(const mat &x, int batch, std::vector<unsigned char> &seen, uintptr_t lo,
                      bool test)
{
    size_t es = esize(x.t);
    for (int q = 0; q < batch; q++)
        for (int64_t c = 0; c < x.cols; c++)
            for (int64_t r = 0; r < x.rows; r++) {
                uintptr_t a = (uintptr_t)x.p + (size_t)((q * x.stride + c * x.ld + r) * (int64_t)es);
                for (size_t b = 0; b < es; b++) {
                    if (a + b < lo || a + b - lo >= seen.size())
                        continue;
                    unsigned char &s = seen[a + b - lo];
                    if (s)
                        return 1;
                    if (!test)
                        s = 1;
                }
            }
    return 0;
}

/* Whether output d shares an element with x (or, x == NULL, whether two batches of d share
 * one). Exact: interleaved layouts whose spans overlap but whose elements do not are fine. */
static int shares(const mat &d, const mat *x, int batch)
{
    uintptr_t dl = (uintptr_t)lowest(d, batch), dh = dl + span(d, batch) * esize(d.t);
    if (!x) {
        if (batch < 2)
            return 0;
        std::vector<unsigned char> seen(dh - dl);
        return mark_elems(d, batch, seen, dl, false);
    }
    uintptr_t xl = (uintptr_t)lowest(*x, batch), xh = xl + span(*x, batch) * esize(x->t);
    uintptr_t lo = dl > xl ? dl : xl, hi = dh < xh ? dh : xh;
    if (lo >= hi)
        return 0;
    std::vector<unsigned char> seen(hi - lo);
    mark_elems(d, batch, seen, lo, false);
    return mark_elems(*x, batch, seen, lo, true);
}

/* An epilogue of cuBLASLt (cublasLt.h): its kind, its vector and the vector's type. */
struct epi {
    int kind;
    const void *bias;
    cudaDataType_t t;
};
static const epi no_epi = {CUBLASLT_EPILOGUE_DEFAULT, NULL, CUDA_R_32F};

/* The one product: D = alpha op(A) op(B) + beta C, column-major, m x n, inner dimension k,
 * `batch` of them, then the epilogue e (checked by the caller). C may be D itself. Checked
 * now, computed on stream s. */
static cublasStatus_t gemm(const char *who, const char *file, int line, int ta, int tb,
                           int64_t m, int64_t n, int64_t k, float alpha, mat A, mat B,
                           float beta, mat C, mat D, int batch, cublasComputeType_t comp,
                           cudaStream_t s, epi e = no_epi)
{
    if (m < 0 || n < 0 || k < 0 || batch < 1)
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: m=%lld n=%lld k=%lld batch=%d",
                   who, (long long)m, (long long)n, (long long)k, batch);
    if (!esize(A.t) || A.t != B.t || !esize(C.t) || C.t != D.t)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: types A %d, B %d, C %d, D %d "
                   "(emulated: A = B in fp32 or bf16, C = D in fp32 or bf16)", who, A.t, B.t, C.t,
                   D.t);
    if (comp != CUBLAS_COMPUTE_32F &&
        !(comp == CUBLAS_COMPUTE_32F_FAST_TF32 && A.t == CUDA_R_32F))
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: compute type %d with inputs of "
                   "type %d", who, comp, A.t);
    const char *names[] = {"A", "B", "C", "D"};
    const mat *ms[] = {&A, &B, &C, &D};
    for (int i = 0; i < 4; i++)
        if (ms[i]->ld < (ms[i]->rows > 1 ? ms[i]->rows : 1))
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: leading dimension of %s "
                       "%lld < its %lld rows", who, names[i], (long long)ms[i]->ld,
                       (long long)ms[i]->rows);
    if (m == 0 || n == 0)
        return CUBLAS_STATUS_SUCCESS;
    char what[160];
    for (int i = 0; i < 4; i++) {
        if ((i < 2 && k == 0) || (i == 2 && beta == 0))
            continue; /* not read */
        snprintf(what, sizeof what, "%s: operand %s", who, names[i]);
        if (mem_check(lowest(*ms[i], batch), span(*ms[i], batch) * esize(ms[i]->t), what, file,
                      line))
            return CUBLAS_STATUS_EXECUTION_FAILED;
    }
    if (shares(D, NULL, batch))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: the %d batches of the output "
                   "overlap (stride %lld elements, ld %lld, %lld x %lld)", who, batch,
                   (long long)D.stride, (long long)D.ld, (long long)m, (long long)n);
    for (int i = 0; i < 3; i++) {
        if ((i < 2 && k == 0) || (i == 2 && (beta == 0 || (C.p == D.p && C.ld == D.ld &&
                                                           C.stride == D.stride))))
            continue;
        if (shares(D, ms[i], batch))
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: the output D overlaps "
                       "input %s", who, names[i]);
    }
    int r32 = comp == CUBLAS_COMPUTE_32F_FAST_TF32;
    static const int gemms = counter_id("gemms"), digest = counter_id("launch_digest"),
                     flops = counter_id("gemm_flops");
    counter_add(gemms, 1);
    counter_add(flops, 2 * (uint64_t)m * (uint64_t)n * (uint64_t)k * (uint64_t)batch);
    const uint64_t shape[4] = {(uint64_t)m, (uint64_t)n, (uint64_t)k, (uint64_t)batch};
    counter_mix(digest, "gemm", shape, 4);
    cudaError_t r = submit(s, who, file, line, [=]() {
        std::vector<float> a, b, acc((size_t)(m * n));
        for (int q = 0; q < batch; q++) {
            const mat *src[2] = {&A, &B};
            std::vector<float> *dst[2] = {&a, &b};
            for (int o = 0; o < 2 && k > 0; o++) { /* packed fp32 copies, ld = rows */
                const mat &x = *src[o];
                dst[o]->resize((size_t)(x.rows * x.cols));
                for (int64_t c = 0; c < x.cols; c++)
                    for (int64_t i = 0; i < x.rows; i++) {
                        float f = rd(x.p, x.t, (size_t)(q * x.stride + c * x.ld + i));
                        (*dst[o])[(size_t)(c * x.rows + i)] = r32 ? tf32(f) : f;
                    }
            }
            if (k > 0)
                cblas_sgemm(CblasColMajor, ta ? CblasTrans : CblasNoTrans,
                            tb ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha,
                            a.data(), (int)A.rows, b.data(), (int)B.rows, 0.0f, acc.data(),
                            (int)m);
            else
                std::fill(acc.begin(), acc.end(), 0.0f);
            if (e.kind == CUBLASLT_EPILOGUE_BGRADB) /* sums of op(B)'s columns, in k order */
                for (int64_t j = 0; j < n; j++) {
                    float g = 0;
                    for (int64_t p = 0; p < k; p++)
                        g += rd(B.p, B.t, (size_t)(tb ? p * B.ld + j : j * B.ld + p));
                    wr((void *)e.bias, e.t, (size_t)j, g);
                }
            for (int64_t j = 0; j < n; j++)
                for (int64_t i = 0; i < m; i++) {
                    float v = acc[(size_t)(j * m + i)];
                    if (beta != 0) /* C is not read when beta is 0: NaN there does not spread */
                        v += beta * rd(C.p, C.t, (size_t)(q * C.stride + j * C.ld + i));
                    if (e.kind == CUBLASLT_EPILOGUE_BIAS)
                        v += rd(e.bias, e.t, (size_t)i);
                    wr((void *)D.p, D.t, (size_t)(q * D.stride + j * D.ld + i), v);
                }
        }
    });
    return r == cudaSuccess ? CUBLAS_STATUS_SUCCESS : CUBLAS_STATUS_EXECUTION_FAILED;
}

/* Destroys a live object of the library; one that is not live is reported. */
template <class T>
static cublasStatus_t release(T *p, cublasStatus_t st, const char *who, const char *file,
                              int line)
{
    if (!alive(p))
        return bad(st, file, line, "%s: %p is not a live object (destroyed already?)", who,
                   (const void *)p);
    drop(p);
    delete p;
    return CUBLAS_STATUS_SUCCESS;
}

} // namespace cuemu

using namespace cuemu;

/* ---- cuBLAS -------------------------------------------------------------------------------- */

cublasStatus_t cublasCreate(cublasHandle_t *h, const char *file, int line)
{
    *h = NULL;
    if (device_ready() != cudaSuccess)
        return bad(CUBLAS_STATUS_NOT_INITIALIZED, file, line, "cublasCreate: no device");
    *h = (cublasHandle_t)keep(new cuemu_blas_handle{current_device(), 0});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy(cublasHandle_t h, const char *file, int line)
{
    return release(h, CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy", file, line);
}

cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s, const char *file, int line)
{
    if (!alive(h))
        return bad(CUBLAS_STATUS_NOT_INITIALIZED, file, line, "cublasSetStream: not a live "
                   "handle");
    h->s = s;
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType_t at,
                                          int lda, long long sa, const void *B, cudaDataType_t bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType_t ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t comp, cublasGemmAlgo_t algo,
                                          const char *file, int line)
{
    const char *who = "cublasGemmStridedBatchedEx";
    if (!alive(h))
        return bad(CUBLAS_STATUS_NOT_INITIALIZED, file, line, "%s: not a live handle", who);
    if ((ta != CUBLAS_OP_N && ta != CUBLAS_OP_T) || (tb != CUBLAS_OP_N && tb != CUBLAS_OP_T))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: operations %d, %d", who, ta, tb);
    if (algo != CUBLAS_GEMM_DEFAULT)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: algorithm %d", who, algo);
    if (!alpha || !beta)
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: NULL alpha or beta", who);
    mat a = {A, at, ta ? k : m, ta ? m : k, lda, sa};
    mat b = {B, bt, tb ? n : k, tb ? k : n, ldb, sb};
    mat c = {C, ct, m, n, ldc, sc};
    return gemm(who, file, line, ta == CUBLAS_OP_T, tb == CUBLAS_OP_T, m, n, k,
                *(const float *)alpha, a, b, *(const float *)beta, c, c, batch, comp, h->s);
}

/* ---- cuBLASLt ------------------------------------------------------------------------------ */

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h, const char *file, int line)
{
    *h = NULL;
    if (device_ready() != cudaSuccess)
        return bad(CUBLAS_STATUS_NOT_INITIALIZED, file, line, "cublasLtCreate: no device");
    *h = (cublasLtHandle_t)keep(new cuemu_lt_handle{current_device()});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtDestroy(cublasLtHandle_t h, const char *file, int line)
{
    return release(h, CUBLAS_STATUS_NOT_INITIALIZED, "cublasLtDestroy", file, line);
}

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t comp,
                                        cudaDataType_t scale, const char *file, int line)
{
    (void)file, (void)line;
    *d = (cublasLtMatmulDesc_t)keep(
        new cuemu_lt_desc{comp, scale, 0, 0, CUBLASLT_EPILOGUE_DEFAULT, NULL, -1});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d, const char *file, int line)
{
    return release(d, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulDescDestroy", file, line);
}

/* An int32 attribute's value, or -1 (reported) for a wrong size. */
static int attr_i32(const void *buf, size_t size, int32_t *v, const char *what, const char *file,
                    int line)
{
    if (size != sizeof(int32_t) || !buf) {
        bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: %zu bytes (expected 4)", what, size);
        return -1;
    }
    memcpy(v, buf, 4);
    return 0;
}

cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t size, const char *file, int line)
{
    const char *who = "cublasLtMatmulDescSetAttribute";
    if (!alive(d))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: not a live descriptor", who);
    int32_t v;
    switch (a) {
    case CUBLASLT_MATMUL_DESC_TRANSA:
    case CUBLASLT_MATMUL_DESC_TRANSB:
        if (attr_i32(buf, size, &v, "cublasLtMatmulDescSetAttribute(TRANS)", file, line))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (v != CUBLAS_OP_N && v != CUBLAS_OP_T)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(TRANS): %d", who, v);
        (a == CUBLASLT_MATMUL_DESC_TRANSA ? d->ta : d->tb) = v == CUBLAS_OP_T;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_POINTER_MODE:
        if (attr_i32(buf, size, &v, who, file, line))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (v == 0) /* host */
            return CUBLAS_STATUS_SUCCESS;
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: attribute %d = %d is not "
                   "emulated", who, a, v);
    case CUBLASLT_MATMUL_DESC_EPILOGUE:
        if (attr_i32(buf, size, &v, who, file, line))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (v != CUBLASLT_EPILOGUE_DEFAULT && v != CUBLASLT_EPILOGUE_BIAS &&
            v != CUBLASLT_EPILOGUE_BGRADB)
            return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s(EPILOGUE): epilogue %d is "
                       "not emulated (DEFAULT, BIAS and BGRADB are)", who, v);
        d->ep = v;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_POINTER:
        if (size != sizeof(void *) || !buf)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(BIAS_POINTER): %zu bytes "
                       "(expected %zu)", who, size, sizeof(void *));
        memcpy(&d->bias, buf, sizeof(void *));
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE:
        if (attr_i32(buf, size, &v, "cublasLtMatmulDescSetAttribute(BIAS_DATA_TYPE)", file, line))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (v != -1 && v != CUDA_R_32F && v != CUDA_R_16BF)
            return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s(BIAS_DATA_TYPE): type %d is "
                       "not emulated", who, v);
        d->bias_t = v;
        return CUBLAS_STATUS_SUCCESS;
    default:
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: attribute %d is not emulated",
                   who, a);
    }
}

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t,
                                          uint64_t rows, uint64_t cols, int64_t ld,
                                          const char *file, int line)
{
    (void)file, (void)line;
    *l = (cublasLtMatrixLayout_t)keep(new cuemu_lt_layout{t, rows, cols, ld, 1, 0});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l, const char *file, int line)
{
    return release(l, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatrixLayoutDestroy", file, line);
}

cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t size, const char *file,
                                                int line)
{
    const char *who = "cublasLtMatrixLayoutSetAttribute";
    if (!alive(l))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: not a live layout", who);
    int32_t v;
    switch (a) {
    case CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT:
        if (attr_i32(buf, size, &v, "cublasLtMatrixLayoutSetAttribute(BATCH_COUNT)", file, line))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (v < 1)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(BATCH_COUNT): %d", who, v);
        l->batch = v;
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET:
        if (size != sizeof(int64_t) || !buf)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(STRIDED_BATCH_OFFSET): %zu "
                       "bytes (expected 8)", who, size);
        memcpy(&l->stride, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    case CUBLASLT_MATRIX_LAYOUT_ORDER:
        if (attr_i32(buf, size, &v, who, file, line))
            return CUBLAS_STATUS_INVALID_VALUE;
        if (v == 0) /* CUBLASLT_ORDER_COL, the default */
            return CUBLAS_STATUS_SUCCESS;
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s(ORDER): order %d is not "
                   "emulated", who, v);
    default:
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: attribute %d is not emulated",
                   who, a);
    }
}

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p, const char *file,
                                              int line)
{
    (void)file, (void)line;
    /* cuBLASLt's defaults: no workspace, pointers assumed 256-byte aligned */
    *p = (cublasLtMatmulPreference_t)keep(new cuemu_lt_pref{0, {256, 256, 256, 256}});
    return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p, const char *file,
                                               int line)
{
    return release(p, CUBLAS_STATUS_INVALID_VALUE, "cublasLtMatmulPreferenceDestroy", file, line);
}

cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size,
                                                    const char *file, int line)
{
    const char *who = "cublasLtMatmulPreferenceSetAttribute";
    if (!alive(p))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: not a live preference", who);
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (size != sizeof(uint64_t) || !buf)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(MAX_WORKSPACE_BYTES): %zu "
                       "bytes (expected 8)", who, size);
        memcpy(&p->ws, buf, 8);
        return CUBLAS_STATUS_SUCCESS;
    }
    if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES &&
        a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        uint32_t v;
        if (size != sizeof v || !buf)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(MIN_ALIGNMENT): %zu bytes "
                       "(expected 4)", who, size);
        memcpy(&v, buf, 4);
        if (v == 0 || (v & (v - 1)))
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s(MIN_ALIGNMENT): %u is not a "
                       "power of 2", who, v);
        p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES] = v;
        return CUBLAS_STATUS_SUCCESS;
    }
    return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: attribute %d is not emulated", who,
               a);
}

/* The product a descriptor and its layouts describe (m, n, k), or a status when they do not
 * agree (reported). */
static cublasStatus_t shape(const char *who, const char *file, int line, cublasLtMatmulDesc_t op,
                            cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                            cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d, int64_t *m,
                            int64_t *n, int64_t *k)
{
    if (!alive(op) || !alive(a) || !alive(b) || !alive(c) || !alive(d))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: a descriptor or layout that is "
                   "NULL or not live", who);
    if (op->scale != CUDA_R_32F)
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: scale type %d is not emulated",
                   who, op->scale);
    *m = (int64_t)(op->ta ? a->cols : a->rows);
    *k = (int64_t)(op->ta ? a->rows : a->cols);
    int64_t kb = (int64_t)(op->tb ? b->cols : b->rows);
    *n = (int64_t)(op->tb ? b->rows : b->cols);
    if (kb != *k || (int64_t)c->rows != *m || (int64_t)c->cols != *n || d->rows != c->rows ||
        d->cols != c->cols)
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: op(A) %lldx%lld, op(B) "
                   "%lldx%lld, C %llux%llu, D %llux%llu do not agree", who, (long long)*m,
                   (long long)*k, (long long)kb, (long long)*n, (unsigned long long)c->rows,
                   (unsigned long long)c->cols, (unsigned long long)d->rows,
                   (unsigned long long)d->cols);
    if (a->batch != b->batch || a->batch != c->batch || c->batch != d->batch)
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: batch counts A %d, B %d, C %d, "
                   "D %d", who, a->batch, b->batch, c->batch, d->batch);
    return CUBLAS_STATUS_SUCCESS;
}

/* What an algorithm was chosen for, so that Matmul can tell it is used for that problem. */
static uint64_t signature(cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                          cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c,
                          cublasLtMatrixLayout_t d)
{
    uint64_t h = 1469598103934665603ull;
    auto mix = [&h](uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    mix((uint64_t)op->comp), mix((uint64_t)op->ta), mix((uint64_t)op->tb);
    mix((uint64_t)op->ep), mix((uint64_t)(int64_t)op->bias_t);
    for (cublasLtMatrixLayout_t l : {a, b, c, d}) {
        mix((uint64_t)l->t), mix(l->rows), mix(l->cols), mix((uint64_t)l->ld);
        mix((uint64_t)l->batch), mix((uint64_t)l->stride);
    }
    return h;
}

enum { ALGO_MAGIC = 0xc0e0a190 };

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *res, int *nres,
                                              const char *file, int line)
{
    const char *who = "cublasLtMatmulAlgoGetHeuristic";
    if (!alive(h))
        return bad(CUBLAS_STATUS_NOT_INITIALIZED, file, line, "%s: not a live handle", who);
    if (!nres || !res || requested < 1 || !alive(pref))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: requested %d, results %p, "
                   "count %p, preference %p", who, requested, (void *)res, (void *)nres,
                   (void *)pref);
    *nres = 0;
    int64_t m, n, k;
    cublasStatus_t st = shape(who, file, line, op, a, b, c, d, &m, &n, &k);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (!esize(a->t) || a->t != b->t || !esize(c->t) || c->t != d->t ||
        (op->comp != CUBLAS_COMPUTE_32F &&
         !(op->comp == CUBLAS_COMPUTE_32F_FAST_TF32 && a->t == CUDA_R_32F)))
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: types A %d, B %d, C %d, D %d "
                   "with compute type %d are not emulated", who, a->t, b->t, c->t, d->t,
                   op->comp);
    if (op->ep != CUBLASLT_EPILOGUE_DEFAULT &&
        (a->batch > 1 || (op->bias_t != -1 && op->bias_t != CUDA_R_32F && op->bias_t != d->t)))
        return bad(CUBLAS_STATUS_NOT_SUPPORTED, file, line, "%s: epilogue %d with %d batches "
                   "and bias type %d (D's %d) is not emulated (one product; D's type or fp32)",
                   who, op->ep, a->batch, op->bias_t, d->t);
    int noalgo = env_int("CUEMU_LT_NOALGO", 0);
    if (noalgo == 1) /* the two answers of "no algorithm" */
        return CUBLAS_STATUS_NOT_SUPPORTED;
    if (noalgo == 2)
        return CUBLAS_STATUS_SUCCESS;
    memset(res, 0, sizeof *res);
    res->algo.data[0] = ALGO_MAGIC;
    res->algo.data[1] = signature(op, a, b, c, d);
    for (int i = 0; i < 4; i++)
        res->algo.data[2 + i] = pref->align[i];
    res->workspaceSize = 0;
    res->state = CUBLAS_STATUS_SUCCESS;
    res->wavesCount = 1;
    *nres = 1;
    return CUBLAS_STATUS_SUCCESS;
}

static unsigned align_of(const void *p, int64_t stride_bytes)
{
    uintptr_t v = (uintptr_t)p | (uintptr_t)(stride_bytes < 0 ? -stride_bytes : stride_bytes);
    return v ? 1u << __builtin_ctzll((unsigned long long)v) : 1u << 30;
}

cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta, const void *C,
                              cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t s, const char *file, int line)
{
    const char *who = "cublasLtMatmul";
    if (!alive(h))
        return bad(CUBLAS_STATUS_NOT_INITIALIZED, file, line, "%s: not a live handle", who);
    int64_t m, n, k;
    cublasStatus_t st = shape(who, file, line, op, a, b, c, d, &m, &n, &k);
    if (st != CUBLAS_STATUS_SUCCESS)
        return st;
    if (!algo || algo->data[0] != ALGO_MAGIC)
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: an algorithm the heuristic did "
                   "not return (the emulator needs one: pass a result of "
                   "cublasLtMatmulAlgoGetHeuristic)", who);
    if (algo->data[1] != signature(op, a, b, c, d))
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: the algorithm was chosen for "
                   "another problem (descriptor or layouts changed since the heuristic)", who);
    const void *ptr[4] = {A, B, C, D};
    cublasLtMatrixLayout_t lay[4] = {a, b, c, d};
    for (int i = 0; i < 4; i++) {
        unsigned got = align_of(ptr[i], lay[i]->batch > 1 ? lay[i]->stride *
                                                                (int64_t)esize(lay[i]->t) : 0);
        if (got < algo->data[2 + i])
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: %c (%p, batch stride %lld) "
                       "is %u-byte aligned, but the preference promised %llu", who, "ABCD"[i],
                       ptr[i], (long long)lay[i]->stride, got,
                       (unsigned long long)algo->data[2 + i]);
    }
    if (!alpha || !beta)
        return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: NULL alpha or beta", who);
    if (ws_bytes && mem_check(ws, ws_bytes, "cublasLtMatmul workspace", file, line))
        return CUBLAS_STATUS_EXECUTION_FAILED;
    mat ma = {A, a->t, (int64_t)a->rows, (int64_t)a->cols, a->ld, a->stride};
    mat mb = {B, b->t, (int64_t)b->rows, (int64_t)b->cols, b->ld, b->stride};
    mat mc = {C, c->t, (int64_t)c->rows, (int64_t)c->cols, c->ld, c->stride};
    mat md = {D, d->t, (int64_t)d->rows, (int64_t)d->cols, d->ld, d->stride};
    epi e = {op->ep, op->bias, op->bias_t == -1 ? d->t : (cudaDataType_t)op->bias_t};
    if (e.kind != CUBLASLT_EPILOGUE_DEFAULT) {
        /* BIAS reads one element per row of D, BGRADB writes one per column */
        int64_t len = e.kind == CUBLASLT_EPILOGUE_BIAS ? m : n;
        mat v = {e.bias, e.t, len, 1, len, 0};
        if (!e.bias)
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: epilogue %d without a bias "
                       "pointer (CUBLASLT_MATMUL_DESC_BIAS_POINTER)", who, e.kind);
        if (len > 0 && mem_check(e.bias, (size_t)len * esize(e.t), "cublasLtMatmul bias vector",
                                 file, line))
            return CUBLAS_STATUS_EXECUTION_FAILED;
        if (e.kind == CUBLASLT_EPILOGUE_BGRADB && m > 0 && n > 0)
            for (const mat *x : {&md, &mb, &ma})
                if (shares(v, x, 1))
                    return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: the bias gradient "
                               "overlaps %s", who, x == &md ? "D" : x == &mb ? "B" : "A");
        if (e.kind == CUBLASLT_EPILOGUE_BIAS && m > 0 && n > 0 && shares(md, &v, 1))
            return bad(CUBLAS_STATUS_INVALID_VALUE, file, line, "%s: the output D overlaps the "
                       "bias", who);
    }
    return gemm(who, file, line, op->ta, op->tb, m, n, k, *(const float *)alpha, ma, mb,
                *(const float *)beta, mc, md, a->batch, op->comp, s, e);
}
