/* Matrix products and their epilogues (matmul.cu). */
#ifndef TUPE_KERNELS_MATMUL_CUH
#define TUPE_KERNELS_MATMUL_CUH

#include "common.cuh"

/* C = alpha op(A) op(B) + beta C, row-major, `batch` products at the given element strides.
 * A and B have type ab, C type ct. */
void lt_gemm(cu_priv *pr, int ta, int tb, int M, int N, int K, float alpha, const void *A,
             int lda, long long sa, const void *B, int ldb, long long sb, float beta, void *C,
             int ldc, long long sc, int batch, cudaDataType_t ab, cudaDataType_t ct);
/* Frees a cached plan's descriptors. */
void destroy_plan(gemm_plan *g);
/* db += column sums of dy over the selected rows; dg += column sums of dy*xh when dg. */
template <class T>
void colsums(cu_priv *pr, T *dg, T *db, const T *dy, const T *xh, int N, int D, rowsel sel);

void cu_gemm(tupe_backend *be, int ta, int tb, int M, int N, int K, double alpha,
             const tupe_dev *A, int lda, const tupe_dev *B, int ldb, double beta, tupe_dev *C,
             int ldc);
void cu_linear_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *a, const tupe_dev *x,
                   const tupe_dev *W, const tupe_dev *b, int N, int in, int out, int act,
                   const tupe_drop *drop);
void cu_linear_bwd(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dW, tupe_dev *db,
                   const tupe_dev *dy, const tupe_dev *x, const tupe_dev *W, int N, int in,
                   int out);
void cu_act_fwd(tupe_backend *be, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                const tupe_drop *drop);
void cu_act_bwd(tupe_backend *be, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n,
                int act, const tupe_drop *drop);

#endif
