/* Per-element math shared by the CPU backend (gcc) and the CUDA kernels (nvcc): functions
 * declared TUPE_HD compile for host and device, so the CPU tests exercise the GPU's math. */
#ifndef TUPE_HD_H
#define TUPE_HD_H

#if defined(__CUDACC__)
#define TUPE_HD __host__ __device__ __forceinline__
#else
#define TUPE_HD static inline
#endif

#endif
