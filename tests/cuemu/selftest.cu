/* cuemu's own tests (compiled by emu-nvcc, like the backend's kernels).
 *
 *   cuemu-selftest          runs every case in a child process of its own (a fault is sticky
 *                           for its process): the correct ones under every schedule, where
 *                           they must compute the exact expected results with no report; the
 *                           misuse ones once, where the report each announces (kind, the file
 *                           and line of the offending call, a phrase) must appear on stderr.
 *                           Prints "ok - cuemu/CASE ..." or "not ok - ..." per run and
 *                           "N passed, N failed".
 *   cuemu-selftest CASE     one case, in this process (what the children run)
 *
 * A case announces each report it provokes with EXPECT (the line of the call is taken where
 * EXPECT is written, on the same line as the call), so the check of file and line is exact. */
#include <cub/cub.cuh>
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "verdict.h"

/* ---- the child's side: expectations and checks ---------------------------------------------- */

static int failures;

/* "EXPECT KIND FILE:LINE TEXT" on stdout, once per line (kernels reach it from many threads). */
static void expect_at(const char *kind, const char *file, int line, const char *text)
{
    static std::mutex mu;
    static std::set<int> seen;
    std::lock_guard<std::mutex> g(mu);
    if (seen.insert(line).second)
        printf("EXPECT %s %s:%d %s\n", kind, file, line, text);
    fflush(stdout);
}
#define EXPECT(kind, text, call) (expect_at(kind, __FILE__, __LINE__, text), call)

