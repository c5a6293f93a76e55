/* cuemu: kernel launches. The blocks of a grid are spread over OpenMP threads; a host thread
 * runs one block at a time, to its end. Inside the block the CUDA threads run on fibers
 * (boost.context's fcontext, on mmap'd stacks with a guard page): a thread runs until it
 * waits for others, keeping its fiber while it waits; a thread that ends hands its fiber to
 * the next thread of the schedule that has not started, so a block whose threads never wait
 * runs on one fiber. What a thread waits for:
 *
 *   __syncthreads   released when every thread that has not exited waits (exited threads
 *                   count as arrived, as on sm_70 and later); the waiters must stand at one
 *                   call site, else the barrier is divergent: a FAULT
 *   warp operations (__syncwarp, __shfl*_sync) gather the lanes of their mask; a mask must
 *                   name the calling lane and only lanes that exist and have not exited, and
 *                   every lane of a mask must pass the same mask (lanes of disjoint masks
 *                   proceed independently); a lane that exits while a mask naming it waits,
 *                   or a shuffle reading a lane outside its mask, is a FAULT
 *   a deadlock      every live thread waits and none can be released: a FAULT naming where
 *
 * A FAULT stops the block and the grid, and is sticky (cudaErrorLaunchFailure), as on a GPU.
 * The order in which ready threads run is CUEMU_SCHEDULE:
 *   forward (default), reverse, random[:seed]       thread by thread, each until it waits
 *   warps, warps-reverse, warps-random[:seed]       warp by warp, each until all its lanes
 *                                                   wait at a barrier or exit: one warp runs
 *                                                   ahead of the others, so a missing
 *                                                   __syncthreads shows as a wrong result
 * A correct kernel computes the same under every schedule. */
#include "internal.h"

#include <boost/context/detail/fcontext.hpp>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <deque>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#if defined(__SANITIZE_ADDRESS__)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#define CUEMU_ASAN 1
#else
#define CUEMU_ASAN 0
#endif

