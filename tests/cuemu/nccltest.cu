/* The tests of cuemu's NCCL (src/nccl.cpp), compiled by emu-nvcc as the backend is.
 *
 *   cuemu-nccltest                     every case, each as W processes (one emulated GPU each)
 *                                      started here with a unique id made here; prints "ok -
 *                                      cuemu-nccl/CASE ..." or "not ok - ..." and "N passed, N
 *                                      failed"
 *   cuemu-nccltest CASE RANK W ID      one rank of one case (what the children run)
 *
 * Correct cases must compute exactly what the host computes (reductions fold the ranks in rank
 * order) with no report, under every CUEMU_STREAMS mode; a rank that announces a line of the
 * byte counts ("EXPECT-BYTES LINE") must have written it (CUEMU_NCCL_BYTES). Misuse cases
 * announce the reports they must cause ("EXPECT KIND PHRASE" on stdout): each must appear
 * among the ranks' reports. */
#include <cuda_runtime.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <thread>
#include <vector>

#include "verdict.h"

static int failures;
static int me, W;

#define CHECK(c)                                                                                 \
    do {                                                                                         \
        if (!(c)) {                                                                              \
            printf("FAILED rank %d: %s:%d: %s\n", me, __FILE__, __LINE__, #c);                   \
            failures++;                                                                          \
        }                                                                                        \
    } while (0)
#define CU(call) CHECK((call) == cudaSuccess)
#define NC(call) CHECK((call) == ncclSuccess)

static void expect(const char *kind, const char *phrase)
{
    printf("EXPECT %s %s\n", kind, phrase);
    fflush(stdout);
}

/* Device buffers of the case, freed at its end. */
static std::vector<void *> owned;
template <class T> static T *dalloc(size_t n)
{
    void *p = NULL;
    CU(cudaMalloc(&p, n * sizeof(T) + 1));
    owned.push_back(p);
    return (T *)p;
}
template <class T> static T *dput(const std::vector<T> &h)
{
    T *p = dalloc<T>(h.size());
    CU(cudaMemcpy(p, h.data(), h.size() * sizeof(T), cudaMemcpyHostToDevice));
    return p;
}
template <class T> static std::vector<T> dget(const T *p, size_t n, cudaStream_t s)
{
    std::vector<T> h(n);
    CU(cudaStreamSynchronize(s));
    CU(cudaMemcpy(h.data(), p, n * sizeof(T), cudaMemcpyDeviceToHost));
    return h;
}

/* The value rank r contributes at index i (distinct, with fractions that make order matter). */
static float fval(int r, size_t i) { return (float)((i * 7 + (size_t)r * 13) % 1000) * 0.37f + (float)r * 1e-3f; }

static uint16_t bf(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1)) >> 16);
}
static float unbf(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static ncclComm_t init_comm(const ncclUniqueId &id, bool blocking)
{
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = blocking ? 1 : 0;
    ncclResult_t r = ncclCommInitRankConfig(&c, W, id, me, &cfg);
    if (!blocking) {
        CHECK(r == ncclInProgress || r == ncclSuccess);
        ncclResult_t st = ncclInProgress;
        while (st == ncclInProgress) {
            NC(ncclCommGetAsyncError(c, &st));
            usleep(1000);
        }
        r = st;
    }
    CHECK(r == ncclSuccess);
    return c;
}

__global__ void k_scale(float *x, float s, size_t n)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        x[i] *= s;
}

/* ---- correct use --------------------------------------------------------------------------- */