#define CHECK(c)                                                                                 \
    do {                                                                                         \
        if (!(c)) {                                                                              \
            printf("FAILED %s:%d: %s\n", __FILE__, __LINE__, #c);                                \
            failures++;                                                                          \
        }                                                                                        \
    } while (0)
#define OK(call) CHECK((call) == cudaSuccess)

/* Device memory the case owns: freed when it ends (LeakSanitizer counts what is not). */
static std::vector<void *> owned;
template <class T> static void dmalloc(T **p, size_t bytes)
{
    OK(cudaMalloc(p, bytes));
    owned.push_back((void *)*p);
}
static void dfree(void *p)
{
    OK(cudaFree(p));
    for (size_t i = 0; i < owned.size(); i++)
        if (owned[i] == p)
            owned.erase(owned.begin() + (long)i);
}

template <class T> static T *dev(const std::vector<T> &h)
{
    T *p = NULL;
    dmalloc(&p, h.size() * sizeof(T));
    OK(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <class T> static std::vector<T> host(const T *p, size_t n)
{
    std::vector<T> h(n);
    OK(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

/* ---- kernels that are right ----------------------------------------------------------------- */

__device__ float warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* The backend's block reduction; without the leading barrier (racy), a warp that runs ahead
 * overwrites sh while a slower warp still reads the previous sum from it. */
__device__ float block_sum(float v, float *sh, bool lead)
{
    v = warp_sum(v);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    if (lead)
        __syncthreads();
    if (l == 0)
        sh[w] = v;
    __syncthreads();
    float t = 0;
    for (int i = 0; i < nw; i++)
        t += sh[i];
    return t;
}

__global__ void k_two_sums(float *out, const float *in, int racy)
{
    __shared__ float sh[32];
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    float a = in[i];
    float s1 = block_sum(a, sh, true);
    float s2 = block_sum(a * a, sh, !racy);
    out[2 * i] = s1; /* what every thread saw */
    out[2 * i + 1] = s2;
}

/* Shuffles of every kind and width, per-lane sources, a partial warp (48 threads: the second
 * warp has 16 lanes), divergent halves with disjoint masks, __syncwarp, a 64-bit value. */
__global__ void k_shuffles(int *out)
{
    int t = threadIdx.x, lane = t & 31;
    unsigned all = t < 32 ? 0xffffffffu : 0x0000ffffu;
    int v = t * 7 + 3;
    int *o = out + t * 10;
    o[0] = __shfl_sync(all, v, 5);
    o[1] = __shfl_sync(all, v, (lane * 3) & 15);
    o[2] = __shfl_up_sync(all, v, 3, 16);
    o[3] = __shfl_down_sync(all, v, 3, 16);
    o[4] = __shfl_xor_sync(all, v, 1);
    o[5] = __shfl_xor_sync(all, v, 8, 8);
    o[6] = __shfl_sync(all, v, lane + 1, 8);
    if (lane < 16)
        o[7] = __shfl_xor_sync(all & 0x0000ffffu, v, 2);
    else
        o[7] = __shfl_down_sync(0xffff0000u, v, 4);
    __syncwarp(all);
    double d = __shfl_xor_sync(all, t * 0.5 + 1e-9, 3, 16);
    o[8] = (int)(d * 2);
    o[9] = __shfl_sync(all, lane, 31, 16);
}

/* Expected value of a lane's shuffle, from the rules of the CUDA programming guide. */
static int shfl_src(int lane, int kind, int arg, int width)
{
    int seg = lane / width * width;
    switch (kind) {
    case 0: return seg + (arg % width + width) % width;          /* __shfl_sync */
    case 1: return lane - seg >= arg ? lane - arg : lane;        /* up */
    case 2: return lane - seg + arg < width ? lane + arg : lane; /* down */
    default: {                                                   /* xor */
        int s = lane ^ arg;
        return s / width > lane / width ? lane : s;
    }
    }
}

/* A transpose through a static shared tile (2-D blocks, 3-D grid), and a dynamic shared
 * buffer read crosswise (3-D blocks: warps are made of consecutive linear thread numbers). */
__global__ void k_tile(float *out, const float *in, int n)
{
    __shared__ float tile[16][17];
    const float *src = in + (size_t)blockIdx.z * n * n;
    float *dst = out + (size_t)blockIdx.z * n * n;
    int x = blockIdx.x * 16 + threadIdx.x, y = blockIdx.y * 16 + threadIdx.y;
    if (x < n && y < n)
        tile[threadIdx.y][threadIdx.x] = src[(size_t)y * n + x];
    __syncthreads();
    x = blockIdx.y * 16 + threadIdx.x, y = blockIdx.x * 16 + threadIdx.y;
    if (x < n && y < n)
        dst[(size_t)y * n + x] = tile[threadIdx.x][threadIdx.y];
}

__global__ void k_dyn3d(int *out)
{
    extern __shared__ int buf[];
    int lin = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
    int nt = blockDim.x * blockDim.y * blockDim.z;
    buf[lin] = threadIdx.x + 100 * threadIdx.y + 10000 * threadIdx.z + 1000000 * blockIdx.y;
    __syncthreads();
    int other = buf[(lin + 1) % nt];
    int next = __shfl_down_sync(0xffffffffu, lin, 1); /* blocks of 64: two full warps */
    out[(size_t)(blockIdx.y * gridDim.x + blockIdx.x) * nt + lin] = other * 4 + (next - lin);
}

__global__ void k_bf16(unsigned short *bits, float *back, const float *in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        __nv_bfloat16 h = __float2bfloat16_rn(in[i]);
        bits[i] = h.__x;
        back[i] = __bfloat162float(h);
    }
}

__global__ void k_add(float *x, float s, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] += s;
}

/* The last block to finish (by an integer count) writes the sum of every block's value, in
 * block order, and sets the count back to 0. */
__global__ void k_last_block_sum(float *out, float *part, unsigned *count, int reps)
{
    __shared__ unsigned last;
    for (int r = 0; r < reps; r++) /* some blocks take longer than others */
        __syncthreads();
    if (threadIdx.x == 0)
        part[blockIdx.x] = (float)(blockIdx.x * 3 + 1);
    __threadfence();
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last || threadIdx.x != 0)
        return;
    __threadfence();
    float t = 0;
    for (unsigned c = 0; c < gridDim.x; c++)
        t += part[c];
    out[0] = t;
    *count = 0;
}

/* ---- correct cases -------------------------------------------------------------------------- */

static void case_block_sums(void)
{
    int nb = 6, bs = 256;
    std::vector<float> in((size_t)nb * bs);
    for (size_t i = 0; i < in.size(); i++)
        in[i] = (float)((int)(i * 37 % 19) - 9); /* small integers: exact sums */
    float *din = dev(in), *dout;
    dmalloc(&dout, in.size() * 2 * sizeof(float));
    k_two_sums<<<nb, bs>>>(dout, din, 0);
    OK(cudaGetLastError());
    std::vector<float> o = host(dout, in.size() * 2);
    for (int b = 0; b < nb; b++) {
        float s1 = 0, s2 = 0;
        for (int i = 0; i < bs; i++)
            s1 += in[(size_t)b * bs + i], s2 += in[(size_t)b * bs + i] * in[(size_t)b * bs + i];
        for (int i = 0; i < bs; i++) {
            CHECK(o[2 * ((size_t)b * bs + i)] == s1);
            CHECK(o[2 * ((size_t)b * bs + i) + 1] == s2);
        }
    }
    dfree(din);
    dfree(dout);
}

/* Integer atomics: a grid's last block sums every block's value (twice: the count is back to
 * 0 after the first launch). */
static void case_atomics(void)
{
    int nb = 37;
    float *out, *part;
    unsigned *count;
    dmalloc(&out, sizeof(float));
    dmalloc(&part, nb * sizeof(float));
    dmalloc(&count, sizeof(unsigned));
    OK(cudaMemset(count, 0, sizeof(unsigned)));
    for (int rep = 0; rep < 2; rep++) {
        k_last_block_sum<<<nb, 64>>>(out, part, count, 3 * rep);
        OK(cudaGetLastError());
        std::vector<float> o = host(out, 1);
        std::vector<unsigned> c = host(count, 1);
        CHECK(o[0] == (float)(3 * nb * (nb - 1) / 2 + nb));
        CHECK(c[0] == 0);
    }
    dfree(out);
    dfree(part);
    dfree(count);
}

static void case_shuffles(void)
{
    int nt = 48;
    int *d;
    dmalloc(&d, (size_t)nt * 10 * sizeof(int));
    k_shuffles<<<1, nt>>>(d);
    OK(cudaGetLastError());
    std::vector<int> o = host(d, (size_t)nt * 10);
    for (int t = 0; t < nt; t++) {
        int lane = t & 31, base = t - lane;
        auto val = [&](int src) { return (base + src) * 7 + 3; };
        const int *r = &o[(size_t)t * 10];
        CHECK(r[0] == val(shfl_src(lane, 0, 5, 32)));
        CHECK(r[1] == val(shfl_src(lane, 0, (lane * 3) & 15, 32)));
        CHECK(r[2] == val(shfl_src(lane, 1, 3, 16)));
        CHECK(r[3] == val(shfl_src(lane, 2, 3, 16)));
        CHECK(r[4] == val(shfl_src(lane, 3, 1, 32)));
        CHECK(r[5] == val(shfl_src(lane, 3, 8, 8)));
        CHECK(r[6] == val(shfl_src(lane, 0, lane + 1, 8)));
        CHECK(r[7] == (lane < 16 ? val(shfl_src(lane, 3, 2, 32))
                                 : val(16 + shfl_src(lane - 16, 2, 4, 16))));
        CHECK(r[8] == base + shfl_src(lane, 3, 3, 16));
        CHECK(r[9] == shfl_src(lane, 0, 31, 16));
    }
    dfree(d);
}

static void case_shared(void)
{
    int n = 40, z = 3;
    std::vector<float> in((size_t)z * n * n);
    for (size_t i = 0; i < in.size(); i++)
        in[i] = (float)i;
    float *din = dev(in), *dout;
    dmalloc(&dout, in.size() * sizeof(float));
    k_tile<<<dim3(3, 3, z), dim3(16, 16)>>>(dout, din, n);
    OK(cudaGetLastError());
    std::vector<float> o = host(dout, in.size());
    for (int q = 0; q < z; q++)
        for (int y = 0; y < n; y++)
            for (int x = 0; x < n; x++)
                CHECK(o[((size_t)q * n + y) * n + x] == in[((size_t)q * n + x) * n + y]);
    int *dd;
    dim3 blk(4, 4, 4), grid(2, 3);
    int nt = 64;
    dmalloc(&dd, (size_t)6 * nt * sizeof(int));
    k_dyn3d<<<grid, blk, nt * sizeof(int)>>>(dd);
    OK(cudaGetLastError());
    std::vector<int> r = host(dd, (size_t)6 * nt);
    for (int by = 0; by < 3; by++)
        for (int bx = 0; bx < 2; bx++)
            for (int lin = 0; lin < nt; lin++) {
                int o2 = (lin + 1) % nt, x = o2 % 4, y = o2 / 4 % 4, zz = o2 / 16;
                int next = (lin & 31) == 31 ? 0 : 1;
                CHECK(r[(size_t)(by * 2 + bx) * nt + lin] ==
                      (x + 100 * y + 10000 * zz + 1000000 * by) * 4 + next);
            }
    dfree(din);
    dfree(dout);
    dfree(dd);
}

static void case_bf16(void)
{
    uint32_t nan = 0x7fc00001u, big = 0x7f7fffffu;
    float fnan, fbig;
    memcpy(&fnan, &nan, 4);
    memcpy(&fbig, &big, 4);
    /* 1 + 2^-8 is a tie (to even: 1), 1 + 3*2^-8 too (to even: 1 + 2^-6), 1 + 2^-8 + 2^-20
     * is above it (up) */
    std::vector<float> in = {1.0f, 1.0f + 0x1p-8f, 1.0f + 0x3p-8f, 1.0f + 0x1p-8f + 0x1p-20f,
                             -0.0f, INFINITY, fnan, fbig, -2.5f, 0x1p-140f};
    std::vector<unsigned short> want = {0x3f80, 0x3f80, 0x3f82, 0x3f81, 0x8000,
                                        0x7f80, 0x7fff, 0x7f80, 0xc020, 0x0000};
    int n = (int)in.size();
    float *din = dev(in), *back;
    unsigned short *bits;
    dmalloc(&bits, n * sizeof(unsigned short));
    dmalloc(&back, n * sizeof(float));
    k_bf16<<<1, 32>>>(bits, back, din, n);
    std::vector<unsigned short> b = host(bits, n);
    std::vector<float> f = host(back, n);
    for (int i = 0; i < n; i++) {
        CHECK(b[i] == want[i]);
        uint32_t u = (uint32_t)want[i] << 16, g;
        memcpy(&g, &f[i], 4);
        CHECK(g == u);
    }
    dfree(din);
    dfree(bits);
    dfree(back);
}

static void case_streams(void)
{
    int n = 1000;
    std::vector<float> h(n, 1.0f);
    cudaStream_t s1, s2;
    cudaEvent_t e1, e2, e3;
    OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    OK(cudaStreamCreate(&s2));
    OK(cudaEventCreate(&e1));
    OK(cudaEventCreate(&e2));
    OK(cudaEventCreateWithFlags(&e3, cudaEventDisableTiming));
    float *d, *pinned;
    dmalloc(&d, n * sizeof(float));
    OK(cudaMallocHost(&pinned, n * sizeof(float)));
    OK(cudaEventRecord(e1, s1));
    OK(cudaMemcpyAsync(d, h.data(), n * sizeof(float), cudaMemcpyHostToDevice, s1));
    k_add<<<(n + 127) / 128, 128, 0, s1>>>(d, 2.0f, n);
    OK(cudaEventRecord(e3, s1));
    OK(cudaStreamWaitEvent(s2, e3, 0));
    k_add<<<(n + 127) / 128, 128, 0, s2>>>(d, 3.0f, n);
    OK(cudaMemcpyAsync(pinned, d, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
    OK(cudaEventRecord(e2, s2));
    OK(cudaEventSynchronize(e2));
    OK(cudaStreamSynchronize(s1));
    OK(cudaStreamQuery(s2));
    OK(cudaEventQuery(e2));
    float ms = -1;
    OK(cudaEventElapsedTime(&ms, e1, e2));
    CHECK(ms >= 0);
    for (int i = 0; i < n; i++)
        CHECK(pinned[i] == 6.0f);
    /* s2 is a blocking stream: the legacy stream's copy waits for its memset */
    OK(cudaMemsetAsync(d, 0, n * sizeof(float), s2));
    OK(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDefault));
    for (int i = 0; i < n; i++)
        CHECK(h[i] == 0.0f);
    OK(cudaEventDestroy(e1));
    OK(cudaEventDestroy(e2));
    OK(cudaEventDestroy(e3));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    dfree(d);
    OK(cudaFreeHost(pinned));
    OK(cudaDeviceSynchronize());
}

/* Column-major D = alpha op(A) op(B) + beta C on the host, in double. */
static double ref_elem(const std::vector<float> &A, const std::vector<float> &B, int ta, int tb,
                       int lda, int ldb, int k, int i, int j)
{
    double s = 0;
    for (int p = 0; p < k; p++)
        s += (double)(ta ? A[(size_t)i * lda + p] : A[(size_t)p * lda + i]) *
             (tb ? B[(size_t)p * ldb + j] : B[(size_t)j * ldb + p]);
    return s;
}

static unsigned short to_bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (unsigned short)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* Small integers times 1/8: exact in bf16 and TF32, so every product below is exact. */
static std::vector<float> grid_values(size_t n, int salt)
{
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++)
        v[i] = (float)((int)((i * 13 + (size_t)salt * 7) % 17) - 8) / 8.0f;
    return v;
}

static void case_blas(void)
{
    cublasLtHandle_t lt;
    cublasHandle_t h;
    CHECK(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
    CHECK(cublasCreate(&h) == CUBLAS_STATUS_SUCCESS);
    int m = 13, n = 9, k = 7, batch = 3;
    for (int ta = 0; ta < 2; ta++)
        for (int tb = 0; tb < 2; tb++)
            for (int bf = 0; bf < 2; bf++) {
                int ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
                int lda = ar + 2, ldb = br + 1, ldc = m + 3;
                long long sa = (long long)lda * ac + 6, sb = (long long)ldb * bc, sc = (long long)ldc * n;
                std::vector<float> A = grid_values((size_t)sa * batch, 1 + ta),
                                   B = grid_values((size_t)sb * batch, 2 + tb),
                                   C = grid_values((size_t)sc * batch, 3);
                cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_32F;
                size_t es = bf ? 2 : 4;
                void *dA, *dB, *dC, *dD;
                dmalloc(&dA, A.size() * es);
                dmalloc(&dB, B.size() * es);
                dmalloc(&dC, C.size() * 4);
                dmalloc(&dD, C.size() * 4);
                if (bf) {
                    std::vector<unsigned short> a(A.size()), b(B.size());
                    for (size_t i = 0; i < A.size(); i++)
                        a[i] = to_bf(A[i]);
                    for (size_t i = 0; i < B.size(); i++)
                        b[i] = to_bf(B[i]);
                    OK(cudaMemcpy(dA, a.data(), a.size() * 2, cudaMemcpyHostToDevice));
                    OK(cudaMemcpy(dB, b.data(), b.size() * 2, cudaMemcpyHostToDevice));
                } else {
                    OK(cudaMemcpy(dA, A.data(), A.size() * 4, cudaMemcpyHostToDevice));
                    OK(cudaMemcpy(dB, B.data(), B.size() * 4, cudaMemcpyHostToDevice));
                }
                OK(cudaMemcpy(dC, C.data(), C.size() * 4, cudaMemcpyHostToDevice));
                float alpha = 0.5f, beta = 2.0f;
                /* cuBLASLt, out of place (D != C), fp32 output; TF32 for fp32 inputs */
                cublasLtMatmulDesc_t op;
                cublasLtMatrixLayout_t la, lb, lc;
                CHECK(cublasLtMatmulDescCreate(&op, bf ? CUBLAS_COMPUTE_32F
                                                      : CUBLAS_COMPUTE_32F_FAST_TF32,
                                               CUDA_R_32F) == CUBLAS_STATUS_SUCCESS);
                cublasOperation_t oa = ta ? CUBLAS_OP_T : CUBLAS_OP_N, ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
                CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &oa, sizeof oa) == 0);
                CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob) == 0);
                CHECK(cublasLtMatrixLayoutCreate(&la, t, ar, ac, lda) == 0);
                CHECK(cublasLtMatrixLayoutCreate(&lb, t, br, bc, ldb) == 0);
                CHECK(cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc) == 0);
                int32_t bc32 = batch;
                int64_t strides[3] = {sa, sb, sc};
                cublasLtMatrixLayout_t ls[3] = {la, lb, lc};
                for (int i = 0; i < 3; i++) {
                    CHECK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &bc32, 4) == 0);
                    CHECK(cublasLtMatrixLayoutSetAttribute(ls[i], CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &strides[i], 8) == 0);
                }
                cublasLtMatmulPreference_t pref;
                CHECK(cublasLtMatmulPreferenceCreate(&pref) == 0);
                uint32_t al = 2;
                for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
                    CHECK(cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, 4) == 0);
                cublasLtMatmulHeuristicResult_t res;
                int nres = 0;
                CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &nres) == 0 && nres == 1);
                CHECK(cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dC, lc, dD, lc, &res.algo, NULL, 0, 0) == 0);
                std::vector<float> D = host((float *)dD, C.size());
                /* cuBLAS, in place on C, same product */
                CHECK(cublasGemmStridedBatchedEx(h, oa, ob, m, n, k, &alpha, dA, t, lda, sa, dB, t, ldb, sb, &beta, dC,
                                                 CUDA_R_32F, ldc, sc, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == 0);
                std::vector<float> D2 = host((float *)dC, C.size());
                for (int q = 0; q < batch; q++)
                    for (int j = 0; j < n; j++)
                        for (int i = 0; i < m; i++) {
                            std::vector<float> Aq(A.begin() + q * sa, A.end()), Bq(B.begin() + q * sb, B.end());
                            size_t o = (size_t)(q * sc + (long long)j * ldc + i);
                            double want = alpha * ref_elem(Aq, Bq, ta, tb, lda, ldb, k, i, j) + beta * C[o];
                            CHECK(D[o] == (float)want);
                            CHECK(D2[o] == (float)want);
                        }
                cublasLtMatmulPreferenceDestroy(pref);
                cublasLtMatrixLayoutDestroy(la);
                cublasLtMatrixLayoutDestroy(lb);
                cublasLtMatrixLayoutDestroy(lc);
                cublasLtMatmulDescDestroy(op);
                dfree(dA);
                dfree(dB);
                dfree(dC);
                dfree(dD);
            }
    /* a bf16 output is rounded once, at the end */
    std::vector<unsigned short> one = {to_bf(1.0f)}, third(3, to_bf(1.0f));
    void *x, *y, *z;
    dmalloc(&x, 2);
    dmalloc(&y, 2);
    dmalloc(&z, 2);
    OK(cudaMemcpy(x, one.data(), 2, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(y, one.data(), 2, cudaMemcpyHostToDevice));
    OK(cudaMemcpy(z, one.data(), 2, cudaMemcpyHostToDevice));
    float a3 = 1.0f / 3.0f, b0 = 0.0f;
    CHECK(cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 1, 1, 1, &a3, x, CUDA_R_16BF, 1, 0, y, CUDA_R_16BF,
                                     1, 0, &b0, z, CUDA_R_16BF, 1, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == 0);
    std::vector<unsigned short> zr = host((unsigned short *)z, 1);
    CHECK(zr[0] == to_bf(1.0f / 3.0f));
    dfree(x);
    dfree(y);
    dfree(z);
    CHECK(cublasDestroy(h) == 0);
    CHECK(cublasLtDestroy(lt) == 0);
}

