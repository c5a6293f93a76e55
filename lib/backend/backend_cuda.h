/* The CUDA backend (kernels/: kernels/README.md), present in builds with CUDA=1 (TUPE_HAVE_CUDA).
 * Reach it through tupe_backend_create / tupe_backend_open (backend.h); this header is for the
 * modules that need the device itself (comm: NCCL runs on the backend's second stream).
 *
 *   cuda       fp32 everywhere; every product through cuBLASLt in fp32 (TF32 tensor cores
 *              only with TUPE_CUDA_TF32=1 in the environment)
 *   cuda-bf16  bf16 real buffers, fp32 wide buffers and accumulation (backend.h)
 *
 * Every operation is queued on one CUDA stream and returns at once; the host waits only where
 * a value comes back (download, sumsq; the losses of xent_fwd and mse_fwd stay in device
 * doubles until downloaded), after a large upload and when a scratch buffer grows. Results are deterministic: reductions run in a fixed order, and scatters into
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

/* Per-operation timing: with on = 1 every operation of the backend's table that queues work
 * is bracketed by CUDA events on its stream (no host wait is added), and the times start
 * over; on = 0 restores the table. _op_times waits for the device and gives, per operation
 * called since, its name, calls and milliseconds of device time between its events: at most
 * cap of them, the number there are returned (-1 with e set on an error). */
typedef struct tupe_cuda_op_time {
    const char *name;
    long long calls;
    double ms;
} tupe_cuda_op_time;
int tupe_backend_cuda_timing(tupe_backend *be, int on, tupe_err *e);
int tupe_backend_cuda_op_times(tupe_backend *be, tupe_cuda_op_time *t, int cap, tupe_err *e);

/* What the device did since _counters_reset, as the emulated GPU counts it (a build with
 * CUDA=emu: tests/cuemu/README.md): the structure of a step, not its speed. Launches are the
 * kernels, products, memsets, device copies and sorts queued (a CUB sort counts once, though
 * it is several kernels on a GPU); transfers are copies between host and device; host_syncs
 * the host's waits for the device; philox_calls and dropout_decisions what dropout evaluated
 * on the device; peak_device_bytes and largest_buffer_bytes the device memory at its peak and
 * its largest allocation (from what was allocated at the reset). _counters waits for the work
 * queued (that wait is not counted). TUPE_EUSAGE in a build for a real GPU, which counts
 * nothing. */
typedef struct tupe_cuda_counters {
    long long launches, kernels, gemms, memsets, copies, sorts, transfers, host_syncs;
    long long philox_calls, dropout_decisions;
    long long gemm_flops;   /* the products' 2 m n k (per batch) */
    long long peak_device_bytes, largest_buffer_bytes;
    /* the cross-entropy's logits: bytes read from memory, read again by a block that has just
     * read them (from cache on a GPU: the fused classifier's second pass), and written */
    long long xent_read_bytes, xent_reread_bytes, xent_write_bytes;
    /* every launch, product, copy, transfer, memset and sort by name and shape, folded in
     * order (tests/cuemu: cuemu.h): equal for two steps that made the same calls, of the same
     * shapes (a CUDA graph's prerequisite) */
    unsigned long long launch_digest;
} tupe_cuda_counters;
int tupe_backend_cuda_counters_reset(tupe_backend *be, tupe_err *e);
int tupe_backend_cuda_counters(tupe_backend *be, tupe_cuda_counters *c, tupe_err *e);

/* NCCL between the GPUs of a data-parallel job (train/comm.c drives it). NCCL is opened at run
 * time (libnccl.so.2); _load says whether it can be (TUPE_EFAIL with the reason). Rank 0 makes
 * the id, the caller gives it to every rank, and every rank joins (non-blocking
 * initialization, polled: the other ranks have `timeout` seconds to come) as NCCL rank
 * `rank`, its slot (train/comm.h): the world is `nodes` nodes of world/nodes ranks, and
 * slot = node + place * nodes, place being the rank's place among its node's. Collectives then
 * run on a second CUDA stream of the backend, each after the work queued so far on the
 * compute stream; _comm_join makes the compute stream's later work wait for them, _comm_wait
 * makes the host wait. Every host wait of the backend polls once NCCL is joined: it gives up
 * after `timeout` seconds (its message ends with what `hint` says about the other ranks), or
 * as soon as _nccl_abort is called (from any thread, when a rank is known gone); the backend
 * then fails with that reason, and its operations do nothing. Elements are the backend's real
 * type (fp32 on "cuda", bf16 on "cuda-bf16") unless `elem` says bytes. */
