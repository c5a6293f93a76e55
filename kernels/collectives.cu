/* Communication between the GPUs of ranks: NCCL, opened at run time; the host's waits on a
 * stream (which give up when a rank is gone); the gradients' reduction in a fixed order,
 * within each node then across nodes (sends and receives, and a sum kernel), and NCCL's own. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>

#include "collectives.cuh"
#include "norm.cuh"

/* NCCL is optional: with its header, the library is opened when ranks on GPUs first need it. */
#ifndef TUPE_HAVE_NCCL
#if __has_include(<nccl.h>)
#define TUPE_HAVE_NCCL 1
#else
#define TUPE_HAVE_NCCL 0
#endif
#endif
#if TUPE_HAVE_NCCL
#include <nccl.h>
#endif

/* ---- NCCL ------------------------------------------------------------------------------------ */

/* libnccl is opened at run time, not linked: the programs start on machines whose CUDA has no
 * NCCL (it ships apart from the toolkit), and single-GPU runs never need it. The table is
 * filled once per process and never changes after.
 *
 * Collectives run on a second stream of the backend (cs), so that the gradients of one part
 * of the model travel while the backward pass computes the next: each operation first makes
 * cs wait for the work queued so far on the compute stream (an event), and
 * tupe_backend_cuda_comm_join makes the compute stream wait for cs. The communicator is
 * initialized non-blocking and polled, so that no wait on another rank is ever without end:
 * tupe_backend_cuda_nccl_abort (any thread: the collectives module calls it when a rank is
 * known gone) aborts it, and every host wait polls, giving up after the timeout. */
#if TUPE_HAVE_NCCL
static_assert(sizeof(ncclUniqueId) == TUPE_NCCL_ID_BYTES, "NCCL unique id size");

typedef struct nccl_api {
    ncclResult_t (*get_unique_id)(ncclUniqueId *);
    ncclResult_t (*init_config)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*async_error)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*finalize)(ncclComm_t);
    ncclResult_t (*destroy)(ncclComm_t);
    ncclResult_t (*abort)(ncclComm_t);
    const char *(*error_string)(ncclResult_t);
    ncclResult_t (*all_reduce)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                               ncclComm_t, cudaStream_t);
    ncclResult_t (*all_gather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                               cudaStream_t);
    ncclResult_t (*reduce_scatter)(const void *, void *, size_t, ncclDataType_t, ncclRedOp_t,
                                   ncclComm_t, cudaStream_t);
    ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*group_start)(void);
    ncclResult_t (*group_end)(void);
    char why[300];      /* empty when loaded */
} nccl_api;

static nccl_api NCCL;
static pthread_once_t nccl_once = PTHREAD_ONCE_INIT;

static void nccl_load(void)
{
    void *h = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        h = dlopen("libnccl.so", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(NCCL.why, sizeof NCCL.why, "cannot load libnccl.so.2 (%s)", dlerror());
        return;
    }
    struct {
        void **p;
        const char *name;
    } syms[] = {{(void **)&NCCL.get_unique_id, "ncclGetUniqueId"},
                {(void **)&NCCL.init_config, "ncclCommInitRankConfig"},
                {(void **)&NCCL.async_error, "ncclCommGetAsyncError"},
                {(void **)&NCCL.finalize, "ncclCommFinalize"},
                {(void **)&NCCL.destroy, "ncclCommDestroy"},
                {(void **)&NCCL.abort, "ncclCommAbort"},
                {(void **)&NCCL.error_string, "ncclGetErrorString"},
                {(void **)&NCCL.all_reduce, "ncclAllReduce"},
                {(void **)&NCCL.all_gather, "ncclAllGather"},
                {(void **)&NCCL.reduce_scatter, "ncclReduceScatter"},
                {(void **)&NCCL.broadcast, "ncclBroadcast"},
                {(void **)&NCCL.send, "ncclSend"},
                {(void **)&NCCL.recv, "ncclRecv"},
                {(void **)&NCCL.group_start, "ncclGroupStart"},
                {(void **)&NCCL.group_end, "ncclGroupEnd"}};
    for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++)
        if (!(*syms[i].p = dlsym(h, syms[i].name))) {
            snprintf(NCCL.why, sizeof NCCL.why, "libnccl.so.2 has no %s (NCCL 2.18 or later "
                     "is needed)", syms[i].name);
            return;
        }
}

