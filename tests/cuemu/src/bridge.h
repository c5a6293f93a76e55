/* What cuemu's NCCL (libnccl.so.2, nccl.cpp) needs of the emulated runtime, which is linked
 * into the program: the program exports cuemu_bridge_get (the emulated build links with
 * --export-dynamic-symbol), and the library finds it with dlsym when it is opened. */
#ifndef CUEMU_BRIDGE_H
#define CUEMU_BRIDGE_H

#include <stddef.h>

#include "cuda_runtime_api.h"

extern "C" {

struct cuemu_bridge {
    int version; /* CUEMU_BRIDGE_VERSION */
    /* The calling thread's device. */
    int (*current_device)(void);
    /* The device of stream s (0: the current device's legacy stream); -1 if s is no stream. */
    int (*stream_device)(cudaStream_t s);
    /* Runs fn(arg) on stream s in stream order (CUEMU_STREAMS); eager work starts without
     * waiting to be needed (a collective). A cudaError_t. */
    int (*submit)(cudaStream_t s, const char *what, void (*fn)(void *), void *arg, int eager);
    /* 0 when [p, p + bytes) lies inside one device allocation (its device in *device); else
     * 1 with the reason in why. */
    int (*mem_check)(const void *p, size_t bytes, int *device, char *why, size_t cap);
    /* A report on stderr ("cuemu: KIND: message"), counted with the others; kind is
     * "error", "misuse" or "FAULT". */
    void (*report)(const char *kind, const char *msg);
    /* The host waits for stream s's work. A cudaError_t. */
    int (*stream_sync)(cudaStream_t s);
    /* CUEMU_* settings. */
    int (*env_int)(const char *name, int dflt);
};

#define CUEMU_BRIDGE_VERSION 1
const struct cuemu_bridge *cuemu_bridge_get(void);
}

#endif