static void case_collectives(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, me % 2 == 0);
    cudaStream_t s, s2;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CU(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    /* all-reduce (sum) of floats across several staging chunks, out of place */
    size_t n = 300001;
    std::vector<float> h(n);
    for (size_t i = 0; i < n; i++)
        h[i] = fval(me, i);
    float *x = dput(h), *y = dalloc<float>(n);
    NC(ncclAllReduce(x, y, n, ncclFloat32, ncclSum, c, s));
    std::vector<float> got = dget(y, n, s);
    size_t bad = 0;
    for (size_t i = 0; i < n; i++) {
        float acc = fval(0, i);
        for (int r = 1; r < W; r++)
            acc += fval(r, i);
        bad += got[i] != acc;
    }
    CHECK(bad == 0);
    /* in place, after a kernel on another stream (an event orders them): x * 2 summed */
    cudaEvent_t ev;
    CU(cudaEventCreateWithFlags(&ev, cudaEventDisableTiming));
    k_scale<<<(unsigned)((n + 255) / 256), 256, 0, s2>>>(x, 2.0f, n);
    CU(cudaEventRecord(ev, s2));
    CU(cudaStreamWaitEvent(s, ev, 0));
    NC(ncclAllReduce(x, x, n, ncclFloat32, ncclSum, c, s));
    got = dget(x, n, s);
    bad = 0;
    for (size_t i = 0; i < n; i++) {
        float acc = fval(0, i) * 2.0f;
        for (int r = 1; r < W; r++)
            acc += fval(r, i) * 2.0f;
        bad += got[i] != acc;
    }
    CHECK(bad == 0);
    /* max, min, prod of int32; avg of doubles; sum of bf16 (each step rounded) */
    std::vector<int32_t> hi = {me, -me, me + 1, 5 - me};
    int32_t *di = dput(hi), *dmax = dalloc<int32_t>(4), *dmin = dalloc<int32_t>(4), *dprod = dalloc<int32_t>(4);
    NC(ncclAllReduce(di, dmax, 4, ncclInt32, ncclMax, c, s));
    NC(ncclAllReduce(di, dmin, 4, ncclInt32, ncclMin, c, s));
    NC(ncclAllReduce(di + 2, dprod, 1, ncclInt32, ncclProd, c, s));
    std::vector<int32_t> gmax = dget(dmax, 4, s), gmin = dget(dmin, 4, s), gprod = dget(dprod, 1, s);
    int32_t fact = 1;
    for (int r = 1; r <= W; r++)
        fact *= r;
    CHECK(gmax[0] == W - 1 && gmax[1] == 0 && gmin[0] == 0 && gmin[1] == -(W - 1) && gmin[3] == 5 - (W - 1));
    CHECK(gprod[0] == fact);
    std::vector<double> hd = {1.0 + me, 0.25 * me};
    double *dd = dput(hd);
    NC(ncclAllReduce(dd, dd, 2, ncclFloat64, ncclAvg, c, s));
    std::vector<double> gd = dget(dd, 2, s);
    double sum0 = 0, sum1 = 0;
    for (int r = 0; r < W; r++)
        sum0 += 1.0 + r, sum1 += 0.25 * r;
    CHECK(gd[0] == sum0 / W && gd[1] == sum1 / W);
    size_t nb = 1000;
    std::vector<uint16_t> hb(nb);
    for (size_t i = 0; i < nb; i++)
        hb[i] = bf(fval(me, i) * 0.01f);
    uint16_t *db = dput(hb);
    NC(ncclAllReduce(db, db, nb, ncclBfloat16, ncclSum, c, s));
    std::vector<uint16_t> gb = dget(db, nb, s);
    bad = 0;
    for (size_t i = 0; i < nb; i++) {
        uint16_t acc = bf(fval(0, i) * 0.01f);
        for (int r = 1; r < W; r++)
            acc = bf(unbf(acc) + unbf(bf(fval(r, i) * 0.01f)));
        bad += gb[i] != acc;
    }
    CHECK(bad == 0);
    /* reduce-scatter, in place (rank r's block of the send buffer) and out of place */
    size_t rc = 70001;
    std::vector<float> hs(rc * (size_t)W);
    for (size_t i = 0; i < hs.size(); i++)
        hs[i] = fval(me, i);
    float *ds = dput(hs), *dr = dalloc<float>(rc);
    NC(ncclReduceScatter(ds, dr, rc, ncclFloat32, ncclSum, c, s));
    NC(ncclReduceScatter(ds, ds + (size_t)me * rc, rc, ncclFloat32, ncclSum, c, s));
    std::vector<float> g1 = dget(dr, rc, s), g2 = dget(ds + (size_t)me * rc, rc, s);
    bad = 0;
    for (size_t i = 0; i < rc; i++) {
        size_t k = (size_t)me * rc + i;
        float acc = fval(0, k);
        for (int r = 1; r < W; r++)
            acc += fval(r, k);
        bad += g1[i] != acc || g2[i] != acc;
    }
    CHECK(bad == 0);
    /* all-gather, in place and out of place */
    size_t gc = 50003;
    std::vector<float> hg(gc * (size_t)W, -1.0f);
    for (size_t i = 0; i < gc; i++)
        hg[(size_t)me * gc + i] = fval(me, i);
    float *dg = dput(hg), *dg2 = dalloc<float>(gc * (size_t)W);
    NC(ncclAllGather(dg + (size_t)me * gc, dg2, gc, ncclFloat32, c, s));
    NC(ncclAllGather(dg + (size_t)me * gc, dg, gc, ncclFloat32, c, s));
    std::vector<float> a1 = dget(dg, gc * (size_t)W, s), a2 = dget(dg2, gc * (size_t)W, s);
    bad = 0;
    for (int r = 0; r < W; r++)
        for (size_t i = 0; i < gc; i++)
            bad += a1[(size_t)r * gc + i] != fval(r, i) || a2[(size_t)r * gc + i] != fval(r, i);
    CHECK(bad == 0);
    /* broadcast from the last rank, in place */
    std::vector<float> hc(777);
    for (size_t i = 0; i < hc.size(); i++)
        hc[i] = fval(me, i);
    float *dc = dput(hc);
    NC(ncclBroadcast(dc, dc, hc.size(), ncclFloat32, W - 1, c, s));
    std::vector<float> gcb = dget(dc, hc.size(), s);
    bad = 0;
    for (size_t i = 0; i < hc.size(); i++)
        bad += gcb[i] != fval(W - 1, i);
    CHECK(bad == 0);
    /* all-to-all by grouped sends and receives: rank r sends 1000 r + 10 q + (q == 0 ? 0 : 1)
     * floats to rank q (some pieces empty), itself included */
    auto len = [](int from, int to) { return (size_t)(from == 1 && to == 0 ? 0 : 1000 * from + 10 * to + 70000 * (to == 0)); };
    std::vector<float *> out(W), in(W);
    for (int q = 0; q < W; q++) {
        std::vector<float> v(len(me, q));
        for (size_t i = 0; i < v.size(); i++)
            v[i] = fval(me, i + (size_t)q);
        out[q] = dput(v);
        in[q] = dalloc<float>(len(q, me));
    }
    NC(ncclGroupStart());
    for (int q = 0; q < W; q++) {
        NC(ncclSend(out[q], len(me, q), ncclFloat32, q, c, s));
        NC(ncclRecv(in[q], len(q, me), ncclFloat32, q, c, s));
    }
    NC(ncclGroupEnd());
    bad = 0;
    for (int q = 0; q < W; q++) {
        std::vector<float> v = dget(in[q], len(q, me), s);
        for (size_t i = 0; i < v.size(); i++)
            bad += v[i] != fval(q, i + (size_t)me);
    }
    CHECK(bad == 0);
    int cnt = 0, rk = -1, dv = -1;
    NC(ncclCommCount(c, &cnt));
    NC(ncclCommUserRank(c, &rk));
    NC(ncclCommCuDevice(c, &dv));
    CHECK(cnt == W && rk == me && dv == 0);
    ncclResult_t ae = ncclInternalError;
    NC(ncclCommGetAsyncError(c, &ae));
    CHECK(ae == ncclSuccess);
    CU(cudaEventDestroy(ev));
    NC(ncclCommDestroy(c));
    CU(cudaStreamDestroy(s));
    CU(cudaStreamDestroy(s2));
}

