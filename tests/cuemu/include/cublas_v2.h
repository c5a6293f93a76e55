/* cuemu: the cuBLAS calls tupe makes (see cublasLt.h for how products are computed). */
#ifndef CUEMU_CUBLAS_V2_H
#define CUEMU_CUBLAS_V2_H
#include "cublas_api_common.h"
typedef struct cuemu_blas_handle *cublasHandle_t;
cublasStatus_t cublasCreate(cublasHandle_t *h, CUEMU_SITE);
cublasStatus_t cublasDestroy(cublasHandle_t h, CUEMU_SITE);
cublasStatus_t cublasSetStream(cublasHandle_t h, cudaStream_t s, CUEMU_SITE);
cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t h, cublasOperation_t ta,
                                          cublasOperation_t tb, int m, int n, int k,
                                          const void *alpha, const void *A, cudaDataType_t at,
                                          int lda, long long sa, const void *B, cudaDataType_t bt,
                                          int ldb, long long sb, const void *beta, void *C,
                                          cudaDataType_t ct, int ldc, long long sc, int batch,
                                          cublasComputeType_t comp, cublasGemmAlgo_t algo,
                                          CUEMU_SITE);
#endif
