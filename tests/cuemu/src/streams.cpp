/* cuemu: the emulated devices, streams and events.
 *
 * Devices: none unless CUEMU=1 is in the environment, so that a program of an emulated build
 * never computes on the emulation without being asked to; then CUEMU_DEVICES (default 1),
 * each one an sm_90 with the limits of the real one (launch checks in scheduler.cpp).
 *
 * Streams: every piece of device work (kernel, copy, memset, library call, event record, NCCL
 * collective) goes through submit() on its stream, after its arguments were checked at the
 * call. How it then runs is CUEMU_STREAMS:
 *
 *   async  (the default) each stream has a thread that runs its work in order as soon as
 *          what it waits for is done, while the host goes on: as on a GPU, a device-to-host
 *          copy lands when it runs, and two streams run side by side;
 *   lazy   the same threads, but work waits until something needs it: a host
 *          synchronization (stream, event, device, a synchronous copy, cudaFree), a query of
 *          it, another stream's cudaStreamWaitEvent on it, or a collective queued after it
 *          (collectives start at once, since other processes wait for them). A device-wide
 *          synchronization runs the streams one after the other, the one given work last
 *          first. So a consumer that does not wait for its producer on another stream, or a
 *          host that reads a copy it did not synchronize, sees the old data every time;
 *   sync   the work runs inside submit(), as under CUDA_LAUNCH_BLOCKING=1.
 *
 * A correct program computes the same under all three. Events are markers in a stream (the
 * position of their last record); cudaStreamWaitEvent makes the stream's later work wait for
 * that position. The legacy default stream (0) of each device waits for all earlier work of
 * the device's blocking streams, and they wait for its earlier work, as CUDA's implicit
 * synchronization does; cudaStreamNonBlocking streams do not. */
/* the standard headers first: cuemu.h defines __noinline__, which libstdc++ uses */
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include <omp.h>
#include <stdio.h>
#include <time.h>

#include "internal.h"

namespace {

/* One piece of work, or a marker (no work): runs when its stream reaches it, after `deps`
 * (stream, position) are done. */
struct item {
    uint64_t seq;
    std::function<void()> work;
    std::vector<std::pair<CUstream_st *, uint64_t>> deps;
};

} // namespace

struct CUgraph_st {              /* a capture: the work as it was submitted */
    int device;
    std::vector<std::function<void()>> nodes;
};

struct CUgraphExec_st {
    int device;
    std::vector<std::function<void()>> nodes;
};

struct CUstream_st {
    unsigned flags;
    int device;
    bool legacy, dead, quit;
    CUgraph_st *capture;          /* being captured into, or NULL */
    bool capture_bad;             /* invalidated (a host synchronization during it) */
    std::deque<item> q;           /* not yet started */
    uint64_t submitted, completed, released; /* positions: 1 is the first piece of work */
    uint64_t last_touch;          /* when it was last given work (a global counter) */
    std::thread th;
};

struct CUevent_st {
    unsigned flags;
    int device;
    bool recorded;
    CUstream_st *st;              /* its last record: stream and position */
    uint64_t seq;
    double ms;                    /* when that record ran */
};