/* A rank that never comes: the others' collective waits until ncclCommAbort (from another
 * thread, as a watchdog would call it) ends it; the stream then drains. */
static void case_abort(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x = dalloc<float>(10);
    if (me == 0) {
        NC(ncclAllReduce(x, x, 10, ncclFloat32, ncclSum, c, s));
        CHECK(cudaStreamQuery(s) == cudaErrorNotReady);
        std::thread t([c] {
            usleep(300000);
            ncclCommAbort(c);
        });
        CU(cudaStreamSynchronize(s));
        t.join();
    } else {
        NC(ncclCommDestroy(c));
    }
    CU(cudaStreamDestroy(s));
}

/* Topology and bytes: four ranks as two nodes, by NCCL_HOSTID (every other rank: nodes {0, 2}
 * and {1, 3}) or by CUEMU_NODES=2 (consecutive ranks: {0, 1} and {2, 3}); an all-reduce of
 * 1000 floats (two rings, each hop 2 (W-1)/W of 4000 bytes, half on each ring), a broadcast of
 * 250 floats from rank 3 (a chain on each ring) and 100 floats sent from rank 0 to rank 1.
 * Each rank announces the line CUEMU_NCCL_BYTES must then hold for it (the rings worked out
 * by hand). */
static void topology(const ncclUniqueId &id, bool hostid)
{
    if (hostid)
        setenv("NCCL_HOSTID", me % 2 ? "node-b" : "node-a", 1);
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s;
    CU(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    float *x = dalloc<float>(1000);
    CU(cudaMemset(x, 0, 1000 * sizeof(float)));
    NC(ncclAllReduce(x, x, 1000, ncclFloat32, ncclSum, c, s));
    NC(ncclBroadcast(x, x, 250, ncclFloat32, 3, c, s));
    if (me < 2) {
        NC(ncclGroupStart());
        if (me == 0)
            NC(ncclSend(x, 100, ncclFloat32, 1, c, s));
        else
            NC(ncclRecv(x, 100, ncclFloat32, 0, c, s));
        NC(ncclGroupEnd());
    }
    CU(cudaStreamSynchronize(s));
    static const char *by_hostid[] = {
        "rank=0 ranks=4 node=0 nodes=2 intra=3500 inter=3400 to=0,400,3500,3000",
        "rank=1 ranks=4 node=1 nodes=2 intra=3000 inter=3500 to=0,0,3500,3000",
        "rank=2 ranks=4 node=0 nodes=2 intra=3500 inter=3500 to=3500,3500,0,0",
        "rank=3 ranks=4 node=1 nodes=2 intra=3500 inter=3500 to=3500,3500,0,0"};
    static const char *by_nodes[] = {
        "rank=0 ranks=4 node=0 nodes=2 intra=3900 inter=3000 to=0,3900,0,3000",
        "rank=1 ranks=4 node=0 nodes=2 intra=3500 inter=3500 to=3500,0,3500,0",
        "rank=2 ranks=4 node=1 nodes=2 intra=3000 inter=3500 to=0,3500,0,3000",
        "rank=3 ranks=4 node=1 nodes=2 intra=3500 inter=3500 to=3500,0,3500,0"};
    printf("EXPECT-BYTES nccl-bytes %s\n", (hostid ? by_hostid : by_nodes)[me]);
    NC(ncclCommDestroy(c));
    CU(cudaStreamDestroy(s));
}

static void case_topology_hostid(const ncclUniqueId &id) { topology(id, true); }
static void case_topology_nodes(const ncclUniqueId &id) { topology(id, false); }

/* ---- misuse --------------------------------------------------------------------------------- */

static void after_misuse(ncclComm_t c, cudaStream_t s)
{
    CU(cudaStreamSynchronize(s));
    ncclResult_t ae = ncclSuccess;
    NC(ncclCommGetAsyncError(c, &ae));
    CHECK(ae == ncclInvalidUsage);
    NC(ncclCommDestroy(c));
    CU(cudaStreamDestroy(s));
}

static void case_count_mismatch(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    float *x = dalloc<float>(101);
    if (me == 1)
        expect("misuse", "ncclAllReduce: ranks disagree: rank 1 calls ncclAllReduce #1 of 101 float32 (sum), rank 0 ncclAllReduce #1 of 100 float32");
    NC(ncclAllReduce(x, x, me == 1 ? 101 : 100, ncclFloat32, ncclSum, c, s));
    after_misuse(c, s);
}

static void case_type_mismatch(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    double *x = dalloc<double>(100), *all = dalloc<double>(100 * (size_t)W);
    if (me == 1)
        expect("misuse", "of 100 float64, rank 0 ncclAllGather #1 of 100 float32");
    NC(ncclAllGather(x, all, 100, me == 1 ? ncclFloat64 : ncclFloat32, c, s));
    after_misuse(c, s);
}

static void case_recv_mismatch(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    float *x = dalloc<float>(12);
    if (me == 0) {
        NC(ncclSend(x, 10, ncclFloat32, 1, c, s));
    } else {
        expect("misuse", "ncclRecv: rank 1 receives 12 float32 from rank 0, which sends 10 float32");
        NC(ncclRecv(x, 12, ncclFloat32, 0, c, s));
    }
    CU(cudaStreamSynchronize(s));
    if (me == 1)
        after_misuse(c, s);
    else {
        NC(ncclCommDestroy(c));
        CU(cudaStreamDestroy(s));
    }
}

static void case_not_ready(const ncclUniqueId &id)
{
    ncclComm_t c = NULL;
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = 0;
    if (me == 0)
        usleep(300000); /* rank 1's initialization cannot finish before rank 0 joins */
    ncclResult_t r = ncclCommInitRankConfig(&c, W, id, me, &cfg);
    CHECK(r == ncclInProgress || r == ncclSuccess);
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    float *x = dalloc<float>(4);
    if (me == 1) {
        expect("misuse", "ncclAllReduce on rank 1: the communicator is not ready");
        CHECK(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, s) == ncclInvalidUsage);
    }
    ncclResult_t st = ncclInProgress;
    while (st == ncclInProgress) {
        NC(ncclCommGetAsyncError(c, &st));
        usleep(1000);
    }
    NC(ncclCommDestroy(c));
    CU(cudaStreamDestroy(s));
}