/* The epilogues BIAS (a bias per row of D, added before the one rounding) and BGRADB (the sums
 * of op(B) over k, one per column of D, overwritten), in fp32 and bf16, both transposes of B:
 * exact values (grid values, so every sum is exact). */
static void case_blas_epilogue(void)
{
    cublasLtHandle_t lt;
    CHECK(cublasLtCreate(&lt) == CUBLAS_STATUS_SUCCESS);
    int m = 11, n = 6, k = 9;
    for (int tb = 0; tb < 2; tb++)
        for (int bf = 0; bf < 2; bf++)
            for (int ep : {(int)CUBLASLT_EPILOGUE_BIAS, (int)CUBLASLT_EPILOGUE_BGRADB}) {
                int br = tb ? n : k, bc = tb ? k : n, lda = m + 1, ldb = br + 2, ldc = m;
                std::vector<float> A = grid_values((size_t)lda * k, 1), B = grid_values((size_t)ldb * bc, 2 + tb),
                                   C = grid_values((size_t)ldc * n, 3), bias = grid_values(16, 5);
                cudaDataType_t t = bf ? CUDA_R_16BF : CUDA_R_32F;
                size_t es = bf ? 2 : 4;
                void *dA, *dB, *dD, *dv;
                dmalloc(&dA, A.size() * es);
                dmalloc(&dB, B.size() * es);
                dmalloc(&dD, C.size() * es);
                dmalloc(&dv, 16 * 4);
                for (int w = 0; w < 4; w++) {
                    const std::vector<float> &x = w == 0 ? A : w == 1 ? B : w == 2 ? C : bias;
                    void *d = w == 0 ? dA : w == 1 ? dB : w == 2 ? dD : dv;
                    std::vector<unsigned short> h(x.size());
                    for (size_t i = 0; i < x.size(); i++)
                        h[i] = to_bf(x[i]);
                    OK(cudaMemcpy(d, bf ? (const void *)h.data() : (const void *)x.data(), x.size() * es,
                                  cudaMemcpyHostToDevice));
                }
                cublasLtMatmulDesc_t op;
                cublasLtMatrixLayout_t la, lb, lc;
                CHECK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0);
                cublasOperation_t ob = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
                CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &ob, sizeof ob) == 0);
                CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep) == 0);
                CHECK(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &dv, sizeof dv) == 0);
                CHECK(cublasLtMatrixLayoutCreate(&la, t, m, k, lda) == 0);
                CHECK(cublasLtMatrixLayoutCreate(&lb, t, br, bc, ldb) == 0);
                CHECK(cublasLtMatrixLayoutCreate(&lc, t, m, n, ldc) == 0);
                cublasLtMatmulPreference_t pref;
                CHECK(cublasLtMatmulPreferenceCreate(&pref) == 0);
                cublasLtMatmulHeuristicResult_t res;
                int nres = 0;
                CHECK(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 1, &res, &nres) == 0 && nres == 1);
                float alpha = 0.5f, beta = 1.0f;
                CHECK(cublasLtMatmul(lt, op, &alpha, dA, la, dB, lb, &beta, dD, lc, dD, lc, &res.algo, NULL, 0, 0) == 0);
                std::vector<unsigned short> Db = host((unsigned short *)dD, bf ? C.size() : 0),
                                            vb = host((unsigned short *)dv, bf ? 16 : 0);
                std::vector<float> Df = host((float *)dD, bf ? 0 : C.size()), vf = host((float *)dv, bf ? 0 : 16);
                for (int j = 0; j < n; j++) {
                    double g = 0;
                    for (int p = 0; p < k; p++)
                        g += tb ? B[(size_t)p * ldb + j] : B[(size_t)j * ldb + p];
                    if (ep == CUBLASLT_EPILOGUE_BGRADB)
                        CHECK(bf ? vb[j] == to_bf((float)g) : vf[j] == (float)g);
                    for (int i = 0; i < m; i++) {
                        size_t o = (size_t)j * ldc + i;
                        double want = alpha * ref_elem(A, B, 0, tb, lda, ldb, k, i, j) + beta * C[o] +
                                      (ep == CUBLASLT_EPILOGUE_BIAS ? bias[i] : 0.0);
                        CHECK(bf ? Db[o] == to_bf((float)want) : Df[o] == (float)want);
                    }
                }
                if (ep == CUBLASLT_EPILOGUE_BGRADB) /* only the n sums are written */
                    for (int j = n; j < 16; j++)
                        CHECK(bf ? vb[j] == to_bf(bias[j]) : vf[j] == bias[j]);
                cublasLtMatmulPreferenceDestroy(pref);
                cublasLtMatrixLayoutDestroy(la);
                cublasLtMatrixLayoutDestroy(lb);
                cublasLtMatrixLayoutDestroy(lc);
                cublasLtMatmulDescDestroy(op);
                dfree(dA);
                dfree(dB);
                dfree(dD);
                dfree(dv);
            }
    CHECK(cublasLtDestroy(lt) == 0);
}

