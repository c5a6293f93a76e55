/* cuemu's NCCL (libnccl.so.2 of the emulated build; API in include/nccl.h): collectives and
 * point-to-point transfers between the processes of one machine, each process one rank with
 * its emulated GPU, through a POSIX shared-memory segment named by the unique id.
 *
 * Call semantics are NCCL's: an operation is checked when it is called and runs later, in
 * order, on its CUDA stream (the emulated runtime's stream threads, through bridge.h); it
 * blocks that stream until every rank has reached it; a group (ncclGroupStart/End) runs its
 * operations together. Sums and the other reductions fold the ranks in rank order (0, 1, ...),
 * in the element type, so that results are the same on every rank and from run to run.
 *
 * What real NCCL would not say but a bug in the program would cause is reported as cuemu
 * reports are ("cuemu: misuse: ...", counted, CUEMU_ABORT=1 aborts): ranks that disagree on
 * an operation (its kind, count, type, reduction or root, or a send and its receive), a
 * communicator used before it is ready (non-blocking initialization still in progress) or
 * after it was destroyed, a stream or a buffer of another device, a buffer that is not
 * device memory or is too short, overlapping buffers that are not NCCL's in-place forms.
 * The operation then does nothing and ncclCommGetAsyncError returns ncclInvalidUsage.
 *
 * Like NCCL, a rank waits for its peers as long as it takes: a peer that died leaves it
 * waiting until the program calls ncclCommAbort (from any thread), which ends the wait. As a
 * safety net, CUEMU_NCCL_TIMEOUT seconds (default 900) of waiting end it with an error that
 * names the ranks that did not come. CUEMU_NCCL_DELAY_MS delays the start of every operation
 * on its stream (other streams run ahead meanwhile: a missing wait after a collective shows).
 *
 * Topology. The ranks are grouped into nodes as NCCL groups them, by host: a rank's node is
 * its NCCL_HOSTID (the variable NCCL reads to override the host's identity) where it is set;
 * else CUEMU_NODES=N cuts the ranks into N nodes of consecutive ranks; else every rank is on
 * this machine's one node. Nodes are numbered in the order of their lowest rank.
 *
 * Bytes. Every rank counts the bytes it sends to each other rank, as the real library would
 * move them: a send, its count to its peer; a collective, as NCCL's ring algorithm moves it,
 * over as many rings as the largest node has ranks (NCCL's channels, one per NIC), each
 * through the nodes in order and leaving every node from another of its ranks, each carrying
 * its share of the data (all-reduce 2(W-1)/W of the buffer per hop, reduce-scatter and
 * all-gather (W-1)/W, broadcast the whole buffer along the chain from the root). With
 * CUEMU_NCCL_BYTES=FILE each rank appends one line to FILE when its communicator ends:
 *   nccl-bytes rank=R ranks=W node=A nodes=N intra=BYTES inter=BYTES to=B0,B1,...
 * (intra: to ranks of its node; inter: to the others; to: to each rank, itself 0).
 */
#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <nccl.h>

#include "bridge.h"

namespace {

enum { MAXR = 32, STAGE = 1 << 20, MBOX = 64 << 10 };
const uint32_t ID_MAGIC = 0x4e43454d; /* "MECN" */
const uint32_t SEG_MAGIC = 0x4e43534d;

/* ---- the shared segment ------------------------------------------------------------------ */

/* What a rank says about the collective it is in: all ranks must say the same. */
struct desc {
    uint64_t seq;
    int32_t kind, dtype, op, root;
    uint64_t count;
};

struct rank_slot {
    std::atomic<int32_t> joined, gone;
    int32_t nranks, device, pid;
    uint64_t host;               /* the node's identity (Topology, above) */
    std::atomic<uint64_t> phase; /* barriers passed */
    desc d;
};

/* One message chunk from one rank to another at a time. */
struct mbox {
    std::atomic<uint32_t> full;
    int32_t dtype;
    uint64_t msg, count, offset, bytes;
    char data[MBOX];
};

struct seg {
    std::atomic<uint32_t> magic, nranks, joined;
    std::atomic<int32_t> init_failed;
    rank_slot r[MAXR];
    char stage[MAXR][STAGE];
    mbox box[MAXR][MAXR]; /* [from][to] */
};

struct id_layout {
    uint32_t magic;
    uint32_t pid;
    uint64_t token[2];
};

/* ---- the runtime, through bridge.h ------------------------------------------------------- */

const cuemu_bridge *B;

bool bridge_ok(void)
{
    if (!B) {
        auto get = (const cuemu_bridge *(*)(void))dlsym(RTLD_DEFAULT, "cuemu_bridge_get");
        const cuemu_bridge *b = get ? get() : NULL;
        if (!b || b->version != CUEMU_BRIDGE_VERSION) {
            fprintf(stderr, "cuemu: error: libnccl.so.2 (cuemu's NCCL) was opened by a program "
                    "that is not an emulated build (no cuemu_bridge_get)\n");
            return false;
        }
        B = b;
    }
    return true;
}

std::string fmt(const char *f, ...) __attribute__((format(printf, 1, 2)));
std::string fmt(const char *f, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, sizeof buf, f, ap);
    va_end(ap);
    return buf;
}

