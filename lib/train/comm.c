#include "train/comm.h"

#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "backend/backend_cuda.h"
#include "backend/pointwise.h"
#include "base/checksum.h"
#include "train/jobauth.h"
#include "train/rdzvfile.h"
#include "train/rendezvous.h"

#if defined(TUPE_HAVE_MPI)
#include <mpi.h>
#endif

enum { PATH_NONE, PATH_HOST, PATH_NCCL };
enum { BK_SINGLE, BK_MPI, BK_TCP };

struct tupe_comm {
    int rank, world, local;
    const char *launcher;
    int bk;                      /* how host collectives travel */
    int mpi;                     /* MPI was initialized by us */
    double timeout;
    tupe_rdzv *z;                /* the meeting and the watch (TCP), or NULL */
    int path;                    /* how device buffers travel */
    tupe_backend *be;            /* the backend NCCL joined, aborted on a failure */
    pthread_mutex_t mu;
    int aborted;
    float *host;                 /* host copies of device pieces */
    size_t host_n;
    double *sums;                /* tupe_comm_dev_sums's on the host */
    size_t sums_n;
    int nodes, node_size, hosts; /* the topology (tupe_comm_nodes); hosts: distinct ones */
    int *slot;                   /* every rank's slot */
    int reduce;                  /* TUPE_REDUCE_* of the device collectives */
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

/* A number of seconds, or -1 when the variable holds something else. */
static double env_seconds(const char *name, double dflt)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return dflt;
    char *end;
    double x = strtod(v, &end);
    return *end || !(x > 0) || !(x <= 1e7) ? -1 : x;
}

/* ---- the rendezvous's failures reach NCCL ---------------------------------------------------- */

static void on_failure(void *ctx, const char *why)
{
    tupe_comm *c = ctx;
    pthread_mutex_lock(&c->mu);
    tupe_backend *be = c->path == PATH_NCCL ? c->be : NULL;
    pthread_mutex_unlock(&c->mu);
#if defined(TUPE_HAVE_CUDA)
    if (be)
        tupe_backend_cuda_nccl_abort(be, why);
#else
    (void)be, (void)why;
#endif
}

#if defined(TUPE_HAVE_CUDA)
static void nccl_hint(void *ctx, char *buf, size_t cap)
{
    tupe_comm *c = ctx;
    buf[0] = 0;
    if (c->z)
        tupe_rdzv_behind(c->z, buf, cap);
}
#endif

/* ---- joining ---------------------------------------------------------------------------------- */

#if defined(TUPE_HAVE_MPI)
static int mpi_fail(tupe_err *e, const char *what, int rc)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(rc, msg, &len);
    return tupe_fail(e, TUPE_EFAIL, "%s failed: %.*s", what, len, msg);
}

/* Rank 0's rendezvous address to the others, through MPI. */
static int mpi_exchange(void *ctx, char *addr, size_t cap, tupe_err *e)
{
    (void)ctx;
    int rc = MPI_Bcast(addr, (int)cap, MPI_CHAR, 0, MPI_COMM_WORLD);
    addr[cap - 1] = 0;
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Bcast", rc);
}

static int mpi_join(tupe_comm *c, tupe_err *e)
{
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        if (MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
            return tupe_fail(e, TUPE_EFAIL, "MPI_Init failed");
        c->mpi = 1;
    }
    int r, w;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &w);
    if (w != c->world)
        /* e.g. RANK/WORLD_SIZE set by hand without a launcher: MPI sees a singleton */
        return tupe_fail(e, TUPE_EUSAGE, "the environment says the world has %d ranks but MPI "
                         "sees %d; start the ranks with mpirun or srun, or give them a "
                         "rendezvous (MASTER_ADDR and MASTER_PORT, or TUPE_RENDEZVOUS_FILE)",
                         c->world, w);
    c->rank = r;
    c->bk = BK_MPI;
    return 0;
}
#endif

/* The job's token: ranks of another job that come to the same address are turned away. */
static uint64_t job_token(void)
{
    const char *names[] = {"TUPE_JOB_ID", "SLURM_JOB_ID", "TORCHELASTIC_RUN_ID", "PBS_JOBID"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v)
            return tupe_hash64(v, strlen(v));
    }
    return 0;
}

/* How the ranks prove they belong to this job (tupe-pretrain(1), SECURITY): the launcher's
 * TUPE_JOB_SECRET; under MPI, a key rank 0 makes and broadcasts; with a rendezvous file, a
 * secret rank 0 writes there; ranks that meet at a loopback MASTER_ADDR, a secret in this
 * user's private directory. A MASTER_ADDR that other machines reach, without a secret or a
 * file to carry one, is refused: anyone who can reach the port could otherwise join. */