static void case_wrong_device(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s, other;
    CU(cudaStreamCreate(&s));
    float *x = dalloc<float>(4);
    CU(cudaSetDevice(1));
    CU(cudaStreamCreate(&other));
    float *y = dalloc<float>(4);
    CU(cudaSetDevice(0));
    if (me == 0) {
        expect("misuse", "ncclAllReduce on rank 0: a stream of device 1, but the communicator is device 0's");
        CHECK(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, other) == ncclInvalidUsage);
        expect("misuse", "ncclAllReduce on rank 0: recvbuff is device 1's memory");
        CHECK(ncclAllReduce(x, y, 4, ncclFloat32, ncclSum, c, s) == ncclInvalidUsage);
        std::vector<float> h(4);
        expect("misuse", "ncclBroadcast on rank 0: sendbuff of 16 bytes:");
        CHECK(ncclBroadcast(h.data(), x, 4, ncclFloat32, 0, c, s) == ncclInvalidArgument);
        expect("misuse", "ncclAllGather on rank 0: sendbuff and recvbuff overlap but are not NCCL's in-place form");
        CHECK(ncclAllGather(x + 1, x, 1, ncclFloat32, c, s) == ncclInvalidArgument);
    }
    NC(ncclCommDestroy(c));
    CU(cudaSetDevice(1));
    CU(cudaStreamDestroy(other));
    CU(cudaSetDevice(0));
    CU(cudaStreamDestroy(s));
}