namespace cuemu {

namespace bctx = boost::context::detail;

static thread_local uint3 tid_, bid_;
static thread_local dim3 bdim_, gdim_;
const uint3 &thread_idx(void) { return tid_; }
const uint3 &block_idx(void) { return bid_; }
const dim3 &block_dim(void) { return bdim_; }
const dim3 &grid_dim(void) { return gdim_; }

enum { F_READY, F_BAR, F_WARP, F_DONE };

enum { T_NEW, T_READY, T_BAR, T_WARP, T_DONE };

struct thread_state {      /* one CUDA thread of the block */
    int state;
    int fib;               /* its fiber, once started */
    const char *file;      /* where it waits */
    int line;
    uint64_t val, result;  /* a warp operation's operand and result */
    int op, arg, width;
};

struct fiber {
    bctx::fcontext_t ctx;
    char *stack;           /* usable stack [stack, stack + size), a guard page below */
    size_t size;
    void *fake;            /* ASan's fake stack while suspended */
    bool fresh;            /* no context yet (or an abandoned one): start it anew */
};

struct group {             /* lanes of one warp gathering for one warp operation */
    uint32_t mask, arrived;
    const char *file;
    int line;
};

struct warp_state {
    uint32_t exists, exited;
    std::vector<group> groups; /* pending; their masks are disjoint */
};

struct block_run {
    unsigned n, alive, at_bar;
    bool fault;
    std::vector<warp_state> warps;
};

struct worker {
    std::deque<fiber> fibers;  /* a deque: fibers started from a fiber must not move the others */
    std::vector<int> free_fibers; /* parked, waiting for a thread */
    std::vector<thread_state> th;
    bctx::fcontext_t sched;    /* the scheduler's context, while a fiber runs */
    const void *sched_bottom;  /* its stack (for ASan) */
    size_t sched_size;
    void *sched_fake;
    int running;           /* the fiber running, -1 for the scheduler */
    int from;              /* the fiber that switched to the one running, -1 for the scheduler */
    block_run *B;
    unsigned cur;          /* the CUDA thread running */
    std::vector<unsigned> seq; /* the threads the scheduler visits now, in order */
    size_t pos;            /* the next of them */
    uint64_t runs;         /* threads resumed or started: progress */
    const launch_desc *L;
    const std::function<void()> *body;
    unsigned char *dyn;    /* dynamic shared memory */
    size_t dyn_cap, dyn_bytes;
    uint64_t serial;       /* blocks run by this host thread */
    std::vector<std::pair<void *, uint64_t>> statics; /* static shared arrays, last block */
    size_t static_bytes;   /* of the block running */
    ~worker()
    {
        size_t pg = (size_t)sysconf(_SC_PAGESIZE);
        for (fiber &f : fibers)
            munmap(f.stack - pg, f.size + pg);
        free(dyn);
    }
};

/* The host thread's worker, reached through a plain pointer: a thread_local of a class with a
 * destructor costs a TLS-wrapper call at every use. `reaper` frees it when the thread ends. */
static thread_local worker *W_;
static struct worker_reaper {
    ~worker_reaper() { delete W_; }
} thread_local reaper;
#define W (*W_)

static const char *op_name(int op)
{
    static const char *const n[] = {"__shfl_sync", "__shfl_up_sync", "__shfl_down_sync",
                                    "__shfl_xor_sync", "__syncwarp"};
    return op >= 0 && op <= SYNCWARP ? n[op] : "warp operation";
}

static size_t smem_limit(void) { return (size_t)env_int("CUEMU_SMEM_LIMIT", 48 * 1024); }

/* ---- fibers --------------------------------------------------------------------------------- */

enum { SW_WAIT, SW_PARK, SW_LOST }; /* how a thread leaves its fiber */
static void switch_out(int how);
static void fiber_entry(bctx::transfer_t t);

static void set_tid(unsigned i)
{
    if (bdim_.y == 1 && bdim_.z == 1) { /* most blocks: no divisions */
        tid_.x = i, tid_.y = 0, tid_.z = 0;
        return;
    }
    tid_.x = i % bdim_.x;
    tid_.y = i / bdim_.x % bdim_.y;
    tid_.z = i / (bdim_.x * bdim_.y);
}

/* A FAULT of the running thread: the block stops. */
static void block_fault(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void block_fault(const char *file, int line, const char *fmt, ...)
{
    char msg[900];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    W.B->fault = true;
    report_fault(cudaErrorLaunchFailure, file, line,
                 "kernel %s (launched at %s:%d), block (%u,%u,%u), thread (%u,%u,%u): %s",
                 W.L->name, W.L->file, W.L->line, bid_.x, bid_.y, bid_.z, tid_.x, tid_.y,
                 tid_.z, msg);
}

/* The running thread stops for good (after a FAULT); its fiber is abandoned. */
[[noreturn]] static void fiber_abort(void)
{
    W.th[W.cur].state = T_DONE;
    switch_out(SW_LOST);
    abort(); /* never resumed */
}

/* Just switched to (by fiber W.from, or by the scheduler): keep the context left behind. */
static void landed(bctx::transfer_t t, void *fake)
{
    if (W.from < 0)
        W.sched = t.fctx;
    else
        W.fibers[W.from].ctx = t.fctx;
#if CUEMU_ASAN
    if (W.from < 0)
        __sanitizer_finish_switch_fiber(fake, &W.sched_bottom, &W.sched_size);
    else
        __sanitizer_finish_switch_fiber(fake, NULL, NULL);
#else
    (void)fake;
#endif
}

/* Switches from the running context (a fiber, or the scheduler: -1) to fiber `target` (or the
 * scheduler); returns when something switches back. `gone`: never back (ASan frees the fake
 * stack). */
static void jump_to(int target, bool gone)
{
    int me = W.running;
    bctx::fcontext_t to;
#if CUEMU_ASAN
    void **fake = me < 0 ? &W.sched_fake : &W.fibers[me].fake;
    if (target < 0)
        __sanitizer_start_switch_fiber(gone ? NULL : fake, W.sched_bottom, W.sched_size);
    else
        __sanitizer_start_switch_fiber(gone ? NULL : fake, W.fibers[target].stack,
                                       W.fibers[target].size);
#else
    (void)gone;
#endif
    if (target < 0) {
        to = W.sched;
    } else {
        fiber &tf = W.fibers[target];
        if (tf.fresh) {
            tf.ctx = bctx::make_fcontext(tf.stack + tf.size, tf.size, fiber_entry);
            tf.fresh = false;
        }
        to = tf.ctx;
    }
    W.from = me;
    W.running = target;
    bctx::transfer_t t = bctx::jump_fcontext(to, NULL);
    landed(t, me < 0 ? W.sched_fake : W.fibers[me].fake);
}

/* "threads 0-127 at f.cu:12, threads 128-255 at f.cu:40" for the threads in `state`. */
static std::string sites(int state)
{
    std::string s;
    block_run &B = *W.B;
    int shown = 0;
    for (unsigned i = 0; i < B.n && shown < 6;) {
        thread_state &t = W.th[i];
        if (t.state != state) {
            i++;
            continue;
        }
        unsigned j = i + 1;
        while (j < B.n && W.th[j].state == state && W.th[j].line == t.line &&
               W.th[j].file == t.file)
            j++;
        char buf[300];
        if (j - i > 1)
            snprintf(buf, sizeof buf, "%sthreads %u-%u at %s:%d", shown ? ", " : "", i, j - 1,
                     t.file, t.line);
        else
            snprintf(buf, sizeof buf, "%sthread %u at %s:%d", shown ? ", " : "", i, t.file,
                     t.line);
        s += buf;
        shown++;
        i = j;
    }
    return s;
}

/* Threads that exited before a barrier the others reach: sm_70 and later count them as
 * arrived, but CUDA defines __syncthreads only where every thread of the block reaches it. */
static void exited_at_barrier(const char *file, int line, unsigned gone, unsigned n)
{
    static std::mutex mu;
    static std::set<std::pair<const char *, int>> seen;
    {
        std::lock_guard<std::mutex> g(mu);
        if (!seen.insert({file, line}).second)
            return;
    }
    report_misuse(file, line, "kernel %s: __syncthreads after %u of %u threads have exited (sm_70 "
                  "and later count them as arrived, but CUDA defines the barrier only where every "
                  "thread of the block reaches it)", W.L->name, gone, n);
}

static void release_barrier(block_run &B)
{
    const char *file = NULL;
    int line = 0;
    bool diverged = false;
    for (unsigned i = 0; i < B.n; i++) {
        thread_state &t = W.th[i];
        if (t.state != T_BAR)
            continue;
        if (!file)
            file = t.file, line = t.line;
        else if (t.line != line || (t.file != file && strcmp(t.file, file) != 0))
            diverged = true;
    }
    if (diverged) {
        block_fault(file, line, "__syncthreads reached at different call sites (a divergent "
                    "barrier): %s; %u of %u threads have exited", sites(T_BAR).c_str(),
                    B.n - B.alive, B.n);
        return;
    }
    if (B.alive < B.n) /* reported once per barrier */
        exited_at_barrier(file, line, B.n - B.alive, B.n);
    for (unsigned i = 0; i < B.n; i++)
        if (W.th[i].state == T_BAR)
            W.th[i].state = T_READY;
    B.at_bar = 0;
}

static void thread_exit(void)
{
    block_run &B = *W.B;
    unsigned i = W.cur, w = i / 32, lane = i % 32;
    W.th[i].state = T_DONE;
    B.alive--;
    warp_state &ws = B.warps[w];
    ws.exited |= 1u << lane;
    for (const group &g : ws.groups)
        if (g.mask >> lane & 1) {
            block_fault(g.file, g.line, "lane %u exited while lanes 0x%08x wait in %s here, "
                        "with a mask (0x%08x) that names it", lane, g.arrived,
                        op_name(W.th[w * 32 + (unsigned)__builtin_ctz(g.arrived)].op), g.mask);
            return;
        }
    if (B.at_bar && B.at_bar == B.alive)
        release_barrier(B); /* exited threads count as arrived */
}

static int take_fiber(void);

/* Thread i (not started) runs on fiber f from now on. */
static void adopt(unsigned i, int f)
{
    W.th[i].state = T_READY;
    W.th[i].fib = f;
    W.cur = i;
    set_tid(i);
    W.runs++;
}

/* The running thread waits (SW_WAIT: it keeps its fiber), is done (SW_PARK: its fiber is
 * free) or stopped by a fault (SW_LOST: its fiber is abandoned). The next thread the
 * scheduler would visit that can run runs now, switched to directly (a thread not started
 * gets a free fiber, perhaps this one); with none, back to the scheduler. Returns when the
 * running fiber is given a thread again. */
static void switch_out(int how)
{
    int me = W.running;
    if (how == SW_PARK)
        W.free_fibers.push_back(me);
    int target = -1;
    while (!W.B->fault && W.pos < W.seq.size()) {
        unsigned j = W.seq[W.pos++];
        thread_state &t = W.th[j];
        if (t.state == T_READY) {
            W.cur = j;
            set_tid(j);
            W.runs++;
            target = t.fib;
            break;
        }
        if (t.state == T_NEW) {
            adopt(j, take_fiber());
            target = t.fib;
            break;
        }
    }
    if (target == me) /* this fiber, free again, was given the next thread */
        return;
    jump_to(target, how == SW_LOST);
}

/* A fiber runs threads: the one it is given, then, while the next thread of the sweep has not
 * started, that one, without a switch. */
static void fiber_entry(bctx::transfer_t t)
{
    landed(t, NULL);
    for (;;) {
        (*W.body)();
        int me = W.running;
        thread_exit();
        if (!W.B->fault && W.pos < W.seq.size() && W.th[W.seq[W.pos]].state == T_NEW) {
            adopt(W.seq[W.pos++], me);
            continue;
        }
        switch_out(SW_PARK);
    }
}

/* ---- what kernels call ---------------------------------------------------------------------- */

void check_align(const void *p, unsigned align, const char *file, int line)
{
    if ((uintptr_t)p % align == 0)
        return;
    if (!W_ || !W.B) {
        report_error(file, line, "a %u-byte access at %p outside a kernel", align, p);
        return;
    }
    block_fault(file, line, "a %u-byte vector access at %p, which is not %u-byte aligned (a "
                "GPU faults: misaligned address)", align, p, align);
    fiber_abort();
}

void syncthreads(const char *file, int line)
{
    if (!W_ || !W.B) {
        report_error(file, line, "__syncthreads outside a kernel");
        return;
    }
    block_run &B = *W.B;
    thread_state &t = W.th[W.cur];
    t.state = T_BAR;
    t.file = file, t.line = line;
    if (++B.at_bar == B.alive)
        release_barrier(B);
    if (B.fault)
        fiber_abort();
    switch_out(SW_WAIT);
}

/* The lanes of group g (index gi of warp w) have all arrived: each gets its result. */
static void complete(block_run &B, unsigned w, size_t gi)
{
    warp_state &ws = B.warps[w];
    group g = ws.groups[gi];
    thread_state *lanes = &W.th[w * 32];
    bool sync0 = lanes[__builtin_ctz(g.mask)].op == SYNCWARP;
    for (unsigned l = 0; l < 32; l++) {
        if (!(g.mask >> l & 1))
            continue;
        thread_state &x = lanes[l];
        if ((x.op == SYNCWARP) != sync0) {
            block_fault(x.file, x.line, "lanes of mask 0x%08x meet in __syncwarp and in a "
                        "shuffle (%s:%d and %s:%d)", g.mask, x.file, x.line, g.file, g.line);
            return;
        }
        if (x.op == SYNCWARP)
            continue;
        int lane = (int)l, wd = x.width, seg = lane & ~(wd - 1), src;
        switch (x.op) {
        case SHFL_IDX: src = seg + (x.arg & (wd - 1)); break;
        case SHFL_UP: src = lane - seg - x.arg < 0 ? lane : lane - x.arg; break;
        case SHFL_DOWN: src = lane - seg + x.arg >= wd ? lane : lane + x.arg; break;
        default:
            src = lane ^ x.arg;
            if ((src & ~(wd - 1)) > seg) /* a later segment: its own value */
                src = lane;
            break;
        }
        if (src < 0 || src > 31 || !(g.mask >> src & 1)) {
            block_fault(x.file, x.line, "%s: lane %d reads lane %d, which is not in the mask "
                        "0x%08x (an undefined value)", op_name(x.op), lane, src, g.mask);
            return;
        }
        x.result = lanes[src].val;
    }
    for (unsigned l = 0; l < 32; l++)
        if (g.mask >> l & 1)
            lanes[l].state = T_READY;
    ws.groups.erase(ws.groups.begin() + (long)gi);
}

uint64_t warp_sync(unsigned mask, uint64_t v, int op, int arg, int width, const char *file,
                   int line)
{
    const char *what = op_name(op);
    if (!W_ || !W.B) {
        report_error(file, line, "%s outside a kernel", what);
        return v;
    }
    block_run &B = *W.B;
    unsigned i = W.cur, w = i / 32, lane = i % 32;
    warp_state &ws = B.warps[w];
    if (width <= 0 || width > 32 || (width & (width - 1))) {
        block_fault(file, line, "%s: width %d is not a power of 2 in [1, 32]", what, width);
        fiber_abort();
    }
    if (!(mask >> lane & 1)) {
        block_fault(file, line, "%s: the mask 0x%08x does not name the calling lane %u", what,
                    mask, lane);
        fiber_abort();
    }
    if (mask & ~ws.exists) {
        block_fault(file, line, "%s: the mask 0x%08x names lanes this warp does not have (it "
                    "has 0x%08x)", what, mask, ws.exists);
        fiber_abort();
    }
    if (mask & ws.exited) {
        block_fault(file, line, "%s: the mask 0x%08x names lanes that have exited (0x%08x)",
                    what, mask, mask & ws.exited);
        fiber_abort();
    }
    size_t gi = 0;
    while (gi < ws.groups.size() && !(ws.groups[gi].mask & mask))
        gi++;
    if (gi == ws.groups.size()) {
        ws.groups.push_back(group{mask, 0, file, line});
    } else if (ws.groups[gi].mask != mask) {
        group &g = ws.groups[gi];
        block_fault(file, line, "%s with mask 0x%08x, but lanes 0x%08x of this warp wait in %s "
                    "at %s:%d with mask 0x%08x (the lanes of a mask must pass the same mask)",
                    what, mask, g.arrived,
                    op_name(W.th[w * 32 + (unsigned)__builtin_ctz(g.arrived)].op), g.file,
                    g.line, g.mask);
        fiber_abort();
    }
    thread_state &t = W.th[i];
    t.val = v, t.op = op, t.arg = arg, t.width = width;
    t.state = T_WARP;
    t.file = file, t.line = line;
    ws.groups[gi].arrived |= 1u << lane;
    if (ws.groups[gi].arrived == mask)
        complete(B, w, gi);
    if (B.fault)
        fiber_abort();
    switch_out(SW_WAIT);
    return W.th[i].result;
}

void *dyn_smem(void) { return W.dyn; }

void shared_decl(void *p, size_t bytes, const char *file, int line)
{
    if (!W_ || !W.B)
        return;
    size_t k = 0;
    while (k < W.statics.size() && W.statics[k].first != p)
        k++;
    if (k == W.statics.size())
        W.statics.push_back({p, 0});
    if (W.statics[k].second == W.serial)
        return; /* this block has it already */
    W.statics[k].second = W.serial;
    memset(p, 0xFF, bytes); /* NaN: a read before the block wrote it shows */
    W.static_bytes += bytes;
    if (W.static_bytes + W.dyn_bytes > smem_limit()) {
        block_fault(file, line, "%zu bytes of static shared memory and %zu of dynamic shared "
                    "memory: more than a block may have (%zu)", W.static_bytes, W.dyn_bytes,
                    smem_limit());
        fiber_abort();
    }
}

/* ---- the block scheduler -------------------------------------------------------------------- */

static size_t stack_bytes(void)
{
    return (size_t)env_int("CUEMU_STACK_KB", CUEMU_ASAN ? 256 : 64) << 10;
}

/* A free fiber: a parked one, or a new one. */
static int take_fiber(void)
{
    if (!W.free_fibers.empty()) {
        int f = W.free_fibers.back();
        W.free_fibers.pop_back();
        return f;
    }
    size_t sz = stack_bytes(), pg = (size_t)sysconf(_SC_PAGESIZE);
    fiber f;
    memset(&f, 0, sizeof f);
    void *m = mmap(NULL, sz + pg, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (m == MAP_FAILED) {
        perror("cuemu: mmap of a fiber stack");
        abort();
    }
    mprotect(m, pg, PROT_NONE); /* an overflow faults instead of corrupting */
    f.stack = (char *)m + pg;
    f.size = sz;
    f.fresh = true;
    W.fibers.push_back(f);
    return (int)W.fibers.size() - 1;
}

enum { ORDER_FORWARD, ORDER_REVERSE, ORDER_RANDOM };

struct schedule {
    int order, by_warp;
    unsigned seed;
};

static schedule parse_schedule(void)
{
    schedule s = {ORDER_FORWARD, 0, 1};
    const char *e = getenv("CUEMU_SCHEDULE");
    if (!e || !*e)
        return s;
    const char *o = e;
    if (strncmp(o, "warps", 5) == 0) {
        s.by_warp = 1;
        o += 5;
        if (*o == '-')
            o++;
    }
    if (strcmp(o, "forward") == 0 || *o == 0) {
        s.order = ORDER_FORWARD;
    } else if (strcmp(o, "reverse") == 0) {
        s.order = ORDER_REVERSE;
    } else if (strncmp(o, "random", 6) == 0 && (o[6] == 0 || o[6] == ':')) {
        s.order = ORDER_RANDOM;
        if (o[6] == ':')
            s.seed = (unsigned)strtoul(o + 7, NULL, 10);
    } else {
        fprintf(stderr, "cuemu: CUEMU_SCHEDULE=%s: expected forward, reverse, random[:seed], "
                "warps, warps-reverse or warps-random[:seed]\n", e);
        exit(2);
    }
    return s;
}

static const schedule &sched_of(void)
{
    static const schedule s = parse_schedule();
    return s;
}

/* v = base + 0, ..., base + n - 1 in the schedule's order. */
static void permute(std::vector<unsigned> &v, unsigned base, unsigned n, const schedule &s,
                    uint64_t salt)
{
    v.resize(n);
    for (unsigned i = 0; i < n; i++)
        v[i] = base + (s.order == ORDER_REVERSE ? n - 1 - i : i);
    if (s.order != ORDER_RANDOM)
        return;
    uint64_t x = (s.seed + 1) * 0x9E3779B97F4A7C15ull ^ (bid_.x * 0xBF58476D1CE4E5B9ull) ^
                 (bid_.y * 0x94D049BB133111EBull) ^ bid_.z ^ (salt * 0x2545F4914F6CDD1Dull);
    for (unsigned i = n; i > 1; i--) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        std::swap(v[i - 1], v[x % i]);
    }
}

/* Runs thread i, if it can run (starting it on a free fiber if it has not started); the
 * fibers then run the next threads of W.seq themselves, until none can run. */
static void visit(block_run &B, unsigned i)
{
    thread_state &t = W.th[i];
    if (B.fault || (t.state != T_NEW && t.state != T_READY))
        return;
    if (t.state == T_NEW) {
        adopt(i, take_fiber());
    } else {
        W.cur = i;
        set_tid(i);
        W.runs++;
    }
    jump_to(t.fib, false);
}

static void deadlock(block_run &B)
{
    unsigned first = 0;
    while (first < B.n && W.th[first].state == T_DONE)
        first++;
    W.cur = first;
    set_tid(first);
    std::string bar = sites(T_BAR), warp = sites(T_WARP);
    block_fault(W.th[first].file, W.th[first].line, "deadlock: every live thread waits and none "
                "can go on (%u of %u threads have exited)%s%s%s%s", B.n - B.alive, B.n,
                bar.empty() ? "" : "; in __syncthreads: ", bar.c_str(),
                warp.empty() ? "" : "; in warp operations: ", warp.c_str());
}

/* Visits W.seq from its start; the fibers may move W.pos on themselves. */
static void sweep(block_run &B)
{
    for (W.pos = 0; W.pos < W.seq.size() && !B.fault;)
        visit(B, W.seq[W.pos++]);
}

static void run_block(block_run &B)
{
    const schedule &s = sched_of();
    unsigned nw = (B.n + 31) / 32;
    B.warps.assign(nw, warp_state());
    for (unsigned w = 0; w < nw; w++) {
        unsigned nl = B.n - w * 32 < 32 ? B.n - w * 32 : 32;
        B.warps[w].exists = nl == 32 ? 0xffffffffu : (1u << nl) - 1;
        B.warps[w].exited = 0;
    }
    W.th.resize(B.n);
    for (unsigned i = 0; i < B.n; i++) {
        W.th[i].state = T_NEW;
        W.th[i].fib = -1;
        W.th[i].file = NULL, W.th[i].line = 0;
    }
    W.B = &B;
    W.running = -1;
    std::vector<unsigned> warps;
    for (uint64_t pass = 0; B.alive > 0 && !B.fault; pass++) {
        uint64_t before = W.runs;
        if (!s.by_warp) {
            permute(W.seq, 0, B.n, s, pass);
            sweep(B);
        } else {
            permute(warps, 0, nw, s, pass);
            for (unsigned k = 0; k < nw && !B.fault; k++) {
                unsigned w = warps[k], nl = B.n - w * 32 < 32 ? B.n - w * 32 : 32;
                for (uint64_t r = W.runs - 1; r != W.runs && !B.fault;) { /* until it stops */
                    r = W.runs;
                    permute(W.seq, w * 32, nl, s, pass * 64 + k);
                    sweep(B);
                }
            }
        }
        if (W.runs == before && !B.fault)
            deadlock(B);
    }
    W.seq.clear();
    if (B.fault) { /* threads stopped mid-way: their fibers start anew */
        W.free_fibers.clear();
        for (size_t f = 0; f < W.fibers.size(); f++) {
            W.fibers[f].fresh = true;
            W.free_fibers.push_back((int)f);
#if CUEMU_ASAN /* the frames left there keep their poison */
            ASAN_UNPOISON_MEMORY_REGION(W.fibers[f].stack, W.fibers[f].size);
#endif
        }
    }
    W.B = NULL;
}

static void prepare_smem(size_t bytes)
{
    if (W.dyn_cap < bytes || !W.dyn) {
        free(W.dyn);
        W.dyn = NULL;
        size_t cap = bytes < 4096 ? 4096 : bytes;
        if (posix_memalign((void **)&W.dyn, 256, cap) != 0) {
            perror("cuemu: dynamic shared memory");
            abort();
        }
        W.dyn_cap = cap;
    }
#if CUEMU_ASAN
    ASAN_UNPOISON_MEMORY_REGION(W.dyn, bytes);
    ASAN_POISON_MEMORY_REGION(W.dyn + bytes, W.dyn_cap - bytes); /* an overrun shows */
#endif
    memset(W.dyn, 0xFF, bytes); /* NaN: a read before the block wrote it shows */
    W.dyn_bytes = bytes;
}

static void run_grid(const launch_desc &d, const std::function<void()> &body)
{
    dim3 g = d.grid, b = d.block;
    long long nb = (long long)g.x * g.y * g.z;
    unsigned nt = b.x * b.y * b.z;
    int threads = env_int("CUEMU_THREADS", omp_get_max_threads());
    std::atomic<bool> bad(false);
#pragma omp parallel for schedule(dynamic, 4) num_threads(threads > 0 ? threads : 1) if (nb > 1)
    for (long long lb = 0; lb < nb; lb++) {
        if (bad.load(std::memory_order_relaxed))
            continue;
        if (!W_) {
            (void)&reaper; /* registers the thread's reaper */
            W_ = new worker();
        }
        W.L = &d;
        W.body = &body;
        gdim_ = g;
        bdim_ = b;
        bid_.x = (unsigned)(lb % g.x);
        bid_.y = (unsigned)(lb / g.x % g.y);
        bid_.z = (unsigned)(lb / ((long long)g.x * g.y));
        prepare_smem(d.smem);
        W.serial++;
        W.static_bytes = 0;
        block_run B;
        B.n = B.alive = nt;
        B.at_bar = 0;
        B.fault = false;
        run_block(B);
        if (B.fault)
            bad = true;
    }
#if CUEMU_ASAN
    if (W_ && W.dyn) /* the host thread may use that memory next: not shared memory now */
        ASAN_UNPOISON_MEMORY_REGION(W.dyn, W.dyn_cap);
#endif
}

cudaError_t launch(const launch_desc &d, std::function<void()> body, const void *const *ptrs,
                   const int *ptr_index, int nptrs)
{
    cudaError_t r = device_ready();
    if (r == cudaSuccess)
        r = sticky();
    if (r != cudaSuccess)
        return set_error(r);
    dim3 g = d.grid, b = d.block;
    unsigned long long nt = (unsigned long long)b.x * b.y * b.z;
    if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > 1024 || b.y > 1024 || b.z > 64 || nt > 1024) {
        report_error(d.file, d.line, "launch of %s: block (%u,%u,%u) is not a valid block (at "
                     "most 1024 threads; x, y <= 1024, z <= 64)", d.name, b.x, b.y, b.z);
        return set_error(cudaErrorInvalidConfiguration);
    }
    if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > 2147483647u || g.y > 65535 || g.z > 65535) {
        report_error(d.file, d.line, "launch of %s: grid (%u,%u,%u) is not a valid grid "
                     "(x < 2^31, y and z <= 65535, none 0)", d.name, g.x, g.y, g.z);
        return set_error(cudaErrorInvalidConfiguration);
    }
    if (d.smem > smem_limit()) {
        report_error(d.file, d.line, "launch of %s: %zu bytes of dynamic shared memory (more "
                     "than %zu needs cudaFuncSetAttribute's opt-in)", d.name, d.smem,
                     smem_limit());
        return set_error(cudaErrorInvalidValue);
    }
    for (int k = 0; k < nptrs; k++) {
        int dev = 0, kind = ptrs[k] ? mem_find(ptrs[k], 1, NULL, NULL, &dev) : MEM_DEVICE;
        if (kind == MEM_NONE)
            report_misuse(d.file, d.line, "launch of %s: argument %d (%p) is not device memory "
                          "(the kernel faults on a GPU if it dereferences it)", d.name,
                          ptr_index[k] + 1, ptrs[k]);
        else if (kind == MEM_DEVICE && ptrs[k] && dev != current_device())
            report_misuse(d.file, d.line, "launch of %s on device %d: argument %d is memory of "
                          "device %d", d.name, current_device(), ptr_index[k] + 1, dev);
    }
    if (env_int("CUEMU_VERBOSE", 0))
        fprintf(stderr, "cuemu: %s:%d: launch %s grid (%u,%u,%u) block (%u,%u,%u) smem %zu\n",
                d.file, d.line, d.name, g.x, g.y, g.z, b.x, b.y, b.z, d.smem);
    static const int kernels = counter_id("kernels"), digest = counter_id("launch_digest");
    counter_add(kernels, 1);
    const uint64_t shape[7] = {g.x, g.y, g.z, b.x, b.y, b.z, d.smem};
    counter_mix(digest, d.name, shape, 7);
    /* the launch's own copies: the work may run after this returns */
    return set_error(submit(d.stream, d.name, d.file, d.line,
                            [d, body = std::move(body)]() { run_grid(d, body); }));
}

} // namespace cuemu