static int job_secret(tupe_comm *c, const char *host, int port, const char *file, tupe_rdzv_opts *o,
                      tupe_jobkey *key, char *keyfile, size_t cap, tupe_err *e)
{
    const char *secret = getenv("TUPE_JOB_SECRET");
    if (secret && *secret) {
        if (strlen(secret) < TUPE_JOBSECRET_MIN)
            return tupe_fail(e, TUPE_EUSAGE, "TUPE_JOB_SECRET is %zu characters: at least %d, the "
                             "same on every rank (e.g. from `openssl rand -hex 32`)", strlen(secret),
                             TUPE_JOBSECRET_MIN);
        int rc = tupe_jobkey_from_text(key, secret, strlen(secret), e);
        o->key = rc ? NULL : key;
        return rc;
    }
    if (c->bk == BK_MPI || !host)
        return 0; /* MPI's broadcast, or the rendezvous file */
    if (file) { /* MASTER_ADDR for the address, the file for the secret */
        o->keyfile = file;
        return 0;
    }
    if (!tupe_rdzv_loopback(host))
        return tupe_fail(e, TUPE_EUSAGE, "MASTER_ADDR=%s is not the loopback: ranks on other machines "
                         "must prove they belong to the job, or rank 0 would let in anyone who "
                         "connects: give every rank the same TUPE_JOB_SECRET "
                         "(e.g. export TUPE_JOB_SECRET=$(openssl rand -hex 32) before the launcher), "
                         "or a TUPE_RENDEZVOUS_FILE on a shared file system to carry one; ranks on "
                         "one machine can meet at MASTER_ADDR=127.0.0.1 without either", host);
    char dir[4000];
    int rc = tupe_rdzvfile_private_dir(dir, sizeof dir, e);
    if (rc)
        return rc;
    char name[300];
    size_t n = 0;
    for (const char *p = host; *p && n < 200; p++, n++)
        name[n] = (isalnum((unsigned char)*p) || *p == '.' || *p == '-') ? *p : '_';
    name[n] = 0;
    snprintf(keyfile, cap, "%s/tupe-rendezvous-%s-%d", dir, name, port);
    o->keyfile = keyfile;
    o->file_what = "the ranks' secret file";
    return 0;
}

static int watch(tupe_comm *c, const char *host, int port, const char *file, tupe_err *e)
{
    tupe_rdzv_opts o;
    memset(&o, 0, sizeof o);
    o.rank = c->rank;
    o.world = c->world;
    o.host = host;
    o.port = port;
    o.file = host ? NULL : file;
    o.timeout = c->timeout;
    o.job = job_token();
    tupe_jobkey key;
    char keyfile[4400];
    int rc = job_secret(c, host, port, file, &o, &key, keyfile, sizeof keyfile, e);
    if (rc)
        return rc;
#if defined(TUPE_HAVE_MPI)
    if (c->bk == BK_MPI) {
        o.exchange = mpi_exchange;
        uint64_t tok = 0;
        if (c->rank == 0 && getrandom(&tok, sizeof tok, 0) != (ssize_t)sizeof tok)
            tok = (uint64_t)getpid();
        MPI_Bcast(&tok, 1, MPI_UINT64_T, 0, MPI_COMM_WORLD);
        o.job = tok;
        if (!o.key) { /* MPI's own channel carries the key */
            int bad = c->rank == 0 && tupe_jobauth_random(key.k, sizeof key.k, e) != 0;
            MPI_Bcast(&bad, 1, MPI_INT, 0, MPI_COMM_WORLD);
            if (bad)
                return c->rank == 0 ? TUPE_EFAIL : tupe_fail(e, TUPE_EFAIL, "rank 0 has no random numbers");
            MPI_Bcast(key.k, (int)sizeof key.k, MPI_BYTE, 0, MPI_COMM_WORLD);
            o.key = &key;
        }
    }
#endif
    rc = tupe_rdzv_open(&c->z, &o, e);
    tupe_jobauth_wipe(&key, sizeof key);
    if (!rc)
        tupe_rdzv_on_failure(c->z, on_failure, c);
    return rc;
}

static int allgather_bytes(tupe_comm *c, const void *mine, void *all, size_t bytes, tupe_err *e);

/* This rank's node: its host name, or its NCCL_HOSTID where that is set (the variable NCCL reads
 * to override the host's identity), so that tupe's nodes are NCCL's. */
static uint64_t node_key(void)
{
    const char *id = getenv("NCCL_HOSTID");
    char h[256];
    if (!id || !*id) {
        if (gethostname(h, sizeof h) != 0)
            h[0] = 0;
        h[sizeof h - 1] = 0;
        id = h;
    }
    return tupe_hash64(id, strlen(id));
}

/* The nodes (tupe_comm_nodes): every rank's node key to every rank, the nodes numbered by their
 * lowest rank, each rank's slot. */
