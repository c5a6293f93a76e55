/* Data-parallel collectives behind one interface. One process per rank; the rank and world
 * size come from the launcher:
 *
 *   mpirun / mpiexec (Open MPI)   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, ..._LOCAL_RANK
 *   srun (Slurm)                  SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 *   torchrun-style environment    RANK, WORLD_SIZE, LOCAL_RANK
 *
 * How the ranks meet: under mpirun, through MPI (a build with MPI=1); otherwise at rank 0's
 * address, MASTER_ADDR and MASTER_PORT (29500 if unset), or through a file on a shared file
 * system named by TUPE_RENDEZVOUS_FILE, where rank 0 writes its address
 * (train/rendezvous.h) -- no MPI needed, so that srun or a plain `for` loop of processes can
 * start a job. srun without either uses MPI when the build has it. With no launcher (or a
 * world of one) everything is local.
 *
 * Host collectives (small values, and gradients on the CPU) go through MPI or through rank 0
 * over TCP; gradients on GPUs through NCCL (the tupe_comm_dev_* functions). Ranks watch each
 * other (train/rendezvous.h, also under MPI unless TUPE_COMM_WATCH=0): a rank that exits, is
 * killed, fails or falls silent ends every other rank's waits with a message that names it,
 * and no wait lasts more than TUPE_COMM_TIMEOUT seconds (600) without progress. Only this
 * module and the CUDA backend know that MPI and NCCL exist.
 *
 * Collectives are deterministic: the same inputs give the same bits on every rank and run;
 * sums add the ranks in rank order, and the gradient sums of tupe_comm_dev_reduce (unless
 * NCCL's own are asked for) in a fixed order over the slots, within each node then across the
 * nodes (tupe_comm_nodes). */
#ifndef TUPE_COMM_H
#define TUPE_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"

typedef struct tupe_comm tupe_comm;

/* Detect the launcher and join the job. */
int tupe_comm_init(tupe_comm **c, tupe_err *e);
/* The end: with every rank (a barrier) unless tupe_comm_abort was called. */
void tupe_comm_finalize(tupe_comm *c);
/* This rank stops with an error: the other ranks are told `why` and stop waiting for it, and
 * this rank's GPU collectives are aborted. Then tupe_comm_finalize. */
void tupe_comm_abort(tupe_comm *c, const char *why);

int tupe_comm_rank(const tupe_comm *c);
int tupe_comm_world(const tupe_comm *c);
/* The nodes. Ranks whose host names are the same, or their NCCL_HOSTID where that is set (the
 * variable NCCL reads to override a host's identity, so that tupe's nodes are NCCL's), are on
 * one node; nodes are numbered by their lowest rank, and a node's ranks have places 0, 1, ...
 * in rank order. With N nodes of L ranks each, a rank's slot is node + place * N: where it is
 * in the gradients' sums (train/gradsync.h) and which sequences of a batch it reads, so that
 * results do not depend on which rank is where. Nodes of unequal size are taken as one (N = 1,
 * slot = rank); hosts is how many there are. */
int tupe_comm_nodes(const tupe_comm *c);
int tupe_comm_node_size(const tupe_comm *c);
int tupe_comm_hosts(const tupe_comm *c);
int tupe_comm_slot(const tupe_comm *c);
/* "single", "mpi", "tcp" */
const char *tupe_comm_backend(const tupe_comm *c);
/* Where the rank numbers came from: "none", "mpirun", "srun", "env". */
const char *tupe_comm_launcher(const tupe_comm *c);

/* In-place sums over all ranks. */
int tupe_comm_allreduce_f32(tupe_comm *c, float *buf, size_t n, tupe_err *e);
int tupe_comm_allreduce_f64(tupe_comm *c, double *buf, size_t n, tupe_err *e);
int tupe_comm_allreduce_u64(tupe_comm *c, uint64_t *buf, size_t n, tupe_err *e);
/* Maximum over ranks (e.g. "did any rank see a stop signal"). */
int tupe_comm_allmax_i32(tupe_comm *c, int32_t *buf, size_t n, tupe_err *e);
/* Reduce-scatter of a buffer of world·shard floats: rank r receives the sum of block r in
 * out (shard floats). And the inverse gather: every rank's shard into all (world·shard). */
int tupe_comm_reduce_scatter_f32(tupe_comm *c, const float *in, float *out, size_t shard, tupe_err *e);
int tupe_comm_allgather_f32(tupe_comm *c, const float *shard_in, float *all, size_t shard, tupe_err *e);
/* buf holds world pieces of `piece` floats, this rank's at its slot: every rank's to every rank. */
int tupe_comm_gather_slots_f32(tupe_comm *c, float *buf, size_t piece, tupe_err *e);
int tupe_comm_bcast(tupe_comm *c, void *buf, size_t bytes, int root, tupe_err *e);
int tupe_comm_barrier(tupe_comm *c, tupe_err *e);

