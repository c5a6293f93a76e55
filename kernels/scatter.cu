/* Deterministic scatter-adds (no floating-point atomics): CUB's stable radix sort by the
 * destination row, then segmented sums in a fixed order. The embedding-table gradient and the
 * relative-bucket gradient go through them. */
#include <cub/cub.cuh>

#include "scatter.cuh"

/* Segmented sums after a stable sort by key: dst[key, w] += the sum over the run of entries q
 * with that key (key < none) of src[vals[q] * sv + w * sw], w < W, in sorted order. Runs can
 * be long (a far relative bucket holds ~70k of the 262k (i, j) at T = 512; [MASK] ~12% of the
 * tokens), so no thread adds a whole run: pass 1 sums each piece (the part of a run inside one
 * chunk of SEG_CH sorted entries) into part[start, w]; pass 2 adds a run's pieces, chunk by
 * chunk. Both passes run in a fixed order: the result does not depend on scheduling. */
#define SEG_CH 64

template <class S>
__global__ void k_seg_part(float *part, const S *src, size_t sv, size_t sw, const unsigned *keys,
                           const unsigned *vals, int n, int W, unsigned none)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    int nch = (n + SEG_CH - 1) / SEG_CH;
    if (x >= (size_t)nch * W)
        return;
    int c = (int)(x / W), w = (int)(x % W);
    int q0 = c * SEG_CH, q1 = q0 + SEG_CH < n ? q0 + SEG_CH : n, start = q0;
    float acc = 0;
    for (int q = q0; q < q1 && keys[q] < none; q++) {
        if (q > q0 && keys[q] != keys[q - 1]) {
            part[(size_t)start * W + w] = acc;
            acc = 0;
            start = q;
        }
        acc += ldv(src, (size_t)vals[q] * sv + (size_t)w * sw);
    }
    part[(size_t)start * W + w] = acc;
}

template <class T>
__global__ void k_seg_sum(T *dst, const float *part, const unsigned *keys, int n, int W,
                          unsigned none)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)n * W)
        return;
    int p = (int)(x / W), w = (int)(x % W);
    unsigned k = keys[p];
    if (k >= none || (p > 0 && keys[p - 1] == k))
        return;
    size_t o = (size_t)k * W + w;
    float acc = ldv(dst, o);
    for (int q = p; q < n && keys[q] == k; q = (q / SEG_CH + 1) * SEG_CH)
        acc += part[(size_t)q * W + w];
    stv(dst, o, acc);
}

/* The two passes over n sorted entries (keys k2, values v2), W columns; part is scratch. */
template <class T, class S>
void seg_sums(cu_priv *pr, T *dst, const S *src, size_t sv, size_t sw, const unsigned *k2,
              const unsigned *v2, int n, int W, unsigned none)
{
    float *part = (float *)scratch(pr, SC_PART, (size_t)n * W * sizeof(float));
    if (!part)
        return;
    size_t nch = ((size_t)n + SEG_CH - 1) / SEG_CH;
    k_seg_part<S><<<nblocks(nch * W, 128), 128, 0, pr->s>>>(part, src, sv, sw, k2, v2, n, W,
                                                              none);
    LAUNCHED("k_seg_part");
    k_seg_sum<T><<<nblocks((size_t)n * W, 256), 256, 0, pr->s>>>(dst, part, k2, n, W, none);
    LAUNCHED("k_seg_sum");
}

/* dpos[t] += sum over b of s[b, t] (padding rows of s are 0), b in order. */
int sort_pairs(cu_priv *pr, const unsigned *k1, const unsigned *v1, unsigned **k2,
                      unsigned **v2, int n, int bits)
{
    *k2 = (unsigned *)scratch(pr, SC_K2, (size_t)n * 4);
    *v2 = (unsigned *)scratch(pr, SC_V2, (size_t)n * 4);
    if (!*k2 || !*v2)
        return 1;
    size_t tb = 0;
    if (CK(cub::DeviceRadixSort::SortPairs(NULL, tb, k1, *k2, v1, *v2, n, 0, bits, pr->s)))
        return 1;
    void *tmp = scratch(pr, SC_CUB, tb);
    if (!tmp)
        return 1;
    return CK(cub::DeviceRadixSort::SortPairs(tmp, tb, k1, *k2, v1, *v2, n, 0, bits, pr->s));
}

int bits_for(unsigned v)
{
    int b = 1;
    while (b < 32 && (v >> b) != 0)
        b++;
    return b;
}

template void seg_sums<float, float>(cu_priv *, float *, const float *, size_t, size_t,
                                     const unsigned *, const unsigned *, int, int, unsigned);
template void seg_sums<bf16, bf16>(cu_priv *, bf16 *, const bf16 *, size_t, size_t,
                                   const unsigned *, const unsigned *, int, int, unsigned);
template void seg_sums<bf16, float>(cu_priv *, bf16 *, const float *, size_t, size_t,
                                    const unsigned *, const unsigned *, int, int, unsigned);