static void case_size_mismatch(const ncclUniqueId &id)
{
    ncclComm_t c = NULL;
    if (me == 1)
        usleep(200000);
    ncclResult_t r = ncclCommInitRank(&c, me == 1 ? W + 1 : W, id, me);
    if (me == 1) {
        expect("misuse", "ranks disagree on the size of the communicator");
        CHECK(r == ncclInvalidUsage);
    } else {
        CHECK(r != ncclSuccess);
    }
    if (c)
        ncclCommAbort(c);
}

static void case_missing_rank(const ncclUniqueId &id)
{
    ncclComm_t c = init_comm(id, true);
    cudaStream_t s;
    CU(cudaStreamCreate(&s));
    float *x = dalloc<float>(4);
    if (me == 0) {
        expect("error", "ncclAllReduce (rank 0 of 2): waited 2 s for rank 1 to reach the same operation");
        NC(ncclAllReduce(x, x, 4, ncclFloat32, ncclSum, c, s));
        CU(cudaStreamSynchronize(s));
        ncclResult_t ae = ncclSuccess;
        NC(ncclCommGetAsyncError(c, &ae));
        CHECK(ae == ncclSystemError);
    }
    NC(ncclCommDestroy(c));
    CU(cudaStreamDestroy(s));
}

/* ---- the parent ----------------------------------------------------------------------------- */

