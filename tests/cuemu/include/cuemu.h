/* cuemu: CUDA C++ kernels run on the CPU, for testing on machines without a GPU.
 *
 * A kernel launch runs every block of its grid on the host (blocks spread over OpenMP
 * threads). Inside a block the CUDA threads run on fibers, switched only where a thread waits
 * for others (__syncthreads, __syncwarp, the _sync shuffles), so their semantics are the
 * hardware's, misuse included, and misuse is reported with the file and line of the call
 * instead of hanging or computing garbage (tests/cuemu/README.md lists the checks).
 *
 * Device memory is host memory, registered so that copies, memsets, library operands and
 * kernel pointer arguments are checked against their allocations; shared memory is filled
 * with NaN bytes before every block. emu-nvcc makes a .cu file C++ with three rewrites:
 *   k<<<g, b, s, st>>>(args)     ->  ::cuemu::launcher(k, "k", g, b, s, st)(args)
 *   extern __shared__ T name[];  ->  T *name = (T *)::cuemu::dyn_smem();
 *   __shared__ T a[n], b[m];     ->  the same, then ::cuemu::shared_decl(&a, sizeof a, ...) per
 *                                    array (poisoned once per block, counted against 48 KiB) */
#ifndef CUEMU_H
#define CUEMU_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <functional>
#include <tuple>
#include <type_traits>
#include <utility>

#include "cuda_runtime_api.h"

#define __CUEMU__ 1
#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
/* A block-scope thread_local is static: one instance per host thread, and a host thread runs
 * one block at a time (all its CUDA threads), so one instance per block in flight. */
#define __shared__ thread_local
#define __launch_bounds__(...)
#define __restrict__ __restrict

struct uint3 {
    unsigned int x, y, z;
};
/* The 16-byte vector type of the 128-bit loads and stores (accesses through it are checked by
 * the kernels' own calls of cuemu::check_align: host code does not fault on them). */
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct dim3 {
    unsigned int x, y, z;
    constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1)
        : x(vx), y(vy), z(vz) {}
};

/* The built-in variables, read through functions of the runtime: an `extern thread_local`
 * read from another object trips UBSan's null check after the linker relaxes its TLS access
 * (a false "member access within null pointer"). */
namespace cuemu {
const uint3 &thread_idx(void);
const uint3 &block_idx(void);
const dim3 &block_dim(void);
const dim3 &grid_dim(void);
} // namespace cuemu
#define threadIdx (::cuemu::thread_idx())
#define blockIdx (::cuemu::block_idx())
#define blockDim (::cuemu::block_dim())
#define gridDim (::cuemu::grid_dim())
static const int warpSize = 32;

/* ---- device functions ------------------------------------------------------------------ */

static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
/* The _rn intrinsics: IEEE round to nearest, never contracted (emu-nvcc compiles with
 * -ffp-contract=off, so plain arithmetic is never contracted either). */
static inline float __fmul_rn(float a, float b) { return a * b; }
static inline float __fadd_rn(float a, float b) { return a + b; }

namespace cuemu {

enum warp_op { SHFL_IDX, SHFL_UP, SHFL_DOWN, SHFL_XOR, SYNCWARP };
void syncthreads(const char *file, int line);
uint64_t warp_sync(unsigned mask, uint64_t bits, int op, int arg, int width, const char *file,
                   int line);
void *dyn_smem(void);
/* A vector access of `align` bytes at p: a FAULT (the block stops) unless p is aligned to it,
 * as the GPU faults on a misaligned address. */
void check_align(const void *p, unsigned align, const char *file, int line);
void shared_decl(void *p, size_t bytes, const char *file, int line);

/* One kernel launch: what the launch checks and the scheduler need. `body` runs one CUDA
 * thread (the kernel called with its own copy of the arguments). */
struct launch_desc {
    const char *name, *file;
    int line;
    dim3 grid, block;
    size_t smem;
    cudaStream_t stream;
};
cudaError_t launch(const launch_desc &d, std::function<void()> body, const void *const *ptrs,
                   const int *ptr_index, int nptrs);

template <class T> static inline T warp_t(unsigned mask, T v, int op, int arg, int width,
                                          const char *file, int line)
{
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value,
                  "cuemu shuffles types of at most 8 bytes");
    uint64_t b = 0;
    memcpy(&b, &v, sizeof v);
    b = warp_sync(mask, b, op, arg, width, file, line);
    T r;
    memcpy(&r, &b, sizeof r);
    return r;
}

/* The pointer arguments of a launch, which must be device memory (or pinned host memory). */
template <class Tup, size_t... I>
static inline int pointer_args(const Tup &t, const void **ptrs, int *idx, std::index_sequence<I...>)
{
    int n = 0;
    auto one = [&](auto v, int i) {
        if constexpr (std::is_pointer<decltype(v)>::value) {
            ptrs[n] = (const void *)v;
            idx[n++] = i;
        }
    };
    (one(std::get<I>(t), (int)I), ...);
    return n;
}

