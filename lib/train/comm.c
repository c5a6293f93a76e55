#include "train/comm.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_cuda.h"

#if defined(TUPE_HAVE_MPI)
#include <mpi.h>
#endif

struct tupe_comm {
    int rank, world, local;
    const char *launcher;
    int mpi;          /* MPI was initialized by us */
    /* tupe_comm_allreduce_dev: NCCL on nccl_be (1), or not (-1), 0 before the first call */
    int nccl;
    tupe_backend *nccl_be;
    float *host;      /* the host copy otherwise */
    size_t host_n;
};

static int env_int(const char *name, int dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    long x = strtol(v, &end, 10);
    return *end || x < 0 || x > INT_MAX ? -1 : (int)x;
}

int tupe_comm_init(tupe_comm **cp, tupe_err *e)
{
    tupe_comm *c = calloc(1, sizeof *c);
    if (!c)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    c->world = 1;
    c->launcher = "none";
    if (getenv("OMPI_COMM_WORLD_SIZE")) {
        c->launcher = "mpirun";
        c->rank = env_int("OMPI_COMM_WORLD_RANK", 0);
        c->world = env_int("OMPI_COMM_WORLD_SIZE", 1);
        c->local = env_int("OMPI_COMM_WORLD_LOCAL_RANK", 0);
    } else if (getenv("SLURM_PROCID") && getenv("SLURM_NTASKS")) {
        c->launcher = "srun";
        c->rank = env_int("SLURM_PROCID", 0);
        c->world = env_int("SLURM_NTASKS", 1);
        c->local = env_int("SLURM_LOCALID", 0);
    } else if (getenv("WORLD_SIZE")) {
        c->launcher = "env";
        c->rank = env_int("RANK", 0);
        c->world = env_int("WORLD_SIZE", 1);
        c->local = env_int("LOCAL_RANK", 0);
    }
    if (c->rank < 0 || c->world < 1 || c->local < 0 || c->rank >= c->world) {
        free(c);
        return tupe_fail(e, TUPE_EUSAGE, "inconsistent rank environment (rank must be in 0..world-1)");
    }
    if (c->world > 1) {
#if defined(TUPE_HAVE_MPI)
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited) {
            int provided;
            if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
                free(c);
                return tupe_fail(e, TUPE_EFAIL, "MPI_Init failed");
            }
            c->mpi = 1;
        }
        int r, w;
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_size(MPI_COMM_WORLD, &w);
        if (w != c->world) {
            /* e.g. RANK/WORLD_SIZE set by hand without an MPI launcher: MPI sees a singleton. */
            int want = c->world;
            if (c->mpi)
                MPI_Finalize();
            free(c);
            return tupe_fail(e, TUPE_EUSAGE,
                             "the environment says the world has %d ranks but MPI sees %d; start "
                             "CPU ranks with mpirun or srun", want, w);
        }
        c->rank = r;
#else
        int w = c->world;
        free(c);
        return tupe_fail(e, TUPE_EUSAGE,
                         "started as one of %d ranks, but this build has no MPI; rebuild with "
                         "MPI=1 (Debian: apt-get install libopenmpi-dev openmpi-bin)", w);
#endif
    }
    *cp = c;
    return 0;
}

void tupe_comm_finalize(tupe_comm *c)
{
    if (!c)
        return;
#if defined(TUPE_HAVE_MPI)
    if (c->mpi)
        MPI_Finalize();
#endif
    free(c->host);
    free(c);
}

int tupe_comm_rank(const tupe_comm *c) { return c->rank; }
int tupe_comm_world(const tupe_comm *c) { return c->world; }
const char *tupe_comm_backend(const tupe_comm *c) { return c->world > 1 ? "mpi" : "single"; }
const char *tupe_comm_launcher(const tupe_comm *c) { return c->launcher; }

#if defined(TUPE_HAVE_MPI)
/* MPI counts are ints: large buffers go in chunks. */
#define CHUNK ((size_t)1 << 28)

static int mpi_fail(tupe_err *e, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return tupe_fail(e, TUPE_EFAIL, "%s failed: %.*s", what, len, msg);
}

static int allreduce(void *buf, size_t n, size_t size, MPI_Datatype t, MPI_Op op, tupe_err *e)
{
    for (size_t off = 0; off < n; off += CHUNK) {
        size_t k = n - off < CHUNK ? n - off : CHUNK;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * size, (int)k, t, op, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(e, "MPI_Allreduce", rc);
    }
    return 0;
}
#endif