/* The loaded library, or NULL with the reason in e. */
static const nccl_api *nccl(tupe_err *e)
{
    pthread_once(&nccl_once, nccl_load);
    if (NCCL.why[0]) {
        tupe_fail(e, TUPE_EFAIL, "NCCL: %s; install NCCL (libnccl2) or set TUPE_NCCL=0 to sum "
                  "gradients through host copies", NCCL.why);
        return NULL;
    }
    return &NCCL;
}

struct nccl_link {
    ncclComm_t comm;
    int rank, world;                /* NCCL's numbers: rank is this rank's slot */
    int nodes, node_size;           /* slot = node + place * nodes */
    cudaStream_t cs;                /* the communication stream */
    cudaEvent_t after_compute, after_comm;
    void *scr;                      /* the pieces received from the other ranks */
    size_t scr_bytes;
    cudaEvent_t *marks;             /* _comm_mark's */
    int nmarks;
    double timeout;                 /* seconds a host wait may last */
    tupe_nccl_hint_fn hint;         /* what the other ranks are doing, for a timeout's message */
    void *hint_ctx;
    pthread_mutex_t mu;             /* NCCL's calls on comm against an abort from another
                                     * thread; never held across a stream or event call */
    volatile int aborted;
    char why[400];
};

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void sleep_us(long us)
{
    struct timespec ts = {0, us * 1000};
    nanosleep(&ts, NULL);
}

/* Aborts the communicator once, keeping the first reason (nl->mu held). */
static void abort_locked(nccl_link *nl, const char *why)
{
    if (nl->aborted)
        return;
    snprintf(nl->why, sizeof nl->why, "%s", why);
    nl->aborted = 1;
    if (nl->comm)
        NCCL.abort(nl->comm);
    nl->comm = NULL;
}

/* A result of an NCCL call on a non-blocking communicator: ncclInProgress means "poll until it
 * is done"; the lock is let go between polls, so that an abort from another thread is never
 * kept waiting for a peer that is gone. 0, or 1 with the reason in pr's error (nl->mu held). */
static int nccl_done(cu_priv *pr, ncclResult_t r, const char *what)
{
    nccl_link *nl = pr->nl;
    double t0 = now_s();
    while (r == ncclInProgress && nl->comm) {
        if (NCCL.async_error(nl->comm, &r) != ncclSuccess)
            break;
        if (r == ncclInProgress) {
            if (now_s() - t0 > nl->timeout) {
                abort_locked(nl, "NCCL: an operation did not start in time");
                break;
            }
            pthread_mutex_unlock(&nl->mu);
            sleep_us(50);
            pthread_mutex_lock(&nl->mu);
        }
    }
    if (r == ncclSuccess)
        return 0;
    char msg[300];
    snprintf(msg, sizeof msg, "NCCL %s: %s", what, NCCL.error_string(r));
    abort_locked(nl, msg);
    set_err(pr, "%s%s", nl->why, "");
    return 1;
}

