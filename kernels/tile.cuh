/* Tiles: the matrix-multiply and copy primitives of the flash attention (attention_flash.cu),
 * on fp32 tiles in shared memory, row-major with a leading dimension. Every thread of the block
 * calls each primitive; each output element is one thread's, its sum taken in the order of k,
 * so the results are the same bits under any schedule. The bodies are scalar, on the GPU as
 * under emulation: a tensor-core body (ldmatrix + mma.sync, cp.async for the copies) goes
 * behind the same calls, and is to be checked on a GPU against this one. */
#ifndef TUPE_KERNELS_TILE_CUH
#define TUPE_KERNELS_TILE_CUH

#include "common.cuh"

/* dst[r][c] = src[r * lds + c] (converted to fp32) for r < valid, 0 for valid <= r < rows;
 * c < cols. Asynchronous in the tensor-core body: the tile is there after tile_wait(). */
template <class T>
__device__ inline void tile_copy(float *dst, int ldd, const T *src, size_t lds, int rows,
                                 int valid, int cols)
{
    for (int x = threadIdx.x; x < rows * cols; x += blockDim.x) {
        int r = x / cols, c = x % cols;
        dst[r * ldd + c] = r < valid ? ldv(src, (size_t)r * lds + c) : 0.0f;
    }
}

/* Every copy and product before it is complete and visible to the block. */
__device__ inline void tile_wait() { __syncthreads(); }

/* C[m][n] = alpha sum_k A[m][k] B[n][k] (+ C[m][n] when acc): A [M][K], B [N][K]. */
__device__ inline void tile_mma_nt(float *C, int ldc, const float *A, int lda, const float *B,
                                   int ldb, int M, int N, int K, float alpha, bool acc)
{
    for (int x = threadIdx.x; x < M * N; x += blockDim.x) {
        int m = x / N, n = x % N;
        const float *a = A + m * lda, *b = B + n * ldb;
        float s = 0;
        for (int k = 0; k < K; k++)
            s += a[k] * b[k];
        C[m * ldc + n] = acc ? C[m * ldc + n] + alpha * s : alpha * s;
    }
}

/* C[m][n] = rs[m] C[m][n] + alpha sum_k A[m][k] B[k][n] (rs NULL: 1): A [M][K], B [K][N]. */
__device__ inline void tile_mma_nn(float *C, int ldc, const float *rs, const float *A, int lda,
                                   const float *B, int ldb, int M, int N, int K, float alpha)
{
    for (int x = threadIdx.x; x < M * N; x += blockDim.x) {
        int m = x / N, n = x % N;
        const float *a = A + m * lda;
        float s = 0;
        for (int k = 0; k < K; k++)
            s += a[k] * B[k * ldb + n];
        float c = C[m * ldc + n];
        C[m * ldc + n] = (rs ? rs[m] * c : c) + alpha * s;
    }
}

/* C[m][n] += alpha sum_k A[k][m] B[k][n]: A [K][M], B [K][N]. */
__device__ inline void tile_mma_tn(float *C, int ldc, const float *A, int lda, const float *B,
                                   int ldb, int M, int N, int K, float alpha)
{
    for (int x = threadIdx.x; x < M * N; x += blockDim.x) {
        int m = x / N, n = x % N;
        float s = 0;
        for (int k = 0; k < K; k++)
            s += A[k * lda + m] * B[k * ldb + n];
        C[m * ldc + n] += alpha * s;
    }
}

#endif