static void case_sort(void)
{
    int n = 3000;
    std::vector<unsigned> k(n), v(n);
    for (int i = 0; i < n; i++)
        k[i] = (unsigned)((i * 7919) % 301), v[i] = (unsigned)i;
    unsigned *dk = dev(k), *dv = dev(v), *ko, *vo;
    dmalloc(&ko, n * 4);
    dmalloc(&vo, n * 4);
    size_t tb = 0;
    OK(cub::DeviceRadixSort::SortPairs(NULL, tb, dk, ko, dv, vo, n, 0, 9));
    void *tmp;
    dmalloc(&tmp, tb);
    OK(cub::DeviceRadixSort::SortPairs(tmp, tb, dk, ko, dv, vo, n, 0, 9));
    std::vector<unsigned> K = host(ko, n), V = host(vo, n);
    for (int i = 0; i < n; i++) {
        CHECK(K[i] == k[V[i]]);
        if (i)
            CHECK(K[i - 1] < K[i] || (K[i - 1] == K[i] && V[i - 1] < V[i])); /* stable */
    }
    dfree(dk);
    dfree(dv);
    dfree(ko);
    dfree(vo);
    dfree(tmp);
}

__global__ void k_counted(int n)
{
    if ((int)threadIdx.x < n)
        CUEMU_COUNT("selftest_threads", 1);
}

/* The counters: each kind of work once, memory's peak and largest buffer, a kernel's own, the
 * launch digest. */
static void case_counters(void)
{
    using cuemu::counter_get;
    OK(cudaDeviceSynchronize());
    cuemu::counters_reset();
    float *a, *b;
    dmalloc(&a, 4096);
    dmalloc(&b, 1 << 20);
    CHECK(counter_get("peak_device_bytes") == 4096 + (1 << 20));
    CHECK(counter_get("largest_buffer_bytes") == 1 << 20);
    OK(cudaMemsetAsync(a, 0, 4096, 0));
    OK(cudaMemcpyAsync(b, a, 4096, cudaMemcpyDeviceToDevice, 0));
    std::vector<float> h(1024, 1.0f);
    OK(cudaMemcpy(h.data(), b, 4096, cudaMemcpyDeviceToHost));
    CHECK(h[0] == 0 && h[1023] == 0);
    k_counted<<<3, 64>>>(40);
    OK(cudaGetLastError());
    OK(cudaStreamSynchronize(0));
    dfree(b);
    CHECK(counter_get("kernels") == 1);
    CHECK(counter_get("memsets") == 1);
    CHECK(counter_get("copies") == 1);
    CHECK(counter_get("transfers") == 1);
    CHECK(counter_get("host_syncs") == 3); /* the copy to the host, the stream, cudaFree */
    CHECK(counter_get("gemms") == 0 && counter_get("sorts") == 0);
    CHECK(counter_get("selftest_threads") == 3 * 40);
    CHECK(counter_get("peak_device_bytes") == 4096 + (1 << 20));
    cuemu::counters_reset(); /* the memory's from what is allocated now */
    CHECK(counter_get("kernels") == 0 && counter_get("selftest_threads") == 0);
    CHECK(counter_get("peak_device_bytes") == 4096);
    CHECK(counter_get("largest_buffer_bytes") == 4096);
    /* the launch digest: the same calls of the same shapes give the same digest (whatever
     * the arguments' values), another shape or another order another */
    uint64_t dg[4];
    for (int r = 0; r < 4; r++) {
        cuemu::counters_reset();
        if (r == 3)
            OK(cudaMemsetAsync(a, 0, 4096, 0));
        k_counted<<<r == 2 ? 4 : 3, 64>>>(r == 1 ? 7 : 40);
        OK(cudaGetLastError());
        if (r != 3)
            OK(cudaMemsetAsync(a, r, 4096, 0));
        dg[r] = counter_get("launch_digest");
    }
    OK(cudaStreamSynchronize(0));
    CHECK(dg[0] != 0 && dg[0] == dg[1] && dg[2] != dg[0] && dg[3] != dg[0]);
    dfree(a);
}

static void case_limits(void)
{
    /* the largest block, and grid.y and grid.z at their limit, run */
    int *d;
    dmalloc(&d, 4);
    float *x;
    dmalloc(&x, 1024 * sizeof(float));
    OK(cudaMemset(x, 0, 1024 * sizeof(float)));
    k_add<<<1, 1024>>>(x, 1.0f, 1024);
    OK(cudaGetLastError());
    k_add<<<dim3(1, 65535, 1), 32>>>(x, 1.0f, 0);
    OK(cudaGetLastError());
    k_add<<<dim3(1, 1, 65535), 1>>>(x, 1.0f, 0);
    OK(cudaGetLastError());
    std::vector<float> h = host(x, 1024);
    for (int i = 0; i < 1024; i++)
        CHECK(h[i] == 1.0f);
    dfree(d);
    dfree(x);
}

/* ---- misuse: each must be reported where it happens ------------------------------------------ */

__global__ void k_divergent(int *out)
{
    if (threadIdx.x < 64)
        EXPECT("FAULT", "divergent barrier", __syncthreads());
    else
        __syncthreads();
    out[threadIdx.x] = 1;
}

__global__ void k_exited_lane(float *out)
{
    if ((threadIdx.x & 31) >= 16)
        return;
    out[threadIdx.x] = EXPECT("FAULT", "exited", __shfl_xor_sync(0xffffffffu, 1.0f, 1));
}

__global__ void k_mask_self(int *out)
{
    out[threadIdx.x] = EXPECT("FAULT", "does not name the calling lane", __shfl_sync(0x1u, 5, 0));
}

__global__ void k_mask_mismatch(int *out)
{
    unsigned m = threadIdx.x < 16 ? 0xffffffffu : 0xffff0000u;
    out[threadIdx.x] = EXPECT("FAULT", "must pass the same mask", __shfl_xor_sync(m, 1, 1));
}

__global__ void k_read_outside(int *out)
{
    if (threadIdx.x < 16)
        out[threadIdx.x] = EXPECT("FAULT", "not in the mask", __shfl_sync(0x0000ffffu, 1, 20));
}