static int topology(tupe_comm *c, tupe_err *e)
{
    int W = c->world;
    uint64_t *key = malloc((size_t)W * sizeof *key);
    int *node = malloc((size_t)W * sizeof *node), *size = calloc((size_t)W, sizeof *size);
    c->slot = malloc((size_t)W * sizeof *c->slot);
    int rc = 0;
    if (!key || !node || !size || !c->slot)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc) {
        key[c->rank] = node_key();
        rc = allgather_bytes(c, key + c->rank, key, sizeof *key, e);
    }
    if (!rc) {
        int n = 0, even = 1;
        for (int q = 0; q < W; q++) {
            int k = 0;
            while (k < q && key[k] != key[q])
                k++;
            node[q] = k < q ? node[k] : n++;
            c->slot[q] = size[node[q]]++; /* its place in its node, for now */
        }
        for (int a = 1; a < n; a++)
            even &= size[a] == size[0];
        c->hosts = n;
        c->nodes = even ? n : 1;
        c->node_size = W / c->nodes;
        for (int q = 0; q < W; q++)
            c->slot[q] = even ? node[q] + c->slot[q] * n : q;
    }
    free(key);
    free(node);
    free(size);
    return rc;
}

int tupe_comm_init(tupe_comm **cp, tupe_err *e)
{
    tupe_comm *c = calloc(1, sizeof *c);
    if (!c)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    pthread_mutex_init(&c->mu, NULL);
    c->world = 1;
    c->launcher = "none";
    c->timeout = env_seconds("TUPE_COMM_TIMEOUT", 600);
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
    if (c->timeout < 0) {
        free(c);
        return tupe_fail(e, TUPE_EUSAGE, "TUPE_COMM_TIMEOUT=%s is not a number of seconds (more "
                         "than 0, at most 10000000)", getenv("TUPE_COMM_TIMEOUT"));
    }
    if (c->world > TUPE_RDZV_MAX_WORLD) {
        int w = c->world;
        free(c);
        return tupe_fail(e, TUPE_EUSAGE, "the launcher says the world has %d ranks: at most %d",
                         w, TUPE_RDZV_MAX_WORLD);
    }
    if (c->rank < 0 || c->world < 1 || c->local < 0 || c->rank >= c->world) {
        free(c);
        return tupe_fail(e, TUPE_EUSAGE, "inconsistent rank environment (rank must be in 0..world-1)");
    }
    int rc = 0;
    if (c->world > 1) {
        const char *host = getenv("MASTER_ADDR"), *file = getenv("TUPE_RENDEZVOUS_FILE");
        if (host && !*host)
            host = NULL;
        if (file && !*file)
            file = NULL;
        int port = env_int("MASTER_PORT", 29500);
        int mpi_launched = strcmp(c->launcher, "mpirun") == 0;
        if (port < 1 || port > 65535) {
            rc = tupe_fail(e, TUPE_EUSAGE, "MASTER_PORT=%s is not a port number", getenv("MASTER_PORT"));
        } else if (!mpi_launched && (host || file)) {
            c->bk = BK_TCP;
            rc = watch(c, host, host ? port : (getenv("MASTER_PORT") ? port : 0), file, e);
        } else {
#if defined(TUPE_HAVE_MPI)
            rc = mpi_join(c, e);
            if (!rc && env_int("TUPE_COMM_WATCH", 1) != 0)
                rc = watch(c, NULL, 0, NULL, e);
#else
            rc = tupe_fail(e, TUPE_EUSAGE, "started as one of %d ranks (%s), but this build has no "
                           "MPI: give the ranks a rendezvous instead (MASTER_ADDR and MASTER_PORT, "
                           "or TUPE_RENDEZVOUS_FILE), or rebuild with MPI=1 (Debian: apt-get "
                           "install libopenmpi-dev openmpi-bin)", c->world, c->launcher);
#endif
        }
    }
    c->nodes = c->node_size = c->hosts = 1;
    if (!rc && c->world > 1)
        rc = topology(c, e);
    if (rc) {
        if (c->z) { /* the topology's exchange failed: the others are told */
            tupe_rdzv_abort(c->z, e->msg);
            tupe_rdzv_close(c->z);
        }
#if defined(TUPE_HAVE_MPI)
        if (c->mpi)
            MPI_Finalize();
#endif
        pthread_mutex_destroy(&c->mu);
        free(c->slot);
        free(c);
        return rc;
    }
    *cp = c;
    return 0;
}

void tupe_comm_abort(tupe_comm *c, const char *why)
{
    if (!c || c->world == 1)
        return;
    pthread_mutex_lock(&c->mu);
    int first = !c->aborted;
    c->aborted = 1;
    pthread_mutex_unlock(&c->mu);
    if (!first)
        return;
    if (c->z)
        tupe_rdzv_abort(c->z, why);
    on_failure(c, why);
}

void tupe_comm_finalize(tupe_comm *c)
{
    if (!c)
        return;
    if (c->world > 1 && !c->aborted) {
        tupe_err e;
        if (tupe_comm_barrier(c, &e))
            c->aborted = 1; /* another rank failed: no goodbyes to wait for */
    }
    tupe_rdzv_close(c->z);
#if defined(TUPE_HAVE_MPI)
    /* MPI_Finalize waits for ranks that may be gone; a failed job ends without it */
    if (c->mpi && !c->aborted)
        MPI_Finalize();
#endif
    pthread_mutex_destroy(&c->mu);
    free(c->host);
    free(c->sums);
    free(c->slot);
    free(c);
}