thread_local std::string last_error;

ncclResult_t fail(ncclResult_t r, const char *kind, const std::string &msg)
{
    last_error = msg;
    if (B)
        B->report(kind, msg.c_str());
    else
        fprintf(stderr, "cuemu: %s: %s\n", kind, msg.c_str());
    return r;
}

double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int timeout_s(void) { return B ? B->env_int("CUEMU_NCCL_TIMEOUT", 900) : 900; }

/* ---- communicators ------------------------------------------------------------------------ */

enum { ST_INIT, ST_READY, ST_FAILED };

struct op;

} // namespace

struct ncclComm {
    int rank, nranks, device;
    std::atomic<int> state;
    std::atomic<int> async_err;
    std::atomic<bool> abort;
    seg *s;
    uint64_t coll_seq;            /* collectives queued */
    uint64_t sent[MAXR], rcvd[MAXR]; /* messages queued to and from each peer */
    std::mutex mu;
    std::condition_variable cv;
    int pending;                  /* operations queued and not finished */
    std::thread init_thread;
    std::string init_msg;
    uint64_t host;                /* this rank's node identity, before joining */
    int node[MAXR], nnodes;       /* every rank's node index, once joined */
    double bytes[MAXR];           /* sent to each rank (Bytes, above) */
};

namespace {

std::mutex comms_mu;
std::set<ncclComm *> comms;

bool live(ncclComm *c)
{
    std::lock_guard<std::mutex> g(comms_mu);
    return c && comms.count(c);
}

/* Waits (spinning, then sleeping) until ready() or the communicator is aborted or the safety
 * timeout passes; `who` names what is awaited for the timeout's message. */
template <class F, class W>
bool wait_for(ncclComm *c, const char *what, F ready, W who)
{
    double t0 = now_s(), limit = timeout_s();
    for (long i = 0;; i++) {
        if (ready())
            return true;
        if (c->abort.load())
            return false;
        if (i < 200) {
            sched_yield();
            continue;
        }
        if (now_s() - t0 > limit) {
            c->async_err = ncclSystemError;
            fail(ncclSystemError, "error", fmt("%s (rank %d of %d): waited %d s for %s: "
                                              "CUEMU_NCCL_TIMEOUT", what, c->rank, c->nranks,
                                              (int)limit, who().c_str()));
            return false;
        }
        struct timespec ts = {0, i < 2000 ? 20000 : 200000};
        nanosleep(&ts, NULL);
    }
}

std::string ranks_behind(ncclComm *c, uint64_t phase)
{
    std::string s;
    for (int q = 0; q < c->nranks; q++)
        if (c->s->r[q].phase.load() < phase)
            s += (s.empty() ? "rank " : ", ") + std::to_string(q);
    return s.empty() ? "the other ranks" : s;
}

/* Every rank at the same barrier. */
bool barrier(ncclComm *c, const char *what)
{
    uint64_t mine = ++c->s->r[c->rank].phase;
    return wait_for(c, what, [&] {
        for (int q = 0; q < c->nranks; q++)
            if (c->s->r[q].phase.load(std::memory_order_acquire) < mine)
                return false;
        return true;
    }, [&] { return ranks_behind(c, mine) + " to reach the same operation"; });
}

std::string seg_name(const id_layout *id)
{
    char n[64];
    snprintf(n, sizeof n, "/cuemu-nccl-%08x-%016llx%016llx", id->pid,
             (unsigned long long)id->token[0], (unsigned long long)id->token[1]);
    return n;
}

/* Joins the ranks of the id: maps the segment, takes the rank's slot, waits for all. */
ncclResult_t join(ncclComm *c, const id_layout *id)
{
    std::string name = seg_name(id);
    int fd = shm_open(name.c_str(), O_CREAT | O_RDWR, 0600);
    if (fd < 0)
        return fail(ncclSystemError, "error", fmt("ncclCommInitRank: shm_open %s: %s", name.c_str(), strerror(errno)));
    struct stat st;
    if (fstat(fd, &st) == 0 && (size_t)st.st_size < sizeof(seg) && ftruncate(fd, sizeof(seg)) != 0) {
        close(fd);
        return fail(ncclSystemError, "error", fmt("ncclCommInitRank: ftruncate %s: %s", name.c_str(), strerror(errno)));
    }
    void *m = mmap(NULL, sizeof(seg), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return fail(ncclSystemError, "error", fmt("ncclCommInitRank: mmap: %s", strerror(errno)));
    seg *s = (seg *)m;
    c->s = s;
    uint32_t zero = 0;
    s->magic.compare_exchange_strong(zero, SEG_MAGIC);
    uint32_t want = 0;
    if (!s->nranks.compare_exchange_strong(want, (uint32_t)c->nranks) && want != (uint32_t)c->nranks) {
        s->init_failed = 1;
        shm_unlink(name.c_str());
        return fail(ncclInvalidUsage, "misuse", fmt("ncclCommInitRank: rank %d was given %d ranks, "
                                                    "but a rank before it %u (ranks disagree on the "
                                                    "size of the communicator)", c->rank, c->nranks, want));
    }
    rank_slot &me = s->r[c->rank];
    int32_t no = 0;
    if (!me.joined.compare_exchange_strong(no, 1)) {
        s->init_failed = 1;
        shm_unlink(name.c_str());
        return fail(ncclInvalidUsage, "misuse", fmt("ncclCommInitRank: rank %d of %d joined "
                                                    "twice (two processes with the same rank?)", c->rank, c->nranks));
    }
    me.nranks = c->nranks;
    me.device = c->device;
    me.pid = (int32_t)getpid();
    me.host = c->host;
    s->joined++;
    bool ok = wait_for(c, "ncclCommInitRank", [&] {
        return s->joined.load() == (uint32_t)c->nranks || s->init_failed.load();
    }, [&] {
        std::string w;
        for (int q = 0; q < c->nranks; q++)
            if (!s->r[q].joined.load())
                w += (w.empty() ? "rank " : ", ") + std::to_string(q);
        return w + " to join";
    });
    shm_unlink(name.c_str()); /* every rank has it mapped, or the job failed: the name may go */
    if (!ok || s->init_failed.load()) {
        s->init_failed = 1;
        return c->abort ? ncclRemoteError : ncclSystemError;
    }
    /* the nodes, numbered in the order of their lowest rank */
    c->nnodes = 0;
    for (int q = 0; q < c->nranks; q++) {
        int k = 0;
        while (k < q && s->r[k].host != s->r[q].host)
            k++;
        c->node[q] = k < q ? c->node[k] : c->nnodes++;
    }
    return ncclSuccess;
}

/* This process's node identity for a communicator of n ranks in which it is rank r. */
uint64_t host_of(int r, int n)
{
    const char *id = getenv("NCCL_HOSTID");
    if (id && *id) {
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        for (const char *p = id; *p; p++)
            h = (h ^ (unsigned char)*p) * 1099511628211ull;
        return h | 1; /* never 0 */
    }
    int nodes = B->env_int("CUEMU_NODES", 1);
    if (nodes < 1)
        nodes = 1;
    return 2 * (uint64_t)((int64_t)r * nodes / n);
}

/* ---- element types and reductions -------------------------------------------------------- */

size_t esize(int t)
{
    switch (t) {
    case ncclInt8: case ncclUint8: return 1;
    case ncclFloat16: case ncclBfloat16: return 2;
    case ncclInt32: case ncclUint32: case ncclFloat32: return 4;
    case ncclInt64: case ncclUint64: case ncclFloat64: return 8;
    }
    return 0;
}

const char *tname(int t)
{
    static const char *n[] = {"int8", "uint8", "int32", "uint32", "int64", "uint64", "float16",
                              "float32", "float64", "bfloat16"};
    return t >= 0 && t < ncclNumTypes ? n[t] : "?";
}

const char *opname(int o)
{
    static const char *n[] = {"sum", "prod", "max", "min", "avg"};
    return o >= 0 && o < ncclNumOps ? n[o] : "?";
}

float bf16_to_f(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40); /* a quiet NaN */
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}

template <class T> T red(T a, T b, int op)
{
    switch (op) {
    case ncclProd: return (T)(a * b);
    case ncclMax: return a > b ? a : b;
    case ncclMin: return a < b ? a : b;
    default: return (T)(a + b);
    }
}

template <class T> void fold_t(void *out, const void *const *in, int n, size_t count, int op)
{
    for (size_t i = 0; i < count; i++) {
        T acc = ((const T *)in[0])[i];
        for (int q = 1; q < n; q++)
            acc = red(acc, ((const T *)in[q])[i], op);
        if (op == ncclAvg)
            acc = (T)(acc / (T)n);
        ((T *)out)[i] = acc;
    }
}

/* Narrow floats: each step rounded to the type, as the transfers between ranks carry it. */
template <class H, class TO, class FROM>
void fold_narrow(void *out, const void *const *in, int n, size_t count, int op, TO to, FROM from)
{
    for (size_t i = 0; i < count; i++) {
        H acc = ((const H *)in[0])[i];
        for (int q = 1; q < n; q++)
            acc = to(red(from(acc), from(((const H *)in[q])[i]), op));
        if (op == ncclAvg)
            acc = to(from(acc) / (float)n);
        ((H *)out)[i] = acc;
    }
}

/* out[i] = in[0][i] op in[1][i] op ... in rank order. */
void fold(int t, int op, void *out, const void *const *in, int n, size_t count)
{
    switch (t) {
    case ncclInt8: fold_t<int8_t>(out, in, n, count, op); break;
    case ncclUint8: fold_t<uint8_t>(out, in, n, count, op); break;
    case ncclInt32: fold_t<int32_t>(out, in, n, count, op); break;
    case ncclUint32: fold_t<uint32_t>(out, in, n, count, op); break;
    case ncclInt64: fold_t<int64_t>(out, in, n, count, op); break;
    case ncclUint64: fold_t<uint64_t>(out, in, n, count, op); break;
    case ncclFloat32: fold_t<float>(out, in, n, count, op); break;
    case ncclFloat64: fold_t<double>(out, in, n, count, op); break;
    case ncclFloat16:
        fold_narrow<_Float16>(out, in, n, count, op, [](float f) { return (_Float16)f; },
                              [](_Float16 h) { return (float)h; });
        break;
    case ncclBfloat16:
        fold_narrow<uint16_t>(out, in, n, count, op, f_to_bf16, bf16_to_f);
        break;
    }
}

/* ---- operations ---------------------------------------------------------------------------- */

enum kind { K_ALLREDUCE, K_REDUCESCATTER, K_ALLGATHER, K_BROADCAST, K_SEND, K_RECV };
const char *kname(int k)
{
    static const char *n[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather",
                              "ncclBroadcast", "ncclSend", "ncclRecv"};
    return n[k];
}

struct op {
    int kind;
    const void *send;
    void *recv;
    size_t count;
    int dtype, redop, root, peer;
    uint64_t seq; /* collective number, or message number with the peer */
};

/* One queued unit: a lone operation or a group, on one communicator and stream. */
struct work {
    ncclComm *c;
    std::vector<op> ops;
};

std::string describe(const desc &d)
{
    std::string s = fmt("%s #%llu of %llu %s", kname(d.kind), (unsigned long long)d.seq,
                        (unsigned long long)d.count, tname(d.dtype));
    if (d.kind == K_ALLREDUCE || d.kind == K_REDUCESCATTER)
        s += fmt(" (%s)", opname(d.op));
    if (d.kind == K_BROADCAST)
        s += fmt(" from rank %d", d.root);
    return s;
}

void misuse_async(ncclComm *c, const std::string &msg)
{
    c->async_err = ncclInvalidUsage;
    fail(ncclInvalidUsage, "misuse", msg);
}

/* The bytes of a collective, as NCCL's rings move them (Bytes, above): every hop of a ring
 * carries per_hop bytes in all (shared by the rings); with root >= 0, a chain from the root
 * (no hop into it). */
void count_rings(ncclComm *c, double per_hop, int root)
{
    int n = c->nranks;
    if (n < 2 || c->nnodes < 1)
        return;
    std::vector<std::vector<int>> mem((size_t)c->nnodes);
    size_t rings = 1;
    for (int q = 0; q < n; q++) {
        mem[(size_t)c->node[q]].push_back(q);
        rings = std::max(rings, mem[(size_t)c->node[q]].size());
    }
    std::vector<int> ring;
    for (size_t ch = 0; ch < rings; ch++) {
        ring.clear();
        for (const std::vector<int> &m : mem)
            for (size_t i = 0; i < m.size(); i++)
                ring.push_back(m[(ch + i) % m.size()]);
        for (int i = 0; i < n; i++) {
            int u = ring[(size_t)i], v = ring[(size_t)(i + 1) % (size_t)n];
            if (u == c->rank && v != root)
                c->bytes[v] += per_hop / (double)rings;
        }
    }
}

void count_collective(ncclComm *c, const op &o)
{
    double n = c->nranks, b = (double)o.count * (double)esize(o.dtype);
    switch (o.kind) {
    case K_ALLREDUCE: count_rings(c, 2 * (n - 1) / n * b, -1); break;
    case K_REDUCESCATTER:
    case K_ALLGATHER: count_rings(c, (n - 1) * b, -1); break;
    case K_BROADCAST: count_rings(c, b, o.root); break;
    }
}

/* The line of CUEMU_NCCL_BYTES (Bytes, above), appended in one write. */
void write_bytes(ncclComm *c)
{
    const char *path = getenv("CUEMU_NCCL_BYTES");
    if (!path || !*path || c->nnodes < 1)
        return;
    double intra = 0, inter = 0;
    std::string to;
    for (int q = 0; q < c->nranks; q++) {
        (c->node[q] == c->node[c->rank] ? intra : inter) += c->bytes[q];
        to += fmt("%s%.0f", q ? "," : "", c->bytes[q]);
    }
    std::string line = fmt("nccl-bytes rank=%d ranks=%d node=%d nodes=%d intra=%.0f inter=%.0f to=",
                           c->rank, c->nranks, c->node[c->rank], c->nnodes, intra, inter) + to + "\n";
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0 || write(fd, line.data(), line.size()) != (ssize_t)line.size())
        fail(ncclSystemError, "error", fmt("CUEMU_NCCL_BYTES=%s: %s", path, strerror(errno)));
    if (fd >= 0)
        close(fd);
}