int tupe_comm_allreduce_f32(tupe_comm *c, float *buf, size_t n, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_MPI)
    return allreduce(buf, n, sizeof *buf, MPI_FLOAT, MPI_SUM, e);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_allreduce_f64(tupe_comm *c, double *buf, size_t n, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_MPI)
    return allreduce(buf, n, sizeof *buf, MPI_DOUBLE, MPI_SUM, e);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_allreduce_u64(tupe_comm *c, uint64_t *buf, size_t n, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_MPI)
    return allreduce(buf, n, sizeof *buf, MPI_UINT64_T, MPI_SUM, e);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_allmax_i32(tupe_comm *c, int32_t *buf, size_t n, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_MPI)
    return allreduce(buf, n, sizeof *buf, MPI_INT32_T, MPI_MAX, e);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_reduce_scatter_f32(tupe_comm *c, const float *in, float *out, size_t shard, tupe_err *e)
{
    if (c->world == 1) {
        memmove(out, in, shard * sizeof *out);
        return 0;
    }
#if defined(TUPE_HAVE_MPI)
    if (shard > INT_MAX)
        return tupe_fail(e, TUPE_EFAIL, "reduce-scatter shard of %zu floats is too large", shard);
    int rc = MPI_Reduce_scatter_block(in, out, (int)shard, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Reduce_scatter_block", rc);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_allgather_f32(tupe_comm *c, const float *shard_in, float *all, size_t shard, tupe_err *e)
{
    if (c->world == 1) {
        memmove(all, shard_in, shard * sizeof *all);
        return 0;
    }
#if defined(TUPE_HAVE_MPI)
    if (shard > INT_MAX)
        return tupe_fail(e, TUPE_EFAIL, "allgather shard of %zu floats is too large", shard);
    int rc = MPI_Allgather(shard_in, (int)shard, MPI_FLOAT, all, (int)shard, MPI_FLOAT, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Allgather", rc);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_bcast(tupe_comm *c, void *buf, size_t bytes, int root, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_MPI)
    for (size_t off = 0; off < bytes; off += CHUNK) {
        size_t k = bytes - off < CHUNK ? bytes - off : CHUNK;
        int rc = MPI_Bcast((char *)buf + off, (int)k, MPI_BYTE, root, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(e, "MPI_Bcast", rc);
    }
    return 0;
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_barrier(tupe_comm *c, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_MPI)
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Barrier", rc);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

#if defined(TUPE_HAVE_CUDA)
/* NCCL for device buffers when asked (TUPE_NCCL=1) and be is a GPU: rank 0's id goes to every
 * rank through the collectives above. 1 when set up, -1 for the host path, 0 on error. */
static int nccl_setup(tupe_comm *c, tupe_backend *be, tupe_err *e)
{
    const char *v = getenv("TUPE_NCCL");
    if (!v || strcmp(v, "1") != 0 || tupe_backend_cuda_device(be) < 0)
        return -1;
    char id[TUPE_NCCL_ID_BYTES];
    memset(id, 0, sizeof id);
    int rc = c->rank == 0 ? tupe_backend_cuda_nccl_id(id, e) : 0;
    int32_t bad = rc != 0;
    if (tupe_comm_allmax_i32(c, &bad, 1, e))
        return 0;
    if (bad)
        return rc ? 0 : (tupe_fail(e, TUPE_EFAIL, "NCCL: rank 0 could not make an id"), 0);
    if (tupe_comm_bcast(c, id, sizeof id, 0, e) ||
        tupe_backend_cuda_nccl_init(be, id, c->rank, c->world, e))
        return 0;
    return 1;
}
#endif

int tupe_comm_allreduce_dev(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e)
{
    if (c->world == 1)
        return 0;
#if defined(TUPE_HAVE_CUDA)
    if (c->nccl_be != be) {
        c->nccl_be = be;
        c->nccl = 0;
    }
    if (c->nccl == 0 && (c->nccl = nccl_setup(c, be, e)) == 0)
        return e->code ? e->code : TUPE_EFAIL;
    if (c->nccl > 0)
        return tupe_backend_cuda_allreduce(be, buf, n, e);
#endif
    if (c->host_n < n) {
        float *h = realloc(c->host, n * sizeof *h);
        if (!h)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        c->host = h;
        c->host_n = n;
    }
    be->download(be, c->host, buf, n, TUPE_F32);
    int rc = tupe_comm_allreduce_f32(c, c->host, n, e);
    if (!rc)
        be->upload(be, buf, c->host, n, TUPE_F32);
    return rc;
}
