/* cuemu: device memory is host memory from posix_memalign (256-byte aligned, as cudaMalloc's),
 * filled with 0xCB bytes (cudaMalloc does not zero), and registered with the place that
 * allocated it, so that copies, memsets, library operands and kernel pointer arguments are
 * checked against their allocation. Pinned host memory (cudaMallocHost) is registered too:
 * kernels may read it (it is mapped on the GPU), copies treat it as host memory. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>

#include <map>
#include <mutex>

namespace cuemu {

struct alloc {
    size_t size;
    int kind, device;
    const char *file;
    int line;
};

static std::mutex mu;
static std::map<uintptr_t, alloc> allocs;
static size_t device_bytes;

/* The allocation holding p, or allocs.end(). */
static std::map<uintptr_t, alloc>::iterator holder(const void *p, int end_ok)
{
    uintptr_t a = (uintptr_t)p;
    auto it = allocs.upper_bound(a);
    if (it == allocs.begin())
        return allocs.end();
    --it;
    if (a < it->first + it->second.size || (end_ok && a == it->first + it->second.size))
        return it;
    return allocs.end();
}

int mem_find(const void *p, int end_ok, const void **base, size_t *size, int *device)
{
    std::lock_guard<std::mutex> g(mu);
    auto it = holder(p, end_ok);
    if (it == allocs.end())
        return MEM_NONE;
    if (base)
        *base = (const void *)it->first;
    if (size)
        *size = it->second.size;
    if (device)
        *device = it->second.device;
    return it->second.kind;
}

int mem_check(const void *p, size_t bytes, const char *what, const char *file, int line)
{
    char why[400];
    {
        std::lock_guard<std::mutex> g(mu);
        auto it = holder(p, bytes == 0);
        if (it != allocs.end() && it->second.kind == MEM_DEVICE &&
            (uintptr_t)p + bytes <= it->first + it->second.size)
            return 0;
        if (it == allocs.end())
            snprintf(why, sizeof why, "not in any device allocation");
        else if (it->second.kind != MEM_DEVICE)
            snprintf(why, sizeof why, "pinned host memory (cudaMallocHost at %s:%d), not "
                     "device memory", it->second.file, it->second.line);
        else
            snprintf(why, sizeof why, "ends %zu bytes past the end of the %zu-byte allocation "
                     "at %p (cudaMalloc at %s:%d)",
                     (size_t)((uintptr_t)p + bytes - (it->first + it->second.size)),
                     it->second.size, (void *)it->first, it->second.file, it->second.line);
    }
    report_fault(cudaErrorIllegalAddress, file, line, "%s [%p, +%zu bytes): %s", what, p, bytes,
                 why);
    return 1;
}

int overlaps(const void *a, size_t na, const void *b, size_t nb)
{
    uintptr_t x = (uintptr_t)a, y = (uintptr_t)b;
    return na && nb && x < y + nb && y < x + na;
}

static cudaError_t host_alloc(void **p, size_t bytes, int kind, const char *file, int line)
{
    *p = NULL;
    cudaError_t r = device_ready();
    if (r == cudaSuccess)
        r = sticky();
    if (r != cudaSuccess)
        return set_error(r);
    if (bytes == 0)
        return cudaSuccess;
    size_t limit = (size_t)env_int("CUEMU_MEM_LIMIT_MB", 0) << 20;
    {
        std::lock_guard<std::mutex> g(mu);
        if (kind == MEM_DEVICE && limit && device_bytes + bytes > limit)
            return set_error(cudaErrorMemoryAllocation);
    }
    void *q = NULL;
    if (posix_memalign(&q, 256, bytes) != 0)
        return set_error(cudaErrorMemoryAllocation);
    memset(q, kind == MEM_DEVICE ? 0xCB : 0, bytes);
    if (env_int("CUEMU_VERBOSE", 0))
        fprintf(stderr, "cuemu: %s:%d: %s %zu bytes at %p\n", file, line,
                kind == MEM_DEVICE ? "cudaMalloc" : "cudaMallocHost", bytes, q);
    static const int peak = counter_id("peak_device_bytes"),
                     largest = counter_id("largest_buffer_bytes");
    std::lock_guard<std::mutex> g(mu);
    allocs[(uintptr_t)q] = alloc{bytes, kind, current_device(), file, line};
    if (kind == MEM_DEVICE) {
        device_bytes += bytes;
        counter_max(peak, device_bytes);
        counter_max(largest, bytes);
    }
    *p = q;
    return cudaSuccess;
}

void mem_counters_reset(void)
{
    static const int peak = counter_id("peak_device_bytes"),
                     largest = counter_id("largest_buffer_bytes");
    std::lock_guard<std::mutex> g(mu);
    counter_max(peak, device_bytes);
    for (const auto &a : allocs)
        if (a.second.kind == MEM_DEVICE)
            counter_max(largest, a.second.size);
}

