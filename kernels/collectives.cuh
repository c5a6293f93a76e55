/* Communication between the GPUs of ranks (collectives.cu). */
#ifndef TUPE_KERNELS_COLLECTIVES_CUH
#define TUPE_KERNELS_COLLECTIVES_CUH

#include "common.cuh"

/* Ends the NCCL link of the backend, if any (before anything it may still use is freed). */
void nccl_destroy(cu_priv *pr);

#endif
