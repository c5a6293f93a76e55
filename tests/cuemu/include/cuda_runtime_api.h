/* cuemu: the CUDA runtime API on the CPU (the calls tupe's backend makes, and the streams and
 * events a second stream needs). Every call takes its caller's file and line as hidden
 * trailing arguments, so that a report names the place in the program, not in the emulator.
 * Error codes are CUDA's numbers. */
#ifndef CUEMU_CUDA_RUNTIME_API_H
#define CUEMU_CUDA_RUNTIME_API_H

#include <stddef.h>
#include <stdint.h>

#ifndef __cplusplus
#error "cuemu's headers are C++ (emu-nvcc compiles .cu files as C++17)"
#endif

/* The caller's place, as defaulted trailing parameters of every API function. */
#define CUEMU_SITE const char *cuemu_file = __builtin_FILE(), int cuemu_line = __builtin_LINE()

enum cudaError_t {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidDevicePointer = 17,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorIllegalState = 401,
    cudaErrorNotReady = 600,
    cudaErrorIllegalAddress = 700,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorStreamCaptureImplicit = 906,
    cudaErrorUnknown = 999
};
typedef cudaError_t cudaError;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
typedef cudaDataType_t cudaDataType;

typedef struct CUstream_st *cudaStream_t;
typedef struct CUevent_st *cudaEvent_t;
typedef struct CUgraph_st *cudaGraph_t;
typedef struct CUgraphExec_st *cudaGraphExec_t;
enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};
enum cudaStreamCaptureStatus {
    cudaStreamCaptureStatusNone = 0,
    cudaStreamCaptureStatusActive = 1,
    cudaStreamCaptureStatusInvalidated = 2
};
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventBlockingSync 0x01
#define cudaEventDisableTiming 0x02

struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem;
    size_t sharedMemPerBlock;
    size_t sharedMemPerBlockOptin;
    int warpSize;
    int maxThreadsPerBlock;
    int maxThreadsDim[3];
    int maxGridSize[3];
    int major, minor;
    int multiProcessorCount;
};

const char *cudaGetErrorString(cudaError_t e);
const char *cudaGetErrorName(cudaError_t e);
cudaError_t cudaGetLastError(void);
cudaError_t cudaPeekAtLastError(void);

cudaError_t cudaDriverGetVersion(int *v);
cudaError_t cudaRuntimeGetVersion(int *v);
cudaError_t cudaGetDeviceCount(int *n);
cudaError_t cudaSetDevice(int d, CUEMU_SITE);
cudaError_t cudaGetDevice(int *d);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp *p, int d);
cudaError_t cudaDeviceSynchronize(CUEMU_SITE);

cudaError_t cudaMalloc(void **p, size_t bytes, CUEMU_SITE);
template <class T> static inline cudaError_t cudaMalloc(T **p, size_t bytes, CUEMU_SITE)
{
    return cudaMalloc((void **)p, bytes, cuemu_file, cuemu_line);
}
cudaError_t cudaFree(void *p, CUEMU_SITE);
cudaError_t cudaMallocHost(void **p, size_t bytes, CUEMU_SITE);
template <class T> static inline cudaError_t cudaMallocHost(T **p, size_t bytes, CUEMU_SITE)
{
    return cudaMallocHost((void **)p, bytes, cuemu_file, cuemu_line);
}
cudaError_t cudaFreeHost(void *p, CUEMU_SITE);
cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, cudaMemcpyKind k, CUEMU_SITE);
cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, cudaMemcpyKind k,
                            cudaStream_t s = 0, CUEMU_SITE);
cudaError_t cudaMemset(void *p, int v, size_t n, CUEMU_SITE);
cudaError_t cudaMemsetAsync(void *p, int v, size_t n, cudaStream_t s = 0, CUEMU_SITE);

cudaError_t cudaStreamCreate(cudaStream_t *s, CUEMU_SITE);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned flags, CUEMU_SITE);
cudaError_t cudaStreamDestroy(cudaStream_t s, CUEMU_SITE);
cudaError_t cudaStreamSynchronize(cudaStream_t s, CUEMU_SITE);
cudaError_t cudaStreamQuery(cudaStream_t s, CUEMU_SITE);
cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned flags = 0, CUEMU_SITE);

cudaError_t cudaEventCreate(cudaEvent_t *e, CUEMU_SITE);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned flags, CUEMU_SITE);
cudaError_t cudaEventDestroy(cudaEvent_t e, CUEMU_SITE);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0, CUEMU_SITE);
cudaError_t cudaEventQuery(cudaEvent_t e, CUEMU_SITE);
cudaError_t cudaEventSynchronize(cudaEvent_t e, CUEMU_SITE);
cudaError_t cudaEventElapsedTime(float *ms, cudaEvent_t start, cudaEvent_t end, CUEMU_SITE);

/* CUDA graphs: a stream's work captured (kernels, copies, memsets, library calls, each with
 * its arguments as given), then replayed in order by each launch. Only the global mode; a
 * host synchronization while any stream captures is an error that invalidates the capture,
 * as on a GPU; events and waits inside a capture are not emulated (an error). */
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode mode, CUEMU_SITE);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t *g, CUEMU_SITE);
cudaError_t cudaStreamIsCapturing(cudaStream_t s, cudaStreamCaptureStatus *status, CUEMU_SITE);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t *e, cudaGraph_t g, unsigned long long flags = 0,
                                 CUEMU_SITE);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s, CUEMU_SITE);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e, CUEMU_SITE);
cudaError_t cudaGraphDestroy(cudaGraph_t g, CUEMU_SITE);

#endif