int wait_stream(cu_priv *pr, cudaStream_t st, const char *what)
{
    nccl_link *nl = pr->nl;
    if (!nl)
        return ck(pr, cudaStreamSynchronize(st), what);
    double t0 = now_s();
    for (long i = 0;; i++) {
        cudaError_t r = cudaStreamQuery(st);
        if (r == cudaSuccess)
            break;
        if (r != cudaErrorNotReady)
            return ck(pr, r, what);
        if (nl->aborted)
            break;
        char late[400] = "";
        if (now_s() - t0 > nl->timeout) { /* the hint is asked for without nl->mu */
            char h[240] = "";
            if (nl->hint)
                nl->hint(nl->hint_ctx, h, sizeof h);
            snprintf(late, sizeof late, "rank %d: the GPU work waiting on the other ranks did "
                     "not finish within %.0f s (TUPE_COMM_TIMEOUT)%s%s", nl->rank, nl->timeout,
                     h[0] ? ": " : "", h);
        }
        ncclResult_t ae = ncclSuccess;
        pthread_mutex_lock(&nl->mu);
        if (nl->comm && NCCL.async_error(nl->comm, &ae) == ncclSuccess && ae != ncclSuccess &&
            ae != ncclInProgress) {
            char msg[300];
            snprintf(msg, sizeof msg, "NCCL: %s", NCCL.error_string(ae));
            abort_locked(nl, msg);
        } else if (late[0]) {
            abort_locked(nl, late);
        }
        pthread_mutex_unlock(&nl->mu);
        sleep_us(i < 100 ? 20 : i < 1000 ? 100 : 1000);
    }
    if (nl->aborted) {
        /* the aborted collectives have left the streams: what they wrote is not to be used */
        cudaStreamSynchronize(st);
        set_err(pr, "%s%s", nl->why, "");
        return 1;
    }
    return 0;
}

void nccl_destroy(cu_priv *pr)
{
    nccl_link *nl = pr->nl;
    if (!nl)
        return;
    if (!pr->err)
        wait_stream(pr, nl->cs, "cudaStreamSynchronize (communication)");
    pthread_mutex_lock(&nl->mu);
    if (nl->comm) {
        if (!pr->err) {
            ncclResult_t r = NCCL.finalize(nl->comm);
            double t0 = now_s();
            while (r == ncclInProgress && now_s() - t0 < nl->timeout &&
                   NCCL.async_error(nl->comm, &r) == ncclSuccess)
                if (r == ncclInProgress)
                    sleep_us(100);
            if (r == ncclSuccess)
                NCCL.destroy(nl->comm);
            else
                NCCL.abort(nl->comm);
        } else {
            NCCL.abort(nl->comm);
        }
        nl->comm = NULL;
    }
    pthread_mutex_unlock(&nl->mu);
    cudaStreamSynchronize(nl->cs);
    cudaEventDestroy(nl->after_compute);
    cudaEventDestroy(nl->after_comm);
    if (nl->scr)
        cudaFree(nl->scr);
    for (int i = 0; i < nl->nmarks; i++)
        cudaEventDestroy(nl->marks[i]);
    free(nl->marks);
    cudaStreamDestroy(nl->cs);
    pthread_mutex_destroy(&nl->mu);
    free(nl);
    pr->nl = NULL;
}

extern "C" int tupe_backend_cuda_nccl_load(tupe_err *e) { return nccl(e) ? 0 : TUPE_EFAIL; }

extern "C" int tupe_backend_cuda_nccl_id(void *id, tupe_err *e)
{
    const nccl_api *nc = nccl(e);
    if (!nc)
        return TUPE_EFAIL;
    ncclUniqueId u;
    ncclResult_t r = nc->get_unique_id(&u);
    if (r != ncclSuccess)
        return tupe_fail(e, TUPE_EFAIL, "NCCL: cannot make a unique id: %s",
                         nc->error_string(r));
    memcpy(id, &u, sizeof u);
    return 0;
}

