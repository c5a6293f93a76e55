/* cuemu: the emulated devices, streams and events.
 *
 * Devices: none unless CUEMU=1 is in the environment, so that a program of an emulated build
 * never computes on the emulation without being asked to; then CUEMU_DEVICES (default 1),
 * each one an sm_90 with the limits of the real one (launch checks in scheduler.cpp).
 *
 * Streams: every piece of device work (kernel, copy, memset, library call, event record)
 * goes through submit() on its stream, after its arguments were checked at the call. The
 * executor is synchronous: the work runs before submit() returns, as under
 * CUDA_LAUNCH_BLOCKING=1, which is one of the orders CUDA allows, so a correct program
 * computes what it computes on a GPU. Streams and events are real objects with CUDA's
 * validity rules (a destroyed stream is an error, timing needs timing events), so that an
 * asynchronous executor (per-stream queues run by worker threads, events as markers, waits
 * as dependencies, drained by the synchronizing calls below) can replace submit's body
 * without changing any API function. */
#include "internal.h"

#include <omp.h>
#include <stdio.h>
#include <time.h>

#include <mutex>
#include <set>

struct CUstream_st {
    unsigned flags;
    int device;
};

struct CUevent_st {
    unsigned flags;
    int device;
    bool recorded;
    double ms;
};

namespace cuemu {

enum { MAX_DEVICES = 16 };
static std::mutex mu;
static std::set<CUstream_st *> streams;
static std::set<CUevent_st *> events;
static CUstream_st legacy[MAX_DEVICES];
static thread_local int cur_dev = 0;

static int ndevices(void)
{
    if (!env_int("CUEMU", 0))
        return 0;
    int n = env_int("CUEMU_DEVICES", 1);
    return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

cudaError_t device_ready(void) { return ndevices() > 0 ? cudaSuccess : cudaErrorNoDevice; }

int current_device(void) { return cur_dev; }

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* The stream s names (0: the legacy default stream of the current device), or NULL after
 * reporting why it is none. */
static CUstream_st *stream_of(cudaStream_t s, const char *fn, const char *file, int line)
{
    if (!s) {
        legacy[cur_dev].device = cur_dev;
        return &legacy[cur_dev];
    }
    std::lock_guard<std::mutex> g(mu);
    if (streams.count(s))
        return s;
    report_error(file, line, "%s: stream %p is not a live stream (destroyed, or never created)",
                 fn, (void *)s);
    return NULL;
}

static CUevent_st *event_of(cudaEvent_t e, const char *fn, const char *file, int line)
{
    {
        std::lock_guard<std::mutex> g(mu);
        if (e && events.count(e))
            return e;
    }
    report_error(file, line, "%s: event %p is not a live event (destroyed, or never created)",
                 fn, (void *)e);
    return NULL;
}

cudaError_t submit(cudaStream_t s, const char *what, const char *file, int line,
                   const std::function<void()> &work)
{
    CUstream_st *st = stream_of(s, what, file, line);
    if (!st)
        return cudaErrorInvalidResourceHandle;
    if (st->device != cur_dev) {
        report_error(file, line, "%s on a stream of device %d while device %d is current", what,
                     st->device, cur_dev);
        return cudaErrorInvalidResourceHandle;
    }
    cudaError_t r = sticky();
    if (r != cudaSuccess)
        return r;
    work();
    return sticky();
}

cudaError_t drain_all(void) { return sticky(); }

} // namespace cuemu

using namespace cuemu;

/* ---- devices ----------------------------------------------------------------------------- */

cudaError_t cudaDriverGetVersion(int *v)
{
    *v = 13000; /* the emulator is the driver: always there, with or without devices */
    return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int *v)
{
    *v = 13000;
    return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *n)
{
    *n = ndevices();
    return *n ? cudaSuccess : set_error(cudaErrorNoDevice);
}

cudaError_t cudaSetDevice(int d, const char *file, int line)
{
    int n = ndevices();
    if (!n)
        return set_error(cudaErrorNoDevice);
    if (d < 0 || d >= n) {
        report_error(file, line, "cudaSetDevice(%d): there are %d devices", d, n);
        return set_error(cudaErrorInvalidDevice);
    }
    cur_dev = d;
    return sticky();
}

cudaError_t cudaGetDevice(int *d)
{
    *d = cur_dev;
    return device_ready() != cudaSuccess ? set_error(cudaErrorNoDevice) : sticky();
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d)
{
    int n = ndevices();
    if (!n)
        return set_error(cudaErrorNoDevice);
    if (d < 0 || d >= n)
        return set_error(cudaErrorInvalidDevice);
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "cuemu %d (CPU emulation of an sm_90 GPU)", d);
    p->totalGlobalMem = (size_t)16 << 30;
    p->sharedMemPerBlock = 48 * 1024;
    p->sharedMemPerBlockOptin = 227 * 1024;
    p->warpSize = 32;
    p->maxThreadsPerBlock = 1024;
    p->maxThreadsDim[0] = 1024, p->maxThreadsDim[1] = 1024, p->maxThreadsDim[2] = 64;
    p->maxGridSize[0] = 2147483647, p->maxGridSize[1] = 65535, p->maxGridSize[2] = 65535;
    p->major = 9, p->minor = 0;
    p->multiProcessorCount = omp_get_max_threads();
    return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize(const char *file, int line)
{
    (void)file, (void)line;
    cudaError_t r = device_ready();
    return set_error(r != cudaSuccess ? r : drain_all());
}

/* ---- streams ------------------------------------------------------------------------------ */

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags, const char *file, int line)
{
    *s = NULL;
    cudaError_t r = device_ready();
    if (r != cudaSuccess)
        return set_error(r);
    if (flags & ~(unsigned)cudaStreamNonBlocking) {
        report_error(file, line, "cudaStreamCreateWithFlags: flags 0x%x", flags);
        return set_error(cudaErrorInvalidValue);
    }
    CUstream_st *st = new CUstream_st{flags, cur_dev};
    std::lock_guard<std::mutex> g(mu);
    streams.insert(st);
    *s = st;
    return sticky();
}

