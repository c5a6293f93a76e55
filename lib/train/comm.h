/* Data-parallel collectives behind one interface. One process per rank; the rank and world
 * size come from the launcher:
 *
 *   mpirun / mpiexec (Open MPI)   OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, ..._LOCAL_RANK
 *   srun (Slurm)                  SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID
 *   torchrun-style environment    RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT
 *
 * On CPU the collectives are MPI's (a build with MPI=1); with no launcher (or a world of one)
 * everything is local and no MPI call is made. The sum of a device buffer may instead run on
 * the GPUs through NCCL (tupe_comm_allreduce_dev). Only this module and the CUDA backend know
 * that MPI and NCCL exist.
 * Collectives are deterministic for a given world size: the same inputs give the same bits. */
#ifndef TUPE_COMM_H
#define TUPE_COMM_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"

typedef struct tupe_comm tupe_comm;

/* Detect the launcher and join the job. A world larger than one without MPI support in this
 * build is an error that says how to rebuild. */
int tupe_comm_init(tupe_comm **c, tupe_err *e);
void tupe_comm_finalize(tupe_comm *c);

int tupe_comm_rank(const tupe_comm *c);
int tupe_comm_world(const tupe_comm *c);
/* "single", "mpi" */
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
int tupe_comm_bcast(tupe_comm *c, void *buf, size_t bytes, int root, tupe_err *e);
/* In-place sum over all ranks of n real elements on be's device (the gradients). On a CUDA
 * backend with TUPE_NCCL=1, through NCCL on the GPUs (set up at the first call: rank 0's id
 * goes to every rank through tupe_comm_bcast); else through fp32 host copies and the
 * collectives above. */
int tupe_comm_allreduce_dev(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e);
int tupe_comm_barrier(tupe_comm *c, tupe_err *e);

#endif