extern "C" int tupe_backend_cuda_nccl_init(tupe_backend *be, const void *id, int rank, int world,
                                           int nodes, double timeout, tupe_nccl_hint_fn hint,
                                           void *hint_ctx, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (pr->nl)
        return 0;
    if (pr->err)
        return cu_check(be, e);
    const nccl_api *nc = nccl(e);
    if (!nc)
        return TUPE_EFAIL;
    nccl_link *nl = (nccl_link *)calloc(1, sizeof *nl);
    if (!nl)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    pthread_mutex_init(&nl->mu, NULL);
    nl->rank = rank;
    nl->world = world;
    nl->nodes = nodes > 0 && world % nodes == 0 ? nodes : 1;
    nl->node_size = world / nl->nodes;
    nl->timeout = timeout > 0 ? timeout : 600;
    nl->hint = hint;
    nl->hint_ctx = hint_ctx;
    cudaSetDevice(pr->dev);
    if (CK(cudaStreamCreateWithFlags(&nl->cs, cudaStreamNonBlocking)) ||
        CK(cudaEventCreateWithFlags(&nl->after_compute, cudaEventDisableTiming)) ||
        CK(cudaEventCreateWithFlags(&nl->after_comm, cudaEventDisableTiming))) {
        pthread_mutex_destroy(&nl->mu);
        free(nl);
        return cu_check(be, e);
    }
    pr->nl = nl;
    ncclUniqueId u;
    memcpy(&u, id, sizeof u);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0; /* polled below, so that a rank that never comes ends in a message */
    ncclResult_t r = nc->init_config(&nl->comm, world, u, rank, &cfg);
    double t0 = now_s();
    while (r == ncclInProgress) {
        pthread_mutex_lock(&nl->mu); /* an abort from another thread may free the comm */
        int gone = nl->aborted || nc->async_error(nl->comm, &r) != ncclSuccess;
        pthread_mutex_unlock(&nl->mu);
        if (nl->aborted) {
            r = ncclRemoteError;
            break;
        }
        if (gone || r != ncclInProgress)
            break;
        if (now_s() - t0 > nl->timeout) {
            pthread_mutex_lock(&nl->mu);
            abort_locked(nl, "");
            pthread_mutex_unlock(&nl->mu);
            nccl_destroy(pr);
            return tupe_fail(e, TUPE_EFAIL, "NCCL: rank %d of %d on GPU %d: the other ranks did "
                             "not join within %.0f s (TUPE_COMM_TIMEOUT)", rank, world, pr->dev,
                             timeout);
        }
        sleep_us(1000);
    }
    if (r != ncclSuccess) {
        char why[400];
        snprintf(why, sizeof why, "%s", nl->aborted ? nl->why : nc->error_string(r));
        nccl_destroy(pr);
        return tupe_fail(e, TUPE_EFAIL, "NCCL: rank %d of %d on GPU %d cannot join: %s", rank,
                         world, pr->dev, why);
    }
    return 0;
}

extern "C" void tupe_backend_cuda_nccl_abort(tupe_backend *be, const char *why)
{
    nccl_link *nl = be ? PR(be)->nl : NULL;
    if (!nl)
        return;
    /* The lock keeps an abort from freeing the communicator under an NCCL call. Its holders
     * never wait for a stream or for a peer while they hold it (stream and event calls are
     * made without it; nccl_done lets it go between polls), so this wait is short. */
    pthread_mutex_lock(&nl->mu);
    abort_locked(nl, why);
    pthread_mutex_unlock(&nl->mu);
}

/* The link for work on the streams, or NULL (no link, an abort or an earlier error; an abort's
 * reason kept in pr). Not locked: a stream or event call may wait for the communication
 * stream (under emulation, recording an event again waits for its last record), which only an
 * abort can free when a peer died inside a collective, so nl->mu is never held across one. */
static nccl_link *comm_link(cu_priv *pr)
{
    nccl_link *nl = pr->nl;
    if (nl && nl->aborted)
        set_err(pr, "%s%s", nl->why, "");
    return nl && !pr->err ? nl : NULL;
}

/* The result of a communication call: 0, or the error kept in pr, or no link. */
static int comm_end(cu_priv *pr, tupe_err *e)
{
    if (pr->err)
        return tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", pr->dev, pr->msg);
    if (!pr->nl)
        return tupe_fail(e, TUPE_EFAIL, "NCCL used before tupe_backend_cuda_nccl_init");
    return 0;
}

