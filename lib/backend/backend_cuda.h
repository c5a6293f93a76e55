/* The CUDA backend (kernels/backend_cuda.cu), present in builds with CUDA=1 (TUPE_HAVE_CUDA).
 * Reach it through tupe_backend_create / tupe_backend_open (backend.h); this header is for the
 * modules that need the device itself (comm: NCCL runs on the backend's stream).
 *
 *   cuda       fp32 everywhere; every product through cuBLASLt in fp32 (TF32 tensor cores
 *              only with TUPE_CUDA_TF32=1 in the environment)
 *   cuda-bf16  bf16 real buffers, fp32 wide buffers and accumulation (backend.h)
 *
 * Every operation is queued on one CUDA stream and returns at once; the host waits only where
 * a value comes back (download, sumsq, xent_fwd, mse_fwd), after an upload (so that the host
 * buffer is free again) and when a scratch buffer grows. Results are deterministic: reductions run in a fixed order, and scatters into
 * embedding rows are sorted by row rather than done with floating-point atomics. */
#ifndef TUPE_BACKEND_CUDA_H
#define TUPE_BACKEND_CUDA_H

#if defined(TUPE_HAVE_CUDA)

#include <stddef.h>

#include "backend/backend.h"

#ifdef __cplusplus
extern "C" {
#endif

/* bf16: 0 for "cuda", 1 for "cuda-bf16". gpu: device number, taken modulo the devices present.
 * No device (or no driver): TUPE_EUSAGE with the reason. */
int tupe_backend_cuda_create(tupe_backend **be, int bf16, int gpu, tupe_err *e);
/* Devices this process can use; 0 with the reason in why (cap bytes). */
int tupe_backend_cuda_devices(char *why, size_t cap);
/* The cudaStream_t all operations are queued on, and the device number, of a CUDA backend
 * (NULL and -1 for any other backend). */
void *tupe_backend_cuda_stream(tupe_backend *be);
int tupe_backend_cuda_device(tupe_backend *be);
/* The matrix products run so far: through cuBLASLt (lt), and through cuBLAS's strided-batched
 * GEMM because cuBLASLt had no algorithm for their shape (legacy); `first` (cap bytes) gets
 * the first such shape, "" when none. Zeros for any other backend. */
void tupe_backend_cuda_gemm_counts(tupe_backend *be, long long *lt, long long *legacy,
                                   char *first, size_t cap);

/* NCCL between the GPUs of a data-parallel job: rank 0 makes the id, the caller broadcasts it
 * (tupe_comm_bcast), and every rank joins; then gradients are summed in place on the device,
 * on the backend's stream (n real elements: fp32 on "cuda", bf16 on "cuda-bf16"). */
#define TUPE_NCCL_ID_BYTES 128
int tupe_backend_cuda_nccl_id(void *id, tupe_err *e);
int tupe_backend_cuda_nccl_init(tupe_backend *be, const void *id, int rank, int world,
                                tupe_err *e);
int tupe_backend_cuda_allreduce(tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e);

#ifdef __cplusplus
}
#endif

#endif
#endif