int tupe_comm_rank(const tupe_comm *c) { return c->rank; }
int tupe_comm_world(const tupe_comm *c) { return c->world; }
int tupe_comm_nodes(const tupe_comm *c) { return c->nodes; }
int tupe_comm_node_size(const tupe_comm *c) { return c->node_size; }
int tupe_comm_hosts(const tupe_comm *c) { return c->hosts; }
int tupe_comm_slot(const tupe_comm *c) { return c->slot ? c->slot[c->rank] : 0; }
const char *tupe_comm_backend(const tupe_comm *c)
{
    return c->bk == BK_MPI ? "mpi" : c->bk == BK_TCP ? "tcp" : "single";
}
const char *tupe_comm_launcher(const tupe_comm *c) { return c->launcher; }
void tupe_comm_progress(tupe_comm *c, int64_t step)
{
    if (c->z)
        tupe_rdzv_progress(c->z, step);
}

/* ---- host collectives -------------------------------------------------------------------------- */

/* MPI counts are ints, and TCP collectives go through rank 0's memory: both in chunks. */
#define CHUNK ((size_t)1 << 24)

enum { T_F32, T_F64, T_U64, T_I32 };
static const size_t tsize[] = {4, 8, 8, 4};

/* acc = acc op x, element by element (op 0: sum, 1: max). */
static void combine(void *acc, const void *x, size_t n, int t, int op)
{
    for (size_t i = 0; i < n; i++)
        switch (t) {
        case T_F32: ((float *)acc)[i] += ((const float *)x)[i]; break;
        case T_F64: ((double *)acc)[i] += ((const double *)x)[i]; break;
        case T_U64: ((uint64_t *)acc)[i] += ((const uint64_t *)x)[i]; break;
        case T_I32: {
            int32_t *a = acc;
            const int32_t *b = x;
            a[i] = op == 1 ? (b[i] > a[i] ? b[i] : a[i]) : a[i] + b[i];
        } break;
        }
}

/* Through rank 0: every rank's chunk gathered, combined in rank order, sent back. */
static int tcp_allreduce(tupe_comm *c, void *buf, size_t n, int t, int op, tupe_err *e)
{
    size_t es = tsize[t], per = CHUNK / es;
    char *all = c->rank == 0 ? malloc((size_t)c->world * (n < per ? n : per) * es) : NULL;
    if (c->rank == 0 && !all)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc = 0;
    for (size_t off = 0; off < n && !rc; off += per) {
        size_t k = n - off < per ? n - off : per;
        char *p = (char *)buf + off * es;
        if ((rc = tupe_rdzv_gather(c->z, p, k * es, all, e)))
            break;
        if (c->rank == 0) {
            for (int q = 1; q < c->world; q++)
                combine(all, all + (size_t)q * k * es, k, t, op);
            memcpy(p, all, k * es);
        }
        rc = tupe_rdzv_bcast(c->z, p, k * es, e);
    }
    free(all);
    return rc;
}

#if defined(TUPE_HAVE_MPI)
static int mpi_allreduce(void *buf, size_t n, size_t size, MPI_Datatype t, MPI_Op op, tupe_err *e)
{
    size_t per = CHUNK;
    for (size_t off = 0; off < n; off += per) {
        size_t k = n - off < per ? n - off : per;
        int rc = MPI_Allreduce(MPI_IN_PLACE, (char *)buf + off * size, (int)k, t, op, MPI_COMM_WORLD);
        if (rc != MPI_SUCCESS)
            return mpi_fail(e, "MPI_Allreduce", rc);
    }
    return 0;
}
#endif