/* Starts a communication: cs waits for the compute stream's work queued so far. 0, or 1 (the
 * error kept, or no link). */
static int comm_begin(cu_priv *pr)
{
    nccl_link *nl = comm_link(pr);
    return !nl || CK(cudaEventRecord(nl->after_compute, pr->s)) ||
           CK(cudaStreamWaitEvent(nl->cs, nl->after_compute, 0));
}

/* NCCL calls on nl->comm are made between these: 0 with nl->mu held, or 1 (aborted: the
 * reason kept; not held). */
static int nccl_lock(cu_priv *pr)
{
    nccl_link *nl = pr->nl;
    pthread_mutex_lock(&nl->mu);
    if (!nl->aborted && nl->comm)
        return 0;
    pthread_mutex_unlock(&nl->mu);
    set_err(pr, "%s%s", nl->aborted ? nl->why : "NCCL: the communicator is gone", "");
    return 1;
}

static int nccl_unlock(cu_priv *pr, int bad)
{
    pthread_mutex_unlock(&pr->nl->mu);
    return bad;
}

/* nl->scr of at least `bytes` (growing it waits for cs, which may still read the old one). */
static void *comm_scratch(cu_priv *pr, size_t bytes)
{
    nccl_link *nl = pr->nl;
    if (nl->scr_bytes >= bytes)
        return nl->scr;
    if (wait_stream(pr, nl->cs, "cudaStreamSynchronize (communication)"))
        return NULL;
    if (nl->scr)
        cudaFree(nl->scr);
    nl->scr = NULL;
    nl->scr_bytes = 0;
    if (CK(cudaMalloc(&nl->scr, bytes)))
        return NULL;
    nl->scr_bytes = bytes;
    return nl->scr;
}

/* Each element i of this rank's piece: the ranks' values summed by tupe_tree_sum_f's tree, in
 * place over the pieces (slot q is rank q's piece as received; this rank's own is `own`),
 * each sum rounded to T as stored. */
template <class T>
__global__ void k_tree_pieces(T *own, T *slots, int world, int rank, size_t piece)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= piece)
        return;
    int m = 1;
    while (m < world)
        m <<= 1;
    for (m >>= 1; m >= 1; m >>= 1)
        for (int c = 0; c < m && c + m < world; c++) {
            T *a = c == rank ? own : slots + (size_t)c * piece;
            T *b = c + m == rank ? own : slots + (size_t)(c + m) * piece;
            stv(a, i, ldv(a, i) + ldv(b, i));
        }
    if (rank != 0)
        own[i] = slots[i];
}

/* One stage of the fixed-order exchanges, in one group: with each of n ranks k (NCCL rank
 * base + k * stride; this rank is k = me), count elements sent from sb + k * ss and received
 * into rb + k * rs (bytes). 0, or 1 (the error kept). */
static int exchange(cu_priv *pr, int n, int me, int base, int stride, const char *sb, size_t ss,
                    char *rb, size_t rs, size_t count, ncclDataType_t t)
{
    nccl_link *nl = pr->nl;
    if (nccl_lock(pr))
        return 1;
    int bad = nccl_done(pr, NCCL.group_start(), "group");
    for (int k = 0; k < n && !bad; k++)
        if (k != me)
            bad = nccl_done(pr, NCCL.send(sb + (size_t)k * ss, count, t, base + k * stride,
                                          nl->comm, nl->cs), "send") ||
                  nccl_done(pr, NCCL.recv(rb + (size_t)k * rs, count, t, base + k * stride,
                                          nl->comm, nl->cs), "receive");
    return nccl_unlock(pr, bad || nccl_done(pr, NCCL.group_end(), "group"));
}

