/* Positional terms (position.cu). */
#ifndef TUPE_KERNELS_POSITION_CUH
#define TUPE_KERNELS_POSITION_CUH

#include "common.cuh"

void cu_pos_bias_fwd(tupe_backend *be, tupe_dev *bias, const tupe_dev *A, const tupe_dev *rel,
                     const int32_t *buckets, int ldb, int T, int H, int reset);
void cu_pos_bias_bwd(tupe_backend *be, tupe_dev *dA, tupe_dev *drel, const tupe_dev *G,
                     const int32_t *buckets, int ldb, int T, int H, int reset);
void cu_qk_pos_add(tupe_backend *be, tupe_dev *qkv, const tupe_dev *pq, const tupe_dev *pk,
                   int B, int T, int D);
void cu_qk_pos_grad(tupe_backend *be, tupe_dev *dpq, tupe_dev *dpk, const tupe_dev *dqkv, int B,
                    int T, int D);
void cu_rope(tupe_backend *be, tupe_dev *qkv, const tupe_dev *rot, int B, int T, int D, int dh,
             int interleaved, int inverse);

#endif