struct test_case {
    const char *name;
    void (*fn)(const ncclUniqueId &);
    int ranks;
    int misuse;
    const char *env;
    bool blocking_ok; /* also under CUEMU_STREAMS=sync, where a collective blocks its caller */
};

static const test_case cases[] = {
    {"collectives-2", case_collectives, 2, 0, "", true},
    {"collectives-3", case_collectives, 3, 0, "", true},
    {"collectives-4", case_collectives, 4, 0, "", true},
    {"abort-ends-a-wait", case_abort, 2, 0, "", false},
    {"topology-hostid", case_topology_hostid, 4, 0, "", true},
    {"topology-nodes", case_topology_nodes, 4, 0, "CUEMU_NODES=2", true},
    {"count-mismatch", case_count_mismatch, 2, 1, "", true},
    {"type-mismatch", case_type_mismatch, 2, 1, "", true},
    {"send-receive-mismatch", case_recv_mismatch, 2, 1, "", true},
    {"used-before-ready", case_not_ready, 2, 1, "", true},
    {"device-and-buffers", case_wrong_device, 2, 1, "CUEMU_DEVICES=2", true},
    {"size-mismatch", case_size_mismatch, 2, 1, "CUEMU_NCCL_TIMEOUT=5", true},
    {"missing-rank", case_missing_rank, 2, 1, "CUEMU_NCCL_TIMEOUT=2", true},
};

static std::string hex(const ncclUniqueId &id)
{
    std::string s;
    char b[3];
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES; i++) {
        snprintf(b, sizeof b, "%02x", (unsigned char)id.internal[i]);
        s += b;
    }
    return s;
}

static ncclUniqueId unhex(const char *h)
{
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    for (int i = 0; i < NCCL_UNIQUE_ID_BYTES && h[2 * i] && h[2 * i + 1]; i++) {
        unsigned v;
        sscanf(h + 2 * i, "%2x", &v);
        id.internal[i] = (char)v;
    }
    return id;
}