namespace cuemu {

enum { MAX_DEVICES = 16 };
enum { MODE_SYNC, MODE_ASYNC, MODE_LAZY };

static std::mutex mu;
static std::condition_variable cv;
static std::set<CUstream_st *> live;          /* the program's valid stream handles */
static std::vector<CUstream_st *> every;      /* every stream with a thread, destroyed ones too */
static std::set<CUevent_st *> events;
static std::set<CUgraph_st *> graphs;
static std::set<CUgraphExec_st *> execs;
static int capturing;                         /* streams being captured */
static CUstream_st *legacy[MAX_DEVICES];
static uint64_t touches;
static thread_local int cur_dev = 0;

static int ndevices(void)
{
    if (!env_int("CUEMU", 0))
        return 0;
    int n = env_int("CUEMU_DEVICES", 1);
    return n < 1 ? 1 : n > MAX_DEVICES ? MAX_DEVICES : n;
}

static int mode(void)
{
    static int m = -1;
    if (m < 0) {
        const char *v = getenv("CUEMU_STREAMS");
        m = !v || !*v || !strcmp(v, "async") ? MODE_ASYNC : !strcmp(v, "lazy") ? MODE_LAZY
            : !strcmp(v, "sync") ? MODE_SYNC : -1;
        if (m < 0) {
            fprintf(stderr, "cuemu: CUEMU_STREAMS=%s: expected async, lazy or sync\n", v);
            abort();
        }
    }
    return m;
}

cudaError_t device_ready(void) { return ndevices() > 0 ? cudaSuccess : cudaErrorNoDevice; }

int current_device(void) { return cur_dev; }

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* ---- the executor (mu held unless said) ------------------------------------------------ */

static bool runnable(const CUstream_st *st)
{
    if (st->q.empty() || st->q.front().seq > st->released)
        return false;
    for (const auto &d : st->q.front().deps)
        if (d.first->completed < d.second)
            return false;
    return true;
}

static void executor(CUstream_st *st)
{
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        cv.wait(lk, [st] { return runnable(st) || (st->quit && st->q.empty()); });
        if (st->q.empty())
            break;
        item it = std::move(st->q.front());
        st->q.pop_front();
        lk.unlock();
        if (it.work && sticky() == cudaSuccess) /* a faulted device runs nothing more */
            it.work();
        it.work = nullptr; /* what it captured goes now, outside the lock */
        lk.lock();
        st->completed = it.seq;
        cv.notify_all();
    }
}

/* Lets st run its work up to position `upto`, and whatever that work waits for (lazy). */
static void release(CUstream_st *st, uint64_t upto)
{
    if (st->released >= upto)
        return;
    for (const item &it : st->q)
        if (it.seq > st->released && it.seq <= upto)
            for (const auto &d : it.deps)
                release(d.first, d.second);
    st->released = upto;
    cv.notify_all();
}

static void start(CUstream_st *st)
{
    every.push_back(st);
    if (mode() != MODE_SYNC)
        st->th = std::thread(executor, st);
}

static CUstream_st *new_stream(unsigned flags, int device, bool is_legacy)
{
    CUstream_st *st = new CUstream_st();
    st->flags = flags;
    st->device = device;
    st->legacy = is_legacy;
    start(st);
    return st;
}

static CUstream_st *legacy_of(int d)
{
    if (!legacy[d])
        legacy[d] = new_stream(cudaStreamDefault, d, true);
    return legacy[d];
}

/* Waits until st has done its work up to position `upto`. */
static void wait_done(std::unique_lock<std::mutex> &lk, CUstream_st *st, uint64_t upto)
{
    release(st, upto);
    cv.wait(lk, [st, upto] { return st->completed >= upto; });
}

/* Every stream of device d (all devices for d < 0) done; the lazy mode runs them one after
 * the other, the one given work last first. */
static void drain(int d)
{
    std::unique_lock<std::mutex> lk(mu);
    for (;;) {
        CUstream_st *pick = NULL;
        for (CUstream_st *st : every)
            if ((d < 0 || st->device == d) && st->completed < st->submitted &&
                (!pick || st->last_touch > pick->last_touch))
                pick = st;
        if (!pick)
            return;
        wait_done(lk, pick, pick->submitted);
    }
}

/* At exit: every stream's work done, its thread gone. A stream stuck in a collective whose
 * peers are gone is left to the process's end after a while. */
struct shutdown {
    ~shutdown()
    {
        std::unique_lock<std::mutex> lk(mu);
        for (CUstream_st *st : every) {
            release(st, st->submitted);
            st->quit = true;
        }
        cv.notify_all();
        cv.wait_for(lk, std::chrono::seconds(10), [] {
            for (CUstream_st *st : every)
                if (!st->q.empty() || st->completed < st->submitted)
                    return false;
            return true;
        });
        std::vector<CUstream_st *> all;
        all.swap(every);
        lk.unlock();
        for (CUstream_st *st : all) {
            bool idle;
            {
                std::lock_guard<std::mutex> g(mu);
                idle = st->q.empty() && st->completed == st->submitted;
            }
            if (st->th.joinable()) {
                if (!idle) {
                    st->th.detach();
                    continue;
                }
                st->th.join();
            }
            delete st;
        }
        for (CUevent_st *e : events)
            delete e;
        events.clear();
    }
};
static shutdown shutdown_;

