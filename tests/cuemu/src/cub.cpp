/* cuemu: cub::DeviceRadixSort::SortPairs (cub/cub.cuh) for keys and values of any size. */
#include "internal.h"

#include <algorithm>
#include <numeric>
#include <vector>

namespace cuemu {

static uint64_t key_at(const void *k, size_t ksize, long long i)
{
    uint64_t v = 0;
    memcpy(&v, (const char *)k + (size_t)i * ksize, ksize); /* little-endian: the low bytes */
    return v;
}

cudaError_t sort_pairs(void *tmp, size_t *tmp_bytes, const void *kin, void *kout, size_t ksize,
                       const void *vin, void *vout, size_t vsize, long long n, int begin_bit,
                       int end_bit, cudaStream_t s, const char *file, int line)
{
    const char *who = "cub::DeviceRadixSort::SortPairs";
    size_t kb = n > 0 ? (size_t)n * ksize : 0, vb = n > 0 ? (size_t)n * vsize : 0;
    size_t need = kb + vb + 256;
    if (!tmp) { /* the size query: no device work */
        *tmp_bytes = need;
        return cudaSuccess;
    }
    cudaError_t r = device_ready();
    if (r == cudaSuccess)
        r = sticky();
    if (r != cudaSuccess)
        return set_error(r);
    int kbits = (int)(ksize * 8);
    if (n < 0 || begin_bit < 0 || end_bit > kbits || begin_bit >= end_bit) {
        report_error(file, line, "%s: %lld items, key bits [%d, %d) of %d", who, n, begin_bit,
                     end_bit, kbits);
        return set_error(cudaErrorInvalidValue);
    }
    if (*tmp_bytes < need) {
        report_error(file, line, "%s: %zu bytes of temporary storage, less than the %zu the size "
                     "query asked for", who, *tmp_bytes, need);
        return set_error(cudaErrorInvalidValue);
    }
    if (n == 0)
        return cudaSuccess;
    if (mem_check(kin, kb, "SortPairs keys_in", file, line) ||
        mem_check(kout, kb, "SortPairs keys_out", file, line) ||
        mem_check(vin, vb, "SortPairs values_in", file, line) ||
        mem_check(vout, vb, "SortPairs values_out", file, line) ||
        mem_check(tmp, *tmp_bytes, "SortPairs temporary storage", file, line))
        return set_error(sticky());
    const void *in[2] = {kin, vin};
    size_t inb[2] = {kb, vb};
    void *out[3] = {kout, vout, tmp};
    size_t outb[3] = {kb, vb, *tmp_bytes};
    for (int o = 0; o < 3; o++)
        for (int i = 0; i < 2 + o; i++) {
            const void *p = i < 2 ? in[i] : out[i - 2];
            size_t pb = i < 2 ? inb[i] : outb[i - 2];
            if (overlaps(out[o], outb[o], p, pb)) {
                report_error(file, line, "%s: buffers overlap (keys and values in and out, and "
                             "the temporary storage, must be apart)", who);
                return set_error(cudaErrorInvalidValue);
            }
        }
    size_t tbytes = *tmp_bytes;
    static const int sorts = counter_id("sorts"), digest = counter_id("launch_digest");
    counter_add(sorts, 1);
    const uint64_t shape[3] = {(uint64_t)n, (uint64_t)begin_bit, (uint64_t)end_bit};
    counter_mix(digest, "sort", shape, 3);
    return set_error(submit(s, who, file, line, [=]() {
        uint64_t range = end_bit - begin_bit >= 64 ? ~0ull : (1ull << (end_bit - begin_bit)) - 1;
        uint64_t outside = ~(range << begin_bit) & (kbits >= 64 ? ~0ull : (1ull << kbits) - 1);
        std::vector<long long> idx((size_t)n);
        std::iota(idx.begin(), idx.end(), 0LL);
        for (long long i = 0; i < n; i++)
            if (key_at(kin, ksize, i) & outside) {
                report_misuse(file, line, "%s: key %lld (0x%llx) has bits outside [%d, %d), which "
                              "the sort ignores (end_bit too small?)", who, i,
                              (unsigned long long)key_at(kin, ksize, i), begin_bit, end_bit);
                break;
            }
        std::stable_sort(idx.begin(), idx.end(), [&](long long a, long long b) {
            return (key_at(kin, ksize, a) >> begin_bit & range) <
                   (key_at(kin, ksize, b) >> begin_bit & range);
        });
        for (long long i = 0; i < n; i++) {
            memcpy((char *)kout + (size_t)i * ksize, (const char *)kin + (size_t)idx[(size_t)i] * ksize,
                   ksize);
            memcpy((char *)vout + (size_t)i * vsize, (const char *)vin + (size_t)idx[(size_t)i] * vsize,
                   vsize);
        }
        memset(tmp, 0xA5, tbytes < 4096 ? tbytes : 4096); /* it was used */
    }));
}

} // namespace cuemu
