/* cuemu's runtime, shared between its parts: reports and error state (report.cpp), device
 * memory (memory.cpp), devices, streams and events (streams.cpp), the block scheduler
 * (scheduler.cpp), cuBLAS/cuBLASLt (blas.cpp) and CUB (cub.cpp). */
#ifndef CUEMU_INTERNAL_H
#define CUEMU_INTERNAL_H

#include "cuemu.h"

#include <functional>

namespace cuemu {

/* ---- reports (stderr, one line each, "cuemu: KIND: file:line: message") -----------------
 * error   a call refused its arguments and returned an error, as the real one would
 * FAULT   a kernel or device operation did what faults or is undefined on a GPU: the error
 *         is sticky (cudaErrorLaunchFailure or cudaErrorIllegalAddress), as on the GPU
 * misuse  the call did what the real one does, but the arguments are almost surely a bug
 * Every report counts; the count is printed at exit. CUEMU_ABORT=1 aborts at the first. */
void report_error(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void report_misuse(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void report_fault(cudaError_t e, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* e as the result of a call: kept as the thread's last error (cudaGetLastError). */
cudaError_t set_error(cudaError_t e);
/* The sticky error of a fault, or cudaSuccess. */
cudaError_t sticky(void);
int env_int(const char *name, int dflt);

/* ---- memory ---------------------------------------------------------------------------- */
enum mem_kind { MEM_NONE, MEM_DEVICE, MEM_PINNED };
/* The kind of allocation p points into (one past the end counts when `end_ok`), with its base
 * and size. */
int mem_find(const void *p, int end_ok, const void **base, size_t *size, int *device);
/* 0 when [p, p + bytes) lies in one device allocation; else reports a FAULT naming `what`. */
int mem_check(const void *p, size_t bytes, const char *what, const char *file, int line);
int overlaps(const void *a, size_t na, const void *b, size_t nb);
/* counters_reset's part: the memory's peak and largest buffer from what is allocated now. */
void mem_counters_reset(void);

/* ---- devices and streams --------------------------------------------------------------- */
/* cudaSuccess when CUEMU=1 makes the emulated device visible, else cudaErrorNoDevice. */
cudaError_t device_ready(void);
int current_device(void);
/* Runs `work` on stream s (0: the legacy default stream) in stream order, as CUEMU_STREAMS
 * says (streams.cpp): on the stream's thread when what it waits for is done (async), when
 * something needs it (lazy; `eager` work, a collective, starts at once), or before submit
 * returns (sync). Returns the sticky error, or an error for a stream that is not one
 * (reported). */
cudaError_t submit(cudaStream_t s, const char *what, const char *file, int line,
                   const std::function<void()> &work, bool eager = false);
/* Every stream's work done (cudaFree, cudaFreeHost). */
cudaError_t drain_all(void);
/* The device of stream s (0: the current device's legacy stream), -1 for no live stream. */
int stream_device(cudaStream_t s);
/* The host waits for stream s's work (a report names fn at file:line if s is no stream). */
cudaError_t stream_sync(cudaStream_t s, const char *fn, const char *file, int line);

} // namespace cuemu
#endif
