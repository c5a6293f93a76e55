/* Embeddings, and gathers and scatters of rows (embedding.cu). */
#ifndef TUPE_KERNELS_EMBEDDING_CUH
#define TUPE_KERNELS_EMBEDDING_CUH

#include "common.cuh"

void cu_embed_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                  const int32_t *ids, const int32_t *types, const int32_t *lengths,
                  const tupe_dev *word, const tupe_dev *pos, const tupe_dev *tt,
                  const tupe_dev *gamma, const tupe_dev *beta, int B, int T, int D, double eps,
                  const tupe_drop *drop);
void cu_embed_bwd(tupe_backend *be, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt,
                  tupe_dev *dgamma, tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                  const tupe_dev *rstd, const tupe_dev *gamma, const int32_t *ids,
                  const int32_t *types, const int32_t *lengths, int B, int T, int D, int V,
                  int ntypes, const tupe_drop *drop, tupe_dev *scratch_);
void cu_gather_rows(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx,
                    int M, int D);
void cu_scatter_rows(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx,
                     int M, int D);

#endif