/* The stream s names (0: the legacy default stream of the current device), or NULL after
 * reporting why it is none (mu held). */
static CUstream_st *stream_of(cudaStream_t s, const char *fn, const char *file, int line)
{
    if (!s)
        return legacy_of(cur_dev);
    if (live.count(s))
        return s;
    report_error(file, line, "%s: stream %p is not a live stream (destroyed, or never created)",
                 fn, (void *)s);
    return NULL;
}

static CUevent_st *event_of(cudaEvent_t e, const char *fn, const char *file, int line)
{
    if (e && events.count(e))
        return e;
    report_error(file, line, "%s: event %p is not a live event (destroyed, or never created)",
                 fn, (void *)e);
    return NULL;
}

/* Queues work (empty: a marker) on st after `deps`, with CUDA's implicit synchronization
 * added; returns its position (mu held). */
static uint64_t enqueue(CUstream_st *st, std::function<void()> work,
                        std::vector<std::pair<CUstream_st *, uint64_t>> deps, bool eager)
{
    if (st->legacy) {
        for (CUstream_st *x : every)
            if (x != st && x->device == st->device && !(x->flags & cudaStreamNonBlocking) &&
                x->completed < x->submitted)
                deps.emplace_back(x, x->submitted);
    } else if (!(st->flags & cudaStreamNonBlocking) && legacy[st->device]) {
        CUstream_st *l = legacy[st->device];
        if (l->completed < l->submitted)
            deps.emplace_back(l, l->submitted);
    }
    item it;
    it.seq = ++st->submitted;
    it.work = std::move(work);
    it.deps = std::move(deps);
    st->last_touch = ++touches;
    st->q.push_back(std::move(it));
    if (mode() == MODE_ASYNC)
        st->released = st->submitted;
    else if (eager)
        release(st, st->submitted);
    cv.notify_all();
    return st->submitted;
}

/* submit() with the stream already looked up and checked (mu held); returns the error and
 * the position in *pos. In the sync mode, work runs here, outside the lock. */
static cudaError_t submit_on(std::unique_lock<std::mutex> &lk, CUstream_st *st,
                             std::function<void()> work,
                             std::vector<std::pair<CUstream_st *, uint64_t>> deps, bool eager,
                             uint64_t *pos)
{
    cudaError_t r = sticky();
    if (r != cudaSuccess)
        return r;
    if (mode() == MODE_SYNC) {
        *pos = ++st->submitted;
        st->completed = st->submitted;
        lk.unlock();
        if (work)
            work();
        lk.lock();
        return sticky();
    }
    *pos = enqueue(st, std::move(work), std::move(deps), eager);
    return sticky();
}

/* A host synchronization (fn) while a stream is being captured: an error, and every capture is
 * invalidated, as in CUDA's global capture mode (mu held). */
static bool refused_in_capture(const char *fn, const char *file, int line)
{
    if (!capturing)
        return false;
    report_error(file, line, "%s while a stream is being captured: the host cannot wait for "
                 "the device inside a CUDA graph (the capture is invalidated)", fn);
    for (CUstream_st *x : every)
        if (x->capture)
            x->capture_bad = true;
    return true;
}

cudaError_t submit(cudaStream_t s, const char *what, const char *file, int line,
                   const std::function<void()> &work, bool eager)
{
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *st = stream_of(s, what, file, line);
    if (!st)
        return cudaErrorInvalidResourceHandle;
    if (st->device != cur_dev) {
        report_error(file, line, "%s on a stream of device %d while device %d is current", what,
                     st->device, cur_dev);
        return cudaErrorInvalidResourceHandle;
    }
    if (st->capture) { /* recorded with its arguments, run by each launch of the graph */
        if (work)
            st->capture->nodes.push_back(work);
        return sticky();
    }
    uint64_t pos;
    return submit_on(lk, st, work, {}, eager, &pos);
}

cudaError_t drain_all(void)
{
    drain(-1);
    return sticky();
}

int stream_device(cudaStream_t s)
{
    std::lock_guard<std::mutex> g(mu);
    if (!s)
        return cur_dev;
    return live.count(s) ? s->device : -1;
}

