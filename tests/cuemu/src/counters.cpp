/* cuemu: counters of what a program made the emulated device do (cuemu.h, "counters"): the
 * runtime's own (launches, products, copies, host waits; memory in memory.cpp) and those a
 * kernel bumps with CUEMU_COUNT. Sums since the last counters_reset. */
#include "internal.h"

#include <atomic>
#include <mutex>

namespace cuemu {

enum { MAX_COUNTERS = 64 };
static std::mutex mu;
static const char *names[MAX_COUNTERS];
static int ncounters;
static std::atomic<uint64_t> values[MAX_COUNTERS];

int counter_id(const char *name)
{
    std::lock_guard<std::mutex> g(mu);
    for (int i = 0; i < ncounters; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    if (ncounters == MAX_COUNTERS) {
        report_error(__FILE__, __LINE__, "more than %d counters (counter '%s' not counted)",
                     MAX_COUNTERS, name);
        return -1;
    }
    names[ncounters] = name;
    return ncounters++;
}

void counter_add(int id, uint64_t n)
{
    if (id >= 0)
        values[id].fetch_add(n, std::memory_order_relaxed);
}

void counter_max(int id, uint64_t v)
{
    if (id < 0)
        return;
    uint64_t old = values[id].load(std::memory_order_relaxed);
    while (old < v && !values[id].compare_exchange_weak(old, v, std::memory_order_relaxed)) {
    }
}

void counter_mix(int id, const char *what, const uint64_t *v, int n)
{
    if (id < 0)
        return;
    uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a of the name and the values */
    for (const char *c = what; *c; c++)
        h = (h ^ (unsigned char)*c) * 0x100000001b3ull;
    for (int i = 0; i < n; i++)
        for (int b = 0; b < 64; b += 8)
            h = (h ^ ((v[i] >> b) & 0xff)) * 0x100000001b3ull;
    /* folded in the order of the calls: the same digest means the same sequence */
    uint64_t old = values[id].load(std::memory_order_relaxed);
    while (!values[id].compare_exchange_weak(old, (old ^ h) * 0x9E3779B97F4A7C15ull + 1,
                                             std::memory_order_relaxed)) {
    }
}

uint64_t counter_get(const char *name)
{
    int id = counter_id(name);
    return id >= 0 ? values[id].load(std::memory_order_relaxed) : 0;
}

void counters_reset(void)
{
    {
        std::lock_guard<std::mutex> g(mu);
        for (int i = 0; i < ncounters; i++)
            values[i].store(0, std::memory_order_relaxed);
    }
    mem_counters_reset();
}

} // namespace cuemu
