/* Attention (attention.cu). */
#ifndef TUPE_KERNELS_ATTENTION_CUH
#define TUPE_KERNELS_ATTENTION_CUH

#include "common.cuh"

void cu_attn_fwd(tupe_backend *be, tupe_dev *ctx, tupe_dev *probs, const tupe_dev *qkv,
                 const tupe_dev *bias, const int32_t *lengths, int B, int T, int H, int dh,
                 double alpha, const tupe_drop *drop, tupe_dev *scratch_);
void cu_attn_bwd(tupe_backend *be, tupe_dev *dqkv, tupe_dev *probs, const tupe_dev *dctx,
                 const tupe_dev *qkv, const int32_t *lengths, int B, int T, int H, int dh,
                 double alpha, const tupe_drop *drop, tupe_dev *scratch_);
size_t cu_attn_scratch(tupe_backend *be, int T);
void cu_bias_grad(tupe_backend *be, tupe_dev *G, const tupe_dev *dS, int B, int H, int T);

#endif