cudaError_t stream_sync(cudaStream_t s, const char *fn, const char *file, int line)
{
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *st = stream_of(s, fn, file, line);
    if (!st)
        return cudaErrorInvalidResourceHandle;
    if (refused_in_capture(fn, file, line))
        return cudaErrorStreamCaptureUnsupported;
    wait_done(lk, st, st->submitted);
    return sticky();
}

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
    if (r != cudaSuccess)
        return set_error(r);
    static const int syncs = counter_id("host_syncs");
    counter_add(syncs, 1);
    {
        std::lock_guard<std::mutex> g(mu);
        if (refused_in_capture("cudaDeviceSynchronize", file, line))
            return set_error(cudaErrorStreamCaptureUnsupported);
    }
    drain(cur_dev);
    return set_error(sticky());
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
    std::lock_guard<std::mutex> g(mu);
    CUstream_st *st = new_stream(flags, cur_dev, false);
    live.insert(st);
    *s = st;
    return sticky();
}

cudaError_t cudaStreamCreate(cudaStream_t *s, const char *file, int line)
{
    return cudaStreamCreateWithFlags(s, cudaStreamDefault, file, line);
}

/* The handle dies now; the work already queued still runs (as CUDA does), and the thread
 * ends after it. */
cudaError_t cudaStreamDestroy(cudaStream_t s, const char *file, int line)
{
    if (!s) {
        report_error(file, line, "cudaStreamDestroy: the default stream cannot be destroyed");
        return set_error(cudaErrorInvalidResourceHandle);
    }
    std::lock_guard<std::mutex> g(mu);
    if (!stream_of(s, "cudaStreamDestroy", file, line))
        return set_error(cudaErrorInvalidResourceHandle);
    live.erase(s);
    s->dead = true;
    release(s, s->submitted);
    s->quit = true;
    cv.notify_all();
    return sticky();
}

cudaError_t cudaStreamSynchronize(cudaStream_t s, const char *file, int line)
{
    if (device_ready() != cudaSuccess)
        return set_error(cudaErrorNoDevice);
    static const int syncs = counter_id("host_syncs");
    counter_add(syncs, 1);
    return set_error(stream_sync(s, "cudaStreamSynchronize", file, line));
}

