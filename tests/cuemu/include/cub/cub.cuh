/* cuemu: the CUB algorithms tupe uses. DeviceRadixSort::SortPairs: CUB's two-call protocol
 * (a size query, then the sort) and its result, a stable sort by key bits [begin_bit,
 * end_bit) that moves whole keys; checked: enough temporary storage, buffers inside their
 * allocations, outputs that alias no input, and keys with bits outside the range (CUB would
 * ignore them, which is almost always a wrong end_bit). Runs on the given stream. */
#ifndef CUEMU_CUB_CUH
#define CUEMU_CUB_CUH
#include "../cuemu.h"

namespace cuemu {
cudaError_t sort_pairs(void *tmp, size_t *tmp_bytes, const void *kin, void *kout, size_t ksize,
                       const void *vin, void *vout, size_t vsize, long long n, int begin_bit,
                       int end_bit, cudaStream_t s, const char *file, int line);
} // namespace cuemu

namespace cub {
struct DeviceRadixSort {
    template <class K, class V, class N>
    static cudaError_t SortPairs(void *tmp, size_t &tmp_bytes, const K *kin, K *kout,
                                 const V *vin, V *vout, N n, int begin_bit = 0,
                                 int end_bit = sizeof(K) * 8, cudaStream_t s = 0,
                                 bool debug = false, CUEMU_SITE)
    {
        (void)debug;
        static_assert(std::is_unsigned<K>::value && std::is_integral<K>::value,
                      "cuemu sorts unsigned integer keys");
        static_assert(std::is_trivially_copyable<V>::value, "values must be trivially copyable");
        return cuemu::sort_pairs(tmp, &tmp_bytes, kin, kout, sizeof(K), vin, vout, sizeof(V),
                                 (long long)n, begin_bit, end_bit, s, cuemu_file, cuemu_line);
    }
};
} // namespace cub
#endif