cudaError_t cudaStreamCreate(cudaStream_t *s, const char *file, int line)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault, file, line);
}

cudaError_t cudaStreamDestroy(cudaStream_t s, const char *file, int line)
{
    if (!s) {
        report_error(file, line, "cudaStreamDestroy: the default stream cannot be destroyed");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (!stream_of(s, "cudaStreamDestroy", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> g(mu);
    streams.erase(s); /* its work is done: the executor is synchronous */
    delete s;
    return sticky();
}

cudaError_t cudaStreamSynchronize(cudaStream_t s, const char *file, int line)
{
    if (device_ready() != cudaSuccess)
        return set_error(cudaErrorNoDevice);
    if (!stream_of(s, "cudaStreamSynchronize", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    return set_error(drain_all());
}

cudaError_t cudaStreamQuery(cudaStream_t s, const char *file, int line)
{
    if (!stream_of(s, "cudaStreamQuery", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    return sticky();
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags, const char *file,
                                int line)
{
    if (!stream_of(s, "cudaStreamWaitEvent", file, line) ||
        !event_of(e, "cudaStreamWaitEvent", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    if (flags != 0) {
        report_error(file, line, "cudaStreamWaitEvent: flags 0x%x", flags);
        return set_error(cudaErrorInvalidValue);
    }
    return sticky();
}

/* ---- events ------------------------------------------------------------------------------- */

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags, const char *file, int line)
{
    *e = NULL;
    cudaError_t r = device_ready();
    if (r != cudaSuccess)
        return set_error(r);
    if (flags & ~(unsigned)(cudaEventBlockingSync | cudaEventDisableTiming)) {
        report_error(file, line, "cudaEventCreateWithFlags: flags 0x%x", flags);
        return set_error(cudaErrorInvalidValue);
    }
    CUevent_st *ev = new CUevent_st{flags, cur_dev, false, 0};
    std::lock_guard<std::mutex> g(mu);
    events.insert(ev);
    *e = ev;
    return sticky();
}

cudaError_t cudaEventCreate(cudaEvent_t *e, const char *file, int line)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault, file, line);
}

cudaError_t cudaEventDestroy(cudaEvent_t e, const char *file, int line)
{
    if (!event_of(e, "cudaEventDestroy", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    std::lock_guard<std::mutex> g(mu);
    events.erase(e);
    delete e;
    return sticky();
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s, const char *file, int line)
{
    CUevent_st *ev = event_of(e, "cudaEventRecord", file, line);
    if (!ev)
        return set_error(cudaErrorInvalidResourceHandle);
    return set_error(submit(s, "cudaEventRecord", file, line, [ev]() {
        ev->recorded = true;
        ev->ms = now_ms();
    }));
}

cudaError_t cudaEventQuery(cudaEvent_t e, const char *file, int line)
{
    if (!event_of(e, "cudaEventQuery", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    return sticky();
}

cudaError_t cudaEventSynchronize(cudaEvent_t e, const char *file, int line)
{
    if (!event_of(e, "cudaEventSynchronize", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    return set_error(drain_all());
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b, const char *file,
                                 int line)
{
    CUevent_st *x = event_of(a, "cudaEventElapsedTime", file, line);
    CUevent_st *y = event_of(b, "cudaEventElapsedTime", file, line);
    if (!x || !y)
        return set_error(cudaErrorInvalidResourceHandle);
    if ((x->flags | y->flags) & cudaEventDisableTiming) {
        report_error(file, line, "cudaEventElapsedTime: an event created with "
                     "cudaEventDisableTiming");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (!x->recorded || !y->recorded)
        return set_error(cudaErrorInvalidResourceHandle);
    *ms = (float)(y->ms - x->ms);
    return sticky();
}