#define TUPE_NCCL_ID_BYTES 128
typedef void (*tupe_nccl_hint_fn)(void *ctx, char *buf, size_t cap);
int tupe_backend_cuda_nccl_load(tupe_err *e);
int tupe_backend_cuda_nccl_id(void *id, tupe_err *e);
int tupe_backend_cuda_nccl_init(tupe_backend *be, const void *id, int rank, int world,
                                int nodes, double timeout, tupe_nccl_hint_fn hint,
                                void *hint_ctx, tupe_err *e);
void tupe_backend_cuda_nccl_abort(tupe_backend *be, const char *why);
/* buf holds world pieces of `piece` reals, piece q NCCL rank q's: this rank's piece becomes
 * the sum over the ranks of theirs (the other pieces are left undefined). fixed: in a fixed
 * order, each sum rounded to the real type: within each node first (its L ranks send each
 * other their chunks of N pieces, summed by tupe_tree_sum_f's tree over their places, a
 * kernel), then across nodes (the N ranks of the same place send each other the pieces of
 * their chunk, summed by the tree over the nodes): the same bits as the host adding the same
 * values in that order, whatever the timing; each rank sends (L-1)/L of buf within its node
 * and (N-1)/N of its 1/L across nodes. Else NCCL's reduce-scatter, in NCCL's order. */
int tupe_backend_cuda_reduce_pieces(tupe_backend *be, tupe_dev *buf, size_t piece, int fixed,
                                    tupe_err *e);
/* buf holds world pieces of `piece` elements of `elem` bytes: every rank's own piece to every
 * rank, in place (an all-gather): fixed, the stages of _reduce_pieces backwards (across nodes,
 * then within each); else NCCL's all-gather. */
int tupe_backend_cuda_gather_pieces(tupe_backend *be, tupe_dev *buf, size_t piece, size_t elem,
                                    int fixed, tupe_err *e);
int tupe_backend_cuda_bcast(tupe_backend *be, tupe_dev *buf, size_t bytes, int root, tupe_err *e);
/* The sum over ranks of n reals in place, in NCCL's own order (a measure of its bandwidth). */
int tupe_backend_cuda_allreduce(tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e);
int tupe_backend_cuda_comm_join(tupe_backend *be, tupe_err *e);
/* The step's scalars (train/comm.h, tupe_comm_dev_sums), on the device: the sums of squares of
 * each run of `run` elements of x within this rank's ranges [r[2i], r[2i+1]) (multiples of
 * run), zeros for the other runs of [0, n), and the nvals values (each given by one rank,
 * zeros on the others; the first ndv of them the device doubles dvals, the others the host's
 * vals[ndv..nvals)), summed over the ranks by one NCCL all-reduce of doubles (exact: one term
 * of each is not zero), the runs' sums added by tupe_tree_sum_d's tree into *sumsq; vals
 * become their sums; *sumsq is also copied to the device double dsumsq (NULL: not). Without
 * an NCCL link (one GPU) the same without the all-reduce. */
int tupe_backend_cuda_sums(tupe_backend *be, const tupe_dev *x, const size_t *ranges,
                           size_t nranges, size_t n, size_t run, const tupe_dev *dvals,
                           size_t ndv, double *vals, size_t nvals, double *sumsq, tupe_dev *dsumsq,
                           tupe_err *e);
int tupe_backend_cuda_comm_wait(tupe_backend *be, tupe_err *e);
/* _mark records mark i after the collectives queued so far; _after makes the compute stream's
 * later work wait for mark i (the last record of it; none: no wait). */
int tupe_backend_cuda_comm_mark(tupe_backend *be, int i, tupe_err *e);
int tupe_backend_cuda_comm_after(tupe_backend *be, int i, tupe_err *e);

#ifdef __cplusplus
}
#endif

#endif
#endif