static int allreduce(tupe_comm *c, void *buf, size_t n, int t, int op, tupe_err *e)
{
    if (c->world == 1 || n == 0)
        return 0;
    if (c->bk == BK_TCP)
        return tcp_allreduce(c, buf, n, t, op, e);
#if defined(TUPE_HAVE_MPI)
    MPI_Datatype mt = t == T_F32 ? MPI_FLOAT : t == T_F64 ? MPI_DOUBLE : t == T_U64 ? MPI_UINT64_T : MPI_INT32_T;
    return mpi_allreduce(buf, n, tsize[t], mt, op ? MPI_MAX : MPI_SUM, e);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

int tupe_comm_allreduce_f32(tupe_comm *c, float *buf, size_t n, tupe_err *e)
{
    return allreduce(c, buf, n, T_F32, 0, e);
}

int tupe_comm_allreduce_f64(tupe_comm *c, double *buf, size_t n, tupe_err *e)
{
    return allreduce(c, buf, n, T_F64, 0, e);
}

int tupe_comm_allreduce_u64(tupe_comm *c, uint64_t *buf, size_t n, tupe_err *e)
{
    return allreduce(c, buf, n, T_U64, 0, e);
}

int tupe_comm_allmax_i32(tupe_comm *c, int32_t *buf, size_t n, tupe_err *e)
{
    return allreduce(c, buf, n, T_I32, 1, e);
}

/* All of every rank's `bytes` on every rank (all: world * bytes; mine may be this rank's place
 * in it). */
static int allgather_bytes(tupe_comm *c, const void *mine, void *all, size_t bytes, tupe_err *e)
{
    if (c->world == 1) {
        memmove(all, mine, bytes);
        return 0;
    }
    if (c->bk == BK_TCP) {
        int rc = tupe_rdzv_gather(c->z, mine, bytes, all, e);
        return rc ? rc : tupe_rdzv_bcast(c->z, all, (size_t)c->world * bytes, e);
    }
#if defined(TUPE_HAVE_MPI)
    if (bytes > INT_MAX)
        return tupe_fail(e, TUPE_EFAIL, "allgather of %zu bytes per rank is too large", bytes);
    int inplace = (const char *)mine == (const char *)all + (size_t)c->rank * bytes;
    int rc = MPI_Allgather(inplace ? MPI_IN_PLACE : mine, (int)bytes, MPI_BYTE, all, (int)bytes,
                           MPI_BYTE, MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Allgather", rc);
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
    if (c->bk == BK_TCP) {
        /* through rank 0: the sums of every block, then each rank keeps its own */
        size_t n = (size_t)c->world * shard;
        float *tmp = malloc(n * sizeof *tmp);
        if (!tmp)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        memcpy(tmp, in, n * sizeof *tmp);
        int rc = tcp_allreduce(c, tmp, n, T_F32, 0, e);
        if (!rc)
            memcpy(out, tmp + (size_t)c->rank * shard, shard * sizeof *out);
        free(tmp);
        return rc;
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
    return allgather_bytes(c, shard_in, all, shard * sizeof *all, e);
}

int tupe_comm_bcast(tupe_comm *c, void *buf, size_t bytes, int root, tupe_err *e)
{
    if (c->world == 1 || bytes == 0)
        return 0;
    if (c->bk == BK_TCP) {
        if (root == 0)
            return tupe_rdzv_bcast(c->z, buf, bytes, e);
        /* through rank 0 */
        char *all = c->rank == 0 ? malloc((size_t)c->world * bytes) : NULL;
        if (c->rank == 0 && !all)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        int rc = tupe_rdzv_gather(c->z, buf, bytes, all, e);
        if (!rc && c->rank == 0)
            memcpy(buf, all + (size_t)root * bytes, bytes);
        free(all);
        return rc ? rc : tupe_rdzv_bcast(c->z, buf, bytes, e);
    }
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
    if (c->bk == BK_TCP) {
        int32_t x = 0;
        return tcp_allreduce(c, &x, 1, T_I32, 1, e);
    }
#if defined(TUPE_HAVE_MPI)
    int rc = MPI_Barrier(MPI_COMM_WORLD);
    return rc == MPI_SUCCESS ? 0 : mpi_fail(e, "MPI_Barrier", rc);
#else
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

/* ---- agreement --------------------------------------------------------------------------------- */

/* Line `i` (0-based) of text into out, or "(nothing)" past its end. */
static void line_of(const char *text, size_t i, char *out, size_t cap)
{
    const char *p = text;
    for (size_t k = 0; k < i && p; k++) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    if (!p || !*p) {
        snprintf(out, cap, "(nothing)");
        return;
    }
    size_t n = strcspn(p, "\n");
    snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
}

int tupe_comm_agree(tupe_comm *c, const char *what, const char *text, tupe_err *e)
{
    if (c->world == 1)
        return 0;
    uint64_t n = strlen(text) + 1;
    int rc = tupe_comm_bcast(c, &n, sizeof n, 0, e);
    char *ref = rc ? NULL : malloc(n);
    if (!rc && !ref)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc && c->rank == 0)
        memcpy(ref, text, n);
    if (!rc)
        rc = tupe_comm_bcast(c, ref, n, 0, e);
    if (rc) {
        free(ref);
        return rc;
    }
    ref[n - 1] = 0;
    /* the first differing line, and the lowest rank with one */
    size_t at = 0;
    int differ = strcmp(text, ref) != 0;
    if (differ) {
        const char *a = text, *b = ref;
        while (*a && *b) {
            size_t la = strcspn(a, "\n"), lb = strcspn(b, "\n");
            if (la != lb || memcmp(a, b, la) != 0)
                break;
            a += la + (a[la] == '\n');
            b += lb + (b[lb] == '\n');
            at++;
        }
    }
    free(ref);
    int32_t who = differ ? c->world - c->rank : 0;
    if ((rc = tupe_comm_allmax_i32(c, &who, 1, e)))
        return rc;
    if (who == 0)
        return 0;
    int first = c->world - who;
    uint64_t line = at;
    if ((rc = tupe_comm_bcast(c, &line, sizeof line, first, e)))
        return rc;
    char mine[256], theirs[512];
    line_of(text, (size_t)line, mine, sizeof mine);
    snprintf(theirs, sizeof theirs, "%s", mine);
    if ((rc = tupe_comm_bcast(c, theirs, sizeof theirs, first, e)))
        return rc;
    char zero[256];
    snprintf(zero, sizeof zero, "%s", mine);
    if ((rc = tupe_comm_bcast(c, zero, sizeof zero, 0, e)))
        return rc;
    return tupe_fail(e, TUPE_EUSAGE, "ranks disagree on %s: rank %d has \"%s\", rank 0 \"%s\"",
                     what, first, theirs, zero);
}

/* ---- device buffers ------------------------------------------------------------------------------ */

/* Every rank says so alike: the paths agree by then. */
static int no_nccl_reduce(tupe_err *e)
{
    return tupe_fail(e, TUPE_EUSAGE, "--grad-reduce nccl needs ranks on GPUs with NCCL; these ranks "
                     "sum their gradients through host copies (CPUs, or TUPE_NCCL=0)");
}

int tupe_comm_dev_open(tupe_comm *c, tupe_backend *be, int reduce, tupe_err *e)
{
    c->reduce = reduce;
    if (c->world == 1) {
        c->path = PATH_NONE;
        return 0;
    }
    c->path = PATH_HOST;
#if defined(TUPE_HAVE_CUDA)
    const char *v = getenv("TUPE_NCCL");
    int gpu = tupe_backend_cuda_device(be) >= 0, want = gpu && !(v && strcmp(v, "0") == 0);
    /* whether any rank wants NCCL, and the first rank that does not: every rank fails alike */
    int32_t w[2] = {want, want ? 0 : c->world - c->rank};
    int rc = tupe_comm_allmax_i32(c, w, 2, e);
    if (rc)
        return rc;
    if (w[0] && w[1]) {
        int q = c->world - w[1];
        if (q == c->rank)
            return tupe_fail(e, TUPE_EUSAGE, "ranks disagree on the device: rank %d %s while "
                             "other ranks sum gradients through NCCL on GPUs", q,
                             gpu ? "has TUPE_NCCL=0" : "computes on the CPU");
        return tupe_fail(e, TUPE_EUSAGE, "ranks disagree on the device: rank %d computes on the "
                         "CPU or has TUPE_NCCL=0, while this rank sums gradients through NCCL on "
                         "a GPU", q);
    }
    if (!want)
        return reduce == TUPE_REDUCE_NCCL ? no_nccl_reduce(e) : 0;
    /* every rank must be able to load NCCL before any waits for the others to join */
    tupe_err le;
    char id[TUPE_NCCL_ID_BYTES];
    memset(id, 0, sizeof id);
    int bad = tupe_backend_cuda_nccl_load(&le) != 0 ||
              (c->rank == 0 && tupe_backend_cuda_nccl_id(id, &le) != 0);
    int32_t worst = bad ? c->world - c->rank : 0;
    if ((rc = tupe_comm_allmax_i32(c, &worst, 1, e)))
        return rc;
    if (worst) {
        if (bad)
            return tupe_fail(e, le.code ? le.code : TUPE_EFAIL, "rank %d: %s", c->rank, le.msg);
        return tupe_fail(e, TUPE_EFAIL, "rank %d could not set up NCCL (its message says why)",
                         c->world - worst);
    }
    if ((rc = tupe_comm_bcast(c, id, sizeof id, 0, e)) ||
        (rc = tupe_backend_cuda_nccl_init(be, id, c->slot[c->rank], c->world, c->nodes, c->timeout,
                                          nccl_hint, c, e)))
        return rc;
    pthread_mutex_lock(&c->mu);
    c->be = be;
    c->path = PATH_NCCL;
    pthread_mutex_unlock(&c->mu);
    const char *why = c->z ? tupe_rdzv_failure(c->z) : NULL;
    if (why) /* a rank went while NCCL was being set up */
        tupe_backend_cuda_nccl_abort(be, why);
#else
    (void)be;
    if (reduce == TUPE_REDUCE_NCCL)
        return no_nccl_reduce(e);
#endif
    return 0;
}

const char *tupe_comm_dev_path(const tupe_comm *c)
{
    return c->path == PATH_NCCL ? "nccl" : c->path == PATH_HOST ? "host" : "none";
}

static float *host_room(tupe_comm *c, size_t n, tupe_err *e)
{
    if (c->host_n < n) {
        float *h = realloc(c->host, n * sizeof *h);
        if (!h) {
            tupe_fail(e, TUPE_EFAIL, "out of memory");
            return NULL;
        }
        c->host = h;
        c->host_n = n;
    }
    return c->host;
}

/* Element i of every slot's piece (col[slot]) summed as the device's fixed order sums it
 * (backend_cuda.h, _reduce_pieces): over the places of each node, then over the nodes. */
static float tree2(tupe_comm *c, float *col, float *tmp, int bf16)
{
    int N = c->nodes, L = c->node_size;
    for (int a = 0; a < N; a++) {
        for (int l = 0; l < L; l++)
            tmp[l] = col[a + l * N];
        tmp[L + a] = tupe_tree_sum_f(tmp, L, bf16);
    }
    return tupe_tree_sum_f(tmp + L, N, bf16);
}

/* Host copies: every rank's piece of slot q to the rank of slot q, summed by tree2. */
static int host_reduce(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, tupe_err *e)
{
    size_t W = (size_t)c->world, n = W * piece;
    int bf16 = be->esize == 2;
    float *h = host_room(c, 2 * n + 3 * W, e);
    if (!h)
        return e->code;
    float *got = h + n, *col = h + 2 * n, *tmp = col + W;
    be->download(be, h, buf, n, TUPE_F32);
    if (be->check && be->check(be, e))
        return e->code;
    int rc = 0;
    if (c->bk == BK_TCP) {
        /* rank 0 receives every rank's buffer and sums every piece: all ranks get them all */
        float *all = c->rank == 0 ? malloc(W * n * sizeof *all) : NULL;
        if (c->rank == 0 && !all)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        for (size_t off = 0; off < n && !rc; off += CHUNK / 4 / W) {
            size_t k = n - off < CHUNK / 4 / W ? n - off : CHUNK / 4 / W;
            if ((rc = tupe_rdzv_gather(c->z, h + off, k * 4, all, e)))
                break;
            if (c->rank == 0)
                for (size_t i = 0; i < k; i++) {
                    for (size_t q = 0; q < W; q++)
                        col[c->slot[q]] = all[q * k + i];
                    h[off + i] = tree2(c, col, tmp, bf16);
                }
            rc = tupe_rdzv_bcast(c->z, h + off, k * 4, e);
        }
        free(all);
        if (rc)
            return rc;
        be->upload(be, buf, h, n, TUPE_F32);
        return 0;
    }
#if defined(TUPE_HAVE_MPI)
    if (n > INT_MAX)
        return tupe_fail(e, TUPE_EFAIL, "a bucket of %zu elements is too large for MPI", n);
    /* rank q gets the piece of its slot */
    int *cnt = malloc(3 * W * sizeof *cnt);
    if (!cnt)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int *sd = cnt + W, *rd = cnt + 2 * W;
    for (size_t q = 0; q < W; q++) {
        cnt[q] = (int)piece;
        sd[q] = (int)((size_t)c->slot[q] * piece);
        rd[q] = (int)(q * piece);
    }
    int r = MPI_Alltoallv(h, cnt, sd, MPI_FLOAT, got, cnt, rd, MPI_FLOAT, MPI_COMM_WORLD);
    free(cnt);
    if (r != MPI_SUCCESS)
        return mpi_fail(e, "MPI_Alltoallv", r);
    size_t me = (size_t)c->slot[c->rank];
    float *mine = h + me * piece;
    for (size_t i = 0; i < piece; i++) {
        for (size_t q = 0; q < W; q++)
            col[c->slot[q]] = got[q * piece + i];
        mine[i] = tree2(c, col, tmp, bf16);
    }
    be->upload(be, tupe_dev_at(be, buf, me * piece), mine, piece, TUPE_F32);
    return 0;
#else
    (void)got;
    return tupe_fail(e, TUPE_EFAIL, "no MPI in this build");
#endif
}

/* h holds world pieces of `piece` floats, this rank's at its slot: every rank's to every rank
 * (to the place of its slot). */
static int gather_slots(tupe_comm *c, float *h, size_t piece, tupe_err *e)
{
    size_t W = (size_t)c->world, me = (size_t)tupe_comm_slot(c);
    int rc = 0;
    for (size_t off = 0; off < piece && !rc; off += CHUNK / 4) {
        /* piece by piece of every rank: chunks of the same offsets in each rank's piece */
        size_t k = piece - off < CHUNK / 4 ? piece - off : CHUNK / 4;
        float *tmp = malloc(W * k * sizeof *tmp);
        if (!tmp)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        rc = allgather_bytes(c, h + me * piece + off, tmp, k * 4, e);
        for (size_t q = 0; q < W && !rc; q++)
            memcpy(h + (size_t)(c->slot ? c->slot[q] : 0) * piece + off, tmp + q * k, k * 4);
        free(tmp);
    }
    return rc;
}

int tupe_comm_gather_slots_f32(tupe_comm *c, float *buf, size_t piece, tupe_err *e)
{
    return c->world == 1 || piece == 0 ? 0 : gather_slots(c, buf, piece, e);
}

static int host_gather(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, int wide,
                       tupe_err *e)
{
    size_t W = (size_t)c->world, n = W * piece, me = (size_t)tupe_comm_slot(c);
    float *h = host_room(c, n, e);
    if (!h)
        return e->code;
    int dt = TUPE_F32 | (wide ? TUPE_WIDE : 0);
    tupe_dev *mine = wide ? tupe_dev_wat(be, buf, me * piece) : tupe_dev_at(be, buf, me * piece);
    be->download(be, h + me * piece, mine, piece, dt);
    if (be->check && be->check(be, e))
        return e->code;
    int rc = gather_slots(c, h, piece, e);
    if (!rc)
        be->upload(be, buf, h, n, dt);
    return rc;
}

int tupe_comm_dev_reduce(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, tupe_err *e)
{
    if (c->path == PATH_NONE || piece == 0)
        return 0;
#if defined(TUPE_HAVE_CUDA)
    if (c->path == PATH_NCCL)
        return tupe_backend_cuda_reduce_pieces(be, buf, piece, c->reduce == TUPE_REDUCE_TREE, e);
#endif
    return host_reduce(c, be, buf, piece, e);
}

int tupe_comm_dev_allreduce(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, tupe_err *e)
{
    if (c->path == PATH_NONE || piece == 0)
        return 0;
#if defined(TUPE_HAVE_CUDA)
    if (c->path == PATH_NCCL && c->reduce == TUPE_REDUCE_NCCL)
        return tupe_backend_cuda_allreduce(be, buf, piece * (size_t)c->world, e);
#endif
    int rc = tupe_comm_dev_reduce(c, be, buf, piece, e);
    return rc ? rc : tupe_comm_dev_gather(c, be, buf, piece, 0, e);
}

int tupe_comm_dev_gather(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t piece, int wide,
                         tupe_err *e)
{
    if (c->path == PATH_NONE || piece == 0)
        return 0;
#if defined(TUPE_HAVE_CUDA)
    if (c->path == PATH_NCCL)
        return tupe_backend_cuda_gather_pieces(be, buf, piece, (size_t)(wide ? be->wsize : be->esize),
                                               c->reduce == TUPE_REDUCE_TREE, e);
#endif
    return host_gather(c, be, buf, piece, wide, e);
}

int tupe_comm_dev_sums(tupe_comm *c, tupe_backend *be, const tupe_dev *x, const size_t *ranges,
                       size_t nranges, size_t n, size_t run, const tupe_dev *dvals, size_t ndv,
                       double *vals, size_t nvals, double *sumsq, tupe_err *e)
{
    *sumsq = 0;
#if defined(TUPE_HAVE_CUDA)
    if (c->path != PATH_HOST && tupe_backend_cuda_device(be) >= 0)
        return tupe_backend_cuda_sums(be, x, ranges, nranges, n, run, dvals, ndv, vals, nvals,
                                      sumsq, e);
#endif
    size_t np = (n + run - 1) / run, k = np + nvals;
    if (np > INT_MAX)
        return tupe_fail(e, TUPE_EFAIL, "gradient norm: %zu runs are too many", np);
    if (c->sums_n < k) {
        double *s = realloc(c->sums, k * sizeof *s);
        if (!s)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        c->sums = s;
        c->sums_n = k;
    }
    double *p = c->sums;
    memset(p, 0, np * sizeof *p);
    for (size_t r = 0; r < nranges; r++)
        be->sumsq_parts(be, tupe_dev_at(be, x, ranges[2 * r]), ranges[2 * r + 1] - ranges[2 * r],
                        run, p + ranges[2 * r] / run);
    if (ndv)
        be->download(be, p + np, dvals, ndv, TUPE_DBL);
    if (nvals > ndv)
        memcpy(p + np + ndv, vals + ndv, (nvals - ndv) * sizeof *p);
    int rc = be->check ? be->check(be, e) : 0;
    if (!rc && (rc = tupe_comm_allreduce_f64(c, p, k, e)) == 0) {
        if (nvals)
            memcpy(vals, p + np, nvals * sizeof *p);
        *sumsq = tupe_tree_sum_d(p, (int)np);
    }
    return rc;
}

int tupe_comm_dev_join(tupe_comm *c, tupe_backend *be, tupe_err *e)
{
#if defined(TUPE_HAVE_CUDA)
    if (c->path == PATH_NCCL)
        return tupe_backend_cuda_comm_join(be, e);
#endif
    (void)c, (void)be, (void)e;
    return 0;
}

int tupe_comm_dev_mark(tupe_comm *c, tupe_backend *be, int i, tupe_err *e)
{
#if defined(TUPE_HAVE_CUDA)
    if (c->path == PATH_NCCL)
        return tupe_backend_cuda_comm_mark(be, i, e);
#endif
    (void)c, (void)be, (void)i, (void)e;
    return 0;
}

int tupe_comm_dev_after(tupe_comm *c, tupe_backend *be, int i, tupe_err *e)
{
#if defined(TUPE_HAVE_CUDA)
    if (c->path == PATH_NCCL)
        return tupe_backend_cuda_comm_after(be, i, e);
#endif
    (void)c, (void)be, (void)i, (void)e;
    return 0;
}