/* A collective: descriptors compared, then the data through the stages, chunk by chunk. */
void run_collective(ncclComm *c, const op &o)
{
    seg *s = c->s;
    int me = c->rank, n = c->nranks;
    size_t es = esize(o.dtype);
    desc d = {o.seq, o.kind, o.dtype, o.redop, o.root, o.count};
    s->r[me].d = d;
    const char *what = kname(o.kind);
    if (!barrier(c, what))
        return;
    bool agree = true;
    for (int q = 0; q < n; q++) {
        const desc &x = s->r[q].d;
        agree &= x.seq == d.seq && x.kind == d.kind && x.dtype == d.dtype && x.count == d.count &&
                 ((d.kind != K_ALLREDUCE && d.kind != K_REDUCESCATTER) || x.op == d.op) &&
                 (d.kind != K_BROADCAST || x.root == d.root);
    }
    if (!agree) {
        const desc &z = s->r[0].d;
        if (me != 0 && memcmp(&z, &d, sizeof d) != 0)
            misuse_async(c, fmt("%s: ranks disagree: rank %d calls %s, rank 0 %s", what, me,
                                describe(d).c_str(), describe(z).c_str()));
        else
            c->async_err = ncclInvalidUsage;
        barrier(c, what); /* nobody reads the descriptors after this */
        return;
    }
    count_collective(c, o);
    /* elements per chunk of each stage */
    size_t per = o.kind == K_REDUCESCATTER ? STAGE / es / (size_t)n : STAGE / es;
    for (size_t off = 0; off < o.count || (off == 0 && o.count == 0); off += per) {
        size_t k = o.count - off < per ? o.count - off : per;
        char *mine = s->stage[me];
        switch (o.kind) {
        case K_ALLREDUCE:
        case K_ALLGATHER:
            memcpy(mine, (const char *)o.send + off * es, k * es);
            break;
        case K_REDUCESCATTER:
            for (int b = 0; b < n; b++)
                memcpy(mine + (size_t)b * per * es, (const char *)o.send + ((size_t)b * o.count + off) * es, k * es);
            break;
        case K_BROADCAST:
            if (me == o.root)
                memcpy(mine, (const char *)o.send + off * es, k * es);
            break;
        }
        if (!barrier(c, what))
            return;
        const void *in[MAXR];
        switch (o.kind) {
        case K_ALLREDUCE:
            for (int q = 0; q < n; q++)
                in[q] = s->stage[q];
            fold(o.dtype, o.redop, (char *)o.recv + off * es, in, n, k);
            break;
        case K_REDUCESCATTER:
            for (int q = 0; q < n; q++)
                in[q] = s->stage[q] + (size_t)me * per * es;
            fold(o.dtype, o.redop, (char *)o.recv + off * es, in, n, k);
            break;
        case K_ALLGATHER:
            for (int q = 0; q < n; q++)
                memcpy((char *)o.recv + ((size_t)q * o.count + off) * es, s->stage[q], k * es);
            break;
        case K_BROADCAST:
            memcpy((char *)o.recv + off * es, s->stage[o.root], k * es);
            break;
        }
        if (!barrier(c, what))
            return;
        if (o.count == 0)
            break;
    }
}