static cudaError_t host_free(void *p, int kind, const char *fn, const char *file, int line)
{
    if (!p)
        return sticky();
    static const int syncs = counter_id("host_syncs");
    counter_add(syncs, 1);
    drain_all(); /* cudaFree waits for the device */
    {
        std::lock_guard<std::mutex> g(mu);
        auto it = allocs.find((uintptr_t)p);
        if (it != allocs.end() && it->second.kind == kind) {
            if (kind == MEM_DEVICE)
                device_bytes -= it->second.size;
            allocs.erase(it);
            free(p);
            return sticky();
        }
    }
    report_error(file, line, "%s(%p): not the start of a live %s allocation (freed twice, "
                 "or from elsewhere)", fn, p, kind == MEM_DEVICE ? "cudaMalloc" : "cudaMallocHost");
    return set_error(cudaErrorInvalidValue);
}

/* The side a pointer of a copy is on: 1 device, 0 host; -1 (reported) when the kind says
 * otherwise. */
static int side(const void *p, int want_dev, int infer, const char *what, const char *file,
                int line)
{
    int k = mem_find(p, 0, NULL, NULL, NULL);
    if (infer)
        return k == MEM_DEVICE;
    if (want_dev && k != MEM_DEVICE) {
        report_error(file, line, "%s %p is not device memory, but the copy's kind says so", what,
                     p);
        return -1;
    }
    if (!want_dev && k == MEM_DEVICE) {
        report_error(file, line, "%s %p is device memory, but the copy's kind says host", what,
                     p);
        return -1;
    }
    return want_dev;
}

} // namespace cuemu

using namespace cuemu;

cudaError_t cudaMalloc(void **p, size_t bytes, const char *file, int line)
{
    return host_alloc(p, bytes, MEM_DEVICE, file, line);
}

cudaError_t cudaFree(void *p, const char *file, int line)
{
    return host_free(p, MEM_DEVICE, "cudaFree", file, line);
}

cudaError_t cudaMallocHost(void **p, size_t bytes, const char *file, int line)
{
    return host_alloc(p, bytes, MEM_PINNED, file, line);
}

cudaError_t cudaFreeHost(void *p, const char *file, int line)
{
    return host_free(p, MEM_PINNED, "cudaFreeHost", file, line);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
                            cudaStream_t s, const char *file, int line)
{
    cudaError_t r = device_ready();
    if (r != cudaSuccess || (r = sticky()) != cudaSuccess)
        return set_error(r);
    if ((unsigned)k > cudaMemcpyDefault) {
        report_error(file, line, "cudaMemcpy: kind %d is not a cudaMemcpyKind", (int)k);
        return set_error(cudaErrorInvalidMemcpyDirection);
    }
    if (n == 0)
        return cudaSuccess;
    int infer = k == cudaMemcpyDefault;
    int ds = side(dst, k == cudaMemcpyHostToDevice || k == cudaMemcpyDeviceToDevice, infer,
                  "cudaMemcpy destination", file, line);
    int ss = side(src, k == cudaMemcpyDeviceToHost || k == cudaMemcpyDeviceToDevice, infer,
                  "cudaMemcpy source", file, line);
    if (ds < 0 || ss < 0)
        return set_error(cudaErrorInvalidValue);
    if ((ds && mem_check(dst, n, "cudaMemcpy destination", file, line)) ||
        (ss && mem_check(src, n, "cudaMemcpy source", file, line)))
        return set_error(sticky());
    if (overlaps(dst, n, src, n))
        report_misuse(file, line, "cudaMemcpy: source and destination overlap (%zu bytes at %p "
                      "and %p)", n, src, dst);
    static const int copies = counter_id("copies"), transfers = counter_id("transfers"),
                     digest = counter_id("launch_digest");
    counter_add(ds && ss ? copies : transfers, 1);
    const uint64_t shape[2] = {(uint64_t)k, (uint64_t)n};
    counter_mix(digest, "memcpy", shape, 2);
    return set_error(submit(s, "cudaMemcpyAsync", file, line, [=]() { memmove(dst, src, n); }));
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k, const char *file,
                       int line)
{
    cudaError_t r = cudaMemcpyAsync(dst, src, n, k, 0, file, line);
    return r != cudaSuccess ? r : cudaStreamSynchronize(0, file, line);
}

cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s, const char *file, int line)
{
    cudaError_t r = device_ready();
    if (r != cudaSuccess || (r = sticky()) != cudaSuccess)
        return set_error(r);
    if (n == 0)
        return cudaSuccess;
    if (mem_check(p, n, "cudaMemset", file, line))
        return set_error(sticky());
    static const int memsets = counter_id("memsets"), digest = counter_id("launch_digest");
    counter_add(memsets, 1);
    const uint64_t shape[1] = {(uint64_t)n};
    counter_mix(digest, "memset", shape, 1);
    return set_error(submit(s, "cudaMemsetAsync", file, line, [=]() { memset(p, v, n); }));
}

cudaError_t cudaMemset(void *p, int v, size_t n, const char *file, int line)
{
    cudaError_t r = cudaMemsetAsync(p, v, n, 0, file, line);
    return r != cudaSuccess ? r : cudaStreamSynchronize(0, file, line);
}