/* Runs the ranks of a case side by side; their stdout and stderr concatenated. */
static bool run_ranks(const char *self, const test_case &c, const char *extra, std::string *out,
                      std::string *err, std::string *bytes = NULL)
{
    ncclUniqueId id;
    if (ncclGetUniqueId(&id) != ncclSuccess)
        return false;
    char dir[] = "/tmp/cuemu-nccltest.XXXXXX";
    if (!mkdtemp(dir))
        return false;
    std::vector<pid_t> pids;
    for (int r = 0; r < c.ranks; r++) {
        std::string cmd = std::string("env CUEMU=1 CUEMU_NCCL_BYTES=") + dir + "/bytes " + c.env +
                          " " + extra + " '" + self + "' " +
                          c.name + " " + std::to_string(r) + " " + std::to_string(c.ranks) + " " +
                          hex(id) + " >" + dir + "/out" + std::to_string(r) + " 2>" + dir + "/err" +
                          std::to_string(r);
        pid_t p = fork();
        if (p == 0) {
            execl("/bin/sh", "sh", "-c", cmd.c_str(), (char *)NULL);
            _exit(127);
        }
        pids.push_back(p);
    }
    bool ok = true;
    for (pid_t p : pids) {
        int st = 0;
        waitpid(p, &st, 0);
        ok &= WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    out->clear(), err->clear();
    for (int r = 0; r < c.ranks; r++) {
        std::string o = std::string(dir) + "/out" + std::to_string(r), e = std::string(dir) + "/err" + std::to_string(r);
        *out += slurp(o);
        *err += slurp(e);
        unlink(o.c_str());
        unlink(e.c_str());
    }
    std::string b = std::string(dir) + "/bytes";
    if (bytes)
        *bytes = slurp(b);
    unlink(b.c_str());
    rmdir(dir);
    return ok;
}

static void verdict(bool good, const char *name, const std::string &why, const std::string &out,
                    const std::string &err)
{
    verdict_of("cuemu-nccl", good, name, why, out, err);
}

static int run_all(const char *self)
{
    for (const test_case &c : cases) {
        std::string out, err, why;
        if (!c.misuse) {
            bool good = true;
            int modes = 0;
            for (const char *m : {"async", "lazy", "sync"}) {
                if (!strcmp(m, "sync") && !c.blocking_ok)
                    continue;
                modes++;
                std::string env = std::string("CUEMU_STREAMS=") + m, bytes;
                bool ok = run_ranks(self, c, env.c_str(), &out, &err, &bytes);
                if (!ok || err.find("cuemu:") != std::string::npos) {
                    good = false;
                    why = std::string(" (under CUEMU_STREAMS=") + m + ")";
                    break;
                }
                /* the lines of CUEMU_NCCL_BYTES the ranks announced */
                for (size_t p = 0; (p = out.find("EXPECT-BYTES ", p)) != std::string::npos;) {
                    size_t q = out.find('\n', p);
                    std::string line = out.substr(p + 13, q - p - 13) + "\n";
                    p = q;
                    if (bytes.find(line) == std::string::npos) {
                        good = false;
                        why = " (CUEMU_NCCL_BYTES has no line \"" + line.substr(0, line.size() - 1) +
                              "\"; it has:\n" + bytes + ")";
                        break;
                    }
                }
                if (!good)
                    break;
            }
            verdict(good, c.name, good ? std::string(" (") + std::to_string(c.ranks) + " ranks, exact under " +
                                             std::to_string(modes) + " stream modes, no report)" : why,
                    out, err);
            continue;
        }
        bool ok = run_ranks(self, c, "", &out, &err);
        int n = 0;
        bool found = ok;
        for (size_t p = 0; ok && (p = out.find("EXPECT ", p)) != std::string::npos;) {
            size_t q = out.find('\n', p);
            std::string line = out.substr(p + 7, q - p - 7);
            p = q;
            size_t sp = line.find(' ');
            std::string head = "cuemu: " + line.substr(0, sp) + ": ", text = line.substr(sp + 1);
            bool seen = false;
            for (size_t r = err.find(head); r != std::string::npos; r = err.find(head, r + 1)) {
                size_t e = err.find('\n', r);
                seen |= err.substr(r, e - r).find(text) != std::string::npos;
            }
            if (!seen) {
                found = false;
                why = " (no report \"" + head + "..." + text + "\")";
                break;
            }
            n++;
        }
        if (ok && found && n == 0)
            found = false, why = " (announced nothing)";
        verdict(ok && found, c.name, ok && found ? " (" + std::to_string(n) + " report" + (n > 1 ? "s" : "") + " as announced)"
                                           : (why.empty() ? std::string(" (a rank failed)") : why),
                out, err);
    }
    printf("%d passed, %d failed\n", npass, nfail);
    return nfail != 0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return run_all(argv[0]);
    if (argc != 5) {
        fprintf(stderr, "usage: cuemu-nccltest [CASE RANK WORLD ID]\n");
        return 2;
    }
    me = atoi(argv[2]);
    W = atoi(argv[3]);
    ncclUniqueId id = unhex(argv[4]);
    for (const test_case &c : cases)
        if (!strcmp(c.name, argv[1])) {
            c.fn(id);
            for (void *p : owned)
                cudaFree(p);
            return failures != 0;
        }
    fprintf(stderr, "cuemu-nccltest: no case '%s'\n", argv[1]);
    return 2;
}
