/* Attention (attention.cu). */
#ifndef TUPE_KERNELS_ATTENTION_CUH
#define TUPE_KERNELS_ATTENTION_CUH

#include "common.cuh"

void cu_attn_fwd(tupe_backend *be, tupe_dev *ctx, tupe_dev *probs, tupe_dev *lse,
                 const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
                 const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                 const tupe_drop *drop, tupe_dev *scratch_);
void cu_attn_bwd(tupe_backend *be, tupe_dev *dqkv, tupe_dev *G, tupe_dev *probs,
                 const tupe_dev *lse, const tupe_dev *ctx, const tupe_dev *dctx,
                 const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
                 const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                 const tupe_drop *drop, tupe_dev *scratch_);
size_t cu_attn_scratch(tupe_backend *be, int T);

/* The flash attention (attention_flash.cu): lse [B,H,T] (fp32) in place of the probabilities,
 * the backward's bias gradient G (fp32) accumulated inside it (NULL: none). */
void flash_fwd(cu_priv *pr, tupe_dev *ctx, tupe_dev *lse, const tupe_dev *qkv,
               const tupe_dev *bias, size_t bstride, const int32_t *lengths, int B, int T, int H,
               int dh, double alpha, const tupe_drop *drop);
void flash_bwd(cu_priv *pr, tupe_dev *dqkv, tupe_dev *G, const tupe_dev *lse, const tupe_dev *ctx,
               const tupe_dev *dctx, const tupe_dev *qkv, const tupe_dev *bias, size_t bstride,
               const int32_t *lengths, int B, int T, int H, int dh, double alpha,
               const tupe_drop *drop);

#endif