__global__ void k_bad_width(int *out)
{
    out[threadIdx.x] = EXPECT("FAULT", "not a power of 2", __shfl_xor_sync(0xffffffffu, 1, 1, 12));
}

__global__ void k_deadlock(int *out)
{
    int v = 1;
    if (threadIdx.x < 16)
        v = EXPECT("FAULT", "deadlock", __shfl_xor_sync(0xffffffffu, v, 1));
    else
        __syncthreads();
    out[threadIdx.x] = v;
}

__global__ void k_exit_before_barrier(int *out)
{
    __shared__ int sh[64];
    if (threadIdx.x >= 40)
        return;
    sh[threadIdx.x] = (int)threadIdx.x;
    EXPECT("misuse", "have exited", __syncthreads());
    out[threadIdx.x] = sh[39 - threadIdx.x];
}

__global__ void k_too_much_smem(float *out)
{
    extern __shared__ float dyn[];
    (void)EXPECT("FAULT", "static shared memory", 0); __shared__ float big[10240];
    big[threadIdx.x] = 1;
    dyn[threadIdx.x] = 2;
    out[threadIdx.x] = big[threadIdx.x] + dyn[threadIdx.x];
}

__global__ void k_uninit(float *out)
{
    extern __shared__ float dyn[];
    __shared__ float st[32];
    out[threadIdx.x] = st[threadIdx.x] + dyn[threadIdx.x]; /* neither was written */
}

/* A 16-byte vector load at an address 4 bytes past an aligned one (the kernels' accesses
 * through uint4 are checked by cuemu::check_align, as common.cuh's ldve does). */
__global__ void k_misaligned(int *out)
{
    const int *p = out + 1;
    EXPECT("FAULT", "not 16-byte aligned", ::cuemu::check_align(p, 16, __FILE__, __LINE__));
    uint4 u = *(const uint4 *)p;
    out[8] = (int)u.x;
}

__global__ void k_oob_write(float *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) /* one too many */
        x[i] = 1;
}

static void launch_of(const char *what)
{
    int *d;
    dmalloc(&d, 4096 * sizeof(int));
    if (!strcmp(what, "divergent"))
        k_divergent<<<1, 128>>>(d);
    else if (!strcmp(what, "exited"))
        k_exited_lane<<<1, 64>>>((float *)d);
    else if (!strcmp(what, "mask-self"))
        k_mask_self<<<1, 32>>>(d);
    else if (!strcmp(what, "mask-mismatch"))
        k_mask_mismatch<<<1, 32>>>(d);
    else if (!strcmp(what, "read-outside"))
        k_read_outside<<<1, 32>>>(d);
    else if (!strcmp(what, "width"))
        k_bad_width<<<1, 32>>>(d);
    else if (!strcmp(what, "deadlock"))
        k_deadlock<<<1, 64>>>(d);
    else if (!strcmp(what, "misaligned"))
        k_misaligned<<<1, 1>>>(d);
    else
        k_too_much_smem<<<1, 64, 10 * 1024>>>((float *)d);
    /* a fault is sticky: every later call returns it */
    CHECK(cudaDeviceSynchronize() == cudaErrorLaunchFailure);
    CHECK(cudaMemset(d, 0, 4) == cudaErrorLaunchFailure);
    CHECK(cudaGetLastError() == cudaErrorLaunchFailure);
}

static void case_exit_before_barrier(void)
{
    int *d;
    dmalloc(&d, 64 * sizeof(int));
    k_exit_before_barrier<<<1, 64>>>(d);
    OK(cudaDeviceSynchronize()); /* reported, not a fault: sm_70+ runs it */
    std::vector<int> h = host(d, 40);
    for (int i = 0; i < 40; i++)
        CHECK(h[i] == 39 - i);
}

static void case_uninit(void)
{
    float *d;
    dmalloc(&d, 32 * sizeof(float));
    k_uninit<<<1, 32, 32 * sizeof(float)>>>(d);
    OK(cudaDeviceSynchronize());
    std::vector<float> h = host(d, 32);
    for (int i = 0; i < 32; i++)
        CHECK(h[i] != h[i]); /* NaN: the shared memory was poisoned */
}

static void case_launch_config(void)
{
    float *x;
    dmalloc(&x, 64 * sizeof(float));
    EXPECT("error", "not a valid block", (k_add<<<1, 2048>>>(x, 1.0f, 64)));
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    CHECK(cudaGetLastError() == cudaSuccess); /* not sticky */
    EXPECT("error", "not a valid grid", (k_add<<<dim3(1, 65536), 32>>>(x, 1.0f, 64)));
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    EXPECT("error", "dynamic shared memory", (k_add<<<1, 32, 49 * 1024>>>(x, 1.0f, 64)));
    CHECK(cudaGetLastError() == cudaErrorInvalidValue);
    EXPECT("error", "not a valid block", (k_add<<<1, dim3(1, 1, 65)>>>(x, 1.0f, 64)));
    CHECK(cudaGetLastError() == cudaErrorInvalidConfiguration);
    k_add<<<1, 64>>>(x, 1.0f, 64); /* the device still works */
    OK(cudaDeviceSynchronize());
    std::vector<float> h(64, 0.0f);
    EXPECT("misuse", "is not device memory", (k_add<<<1, 64>>>(h.data(), 1.0f, 64)));
    OK(cudaDeviceSynchronize());
}

static void case_memory(void)
{
    float *d, *e;
    std::vector<float> h(100);
    dmalloc(&d, 100 * sizeof(float));
    dmalloc(&e, 100 * sizeof(float));
    CHECK(EXPECT("error", "is not device memory", cudaMemcpy(h.data(), h.data(), 400, cudaMemcpyHostToDevice)) ==
          cudaErrorInvalidValue);
    CHECK(EXPECT("error", "is device memory, but the copy's kind says host", cudaMemcpy(e, d, 400, cudaMemcpyHostToDevice)) ==
          cudaErrorInvalidValue);
    dfree(e);
    CHECK(EXPECT("error", "not the start of a live cudaMalloc allocation", cudaFree(e)) == cudaErrorInvalidValue);
    CHECK(EXPECT("FAULT", "past the end of the 400-byte allocation", cudaMemcpy(d, h.data(), 404, cudaMemcpyHostToDevice)) ==
          cudaErrorIllegalAddress);
    float *f = NULL;
    CHECK(cudaMalloc(&f, 16) == cudaErrorIllegalAddress); /* sticky */
}

/* A captured stream's work (kernels, a device copy, a memset) runs only when the graph is
 * launched, each launch in the captured order with the captured arguments: three launches
 * leave the same bits as the same work done three times eagerly. */
