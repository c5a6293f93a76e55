/* Losses (loss.cu). */
#ifndef TUPE_KERNELS_LOSS_CUH
#define TUPE_KERNELS_LOSS_CUH

#include "common.cuh"

void cu_xent_fwd(tupe_backend *be, tupe_dev *lse, const tupe_dev *logits, const int32_t *labels,
                 int M, int V, int ld, tupe_dev *loss, tupe_dev *correct);
void cu_xent_fused(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                   const int32_t *labels, int M, int V, int ld, double scale,
                   const tupe_dev *snorm, tupe_dev *loss, tupe_dev *correct);
void cu_xent_bwd(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits, const tupe_dev *lse,
                 const int32_t *labels, int M, int V, int ld, double scale);
void cu_mse_fwd(tupe_backend *be, const tupe_dev *pred, const tupe_dev *target, int M,
                tupe_dev *loss);
void cu_mse_bwd(tupe_backend *be, tupe_dev *dpred, const tupe_dev *pred, const tupe_dev *target,
                int M, double scale);

#endif
