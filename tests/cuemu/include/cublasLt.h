/* cuemu: cuBLASLt on the CPU. Descriptors, layouts and preferences are recorded and checked
 * as the library checks them, and more: dimensions that agree, leading dimensions >= rows,
 * attribute sizes, every operand inside its allocation, an output that overlaps no input and
 * whose batches do not overlap, pointers as aligned as the preference promised, a workspace
 * as large as announced. The product is column-major D = alpha op(A) op(B) + beta C through
 * OpenBLAS sgemm: bf16 operands widened exactly, TF32 compute rounds fp32 operands to 10
 * mantissa bits first, the output rounded once at the end; the epilogues BIAS and BGRADB (below)
 * on single products. CUEMU_LT_NOALGO=1 makes the
 * heuristic find no algorithm (a caller's fallback then runs). */
#ifndef CUEMU_CUBLASLT_H
#define CUEMU_CUBLASLT_H
#include "cublas_api_common.h"
typedef struct cuemu_lt_handle *cublasLtHandle_t;
typedef struct cuemu_lt_desc *cublasLtMatmulDesc_t;
typedef struct cuemu_lt_layout *cublasLtMatrixLayout_t;
typedef struct cuemu_lt_pref *cublasLtMatmulPreference_t;
typedef struct {
    uint64_t data[8];
} cublasLtMatmulAlgo_t;
typedef struct {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
} cublasLtMatmulHeuristicResult_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_TRANSC = 5,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
    CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26
} cublasLtMatmulDescAttributes_t;
/* The epilogues emulated: BIAS adds bias[i] (one per row of D) to every column, in fp32 before
 * D's one rounding; BGRADB writes the sums of op(B) over the inner dimension k (one per column
 * of D), in fp32 in the order of k, into the bias pointer (overwritten), rounded once to the
 * bias type. The bias type is D's (the default, -1), or fp32. */
typedef enum {
    CUBLASLT_EPILOGUE_DEFAULT = 1,
    CUBLASLT_EPILOGUE_BIAS = 4,
    CUBLASLT_EPILOGUE_BGRADB = 512
} cublasLtEpilogue_t;
typedef enum {
    CUBLASLT_MATRIX_LAYOUT_TYPE = 0,
    CUBLASLT_MATRIX_LAYOUT_ORDER = 1,
    CUBLASLT_MATRIX_LAYOUT_ROWS = 2,
    CUBLASLT_MATRIX_LAYOUT_COLS = 3,
    CUBLASLT_MATRIX_LAYOUT_LD = 4,
    CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT = 5,
    CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET = 6
} cublasLtMatrixLayoutAttribute_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8
} cublasLtMatmulPreferenceAttributes_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t *h, CUEMU_SITE);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t h, CUEMU_SITE);
cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t *d, cublasComputeType_t comp,
                                        cudaDataType_t scale, CUEMU_SITE);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d, CUEMU_SITE);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d,
                                              cublasLtMatmulDescAttributes_t a, const void *buf,
                                              size_t size, CUEMU_SITE);
cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t *l, cudaDataType_t t,
                                          uint64_t rows, uint64_t cols, int64_t ld, CUEMU_SITE);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l, CUEMU_SITE);
cublasStatus_t cublasLtMatrixLayoutSetAttribute(cublasLtMatrixLayout_t l,
                                                cublasLtMatrixLayoutAttribute_t a,
                                                const void *buf, size_t size, CUEMU_SITE);
cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t *p, CUEMU_SITE);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p, CUEMU_SITE);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p,
                                                    cublasLtMatmulPreferenceAttributes_t a,
                                                    const void *buf, size_t size, CUEMU_SITE);
cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op,
                                              cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
                                              cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                              cublasLtMatmulPreference_t pref, int requested,
                                              cublasLtMatmulHeuristicResult_t *res, int *nres,
                                              CUEMU_SITE);
cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void *alpha,
                              const void *A, cublasLtMatrixLayout_t a, const void *B,
                              cublasLtMatrixLayout_t b, const void *beta, const void *C,
                              cublasLtMatrixLayout_t c, void *D, cublasLtMatrixLayout_t d,
                              const cublasLtMatmulAlgo_t *algo, void *ws, size_t ws_bytes,
                              cudaStream_t s, CUEMU_SITE);
#endif