static void case_graphs(void)
{
    int n = 1000;
    std::vector<float> h(n), x(n), y(n);
    for (int i = 0; i < n; i++)
        h[i] = 1.0f / (float)(i + 3);
    float *a[2], *b[2], *c[2];
    for (int k = 0; k < 2; k++) {
        dmalloc(&a[k], n * sizeof(float));
        dmalloc(&b[k], n * sizeof(float));
        dmalloc(&c[k], n * sizeof(float));
        OK(cudaMemcpy(a[k], h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
        OK(cudaMemcpy(c[k], h.data(), n * sizeof(float), cudaMemcpyHostToDevice));
    }
    cudaStream_t s;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    auto work = [&](int k) {
        k_add<<<(n + 127) / 128, 128, 0, s>>>(a[k], 1.5f, n);
        OK(cudaMemcpyAsync(b[k], a[k], n * sizeof(float), cudaMemcpyDeviceToDevice, s));
        k_add<<<(n + 127) / 128, 128, 0, s>>>(b[k], 0.25f, n);
        OK(cudaMemsetAsync(c[k], 0, n / 2 * sizeof(float), s));
    };
    for (int it = 0; it < 3; it++)
        work(0);
    cudaStreamCaptureStatus cs;
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    OK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusActive);
    work(1);
    cudaGraph_t g;
    OK(cudaStreamEndCapture(s, &g));
    OK(cudaStreamIsCapturing(s, &cs));
    CHECK(cs == cudaStreamCaptureStatusNone);
    OK(cudaStreamSynchronize(s));
    OK(cudaMemcpy(y.data(), a[1], n * sizeof(float), cudaMemcpyDeviceToHost));
    CHECK(memcmp(y.data(), h.data(), n * sizeof(float)) == 0); /* captured, not run */
    cudaGraphExec_t ge;
    OK(cudaGraphInstantiate(&ge, g, 0));
    cuemu::counters_reset();
    for (int it = 0; it < 3; it++)
        OK(cudaGraphLaunch(ge, s));
    OK(cudaStreamSynchronize(s));
    CHECK(cuemu::counter_get("graph_launches") == 3);
    CHECK(cuemu::counter_get("kernels") == 0); /* launched by the graph, not by the host */
    float *bufs[2][3] = {{a[0], b[0], c[0]}, {a[1], b[1], c[1]}};
    for (int q = 0; q < 3; q++) {
        OK(cudaMemcpy(x.data(), bufs[0][q], n * sizeof(float), cudaMemcpyDeviceToHost));
        OK(cudaMemcpy(y.data(), bufs[1][q], n * sizeof(float), cudaMemcpyDeviceToHost));
        CHECK(memcmp(x.data(), y.data(), n * sizeof(float)) == 0);
    }
    CHECK(x[n - 1] == h[n - 1] && x[0] == 0.0f);
    OK(cudaGraphExecDestroy(ge));
    OK(cudaGraphDestroy(g));
    OK(cudaStreamDestroy(s));
    for (int k = 0; k < 2; k++)
        dfree(a[k]), dfree(b[k]), dfree(c[k]);
}

/* The host cannot wait for the device while a stream is captured: the wait is an error and
 * the capture is invalidated; events inside a capture are not emulated; capture calls on
 * streams that are not capturing, and dead graphs, are errors. */
static void case_graph_misuse(void)
{
    float *d;
    dmalloc(&d, 400);
    std::vector<float> h(100);
    cudaStream_t s;
    cudaEvent_t ev;
    cudaGraph_t g = NULL;
    OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    OK(cudaEventCreate(&ev));
    OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    k_add<<<1, 100, 0, s>>>(d, 1.0f, 100);
    CHECK(EXPECT("error", "the host cannot wait for the device inside a CUDA graph", cudaStreamSynchronize(s)) ==
          cudaErrorStreamCaptureUnsupported);
    CHECK(EXPECT("error", "the host cannot wait for the device inside a CUDA graph", cudaDeviceSynchronize()) ==
          cudaErrorStreamCaptureUnsupported);
    CHECK(EXPECT("error", "event nodes are not emulated", cudaEventRecord(ev, s)) ==
          cudaErrorStreamCaptureUnsupported);
    CHECK(cudaStreamEndCapture(s, &g) == cudaErrorStreamCaptureInvalidated && g == NULL);
    CHECK(EXPECT("error", "the stream is not being captured", cudaStreamEndCapture(s, &g)) == cudaErrorIllegalState);
    CHECK(EXPECT("error", "the legacy default stream cannot be captured",
                 cudaStreamBeginCapture(0, cudaStreamCaptureModeGlobal)) == cudaErrorStreamCaptureImplicit);
    CHECK(EXPECT("error", "is not a live graph", cudaGraphDestroy(g)) == cudaErrorInvalidResourceHandle);
    OK(cudaMemcpy(h.data(), d, 400, cudaMemcpyDeviceToHost)); /* nothing of the capture ran */
    OK(cudaEventDestroy(ev));
    OK(cudaStreamDestroy(s));
}

static void case_handles(void)
{
    cudaStream_t s;
    cudaEvent_t a, b;
    OK(cudaStreamCreate(&s));
    OK(cudaStreamDestroy(s));
    CHECK(EXPECT("error", "not a live stream", cudaStreamSynchronize(s)) == cudaErrorInvalidResourceHandle);
    OK(cudaEventCreateWithFlags(&a, cudaEventDisableTiming));
    OK(cudaEventCreate(&b));
    OK(cudaEventRecord(a));
    OK(cudaEventRecord(b));
    float ms;
    CHECK(EXPECT("error", "cudaEventDisableTiming", cudaEventElapsedTime(&ms, a, b)) == cudaErrorInvalidResourceHandle);
    OK(cudaEventDestroy(a));
    OK(cudaEventDestroy(b));
}

/* One cuBLASLt product (m x n x k, fp32, no transposes) with its plan; bytes of A allocated. */
struct lt_case {
    cublasLtHandle_t lt;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc;
    cublasLtMatmulPreference_t pref;
    float *A, *B, *C;
};

static void lt_setup(lt_case &c, int m, int n, int k, size_t a_elems)
{
    CHECK(cublasLtCreate(&c.lt) == 0);
    CHECK(cublasLtMatmulDescCreate(&c.op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0);
    CHECK(cublasLtMatrixLayoutCreate(&c.la, CUDA_R_32F, m, k, m) == 0);
    CHECK(cublasLtMatrixLayoutCreate(&c.lb, CUDA_R_32F, k, n, k) == 0);
    CHECK(cublasLtMatrixLayoutCreate(&c.lc, CUDA_R_32F, m, n, m) == 0);
    CHECK(cublasLtMatmulPreferenceCreate(&c.pref) == 0);
    dmalloc(&c.A, a_elems * 4);
    dmalloc(&c.B, (size_t)k * n * 4);
    dmalloc(&c.C, (size_t)m * n * 4);
    OK(cudaMemset(c.A, 0, a_elems * 4));
    OK(cudaMemset(c.B, 0, (size_t)k * n * 4));
}

static void case_blas_misuse(void)
{
    float one = 1, zero = 0;
    cublasLtMatmulHeuristicResult_t res;
    int nres;
    lt_case c;
    lt_setup(c, 8, 6, 4, 8 * 4);
    /* descriptors that disagree: op(A) is 8x4, B 5x6 */
    cublasLtMatrixLayout_t bad;
    CHECK(cublasLtMatrixLayoutCreate(&bad, CUDA_R_32F, 5, 6, 5) == 0);
    CHECK(EXPECT("error", "do not agree", cublasLtMatmulAlgoGetHeuristic(c.lt, c.op, c.la, bad, c.lc, c.lc, c.pref, 1, &res, &nres)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    /* an algorithm used for another problem */
    CHECK(cublasLtMatmulAlgoGetHeuristic(c.lt, c.op, c.la, c.lb, c.lc, c.lc, c.pref, 1, &res, &nres) == 0);
    cublasOperation_t t = CUBLAS_OP_T;
    cublasLtMatmulDesc_t op2;
    CHECK(cublasLtMatmulDescCreate(&op2, CUBLAS_COMPUTE_32F, CUDA_R_32F) == 0);
    CHECK(cublasLtMatmulDescSetAttribute(op2, CUBLASLT_MATMUL_DESC_TRANSB, &t, sizeof t) == 0);
    cublasLtMatrixLayout_t lb2;
    CHECK(cublasLtMatrixLayoutCreate(&lb2, CUDA_R_32F, 6, 4, 6) == 0);
    CHECK(EXPECT("error", "chosen for another problem", cublasLtMatmul(c.lt, op2, &one, c.A, c.la, c.B, lb2, &zero, c.C, c.lc, c.C, c.lc, &res.algo, NULL, 0, 0)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    /* a pointer less aligned than the preference promised (256 by default) */
    CHECK(EXPECT("error", "promised 256", cublasLtMatmul(c.lt, c.op, &one, c.A, c.la, c.B + 1, c.lb, &zero, c.C, c.lc, c.C, c.lc, &res.algo, NULL, 0, 0)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    /* the legacy product writing into an input */
    cublasHandle_t h;
    CHECK(cublasCreate(&h) == 0);
    CHECK(EXPECT("error", "overlaps input A", cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, c.A, CUDA_R_32F, 4, 0, c.B, CUDA_R_32F, 4, 0, &zero, c.A + 4, CUDA_R_32F, 4, 0, 1, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    CHECK(EXPECT("error", "batches of the output overlap", cublasGemmStridedBatchedEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, c.A, CUDA_R_32F, 4, 0, c.B, CUDA_R_32F, 4, 0, &zero, c.C, CUDA_R_32F, 4, 8, 3, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    /* an operand larger than its allocation: A is 8x4, but only 8x3 were allocated */
    lt_case d;
    lt_setup(d, 8, 6, 4, 8 * 3);
    CHECK(cublasLtMatmulAlgoGetHeuristic(d.lt, d.op, d.la, d.lb, d.lc, d.lc, d.pref, 1, &res, &nres) == 0);
    CHECK(EXPECT("FAULT", "operand A", cublasLtMatmul(d.lt, d.op, &one, d.A, d.la, d.B, d.lb, &zero, d.C, d.lc, d.C, d.lc, &res.algo, NULL, 0, 0)) ==
          CUBLAS_STATUS_EXECUTION_FAILED);
    for (lt_case *x : {&c, &d}) {
        cublasLtMatrixLayoutDestroy(x->la);
        cublasLtMatrixLayoutDestroy(x->lb);
        cublasLtMatrixLayoutDestroy(x->lc);
        cublasLtMatmulDescDestroy(x->op);
        cublasLtMatmulPreferenceDestroy(x->pref);
        cublasLtDestroy(x->lt);
    }
    cublasLtMatrixLayoutDestroy(bad);
    cublasLtMatrixLayoutDestroy(lb2);
    cublasLtMatmulDescDestroy(op2);
    cublasDestroy(h);
}

/* An epilogue without its vector, a vector shorter than D's rows, an epilogue not emulated. */
static void case_blas_epilogue_misuse(void)
{
    float one = 1, zero = 0;
    cublasLtMatmulHeuristicResult_t res;
    int nres;
    lt_case c;
    lt_setup(c, 8, 6, 4, 8 * 4);
    int ep = CUBLASLT_EPILOGUE_BIAS;
    CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof ep) == 0);
    CHECK(cublasLtMatmulAlgoGetHeuristic(c.lt, c.op, c.la, c.lb, c.lc, c.lc, c.pref, 1, &res, &nres) == 0);
    CHECK(EXPECT("error", "without a bias pointer", cublasLtMatmul(c.lt, c.op, &one, c.A, c.la, c.B, c.lb, &zero, c.C, c.lc, c.C, c.lc, &res.algo, NULL, 0, 0)) ==
          CUBLAS_STATUS_INVALID_VALUE);
    float *v;
    dmalloc(&v, 7 * 4);
    CHECK(cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &v, sizeof v) == 0);
    CHECK(EXPECT("FAULT", "bias vector", cublasLtMatmul(c.lt, c.op, &one, c.A, c.la, c.B, c.lb, &zero, c.C, c.lc, c.C, c.lc, &res.algo, NULL, 0, 0)) ==
          CUBLAS_STATUS_EXECUTION_FAILED);
    int gelu = 32;
    CHECK(EXPECT("error", "not emulated", cublasLtMatmulDescSetAttribute(c.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &gelu, sizeof gelu)) ==
          CUBLAS_STATUS_NOT_SUPPORTED);
    cublasLtMatrixLayoutDestroy(c.la);
    cublasLtMatrixLayoutDestroy(c.lb);
    cublasLtMatrixLayoutDestroy(c.lc);
    cublasLtMatmulDescDestroy(c.op);
    cublasLtMatmulPreferenceDestroy(c.pref);
    cublasLtDestroy(c.lt);
}

static void case_sort_misuse(void)
{
    int n = 100;
    std::vector<unsigned> k(n, 3), v(n, 1);
    k[7] = 1u << 12;
    unsigned *dk = dev(k), *dv = dev(v), *ko, *vo;
    dmalloc(&ko, n * 4);
    dmalloc(&vo, n * 4);
    size_t tb = 0;
    OK(cub::DeviceRadixSort::SortPairs(NULL, tb, dk, ko, dv, vo, n, 0, 8));
    void *tmp;
    dmalloc(&tmp, tb);
    size_t small = tb / 2;
    CHECK(EXPECT("error", "temporary storage", cub::DeviceRadixSort::SortPairs(tmp, small, dk, ko, dv, vo, n, 0, 8)) ==
          cudaErrorInvalidValue);
    OK(EXPECT("misuse", "has bits outside [0, 8)", cub::DeviceRadixSort::SortPairs(tmp, tb, dk, ko, dv, vo, n, 0, 8)));
    CHECK(EXPECT("error", "buffers overlap", cub::DeviceRadixSort::SortPairs(tmp, tb, dk, dk, dv, vo, n, 0, 8)) ==
          cudaErrorInvalidValue);
}

/* Two streams and the host, in the orders a program must ask for: a producer on s1, its
 * consumer on s2 after cudaStreamWaitEvent (unless !wait), the host after synchronizing
 * (unless !sync) before it reads a device-to-host copy. Returns the number of wrong values
 * the host saw. */
static int stream_pipeline(bool wait, bool sync)
{
    int n = 4096;
    std::vector<float> h(n, 1.0f);
    cudaStream_t s1, s2;
    cudaEvent_t done;
    OK(cudaStreamCreateWithFlags(&s1, cudaStreamNonBlocking));
    OK(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    OK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    float *x = dev(h), *y = dev(h), *pinned;
    OK(cudaMallocHost(&pinned, n * sizeof(float)));
    for (int i = 0; i < n; i++)
        pinned[i] = -1.0f;
    for (int r = 0; r < 8; r++) /* x = 9: the producer, slow enough to be caught up with */
        k_add<<<(n + 127) / 128, 128, 0, s1>>>(x, 1.0f, n);
    OK(cudaEventRecord(done, s1));
    if (wait)
        OK(cudaStreamWaitEvent(s2, done, 0));
    OK(cudaMemcpyAsync(y, x, n * sizeof(float), cudaMemcpyDeviceToDevice, s2));
    k_add<<<(n + 127) / 128, 128, 0, s2>>>(y, 1.0f, n);
    OK(cudaMemcpyAsync(pinned, y, n * sizeof(float), cudaMemcpyDeviceToHost, s2));
    if (sync)
        OK(cudaStreamSynchronize(s2));
    int wrong = 0;
    for (int i = 0; i < n; i++)
        wrong += pinned[i] != 10.0f;
    OK(cudaDeviceSynchronize());
    OK(cudaEventDestroy(done));
    OK(cudaStreamDestroy(s1));
    OK(cudaStreamDestroy(s2));
    OK(cudaFreeHost(pinned));
    dfree(x);
    dfree(y);
    return wrong;
}

static void case_stream_order(void) { CHECK(stream_pipeline(true, true) == 0); }

/* A stream wait or a host synchronization left out: exit 0 when the host saw wrong values
 * (what the parent wants under CUEMU_STREAMS=lazy), 3 when every value was right. */
static int stream_race_shows(bool wait, bool sync)
{
    int wrong = stream_pipeline(wait, sync);
    printf("stream race: the host saw %d wrong values\n", wrong);
    return wrong ? 0 : 3;
}

/* A missing barrier (block_sum without its leading __syncthreads): with a warp running ahead,
 * some thread must see a wrong sum. Exit 0 when the race showed (what the parent wants under
 * the warps schedules), 3 when every sum came out right. */
static int race_shows(void)
{
    int nb = 4, bs = 256;
    std::vector<float> in((size_t)nb * bs);
    for (size_t i = 0; i < in.size(); i++)
        in[i] = (float)((int)(i % 7) - 3);
    float *din = dev(in), *dout;
    dmalloc(&dout, in.size() * 2 * sizeof(float));
    k_two_sums<<<nb, bs>>>(dout, din, 1);
    std::vector<float> o = host(dout, in.size() * 2);
    int wrong = 0;
    for (int b = 0; b < nb; b++) {
        float s1 = 0, s2 = 0;
        for (int i = 0; i < bs; i++)
            s1 += in[(size_t)b * bs + i], s2 += in[(size_t)b * bs + i] * in[(size_t)b * bs + i];
        for (int i = 0; i < bs; i++)
            wrong += o[2 * ((size_t)b * bs + i)] != s1 || o[2 * ((size_t)b * bs + i) + 1] != s2;
    }
    printf("race: %d of %d threads saw a wrong sum\n", wrong, nb * bs);
    return wrong ? 0 : 3;
}

/* Under ASan: a kernel writing one element past its buffer is caught. */
static void case_asan_oob(void)
{
    float *x;
    dmalloc(&x, 1000 * sizeof(float));
    k_oob_write<<<4, 256>>>(x, 1000);
    cudaDeviceSynchronize();
}

/* Without CUEMU=1 there is no device, and the error says how to get one. */
static void case_no_device(void)
{
    int n = -1;
    CHECK(cudaGetDeviceCount(&n) == cudaErrorNoDevice && n == 0);
    CHECK(strstr(cudaGetErrorString(cudaErrorNoDevice), "CUEMU=1") != NULL);
    float *x = NULL;
    CHECK(cudaMalloc(&x, 4) == cudaErrorNoDevice);
}

/* ---- the parent: every case in a child ----------------------------------------------------- */

struct test_case {
    const char *name;
    void (*fn)(void);
    int misuse; /* 0: must pass under every schedule; 1: must report what it EXPECTs */
};

static void misuse_divergent(void) { launch_of("divergent"); }
static void misuse_exited(void) { launch_of("exited"); }
static void misuse_mask_self(void) { launch_of("mask-self"); }
static void misuse_mask_mismatch(void) { launch_of("mask-mismatch"); }
static void misuse_read_outside(void) { launch_of("read-outside"); }
static void misuse_width(void) { launch_of("width"); }
static void misuse_deadlock(void) { launch_of("deadlock"); }
static void misuse_smem(void) { launch_of("smem"); }
static void misuse_misaligned(void) { launch_of("misaligned"); }

static const test_case cases[] = {
    {"block-sums", case_block_sums, 0},
    {"atomics", case_atomics, 0},
    {"shuffles", case_shuffles, 0},
    {"shared-memory", case_shared, 0},
    {"bf16", case_bf16, 0},
    {"streams-events", case_streams, 0},
    {"stream-order", case_stream_order, 0},
    {"graphs", case_graphs, 0},
    {"blas", case_blas, 0},
    {"blas-epilogues", case_blas_epilogue, 0},
    {"sort", case_sort, 0},
    {"counters", case_counters, 0},
    {"launch-limits", case_limits, 0},
    {"uninitialized-shared", case_uninit, 0},
    {"divergent-barrier", misuse_divergent, 1},
    {"shuffle-exited-lane", misuse_exited, 1},
    {"shuffle-mask-without-caller", misuse_mask_self, 1},
    {"shuffle-mask-mismatch", misuse_mask_mismatch, 1},
    {"shuffle-reads-outside-mask", misuse_read_outside, 1},
    {"shuffle-width", misuse_width, 1},
    {"deadlock", misuse_deadlock, 1},
    {"shared-memory-limit", misuse_smem, 1},
    {"misaligned-vector-access", misuse_misaligned, 1},
    {"exit-before-barrier", case_exit_before_barrier, 1},
    {"launch-configuration", case_launch_config, 1},
    {"memory", case_memory, 1},
    {"handles", case_handles, 1},
    {"graph-misuse", case_graph_misuse, 1},
    {"blas-arguments", case_blas_misuse, 1},
    {"blas-epilogue-arguments", case_blas_epilogue_misuse, 1},
    {"sort-arguments", case_sort_misuse, 1},
};

static const char *const schedules[] = {"forward",     "reverse",       "random:1",
                                        "random:2",    "warps",         "warps-reverse",
                                        "warps-random:1", "warps-random:2"};

static void verdict(bool good, const std::string &name, const std::string &why,
                    const std::string &out, const std::string &err)
{
    verdict_of("cuemu", good, name, why, out, err);
}

/* Runs `self CASE` with env; returns its exit status, its stdout and stderr. */
static int child(const char *self, const char *name, const char *env, const std::string &dir,
                 std::string *out, std::string *err)
{
    std::string o = dir + "/out", e = dir + "/err";
    std::string cmd = std::string("env ") + env + " '" + self + "' " + name + " >" + o + " 2>" + e;
    int st = system(cmd.c_str());
    *out = slurp(o);
    *err = slurp(e);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* Every EXPECT line of out has its report in err ("cuemu: KIND: FILE:LINE: ... TEXT"). */
static bool reports_match(const std::string &out, const std::string &err, std::string *why,
                          int *nexpect)
{
    size_t p = 0;
    *nexpect = 0;
    while ((p = out.find("EXPECT ", p)) != std::string::npos) {
        size_t q = out.find('\n', p);
        std::string line = out.substr(p + 7, q - p - 7);
        p = q;
        size_t s1 = line.find(' '), s2 = line.find(' ', s1 + 1);
        std::string kind = line.substr(0, s1), site = line.substr(s1 + 1, s2 - s1 - 1),
                    text = line.substr(s2 + 1);
        std::string head = "cuemu: " + kind + ": " + site + ": ";
        bool found = false;
        for (size_t r = err.find(head); r != std::string::npos; r = err.find(head, r + 1)) {
            size_t e = err.find('\n', r);
            if (err.substr(r, e - r).find(text) != std::string::npos)
                found = true;
        }
        if (!found) {
            *why = " (no report \"" + head + "..." + text + "\")";
            return false;
        }
        ++*nexpect;
    }
    return *nexpect > 0;
}

static int run_all(const char *self)
{
    char tmpl[] = "/tmp/cuemu-selftest.XXXXXX";
    if (!mkdtemp(tmpl)) {
        perror("cuemu-selftest: mkdtemp");
        return 2;
    }
    std::string dir = tmpl, out, err;
    for (const test_case &c : cases) {
        if (!c.misuse) {
            int bad = 0;
            std::string why;
            for (const char *s : schedules) {
                std::string env = std::string("CUEMU=1 CUEMU_SCHEDULE=") + s;
                int st = child(self, c.name, env.c_str(), dir, &out, &err);
                if (st != 0 || err.find("cuemu:") != std::string::npos) {
                    bad = 1;
                    why = std::string(" (under CUEMU_SCHEDULE=") + s + ", exit " + std::to_string(st) + ")";
                    break;
                }
            }
            for (const char *m : {"sync", "lazy"}) {
                std::string env = std::string("CUEMU=1 CUEMU_STREAMS=") + m;
                int st = bad ? 0 : child(self, c.name, env.c_str(), dir, &out, &err);
                if (st != 0 || err.find("cuemu:") != std::string::npos) {
                    bad = 1;
                    why = std::string(" (under CUEMU_STREAMS=") + m + ", exit " + std::to_string(st) + ")";
                }
            }
            verdict(!bad, c.name, bad ? why : " (exact under 8 schedules and 3 stream modes, no report)", out, err);
            continue;
        }
        int st = child(self, c.name, "CUEMU=1", dir, &out, &err), n = 0;
        std::string why;
        bool good = st == 0 && reports_match(out, err, &why, &n);
        if (good)
            why = " (" + std::to_string(n) + " report" + (n > 1 ? "s" : "") + ", each at its file and line)";
        else if (why.empty())
            why = " (exit " + std::to_string(st) + ")";
        verdict(good, c.name, why, out, err);
    }
    /* the missing barrier: wrong results with a warp running ahead */
    const char *warps[] = {"warps", "warps-reverse", "warps-random:1"};
    int shown = 0;
    std::string all;
    for (const char *s : warps) {
        std::string env = std::string("CUEMU=1 CUEMU_SCHEDULE=") + s;
        shown += child(self, "race", env.c_str(), dir, &out, &err) == 0;
        all += std::string(s) + ": " + out;
    }
    verdict(shown == 3, "missing-barrier", " (wrong sums under warps, warps-reverse and warps-random:1)", all, err);
    /* a missing stream wait, a missing synchronization: the host sees old data under lazy */
    int st = child(self, "stream-race-wait", "CUEMU=1 CUEMU_STREAMS=lazy", dir, &out, &err);
    verdict(st == 0, "missing-stream-wait", " (wrong values under CUEMU_STREAMS=lazy)", out, err);
    st = child(self, "stream-race-sync", "CUEMU=1 CUEMU_STREAMS=lazy", dir, &out, &err);
    verdict(st == 0, "missing-synchronize", " (wrong values under CUEMU_STREAMS=lazy)", out, err);
    st = child(self, "no-device", "-u CUEMU", dir, &out, &err);
    verdict(st == 0, "no-device-without-CUEMU", "", out, err);
#if defined(__SANITIZE_ADDRESS__)
    /* the report names the kernel only when symbolized; the sanitizer parts turn that off
     * (tests/cuemu/run.sh: a leak check at exit could deadlock in the symbolizer), and this
     * child stops at its one report, before any leak check */
    st = child(self, "asan-oob", "CUEMU=1 ASAN_OPTIONS=\"$ASAN_OPTIONS:symbolize=1:detect_leaks=0\" "
               "LSAN_OPTIONS=\"$LSAN_OPTIONS:symbolize=1\"", dir, &out, &err);
    verdict(st != 0 && err.find("heap-buffer-overflow") != std::string::npos &&
                err.find("k_oob_write") != std::string::npos,
            "kernel-out-of-bounds-under-asan", "", out, err);
#endif
    unlink((dir + "/out").c_str());
    unlink((dir + "/err").c_str());
    rmdir(dir.c_str());
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return run_all(argv[0]);
    const char *name = argv[1];
    if (!strcmp(name, "race")) {
        int rc = race_shows();
        for (void *p : owned)
            cudaFree(p);
        return rc;
    }
    if (!strcmp(name, "stream-race-wait") || !strcmp(name, "stream-race-sync")) {
        bool w = !strcmp(name, "stream-race-sync");
        int rc = stream_race_shows(w, !w);
        for (void *p : owned)
            cudaFree(p);
        return rc;
    }
    if (!strcmp(name, "no-device"))
        case_no_device();
    else if (!strcmp(name, "asan-oob"))
        case_asan_oob();
    else {
        const test_case *c = NULL;
        for (const test_case &k : cases)
            if (!strcmp(k.name, name))
                c = &k;
        if (!c) {
            fprintf(stderr, "cuemu-selftest: no case '%s'\n", name);
            return 2;
        }
        c->fn();
    }
    for (void *p : owned) /* after a fault too: cudaFree frees, and returns the fault */
        cudaFree(p);
    return failures != 0;
}