/* Every rank says what it believes about `what` (text: lines "key value"); when a rank's text
 * differs from rank 0's, every rank fails alike (TUPE_EUSAGE) with "ranks disagree on WHAT:"
 * and the first rank's first differing line against rank 0's. */
int tupe_comm_agree(tupe_comm *c, const char *what, const char *text, tupe_err *e);
/* This rank's progress (its step), for the messages about ranks that fall behind. */
void tupe_comm_progress(tupe_comm *c, int64_t step);

/* ---- gradients on be's device (train/gradsync.h) ---------------------------------------- */

/* How the gradients are summed: TREE, in the fixed order of tupe_comm_dev_reduce on any path;
 * NCCL, by NCCL's reduce-scatter, all-gather and all-reduce, in NCCL's order (which depends on
 * the number of ranks and on the machines: not bit-identical across them), GPUs only. */
enum { TUPE_REDUCE_TREE = 0, TUPE_REDUCE_NCCL = 1 };

/* Chooses how device buffers travel: NCCL between GPUs (a CUDA backend, unless TUPE_NCCL=0;
 * rank 0's id goes to every rank through the host collectives), or host copies and the host
 * collectives; and how they are summed (TUPE_REDUCE_*: NCCL is refused, TUPE_EUSAGE, on host
 * copies). Every rank must call it, with its backend. */
int tupe_comm_dev_open(tupe_comm *c, tupe_backend *be, int reduce, tupe_err *e);
/* "nccl", "host", or "none" (one rank, or before tupe_comm_dev_open). */
const char *tupe_comm_dev_path(const tupe_comm *c);
/* buf holds world pieces of `piece` reals, piece s that of slot s. This rank's piece becomes
 * the sum over the ranks of theirs (the other pieces of buf are left undefined), each sum
 * rounded as the real type is: with TREE, over the places of each node by tupe_tree_sum_f's
 * tree (backend/pointwise.h), then over the nodes by the same tree. With W a power of two that
 * is the tree over all slots, the same for any number of nodes: the result depends only on the
 * values of the slots. On NCCL it runs after the work queued so far and overlaps what follows;
 * tupe_comm_dev_join orders the later work after it. */
int tupe_comm_dev_reduce(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, tupe_err *e);
/* The same, then every piece to every rank: the whole sum on each (NCCL: its all-reduce). */
int tupe_comm_dev_allreduce(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, tupe_err *e);
/* buf holds world pieces of `piece` elements, real (wide = 0) or wide: every rank's own piece
 * to every rank (an all-gather), ordered as tupe_comm_dev_reduce is. */
int tupe_comm_dev_gather(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, int wide,
                         tupe_err *e);
/* A step's scalars, summed over the ranks without a host collective where the gradients go
 * through NCCL: every rank gives its ranges [ranges[2i], ranges[2i+1]) of x (n reals; the
 * ranks' ranges apart and covering it, bounds multiples of run) and nvals values that it alone
 * gives (zeros where another rank does; the step's losses) or integers (counts; exact in any
 * order below 2^53). The sums of squares of x's runs
 * of `run` elements are added by tupe_tree_sum_d's tree (backend/pointwise.h) into *sumsq:
 * the same bits on any number of ranks and paths, on one device kind; vals become their sums
 * over the ranks, exactly. The first ndv values are device doubles (backend.h's
 * TUPE_DBL) at dvals, the step's losses as the forward passes left them (model.h), the others
 * the host's vals[ndv..nvals); all nvals come back in vals. On GPUs (one, or NCCL) the device sums the runs and NCCL adds both
 * in one all-reduce of doubles, and the host reads nvals + 1 doubles; through host copies, the
 * runs' sums travel as the host collectives do. */
int tupe_comm_dev_sums(tupe_comm *c, tupe_backend *be, const tupe_dev *x, const size_t *ranges,
                       size_t nranges, size_t n, size_t run, const tupe_dev *dvals, size_t ndv,
                       double *vals, size_t nvals, double *sumsq, tupe_err *e);
/* The backend's later work waits for the collectives queued so far. */
int tupe_comm_dev_join(tupe_comm *c, tupe_backend *be, tupe_err *e);
/* Mark i: _mark names the collectives queued so far, _after makes the backend's later work wait
 * for those only (on NCCL; elsewhere collectives are done when they return: nothing to do). */
int tupe_comm_dev_mark(tupe_comm *c, tupe_backend *be, int i, tupe_err *e);
int tupe_comm_dev_after(tupe_comm *c, tupe_backend *be, int i, tupe_err *e);

#endif