cudaError_t cudaStreamQuery(cudaStream_t s, const char *file, int line)
{
    std::lock_guard<std::mutex> g(mu);
    CUstream_st *st = stream_of(s, "cudaStreamQuery", file, line);
    if (!st)
        return set_error(cudaErrorInvalidResourceHandle);
    if (refused_in_capture("cudaStreamQuery", file, line))
        return set_error(cudaErrorStreamCaptureUnsupported);
    release(st, st->submitted); /* a program that polls must see its work progress */
    cudaError_t r = sticky();
    return r != cudaSuccess ? r : st->completed < st->submitted ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags, const char *file,
                                int line)
{
    std::unique_lock<std::mutex> lk(mu);
    CUstream_st *st = stream_of(s, "cudaStreamWaitEvent", file, line);
    CUevent_st *ev = event_of(e, "cudaStreamWaitEvent", file, line);
    if (!st || !ev)
        return set_error(cudaErrorInvalidResourceHandle);
    if (flags != 0) {
        report_error(file, line, "cudaStreamWaitEvent: flags 0x%x", flags);
        return set_error(cudaErrorInvalidValue);
    }
    if (st->capture) {
        report_error(file, line, "cudaStreamWaitEvent on a stream being captured: a graph's "
                     "dependencies across streams are not emulated");
        st->capture_bad = true;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    if (!ev->recorded || mode() == MODE_SYNC) /* an event never recorded is complete */
        return sticky();
    uint64_t pos;
    std::vector<std::pair<CUstream_st *, uint64_t>> deps{{ev->st, ev->seq}};
    return set_error(submit_on(lk, st, nullptr, deps, false, &pos));
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
    CUevent_st *ev = new CUevent_st{flags, cur_dev, false, NULL, 0, 0};
    std::lock_guard<std::mutex> g(mu);
    events.insert(ev);
    *e = ev;
    return sticky();
}

cudaError_t cudaEventCreate(cudaEvent_t *e, const char *file, int line)
{
    return cudaEventCreateWithFlags(e, cudaEventDefault, file, line);
}

/* Waits for the event's last record first (it writes the event). */
cudaError_t cudaEventDestroy(cudaEvent_t e, const char *file, int line)
{
    std::unique_lock<std::mutex> lk(mu);
    CUevent_st *ev = event_of(e, "cudaEventDestroy", file, line);
    if (!ev)
        return set_error(cudaErrorInvalidResourceHandle);
    events.erase(ev);
    if (ev->recorded)
        wait_done(lk, ev->st, ev->seq);
    delete ev;
    return sticky();
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s, const char *file, int line)
{
    std::unique_lock<std::mutex> lk(mu);
    CUevent_st *ev = event_of(e, "cudaEventRecord", file, line);
    if (!ev)
        return set_error(cudaErrorInvalidResourceHandle);
    CUstream_st *st = stream_of(s, "cudaEventRecord", file, line);
    if (!st)
        return set_error(cudaErrorInvalidResourceHandle);
    if (st->device != cur_dev || ev->device != st->device) {
        report_error(file, line, "cudaEventRecord: event of device %d, stream of device %d, "
                     "device %d current", ev->device, st->device, cur_dev);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (st->capture) {
        report_error(file, line, "cudaEventRecord on a stream being captured: event nodes are "
                     "not emulated");
        st->capture_bad = true;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    if (ev->recorded) /* the previous record writes it: wait for it before reusing it */
        wait_done(lk, ev->st, ev->seq);
    uint64_t pos = 0;
    cudaError_t r = submit_on(lk, st, [ev]() { ev->ms = now_ms(); }, {}, false, &pos);
    ev->recorded = true;
    ev->st = st;
    ev->seq = pos;
    return set_error(r);
}

cudaError_t cudaEventQuery(cudaEvent_t e, const char *file, int line)
{
    std::lock_guard<std::mutex> g(mu);
    CUevent_st *ev = event_of(e, "cudaEventQuery", file, line);
    if (!ev)
        return set_error(cudaErrorInvalidResourceHandle);
    cudaError_t r = sticky();
    if (r != cudaSuccess || !ev->recorded)
        return r;
    release(ev->st, ev->seq);
    return ev->st->completed < ev->seq ? cudaErrorNotReady : cudaSuccess;
}

cudaError_t cudaEventSynchronize(cudaEvent_t e, const char *file, int line)
{
    std::unique_lock<std::mutex> lk(mu);
    CUevent_st *ev = event_of(e, "cudaEventSynchronize", file, line);
    if (!ev)
        return set_error(cudaErrorInvalidResourceHandle);
    static const int syncs = counter_id("host_syncs");
    counter_add(syncs, 1);
    if (refused_in_capture("cudaEventSynchronize", file, line))
        return set_error(cudaErrorStreamCaptureUnsupported);
    if (ev->recorded)
        wait_done(lk, ev->st, ev->seq);
    return set_error(sticky());
}

cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t a, cudaEvent_t b, const char *file,
                                 int line)
{
    std::lock_guard<std::mutex> g(mu);
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
    if (x->st->completed < x->seq || y->st->completed < y->seq)
        return set_error(cudaErrorNotReady);
    *ms = (float)(y->ms - x->ms);
    return sticky();
}

/* ---- graphs ------------------------------------------------------------------------------- */

cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode m, const char *file,
                                   int line)
{
    std::lock_guard<std::mutex> g(mu);
    CUstream_st *st = stream_of(s, "cudaStreamBeginCapture", file, line);
    if (!st)
        return set_error(cudaErrorInvalidResourceHandle);
    if (st->legacy) {
        report_error(file, line, "cudaStreamBeginCapture: the legacy default stream cannot be "
                     "captured");
        return set_error(cudaErrorStreamCaptureImplicit);
    }
    if (m != cudaStreamCaptureModeGlobal) {
        report_error(file, line, "cudaStreamBeginCapture: mode %d (only the global mode is "
                     "emulated)", (int)m);
        return set_error(cudaErrorInvalidValue);
    }
    if (st->capture) {
        report_error(file, line, "cudaStreamBeginCapture: the stream is already being captured");
        return set_error(cudaErrorIllegalState);
    }
    st->capture = new CUgraph_st{st->device, {}};
    st->capture_bad = false;
    capturing++;
    return sticky();
}

cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *out, const char *file, int line)
{
    *out = NULL;
    std::lock_guard<std::mutex> g(mu);
    CUstream_st *st = stream_of(s, "cudaStreamEndCapture", file, line);
    if (!st)
        return set_error(cudaErrorInvalidResourceHandle);
    if (!st->capture) {
        report_error(file, line, "cudaStreamEndCapture: the stream is not being captured");
        return set_error(cudaErrorIllegalState);
    }
    CUgraph_st *gr = st->capture;
    st->capture = NULL;
    capturing--;
    if (st->capture_bad) {
        delete gr;
        return set_error(cudaErrorStreamCaptureInvalidated);
    }
    graphs.insert(gr);
    *out = gr;
    return sticky();
}

cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status,
                                  const char *file, int line)
{
    std::lock_guard<std::mutex> g(mu);
    CUstream_st *st = stream_of(s, "cudaStreamIsCapturing", file, line);
    if (!st)
        return set_error(cudaErrorInvalidResourceHandle);
    *status = !st->capture       ? cudaStreamCaptureStatusNone
              : st->capture_bad ? cudaStreamCaptureStatusInvalidated
                                : cudaStreamCaptureStatusActive;
    return sticky();
}

cudaError_t cudaGraphInstantiate(cudaGraphExec_t *out, cudaGraph_t gr, unsigned long long flags,
                                 const char *file, int line)
{
    *out = NULL;
    std::lock_guard<std::mutex> g(mu);
    if (!gr || !graphs.count(gr)) {
        report_error(file, line, "cudaGraphInstantiate: graph %p is not a live graph", (void *)gr);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (flags) {
        report_error(file, line, "cudaGraphInstantiate: flags 0x%llx", flags);
        return set_error(cudaErrorInvalidValue);
    }
    CUgraphExec_st *x = new CUgraphExec_st{gr->device, gr->nodes};
    execs.insert(x);
    *out = x;
    return sticky();
}

/* The captured work queued again on s, in its order, with the arguments it had. */
cudaError_t cudaGraphLaunch(cudaGraphExec_t x, cudaStream_t s, const char *file, int line)
{
    std::unique_lock<std::mutex> lk(mu);
    if (!x || !execs.count(x)) {
        report_error(file, line, "cudaGraphLaunch: %p is not a live executable graph", (void *)x);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    CUstream_st *st = stream_of(s, "cudaGraphLaunch", file, line);
    if (!st)
        return set_error(cudaErrorInvalidResourceHandle);
    if (st->device != x->device || st->device != cur_dev) {
        report_error(file, line, "cudaGraphLaunch: a graph of device %d on a stream of device %d "
                     "(device %d current)", x->device, st->device, cur_dev);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    if (st->capture) {
        report_error(file, line, "cudaGraphLaunch into a capture: not emulated");
        st->capture_bad = true;
        return set_error(cudaErrorStreamCaptureUnsupported);
    }
    static const int launches = counter_id("graph_launches");
    counter_add(launches, 1);
    cudaError_t r = sticky();
    for (size_t i = 0; i < x->nodes.size() && r == cudaSuccess; i++) {
        uint64_t pos;
        r = submit_on(lk, st, x->nodes[i], {}, false, &pos);
    }
    return set_error(r);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t x, const char *file, int line)
{
    std::lock_guard<std::mutex> g(mu);
    if (!x || !execs.count(x)) {
        report_error(file, line, "cudaGraphExecDestroy: %p is not a live executable graph",
                     (void *)x);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    execs.erase(x);
    delete x; /* queued launches hold copies of its work */
    return sticky();
}

cudaError_t cudaGraphDestroy(cudaGraph_t gr, const char *file, int line)
{
    std::lock_guard<std::mutex> g(mu);
    if (!gr || !graphs.count(gr)) {
        report_error(file, line, "cudaGraphDestroy: %p is not a live graph", (void *)gr);
        return set_error(cudaErrorInvalidResourceHandle);
    }
    graphs.erase(gr);
    delete gr;
    return sticky();
}
