/* The attention's softmax with its key mask and dropout, and its backward (softmax.cu):
 * rows of [B,H,T,T] scores. */
#ifndef TUPE_KERNELS_SOFTMAX_CUH
#define TUPE_KERNELS_SOFTMAX_CUH

#include "common.cuh"

/* Per row (b, h, i) of `rows`: probs = softmax(S + bias[b,h,i]) over keys j < lens[b], 0
 * beyond (sequence b's bias at bias + b * bstride); pd = drop(probs) when pd (dropout on). */
template <class T>
void softmax_fwd(cu_priv *pr, T *probs, T *pd, const float *S, const float *bias,
                 size_t bstride, const int32_t *lens, int H, int T_, size_t rows, dropk d);
/* pd = drop(probs) over n elements (the backward's recomputation). */
template <class T>
void drop_probs(cu_priv *pr, T *pd, const T *probs, const int32_t *lens, int H, int T_, size_t n,
                dropk d);
/* Per row: probs <- P (dp - sum_j P dp), dp = drop'(dpd), over j < lens[b], 0 beyond. */
template <class T>
void softmax_bwd(cu_priv *pr, T *probs, const float *dpd, const int32_t *lens, int H, int T_,
                 size_t rows, dropk d);

#endif