/* k<<<g, b, s, st>>>(args): the arguments are converted to the kernel's parameter types here,
 * as a call converts them, and every CUDA thread calls the kernel with its own copy. */
template <class... P> struct launch_t {
    void (*k)(P...);
    launch_desc d;
    void operator()(P... a) const
    {
        std::tuple<P...> args(a...);
        const void *ptrs[sizeof...(P) + 1];
        int idx[sizeof...(P) + 1];
        int np = pointer_args(args, ptrs, idx, std::index_sequence_for<P...>());
        void (*kf)(P...) = k;
        launch(d, [kf, args]() { std::apply(kf, args); }, ptrs, idx, np);
    }
};

template <class... P>
static inline launch_t<P...> launcher(void (*k)(P...), const char *name, dim3 g, dim3 b,
                                      size_t smem = 0, cudaStream_t s = 0,
                                      const char *file = __builtin_FILE(),
                                      int line = __builtin_LINE())
{
    return launch_t<P...>{k, launch_desc{name, file, line, g, b, smem, s}};
}

/* ---- counters ---------------------------------------------------------------------------
 * What the program made the emulated device do, for tests of its structure (not its speed):
 * the runtime counts "kernels" (launches), "gemms" (cuBLASLt and cuBLAS products) and
 * "gemm_flops" (their 2 m n k per batch), "memsets",
 * "copies" (device to device), "transfers" (between host and device), "sorts" (CUB),
 * "host_syncs" (host waits: stream, event and device synchronizations, the synchronous copies
 * and memsets, cudaFree), and the memory: "peak_device_bytes" and "largest_buffer_bytes" (the
 * largest allocation live), "launch_digest" (below); a kernel adds to a counter of its own
 * with CUEMU_COUNT(name, n).
 * Sums since counters_reset, which also restarts the memory's from what is allocated then.
 * Host-side counts are made when the call is made; a kernel's when it runs (synchronize
 * before reading them). */
int counter_id(const char *name);
void counter_add(int id, uint64_t n);
void counter_max(int id, uint64_t v);
/* "launch_digest": every launch, product, copy, transfer, memset and sort as it is made, by its
 * name and shape (grid, block and shared bytes; m, n, k and batches; bytes), folded in order:
 * two stretches of work with the same digest made the same calls of the same shapes (a CUDA
 * graph's prerequisite; the arguments' values, pointers included, are not in it). */
void counter_mix(int id, const char *what, const uint64_t *v, int n);
uint64_t counter_get(const char *name);
void counters_reset(void);

} // namespace cuemu

#define CUEMU_COUNT(name, n)                                                                       \
    do {                                                                                          \
        static const int cuemu_counter_ = ::cuemu::counter_id(name);                              \
        ::cuemu::counter_add(cuemu_counter_, (uint64_t)(n));                                      \
    } while (0)

static inline void __syncthreads(const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    cuemu::syncthreads(file, line);
}
static inline void __syncwarp(unsigned mask = 0xffffffffu, const char *file = __builtin_FILE(),
                              int line = __builtin_LINE())
{
    cuemu::warp_sync(mask, 0, cuemu::SYNCWARP, 0, 32, file, line);
}
template <class T>
static inline T __shfl_sync(unsigned mask, T v, int src, int width = 32,
                            const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return cuemu::warp_t(mask, v, cuemu::SHFL_IDX, src, width, file, line);
}
template <class T>
static inline T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32,
                               const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return cuemu::warp_t(mask, v, cuemu::SHFL_UP, (int)d, width, file, line);
}
template <class T>
static inline T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32,
                                 const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return cuemu::warp_t(mask, v, cuemu::SHFL_DOWN, (int)d, width, file, line);
}
template <class T>
static inline T __shfl_xor_sync(unsigned mask, T v, int lane_mask, int width = 32,
                                const char *file = __builtin_FILE(), int line = __builtin_LINE())
{
    return cuemu::warp_t(mask, v, cuemu::SHFL_XOR, lane_mask, width, file, line);
}

/* Integer atomics and the memory fence, for a grid whose last block to finish sums the other
 * blocks' partials in a fixed order: sequentially consistent host atomics (blocks may run on
 * several host threads). There is no floating-point atomicAdd: the backend promises none (a sum
 * in arrival order is not deterministic), so a kernel that uses one does not compile here. */
static inline unsigned atomicAdd(unsigned *p, unsigned v)
{
    return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST);
}
static inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }
static inline void __threadfence(void) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }

#endif
