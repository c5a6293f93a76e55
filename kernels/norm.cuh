/* Sums of squares: the gradient norm (norm.cu). */
#ifndef TUPE_KERNELS_NORM_CUH
#define TUPE_KERNELS_NORM_CUH

#include "common.cuh"

double cu_sumsq(tupe_backend *be, const tupe_dev *x, size_t n);
void cu_sumsq_parts(tupe_backend *be, const tupe_dev *x, size_t n, size_t part, double *out);

#endif
