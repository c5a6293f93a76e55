/* Sums of squares: the gradient norm (norm.cu). */
#ifndef TUPE_KERNELS_NORM_CUH
#define TUPE_KERNELS_NORM_CUH

#include "common.cuh"

double cu_sumsq(tupe_backend *be, const tupe_dev *x, size_t n);
void cu_sumsq_parts(tupe_backend *be, const tupe_dev *x, size_t n, size_t part, double *out);
/* The same into device memory d (ceil(n / part) doubles), queued on the compute stream. */
void sumsq_runs_dev(cu_priv *pr, const tupe_dev *x, size_t n, size_t part, double *d);
/* *out (device) = the sum of v[0..n) (device, overwritten) by tupe_tree_sum_d's tree, queued on
 * the compute stream. */
void tree_sum_dev(cu_priv *pr, double *v, int n, double *out);

#endif