/* The sends and receives of a group, all progressing together (a rank sends to and receives
 * from several peers at once, as an all-to-all does). A message is at least one chunk, so
 * that a receive of a different size than its send is seen even when one of them is empty. */
void run_p2p(ncclComm *c, std::vector<op> &ops)
{
    seg *s = c->s;
    int me = c->rank;
    size_t n = ops.size();
    std::vector<size_t> at(n, 0);       /* bytes sent or received so far */
    std::vector<bool> fin(n, false), bad(n, false);
    /* to and from oneself: the matching receive, in order */
    for (size_t i = 0; i < n; i++) {
        if (ops[i].kind != K_SEND || ops[i].peer != me)
            continue;
        for (size_t j = 0; j < n && !fin[i]; j++)
            if (ops[j].kind == K_RECV && ops[j].peer == me && !fin[j]) {
                if (ops[j].count != ops[i].count || ops[j].dtype != ops[i].dtype)
                    misuse_async(c, fmt("ncclSend/ncclRecv to itself (rank %d): %zu %s sent, %zu %s "
                                        "received", me, ops[i].count, tname(ops[i].dtype),
                                        ops[j].count, tname(ops[j].dtype)));
                else
                    memcpy(ops[j].recv, ops[i].send, ops[i].count * esize(ops[i].dtype));
                fin[i] = fin[j] = true;
            }
        if (!fin[i]) {
            misuse_async(c, fmt("ncclSend to itself (rank %d) without a ncclRecv from itself in "
                                "the same group", me));
            fin[i] = true;
        }
    }
    for (size_t j = 0; j < n; j++)
        if (ops[j].kind == K_RECV && ops[j].peer == me && !fin[j]) {
            misuse_async(c, fmt("ncclRecv from itself (rank %d) without a ncclSend to itself in "
                                "the same group", me));
            fin[j] = true;
        }
    for (size_t i = 0; i < n; i++)
        if (ops[i].kind == K_SEND && ops[i].peer != me)
            c->bytes[ops[i].peer] += (double)ops[i].count * (double)esize(ops[i].dtype);
    auto step = [&] {
        bool all = true;
        for (size_t i = 0; i < n; i++) {
            op &o = ops[i];
            if (fin[i])
                continue;
            all = false;
            size_t es = esize(o.dtype), total = o.count * es;
            if (o.kind == K_SEND) {
                mbox &b = s->box[me][o.peer];
                if (b.full.load(std::memory_order_acquire))
                    continue;
                size_t k = total - at[i] < (size_t)MBOX / es * es ? total - at[i] : (size_t)MBOX / es * es;
                b.dtype = o.dtype;
                b.msg = o.seq;
                b.count = o.count;
                b.offset = at[i];
                b.bytes = k;
                memcpy(b.data, (const char *)o.send + at[i], k);
                b.full.store(1, std::memory_order_release);
                at[i] += k;
                fin[i] = at[i] == total;
            } else {
                mbox &b = s->box[o.peer][me];
                if (!b.full.load(std::memory_order_acquire) || b.msg != o.seq)
                    continue;
                if (!bad[i] && (b.count != o.count || b.dtype != o.dtype)) {
                    bad[i] = true;
                    misuse_async(c, fmt("ncclRecv: rank %d receives %zu %s from rank %d, which "
                                        "sends %llu %s (message #%llu between them)", me, o.count,
                                        tname(o.dtype), o.peer, (unsigned long long)b.count,
                                        tname(b.dtype), (unsigned long long)o.seq));
                }
                if (!bad[i])
                    memcpy((char *)o.recv + b.offset, b.data, b.bytes);
                /* a mismatched message is drained as its sender sends it */
                size_t sent_total = b.count * esize(b.dtype);
                at[i] = b.offset + b.bytes;
                b.full.store(0, std::memory_order_release);
                fin[i] = at[i] == sent_total;
            }
        }
        return all;
    };
    wait_for(c, "ncclSend/ncclRecv", step, [&] {
        std::string w;
        for (size_t i = 0; i < n; i++)
            if (!fin[i])
                w += (w.empty() ? "rank " : ", rank ") + std::to_string(ops[i].peer) +
                     (ops[i].kind == K_SEND ? " to receive" : " to send");
        return w;
    });
}

