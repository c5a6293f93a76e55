/* DeBERTa's disentangled terms (disentangled.cu). */
#ifndef TUPE_KERNELS_DISENTANGLED_CUH
#define TUPE_KERNELS_DISENTANGLED_CUH

#include "common.cuh"

void cu_dis_bias_fwd(tupe_backend *be, tupe_dev *bias, const tupe_dev *c2p, const tupe_dev *p2c,
                     const int32_t *idx, int B, int T, int H, int W, double s);
void cu_dis_bias_bwd(tupe_backend *be, tupe_dev *dc2p, tupe_dev *dp2c, const tupe_dev *G,
                     const int32_t *idx, int B, int T, int H, int W, double s);

#endif
