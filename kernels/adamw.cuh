/* The optimizer (adamw.cu). */
#ifndef TUPE_KERNELS_ADAMW_CUH
#define TUPE_KERNELS_ADAMW_CUH

#include "common.cuh"

void cu_adamw(tupe_backend *be, tupe_dev *p, const tupe_dev *g, tupe_dev *m, tupe_dev *v,
              tupe_dev *master, size_t n, const tupe_adamw_args *a, const tupe_dev *sumsq);

#endif
