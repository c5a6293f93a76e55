/* cuemu: the runtime's side of bridge.h, for cuemu's NCCL. */
#include "bridge.h"

#include <stdio.h>

#include "internal.h"

namespace cuemu {

static int b_current_device(void) { return current_device(); }

static int b_submit(cudaStream_t s, const char *what, void (*fn)(void *), void *arg, int eager)
{
    return (int)submit(s, what, NULL, 0, [fn, arg]() { fn(arg); }, eager != 0);
}

static int b_mem_check(const void *p, size_t bytes, int *device, char *why, size_t cap)
{
    const void *base = NULL;
    size_t size = 0;
    int dev = -1, kind = mem_find(p, bytes == 0, &base, &size, &dev);
    if (kind == MEM_DEVICE && (uintptr_t)p + bytes <= (uintptr_t)base + size) {
        *device = dev;
        return 0;
    }
    if (kind == MEM_NONE)
        snprintf(why, cap, "%p is not device memory", p);
    else if (kind != MEM_DEVICE)
        snprintf(why, cap, "%p is pinned host memory, not device memory", p);
    else
        snprintf(why, cap, "[%p, +%zu bytes) ends %zu bytes past the end of its %zu-byte "
                 "allocation", p, bytes, (size_t)((uintptr_t)p + bytes - ((uintptr_t)base + size)),
                 size);
    return 1;
}

static void b_report(const char *kind, const char *msg)
{
    if (kind[0] == 'm')
        report_misuse(NULL, 0, "%s", msg);
    else if (kind[0] == 'F')
        report_fault(cudaErrorIllegalAddress, NULL, 0, "%s", msg);
    else
        report_error(NULL, 0, "%s", msg);
}

static int b_stream_sync(cudaStream_t s) { return (int)stream_sync(s, "ncclCommDestroy", NULL, 0); }

static const cuemu_bridge bridge = {CUEMU_BRIDGE_VERSION, b_current_device, stream_device,
                                    b_submit, b_mem_check, b_report, b_stream_sync, env_int};

} // namespace cuemu

extern "C" const cuemu_bridge *cuemu_bridge_get(void) { return &cuemu::bridge; }
