/* cuemu: reports on stderr, the error state of the runtime (a thread's last error, the
 * process's sticky fault) and CUDA's error names. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <mutex>

namespace cuemu {

static std::mutex out_mu;
static std::atomic<long> nerrors(0), nfaults(0), nmisuse(0);
static std::atomic<int> sticky_err(cudaSuccess);
static thread_local cudaError_t last_err = cudaSuccess;

int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static void vreport(const char *kind, const char *file, int line, const char *fmt, va_list ap)
{
    char msg[1024];
    vsnprintf(msg, sizeof msg, fmt, ap);
    {
        std::lock_guard<std::mutex> g(out_mu);
        if (file)
            fprintf(stderr, "cuemu: %s: %s:%d: %s\n", kind, file, line, msg);
        else
            fprintf(stderr, "cuemu: %s: %s\n", kind, msg);
        fflush(stderr);
    }
    if (env_int("CUEMU_ABORT", 0))
        abort();
}

void report_error(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nerrors++;
    vreport("error", file, line, fmt, ap);
    va_end(ap);
}

void report_misuse(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nmisuse++;
    vreport("misuse", file, line, fmt, ap);
    va_end(ap);
}

void report_fault(cudaError_t e, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nfaults++;
    int ok = cudaSuccess;
    sticky_err.compare_exchange_strong(ok, (int)e);
    last_err = e;
    vreport("FAULT", file, line, fmt, ap);
    va_end(ap);
}

cudaError_t set_error(cudaError_t e)
{
    if (e != cudaSuccess)
        last_err = e;
    return e;
}

cudaError_t sticky(void) { return (cudaError_t)sticky_err.load(); }

struct report_at_exit {
    ~report_at_exit()
    {
        long e = nerrors, f = nfaults, m = nmisuse;
        if (e || f || m)
            fprintf(stderr, "cuemu: %ld errors, %ld faults, %ld misuses reported\n", e, f, m);
    }
};
static report_at_exit report_at_exit_;

} // namespace cuemu

using namespace cuemu;

/* The thread's last error, cleared; a sticky fault (from any thread) stays. */
cudaError_t cudaGetLastError(void)
{
    cudaError_t e = last_err;
    last_err = cudaSuccess;
    return e != cudaSuccess ? e : sticky();
}

cudaError_t cudaPeekAtLastError(void) { return last_err != cudaSuccess ? last_err : sticky(); }

const char *cudaGetErrorName(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidDevicePointer: return "cudaErrorInvalidDevicePointer";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState: return "cudaErrorIllegalState";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorUnknown: return "cudaErrorUnknown";
    }
    return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e)
{
    switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidDevicePointer: return "invalid device pointer";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorInsufficientDriver:
        return "CUDA driver version is insufficient for CUDA runtime version";
    case cudaErrorNoDevice:
        return "no CUDA-capable device is detected (this build emulates one on the CPU: "
               "set CUEMU=1 to use it)";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorIllegalState: return "the operation cannot be performed in the present state";
    case cudaErrorStreamCaptureUnsupported:
        return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
        return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureImplicit:
        return "operation would make the legacy stream depend on a capturing blocking stream";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress:
        return "an illegal memory access was encountered (cuemu: see its FAULT line)";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure:
        return "unspecified launch failure (cuemu: see its FAULT line)";
    case cudaErrorUnknown: return "unknown error";
    }
    return "unknown error";
}