static void tree_pieces(cu_priv *pr, char *own, char *slots, int n, int me, size_t count)
{
    if (pr->bf16)
        k_tree_pieces<bf16><<<nblocks(count, 256), 256, 0, pr->nl->cs>>>((bf16 *)own, (bf16 *)slots, n, me, count);
    else
        k_tree_pieces<float><<<nblocks(count, 256), 256, 0, pr->nl->cs>>>((float *)own, (float *)slots, n, me, count);
    LAUNCHED("k_tree_pieces");
}

extern "C" int tupe_backend_cuda_reduce_pieces(tupe_backend *be, tupe_dev *buf, size_t piece,
                                               int fixed, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (comm_begin(pr) || piece == 0)
        return comm_end(pr, e);
    nccl_link *nl = pr->nl;
    size_t es = (size_t)be->esize;
    ncclDataType_t t = pr->bf16 ? ncclBfloat16 : ncclFloat32;
    char *b = (char *)buf;
    if (!fixed) {
        if (!nccl_lock(pr))
            nccl_unlock(pr, nccl_done(pr, NCCL.reduce_scatter(b, b + (size_t)nl->rank * piece * es,
                                                              piece, t, ncclSum, nl->comm, nl->cs),
                                      "reduce-scatter"));
        return comm_end(pr, e);
    }
    /* within the node: its L ranks' chunks (N pieces each; this rank's is its place l), summed
     * over the places; then across nodes: the chunk's pieces, summed over the nodes */
    int N = nl->nodes, L = nl->node_size, a = nl->rank % N, l = nl->rank / N;
    size_t chunk = (size_t)N * piece;
    char *scr = (char *)comm_scratch(pr, (size_t)nl->world * piece * es), *own = b + l * chunk * es;
    if (!scr)
        return comm_end(pr, e);
    int bad = 0;
    if (L > 1 && !(bad = exchange(pr, L, l, a, N, b, chunk * es, scr, chunk * es, chunk, t)))
        tree_pieces(pr, own, scr, L, l, chunk);
    if (N > 1 && !bad && !exchange(pr, N, a, l * N, 1, own, piece * es, scr, piece * es, piece, t))
        tree_pieces(pr, own + (size_t)a * piece * es, scr, N, a, piece);
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_gather_pieces(tupe_backend *be, tupe_dev *buf, size_t piece,
                                               size_t elem, int fixed, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (comm_begin(pr) || piece == 0)
        return comm_end(pr, e);
    nccl_link *nl = pr->nl;
    size_t bytes = piece * elem;
    char *b = (char *)buf;
    if (!fixed) {
        if (!nccl_lock(pr))
            nccl_unlock(pr, nccl_done(pr, NCCL.all_gather(b + (size_t)nl->rank * bytes, b, bytes,
                                                          ncclUint8, nl->comm, nl->cs),
                                      "all-gather"));
        return comm_end(pr, e);
    }
    /* the reduction's stages backwards: across nodes, the pieces of this rank's chunk; then
     * within the node, the chunks */
    int N = nl->nodes, L = nl->node_size, a = nl->rank % N, l = nl->rank / N;
    size_t chunk = (size_t)N * bytes;
    int bad = N > 1 && exchange(pr, N, a, l * N, 1, b + (size_t)nl->rank * bytes, 0,
                                b + l * chunk, bytes, bytes, ncclUint8);
    if (L > 1 && !bad)
        exchange(pr, L, l, a, N, b + l * chunk, 0, b, chunk, chunk, ncclUint8);
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_bcast(tupe_backend *be, tupe_dev *buf, size_t bytes, int root,
                                       tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (comm_begin(pr) || bytes == 0 || nccl_lock(pr))
        return comm_end(pr, e);
    nccl_link *nl = pr->nl;
    nccl_unlock(pr, nccl_done(pr, NCCL.broadcast(buf, buf, bytes, ncclUint8, root, nl->comm,
                                                 nl->cs), "broadcast"));
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_allreduce(tupe_backend *be, tupe_dev *buf, size_t n,
                                           tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (comm_begin(pr) || n == 0 || nccl_lock(pr))
        return comm_end(pr, e);
    nccl_link *nl = pr->nl;
    nccl_unlock(pr, nccl_done(pr, NCCL.all_reduce(buf, buf, n, pr->bf16 ? ncclBfloat16 : ncclFloat32,
                                                  ncclSum, nl->comm, nl->cs), "all-reduce"));
    return comm_end(pr, e);
}

/* d's k doubles summed over the ranks, on cs between the compute stream's work before and
 * after (0, or 1 with the error kept). */
static int sums_allreduce(cu_priv *pr, double *d, size_t k)
{
    nccl_link *nl = pr->nl;
    return comm_begin(pr) || nccl_lock(pr) ||
           nccl_unlock(pr, nccl_done(pr, NCCL.all_reduce(d, d, k, ncclFloat64, ncclSum, nl->comm,
                                                         nl->cs), "all-reduce (gradient norm)")) ||
           CK(cudaEventRecord(nl->after_comm, nl->cs)) ||
           CK(cudaStreamWaitEvent(pr->s, nl->after_comm, 0));
}

extern "C" int tupe_backend_cuda_comm_join(tupe_backend *be, tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = comm_link(pr);
    if (nl && !CK(cudaEventRecord(nl->after_comm, nl->cs)))
        CK(cudaStreamWaitEvent(pr->s, nl->after_comm, 0));
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_comm_mark(tupe_backend *be, int i, tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = comm_link(pr);
    if (nl && i >= nl->nmarks) {
        cudaEvent_t *m = (cudaEvent_t *)realloc(nl->marks, (size_t)(i + 1) * sizeof *m);
        if (!m)
            set_err(pr, "%s%s", "out of host memory", "");
        else
            nl->marks = m;
        while (!pr->err && nl->nmarks <= i &&
               !CK(cudaEventCreateWithFlags(&nl->marks[nl->nmarks], cudaEventDisableTiming)))
            nl->nmarks++;
    }
    if (nl && !pr->err)
        CK(cudaEventRecord(nl->marks[i], nl->cs));
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_comm_after(tupe_backend *be, int i, tupe_err *e)
{
    cu_priv *pr = PR(be);
    nccl_link *nl = comm_link(pr);
    if (nl && i < nl->nmarks)
        CK(cudaStreamWaitEvent(pr->s, nl->marks[i], 0));
    return comm_end(pr, e);
}

extern "C" int tupe_backend_cuda_comm_wait(tupe_backend *be, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (pr->nl)
        wait_stream(pr, pr->nl->cs, "cudaStreamSynchronize (communication)");
    return comm_end(pr, e);
}
#else
void nccl_destroy(cu_priv *) {}

int wait_stream(cu_priv *pr, cudaStream_t st, const char *what)
{
    return ck(pr, cudaStreamSynchronize(st), what);
}

static int no_nccl(tupe_err *e)
{
    return tupe_fail(e, TUPE_EUSAGE, "NCCL: this build has none (nccl.h was not found when it "
                     "was compiled); set TUPE_NCCL=0 to sum gradients through host copies");
}

extern "C" int tupe_backend_cuda_nccl_load(tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_nccl_id(void *, tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_nccl_init(tupe_backend *, const void *, int, int, int, double,
                                           tupe_nccl_hint_fn, void *, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" void tupe_backend_cuda_nccl_abort(tupe_backend *, const char *) {}
extern "C" int tupe_backend_cuda_reduce_pieces(tupe_backend *, tupe_dev *, size_t, int, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_gather_pieces(tupe_backend *, tupe_dev *, size_t, size_t, int,
                                               tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_bcast(tupe_backend *, tupe_dev *, size_t, int, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_allreduce(tupe_backend *, tupe_dev *, size_t, tupe_err *e)
{
    return no_nccl(e);
}
extern "C" int tupe_backend_cuda_comm_join(tupe_backend *, tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_comm_wait(tupe_backend *, tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_comm_mark(tupe_backend *, int, tupe_err *e) { return no_nccl(e); }
extern "C" int tupe_backend_cuda_comm_after(tupe_backend *, int, tupe_err *e) { return no_nccl(e); }
#endif

/* The pinned host buffer of _sums, for n doubles (NULL with the error kept). */
static double *sums_host(cu_priv *pr, size_t n)
{
    if (pr->hsums_n >= n)
        return pr->hsums;
    if (SYNC(pr)) /* the old one may still be read */
        return NULL;
    if (pr->hsums)
        cudaFreeHost(pr->hsums);
    pr->hsums = NULL;
    pr->hsums_n = 0;
    if (CK(cudaMallocHost((void **)&pr->hsums, n * sizeof(double))))
        return NULL;
    pr->hsums_n = n;
    return pr->hsums;
}

/* The runs' sums of squares of this rank's ranges (zeros elsewhere) and the values (the
 * device's, then the host's), side by side in one device buffer; summed over the ranks by one
 * NCCL all-reduce of doubles on cs, exact as every element comes from one rank; the runs' sums
 * then added by the host's tree on the compute stream, and sumsq and the values read back
 * together: the step's one wait. */
extern "C" int tupe_backend_cuda_sums(tupe_backend *be, const tupe_dev *x, const size_t *ranges,
                                      size_t nranges, size_t n, size_t run, const tupe_dev *dvals,
                                      size_t ndv, double *vals, size_t nvals, double *sumsq,
                                      tupe_err *e)
{
    cu_priv *pr = PR(be);
    *sumsq = 0;
    size_t np = run ? (n + run - 1) / run : 0, k = np + nvals;
    if (np > INT_MAX)
        return tupe_fail(e, TUPE_EFAIL, "gradient norm: %zu runs are too many", np);
    double *d = (double *)scratch(pr, SC_RUNS, (k + 1) * sizeof(double));
    double *h = sums_host(pr, nvals + 1);
    if (!pr->err)
        CK(cudaMemsetAsync(d, 0, np * sizeof(double), pr->s));
    for (size_t r = 0; r < nranges && !pr->err; r++)
        sumsq_runs_dev(pr, tupe_dev_at(be, x, ranges[2 * r]), ranges[2 * r + 1] - ranges[2 * r],
                       run, d + ranges[2 * r] / run);
    if (ndv && !pr->err)
        CK(cudaMemcpyAsync(d + np, dvals, ndv * sizeof(double), cudaMemcpyDeviceToDevice, pr->s));
#if TUPE_HAVE_NCCL
    /* the host's values join the device's (one rank: they are their own sums, left out) */
    if (pr->nl && !pr->err && h) {
        if (nvals > ndv)
            memcpy(h, vals + ndv, (nvals - ndv) * sizeof(double));
        if (!(nvals > ndv && CK(cudaMemcpyAsync(d + np + ndv, h, (nvals - ndv) * sizeof(double),
                                                cudaMemcpyHostToDevice, pr->s))))
            sums_allreduce(pr, d, k);
    }
#endif
    tree_sum_dev(pr, d, (int)np, d + k);
    /* the values (summed) and sumsq: nvals + 1 doubles from d + np */
    if (!pr->err && h && !CK(cudaMemcpyAsync(h, d + np, (nvals + 1) * sizeof(double),
                                             cudaMemcpyDeviceToHost, pr->s)))
        SYNC(pr);
    if (pr->err || !h)
        return cu_check(be, e);
    if (pr->nl)
        memcpy(vals, h, nvals * sizeof(double));
    else
        memcpy(vals, h, ndv * sizeof(double));
    *sumsq = h[nvals];
    return 0;
}