void run_work(void *arg)
{
    work *w = (work *)arg;
    ncclComm *c = w->c;
    int delay = B->env_int("CUEMU_NCCL_DELAY_MS", 0);
    if (delay > 0) {
        struct timespec ts = {delay / 1000, (long)(delay % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!c->abort && c->async_err == ncclSuccess) {
        std::vector<op> p2p;
        for (const op &o : w->ops) {
            if (o.kind == K_SEND || o.kind == K_RECV)
                p2p.push_back(o);
            else if (!c->abort)
                run_collective(c, o);
        }
        if (!p2p.empty() && !c->abort)
            run_p2p(c, p2p);
    }
    {
        std::lock_guard<std::mutex> g(c->mu);
        c->pending--;
    }
    c->cv.notify_all();
    delete w;
}

/* The group being built by this thread (depth > 0), or none. */
thread_local int group_depth;
thread_local std::vector<op> group_ops;
thread_local ncclComm *group_comm;
thread_local cudaStream_t group_stream;
thread_local bool group_bad;

ncclResult_t enqueue(ncclComm *c, cudaStream_t stream, std::vector<op> ops)
{
    work *w = new work{c, std::move(ops)};
    {
        std::lock_guard<std::mutex> g(c->mu);
        c->pending++;
    }
    const char *what = kname(w->ops[0].kind);
    int r = B->submit(stream, what, run_work, w, 1);
    if (r != 0) {
        {
            std::lock_guard<std::mutex> g(c->mu);
            c->pending--;
        }
        delete w;
        return fail(ncclUnhandledCudaError, "error", fmt("%s: the stream refused the work (CUDA "
                                                        "error %d)", what, r));
    }
    return ncclSuccess;
}

/* The checks of every call; then the operation is queued (or added to the group). */
ncclResult_t post_checked(op o, ncclComm *c, cudaStream_t stream);

ncclResult_t post(op o, ncclComm *c, cudaStream_t stream)
{
    ncclResult_t r = post_checked(o, c, stream);
    if (r != ncclSuccess && group_depth > 0)
        group_bad = true; /* the whole group fails, as NCCL's does */
    return r;
}

ncclResult_t post_checked(op o, ncclComm *c, cudaStream_t stream)
{
    const char *what = kname(o.kind);
    if (!bridge_ok())
        return ncclSystemError;
    if (!live(c))
        return fail(ncclInvalidArgument, "misuse", fmt("%s: %p is not a live communicator "
                                                       "(destroyed, aborted, or never made)", what, (void *)c));
    int st = c->state.load();
    if (st == ST_INIT)
        return fail(ncclInvalidUsage, "misuse", fmt("%s on rank %d: the communicator is not ready "
                                                    "(its non-blocking initialization is still in "
                                                    "progress: wait until ncclCommGetAsyncError "
                                                    "says ncclSuccess)", what, c->rank));
    if (st != ST_READY || c->abort)
        return fail(ncclInvalidUsage, "misuse", fmt("%s on rank %d: the communicator failed or was "
                                                    "aborted", what, c->rank));
    if (o.dtype < 0 || o.dtype >= ncclNumTypes)
        return fail(ncclInvalidArgument, "misuse", fmt("%s: data type %d", what, o.dtype));
    if ((o.kind == K_ALLREDUCE || o.kind == K_REDUCESCATTER) && (o.redop < 0 || o.redop >= ncclNumOps))
        return fail(ncclInvalidArgument, "misuse", fmt("%s: reduction %d", what, o.redop));
    if ((o.kind == K_BROADCAST && (o.root < 0 || o.root >= c->nranks)) ||
        ((o.kind == K_SEND || o.kind == K_RECV) && (o.peer < 0 || o.peer >= c->nranks)))
        return fail(ncclInvalidArgument, "misuse", fmt("%s on rank %d: %s %d is not a rank of the "
                                                       "%d", what, c->rank, o.kind == K_BROADCAST ? "root" : "peer",
                                                       o.kind == K_BROADCAST ? o.root : o.peer, c->nranks));
    int sd = B->stream_device(stream);
    if (sd < 0)
        return fail(ncclInvalidArgument, "misuse", fmt("%s: stream %p is not a live stream", what, (void *)stream));
    if (sd != c->device)
        return fail(ncclInvalidUsage, "misuse", fmt("%s on rank %d: a stream of device %d, but the "
                                                    "communicator is device %d's", what, c->rank, sd, c->device));
    size_t es = esize(o.dtype), n = (size_t)c->nranks;
    size_t sbytes = o.count * es * (o.kind == K_REDUCESCATTER ? n : 1);
    size_t rbytes = o.count * es * (o.kind == K_ALLGATHER ? n : 1);
    bool sends = o.kind != K_RECV && (o.kind != K_BROADCAST || c->rank == o.root);
    bool recvs = o.kind != K_SEND;
    char why[400];
    int dev;
    if (o.count > 0) {
        if (sends && B->mem_check(o.send, sbytes, &dev, why, sizeof why))
            return fail(ncclInvalidArgument, "misuse", fmt("%s on rank %d: sendbuff of %zu bytes: %s",
                                                           what, c->rank, sbytes, why));
        if (sends && dev != c->device)
            return fail(ncclInvalidUsage, "misuse", fmt("%s on rank %d: sendbuff is device %d's "
                                                        "memory, the communicator device %d's", what, c->rank, dev, c->device));
        if (recvs && B->mem_check(o.recv, rbytes, &dev, why, sizeof why))
            return fail(ncclInvalidArgument, "misuse", fmt("%s on rank %d: recvbuff of %zu bytes: %s",
                                                           what, c->rank, rbytes, why));
        if (recvs && dev != c->device)
            return fail(ncclInvalidUsage, "misuse", fmt("%s on rank %d: recvbuff is device %d's "
                                                        "memory, the communicator device %d's", what, c->rank, dev, c->device));
        uintptr_t s0 = (uintptr_t)o.send, r0 = (uintptr_t)o.recv;
        bool overlap = sends && recvs && s0 < r0 + rbytes && r0 < s0 + sbytes;
        bool inplace = (o.kind == K_ALLGATHER && s0 == r0 + (size_t)c->rank * o.count * es) ||
                       (o.kind == K_REDUCESCATTER && r0 == s0 + (size_t)c->rank * o.count * es) ||
                       ((o.kind == K_ALLREDUCE || o.kind == K_BROADCAST) && s0 == r0);
        if (overlap && !inplace)
            return fail(ncclInvalidArgument, "misuse", fmt("%s on rank %d: sendbuff and recvbuff "
                                                           "overlap but are not NCCL's in-place form",
                                                           what, c->rank));
    }
    if (o.kind == K_SEND)
        o.seq = ++c->sent[o.peer];
    else if (o.kind == K_RECV)
        o.seq = ++c->rcvd[o.peer];
    else
        o.seq = ++c->coll_seq;
    if (group_depth > 0) {
        if ((group_comm && group_comm != c) || (group_comm && group_stream != stream)) {
            group_bad = true;
            return fail(ncclInvalidUsage, "error", fmt("%s: cuemu's NCCL runs a group on one "
                                                       "communicator and one stream", what));
        }
        group_comm = c;
        group_stream = stream;
        group_ops.push_back(o);
        return ncclSuccess;
    }
    return enqueue(c, stream, std::vector<op>{o});
}

void init_done(ncclComm *c, ncclResult_t r)
{
    c->async_err = r;
    c->state = r == ncclSuccess ? ST_READY : ST_FAILED;
}

} // namespace

/* ---- the API -------------------------------------------------------------------------------- */

extern "C" {

ncclResult_t ncclGetVersion(int *version)
{
    *version = NCCL_VERSION_CODE;
    return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *uid)
{
    id_layout id = {ID_MAGIC, (uint32_t)getpid(), {0, 0}};
    if (getrandom(id.token, sizeof id.token, 0) != (ssize_t)sizeof id.token)
        return fail(ncclSystemError, "error", fmt("ncclGetUniqueId: getrandom: %s", strerror(errno)));
    memset(uid, 0, sizeof *uid);
    memcpy(uid->internal, &id, sizeof id);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank,
                                    ncclConfig_t *config)
{
    *comm = NULL;
    if (!bridge_ok())
        return ncclSystemError;
    id_layout id;
    memcpy(&id, commId.internal, sizeof id);
    if (id.magic != ID_MAGIC)
        return fail(ncclInvalidArgument, "misuse", "ncclCommInitRank: the unique id was not made "
                    "by ncclGetUniqueId (or was not passed on whole)");
    if (nranks < 1 || nranks > MAXR || rank < 0 || rank >= nranks)
        return fail(ncclInvalidArgument, "misuse", fmt("ncclCommInitRank: rank %d of %d ranks "
                                                       "(cuemu's NCCL: 1 to %d ranks)", rank, nranks, MAXR));
    if (config && (config->magic != 0xcafebeef || config->size < offsetof(ncclConfig_t, cgaClusterSize)))
        return fail(ncclInvalidArgument, "misuse", "ncclCommInitRankConfig: the config was not "
                    "made from NCCL_CONFIG_INITIALIZER");
    ncclComm *c = new ncclComm();
    c->rank = rank;
    c->nranks = nranks;
    c->device = B->current_device();
    c->host = host_of(rank, nranks);
    c->state = ST_INIT;
    c->async_err = ncclInProgress;
    {
        std::lock_guard<std::mutex> g(comms_mu);
        comms.insert(c);
    }
    *comm = c;
    bool blocking = !config || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
    if (blocking) {
        ncclResult_t r = join(c, &id);
        init_done(c, r);
        return r;
    }
    c->init_thread = std::thread([c, id]() { init_done(c, join(c, &id)); });
    return ncclInProgress;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId commId, int rank)
{
    return ncclCommInitRankConfig(comm, nranks, commId, rank, NULL);
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *asyncError)
{
    if (!live(c))
        return fail(ncclInvalidArgument, "misuse", "ncclCommGetAsyncError: not a live communicator");
    *asyncError = (ncclResult_t)c->async_err.load();
    return ncclSuccess;
}

/* Waits for the communicator's queued work, then frees it; `abort` first ends every wait. */
static ncclResult_t finish(ncclComm_t c, bool abort, const char *what)
{
    if (!live(c))
        return fail(ncclInvalidArgument, "misuse", fmt("%s: not a live communicator (destroyed "
                                                       "twice?)", what));
    if (abort)
        c->abort = true;
    if (c->init_thread.joinable())
        c->init_thread.join();
    {
        std::unique_lock<std::mutex> lk(c->mu);
        c->cv.wait(lk, [c] { return c->pending == 0; });
    }
    {
        std::lock_guard<std::mutex> g(comms_mu);
        comms.erase(c);
    }
    if (c->s) {
        if (c->state.load() == ST_READY)
            write_bytes(c);
        c->s->r[c->rank].gone = 1;
        munmap(c->s, sizeof(seg));
    }
    delete c;
    return ncclSuccess;
}

ncclResult_t ncclCommFinalize(ncclComm_t c)
{
    return live(c) ? ncclSuccess
                   : fail(ncclInvalidArgument, "misuse", "ncclCommFinalize: not a live communicator");
}

ncclResult_t ncclCommDestroy(ncclComm_t c) { return finish(c, false, "ncclCommDestroy"); }

ncclResult_t ncclCommAbort(ncclComm_t c) { return finish(c, true, "ncclCommAbort"); }

const char *ncclGetErrorString(ncclResult_t r)
{
    switch (r) {
    case ncclSuccess: return "no error";
    case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError: return "remote process exited or there was a network error";
    case ncclInProgress: return "NCCL operation in progress";
    default: return "unknown result code";
    }
}

const char *ncclGetLastError(ncclComm_t) { return last_error.c_str(); }

ncclResult_t ncclCommCount(const ncclComm_t c, int *count)
{
    if (!live(c))
        return ncclInvalidArgument;
    *count = c->nranks;
    return ncclSuccess;
}

ncclResult_t ncclCommCuDevice(const ncclComm_t c, int *device)
{
    if (!live(c))
        return ncclInvalidArgument;
    *device = c->device;
    return ncclSuccess;
}

ncclResult_t ncclCommUserRank(const ncclComm_t c, int *rank)
{
    if (!live(c))
        return ncclInvalidArgument;
    *rank = c->rank;
    return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream)
{
    return post({K_ALLREDUCE, sendbuff, recvbuff, count, datatype, op, 0, 0, 0}, comm, stream);
}

ncclResult_t ncclReduceScatter(const void *sendbuff, void *recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream)
{
    return post({K_REDUCESCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0, 0, 0}, comm, stream);
}

ncclResult_t ncclAllGather(const void *sendbuff, void *recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream)
{
    return post({K_ALLGATHER, sendbuff, recvbuff, sendcount, datatype, 0, 0, 0, 0}, comm, stream);
}

ncclResult_t ncclBroadcast(const void *sendbuff, void *recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream)
{
    return post({K_BROADCAST, sendbuff, recvbuff, count, datatype, 0, root, 0, 0}, comm, stream);
}

ncclResult_t ncclSend(const void *sendbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return post({K_SEND, sendbuff, NULL, count, datatype, 0, 0, peer, 0}, comm, stream);
}

ncclResult_t ncclRecv(void *recvbuff, size_t count, ncclDataType_t datatype, int peer,
                      ncclComm_t comm, cudaStream_t stream)
{
    return post({K_RECV, NULL, recvbuff, count, datatype, 0, 0, peer, 0}, comm, stream);
}

ncclResult_t ncclGroupStart(void)
{
    if (group_depth++ == 0) {
        group_ops.clear();
        group_comm = NULL;
        group_bad = false;
    }
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void)
{
    if (group_depth == 0)
        return fail(ncclInvalidUsage, "misuse", "ncclGroupEnd without ncclGroupStart");
    if (--group_depth > 0)
        return ncclSuccess;
    std::vector<op> ops;
    ops.swap(group_ops);
    if (group_bad)
        return ncclInvalidUsage;
    if (ops.empty())
        return ncclSuccess;
    return enqueue(group_comm, group_stream, std::move(ops));
}

} // extern "C"
