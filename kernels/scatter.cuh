/* Deterministic scatter-adds: a stable sort by destination, then fixed-order segmented sums
 * (scatter.cu). */
#ifndef TUPE_KERNELS_SCATTER_CUH
#define TUPE_KERNELS_SCATTER_CUH

#include "common.cuh"

/* Stable sort of n (key, value) pairs; keys below 2^bits. Results in SC_K2 / SC_V2. */
int sort_pairs(cu_priv *pr, const unsigned *k1, const unsigned *v1, unsigned **k2,
               unsigned **v2, int n, int bits);
/* The bits that hold v. */
int bits_for(unsigned v);
/* dst[key, w] += the sum over the sorted entries q with that key (key < none) of
 * src[vals[q] * sv + w * sw], w < W, in sorted order (n entries: keys k2, values v2). */
template <class T, class S>
void seg_sums(cu_priv *pr, T *dst, const S *src, size_t sv, size_t sw, const unsigned *k2,
              const unsigned *v2, int n, int W, unsigned none);

#endif
