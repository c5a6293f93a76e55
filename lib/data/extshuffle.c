#include "data/extshuffle.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/philox.h"

#define WBUF_MAX (1u << 20)        /* spill write staging */
#define RUNBUF_MIN (64u << 10)     /* smallest read buffer per run worth merging with */

typedef struct ent {
    uint64_t key, idx;
} ent;

typedef struct run {
    uint64_t off, count;
} run;

/* One run being read during a merge. */
typedef struct rrun {
    uint64_t off, left;      /* next file offset; units not yet read into b */
    unsigned char *b;
    size_t pos, len, cap;    /* bytes */
} rrun;

typedef struct merger {
    rrun *rr;
    int k, nheap, pending;   /* pending: run whose head was handed out, advanced next time */
    int *heap;
    int fd;
    size_t unit;
} merger;

enum { MODE_ADD, MODE_MEM_SORTED, MODE_MEM_SEQ, MODE_MERGE, MODE_SEQ_SPILL, MODE_DONE };

struct tupe_xshuf {
    tupe_xshuf_opts o;
    char *tmpdir;
    size_t unit;             /* bytes per spilled record: (key, idx,) record */
    unsigned char *buf;      /* buffered records, in the order added */
    ent *ents;
    size_t cap, nbuf;
    uint64_t base, total;    /* index of buf[0]; records added */
    int fd[2];               /* spill files (unnamed); runs live in fd[cur] */
    int cur;
    uint64_t end[2];
    run *runs;
    size_t nruns, runcap;
    unsigned char *wbuf, *wbuf2;   /* staging: one being filled, one being written */
    size_t wlen, wcap;
    /* The spill writer thread: writes the full staging buffer while the next one fills. */
    pthread_t wtid;
    int won, wbusy, wstop, werr;
    int wfd;
    const unsigned char *wptr;
    size_t wn;
    pthread_mutex_t wmu;
    pthread_cond_t wcv;
    /* The prefault thread: maps the buffer's pages in ahead of the records being added, so
     * that the page faults of a large budget are not paid on the adding thread. */
    pthread_t ptid;
    int pon, pstop;
    size_t pwant, pdone;      /* bytes of buf wanted mapped / mapped so far */
    pthread_mutex_t pmu;
    pthread_cond_t pcv;
    int mode;
    size_t out_pos;
    merger m;
    /* MODE_SEQ_SPILL: reading the spill file back in order, then the buffer */
    uint64_t seq_off, seq_end;
    size_t seq_pos, seq_len;
    tupe_xshuf_stats st;
};

/* The buffer is reserved at full size up front: its pages cost nothing until records land in
 * them. Huge pages where the kernel offers them: the records are later read in random order,
 * and 4 KiB pages would cost a page fault per 4 KiB written and a TLB miss per record read. */
static void *big_alloc(size_t n)
{
    void *p = mmap(NULL, n ? n : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
#ifdef MADV_HUGEPAGE
    madvise(p, n, MADV_HUGEPAGE);
#endif
    return p;
}

#define PREFAULT_CHUNK ((size_t)32 << 20)

static void *prefaulter(void *arg)
{
    tupe_xshuf *x = arg;
    pthread_setname_np(pthread_self(), "tupe-prefault");
    pthread_mutex_lock(&x->pmu);
    for (;;) {
        while (!x->pstop && x->pdone >= x->pwant)
            pthread_cond_wait(&x->pcv, &x->pmu);
        if (x->pstop)
            break;
        size_t lo = x->pdone, hi = x->pwant;
        if (hi - lo > PREFAULT_CHUNK)
            hi = lo + PREFAULT_CHUNK;
        pthread_mutex_unlock(&x->pmu);
        int ok = 1;
#ifdef MADV_POPULATE_WRITE
        /* Faults the pages in without writing to them: safe while records land there. */
        ok = madvise(x->buf + lo, hi - lo, MADV_POPULATE_WRITE) == 0;
#else
        ok = 0;
#endif
        pthread_mutex_lock(&x->pmu);
        x->pdone = ok ? hi : SIZE_MAX;   /* without the call, stop trying */
    }
    pthread_mutex_unlock(&x->pmu);
    return NULL;
}

/* Ask for the pages up to two chunks past `used` bytes of buf (never waits). */
static void prefault_ahead(tupe_xshuf *x, size_t used)
{
    size_t total = x->cap * x->o.rec_bytes, want = used + 2 * PREFAULT_CHUNK;
    if (total < 4 * PREFAULT_CHUNK)
        return;   /* small buffers fault in quickly enough */
    if (want > total)
        want = total;
    if (!x->pon) {
        if (pthread_create(&x->ptid, NULL, prefaulter, x) != 0)
            return;
        x->pon = 1;
    }
    pthread_mutex_lock(&x->pmu);
    if (want > x->pwant && x->pdone != SIZE_MAX) {
        x->pwant = want;
        pthread_cond_signal(&x->pcv);
    }
    pthread_mutex_unlock(&x->pmu);
}

static void stop_prefault(tupe_xshuf *x)
{
    if (!x->pon)
        return;
    pthread_mutex_lock(&x->pmu);
    x->pstop = 1;
    pthread_cond_signal(&x->pcv);
    pthread_mutex_unlock(&x->pmu);
    pthread_join(x->ptid, NULL);
    x->pon = 0;
}

static void big_free(void *p, size_t n)
{
    if (p)
        munmap(p, n ? n : 1);
}

uint64_t tupe_xshuf_key(uint64_t seed, uint32_t stream, uint64_t i)
{
    tupe_u32x4 b = tupe_philox_block(seed, (uint32_t)i, (uint32_t)(i >> 32),
                                     TUPE_RNG_SHUFFLE | (stream + 1) << 8, 0);
    return (uint64_t)b.v[0] << 32 | b.v[1];
}

static const char *tmp_name(const tupe_xshuf *x) { return x->tmpdir; }

int tupe_xshuf_new(tupe_xshuf **xp, const tupe_xshuf_opts *o, tupe_err *e)
{
    if (o->rec_bytes == 0)
        return tupe_fail(e, TUPE_EFAIL, "shuffle: record size 0");
    tupe_xshuf *x = calloc(1, sizeof *x);
    if (!x)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    x->o = *o;
    x->fd[0] = x->fd[1] = -1;
    x->m.pending = -1;
    const char *td = o->tmpdir;
    if (!td || !*td)
        td = getenv("TMPDIR");
    if (!td || !*td)
        td = "/tmp";
    x->tmpdir = strdup(td);
    x->o.tmpdir = x->tmpdir;
    x->unit = o->shuffle ? 16 + o->rec_bytes : o->rec_bytes;
    x->wcap = o->memory / 8 < WBUF_MAX ? o->memory / 8 : WBUF_MAX;
    if (x->wcap < x->unit)
        x->wcap = x->unit;
    size_t per = o->rec_bytes + (o->shuffle ? sizeof(ent) : 0);
    size_t staging = o->shuffle ? 2 * x->wcap : x->wcap;
    x->cap = o->memory > staging ? (o->memory - staging) / per : 0;
    if (!x->tmpdir || x->cap < 2) {
        int oom = !x->tmpdir;
        free(x->tmpdir);
        free(x);
        return oom ? tupe_fail(e, TUPE_EFAIL, "out of memory")
                   : tupe_fail(e, TUPE_EUSAGE,
                               "memory budget of %zu bytes is too small for records of %zu bytes",
                               o->memory, o->rec_bytes);
    }
    x->buf = big_alloc(x->cap * o->rec_bytes);
    x->ents = o->shuffle ? big_alloc(x->cap * sizeof(ent)) : NULL;
    x->wbuf = malloc(x->wcap);
    x->wbuf2 = o->shuffle ? malloc(x->wcap) : NULL;
    pthread_mutex_init(&x->wmu, NULL);
    pthread_cond_init(&x->wcv, NULL);
    pthread_mutex_init(&x->pmu, NULL);
    pthread_cond_init(&x->pcv, NULL);
    if (!x->buf || (o->shuffle && (!x->ents || !x->wbuf2)) || !x->wbuf) {
        tupe_xshuf_free(x);
        return tupe_fail(e, TUPE_EFAIL, "out of memory: cannot reserve the shuffle buffer of "
                         "%.1f GiB (is --memory more than this machine has?)",
                         (double)o->memory / (double)(1 << 30));
    }
    *xp = x;
    return 0;
}

/* ---- spill files -------------------------------------------------------------------------- */

static int open_spill(tupe_xshuf *x, int which, tupe_err *e)
{
    if (x->fd[which] >= 0)
        return 0;
    /* Unnamed: the kernel removes it when the process ends, however it ends. */
    int fd = open(x->tmpdir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
    if (fd < 0 && (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL)) {
        char p[PATH_MAX];
        snprintf(p, sizeof p, "%s/.tupe-spill.XXXXXX", x->tmpdir);
        fd = mkostemp(p, O_CLOEXEC);
        if (fd >= 0)
            unlink(p);
    }
    if (fd < 0)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno,
                               "%s: cannot create a spill file (set TMPDIR or --temp-dir)",
                               tmp_name(x));
    x->fd[which] = fd;
    x->end[which] = 0;
    return 0;
}

static int write_all(tupe_xshuf *x, int fd, const void *buf, size_t n, tupe_err *e)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return tupe_fail_errno(e, TUPE_EIO, errno, "%s: writing a spill file failed",
                                   tmp_name(x));
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static void *spill_writer(void *arg)
{
    tupe_xshuf *x = arg;
    pthread_setname_np(pthread_self(), "tupe-spill");
    pthread_mutex_lock(&x->wmu);
    for (;;) {
        while (!x->wbusy && !x->wstop)
            pthread_cond_wait(&x->wcv, &x->wmu);
        if (x->wstop && !x->wbusy)
            break;
        const unsigned char *p = x->wptr;
        size_t n = x->wn;
        int fd = x->wfd, err = 0;
        pthread_mutex_unlock(&x->wmu);
        while (n > 0 && !err) {
            ssize_t w = write(fd, p, n);
            if (w < 0 && errno != EINTR)
                err = errno;
            else if (w > 0)
                p += w, n -= (size_t)w;
        }
        pthread_mutex_lock(&x->wmu);
        if (err && !x->werr)
            x->werr = err;
        x->wbusy = 0;
        pthread_cond_broadcast(&x->wcv);
    }
    pthread_mutex_unlock(&x->wmu);
    return NULL;
}

static void stop_writer(tupe_xshuf *x)
{
    if (!x->won)
        return;
    pthread_mutex_lock(&x->wmu);
    x->wstop = 1;
    pthread_cond_broadcast(&x->wcv);
    pthread_mutex_unlock(&x->wmu);
    pthread_join(x->wtid, NULL);
    x->won = 0;
}

/* Wait until the writer is idle; report what it failed on. */
static int wwait(tupe_xshuf *x, tupe_err *e)
{
    if (!x->won)
        return 0;
    pthread_mutex_lock(&x->wmu);
    while (x->wbusy)
        pthread_cond_wait(&x->wcv, &x->wmu);
    int err = x->werr;
    pthread_mutex_unlock(&x->wmu);
    if (err)
        return tupe_fail_errno(e, TUPE_EIO, err, "%s: writing a spill file failed", tmp_name(x));
    return 0;
}

/* Hand the staging buffer to the writer thread and go on filling the other one (written in
 * place when there is no thread). */
static int wflush(tupe_xshuf *x, int fd, tupe_err *e)
{
    if (!x->won && x->wbuf2 && pthread_create(&x->wtid, NULL, spill_writer, x) == 0)
        x->won = 1;
    if (!x->won) {
        int rc = write_all(x, fd, x->wbuf, x->wlen, e);
        x->wlen = 0;
        return rc;
    }
    int rc = wwait(x, e);
    if (rc)
        return rc;
    pthread_mutex_lock(&x->wmu);
    x->wfd = fd;
    x->wptr = x->wbuf;
    x->wn = x->wlen;
    x->wbusy = 1;
    pthread_cond_broadcast(&x->wcv);
    pthread_mutex_unlock(&x->wmu);
    unsigned char *t = x->wbuf;
    x->wbuf = x->wbuf2;
    x->wbuf2 = t;
    x->wlen = 0;
    return 0;
}

static int wput(tupe_xshuf *x, int fd, const void *a, size_t na, const void *b, size_t nb,
                tupe_err *e)
{
    if (x->wlen + na + nb > x->wcap) {
        int rc = wflush(x, fd, e);
        if (rc)
            return rc;
    }
    memcpy(x->wbuf + x->wlen, a, na);
    if (nb)
        memcpy(x->wbuf + x->wlen + na, b, nb);
    x->wlen += na + nb;
    return 0;
}

static int push_run(tupe_xshuf *x, run r, tupe_err *e)
{
    if (x->nruns == x->runcap) {
        size_t nc = x->runcap ? x->runcap * 2 : 16;
        run *nr = realloc(x->runs, nc * sizeof *nr);
        if (!nr)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        x->runs = nr;
        x->runcap = nc;
    }
    x->runs[x->nruns++] = r;
    return 0;
}

static int cmp_ent(const void *a, const void *b)
{
    const ent *p = a, *q = b;
    if (p->key != q->key)
        return p->key < q->key ? -1 : 1;
    return p->idx < q->idx ? -1 : p->idx > q->idx;
}

static void sort_buffer(tupe_xshuf *x)
{
    for (size_t j = 0; j < x->nbuf; j++) {
        x->ents[j].idx = x->base + j;
        x->ents[j].key = tupe_xshuf_key(x->o.seed, x->o.stream, x->base + j);
    }
    qsort(x->ents, x->nbuf, sizeof(ent), cmp_ent);
}

/* Write the buffer as one run (sorted when shuffling) and empty it. */
static int spill(tupe_xshuf *x, tupe_err *e)
{
    if (x->nbuf == 0)
        return 0;
    int rc = open_spill(x, 0, e);
    if (rc)
        return rc;
    int fd = x->fd[0];
    run r = {x->end[0], x->nbuf};
    if (x->o.shuffle) {
        sort_buffer(x);
        for (size_t j = 0; j < x->nbuf && !rc; j++) {
            const ent *t = &x->ents[j];
            rc = wput(x, fd, t, sizeof *t, x->buf + (t->idx - x->base) * x->o.rec_bytes,
                      x->o.rec_bytes, e);
        }
        if (!rc)
            rc = wflush(x, fd, e);
        if (!rc)
            rc = wwait(x, e);
    } else {
        rc = write_all(x, fd, x->buf, x->nbuf * x->o.rec_bytes, e);
    }
    if (rc)
        return rc;
    x->end[0] += x->nbuf * x->unit;
    x->st.spilled += x->nbuf * x->unit;
    x->st.runs++;
    x->base += x->nbuf;
    x->nbuf = 0;
    return push_run(x, r, e);
}

int tupe_xshuf_slot(tupe_xshuf *x, void **rec, tupe_err *e)
{
    if (x->mode != MODE_ADD)
        return tupe_fail(e, TUPE_EFAIL, "shuffle: record added after finish");
    if (x->nbuf == x->cap) {
        int rc = spill(x, e);
        if (rc)
            return rc;
    }
    size_t used = x->nbuf * x->o.rec_bytes;
    *rec = x->buf + used;
    x->nbuf++;
    x->total++;
    if (used % PREFAULT_CHUNK < x->o.rec_bytes && x->st.runs == 0)
        prefault_ahead(x, used);
    return 0;
}

int tupe_xshuf_add(tupe_xshuf *x, const void *rec, tupe_err *e)
{
    void *slot = NULL;
    int rc = tupe_xshuf_slot(x, &slot, e);
    if (!rc)
        memcpy(slot, rec, x->o.rec_bytes);
    return rc;
}

/* ---- merging ------------------------------------------------------------------------------ */

static int pread_all(tupe_xshuf *x, int fd, void *buf, size_t n, uint64_t off, tupe_err *e)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return tupe_fail_errno(e, TUPE_EIO, r < 0 ? errno : EIO,
                                   "%s: reading a spill file failed", tmp_name(x));
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int rr_fill(tupe_xshuf *x, merger *m, rrun *r, tupe_err *e)
{
    uint64_t units = r->cap / m->unit;
    if (units > r->left)
        units = r->left;
    size_t n = (size_t)units * m->unit;
    r->pos = 0;
    r->len = n;
    if (n == 0)
        return 0;
    int rc = pread_all(x, m->fd, r->b, n, r->off, e);
    r->off += n;
    r->left -= units;
    return rc;
}

static int head_less(const merger *m, int a, int b)
{
    const rrun *p = &m->rr[a], *q = &m->rr[b];
    uint64_t ka, kb, ia, ib;
    memcpy(&ka, p->b + p->pos, 8);
    memcpy(&kb, q->b + q->pos, 8);
    if (ka != kb)
        return ka < kb;
    memcpy(&ia, p->b + p->pos + 8, 8);
    memcpy(&ib, q->b + q->pos + 8, 8);
    return ia < ib;
}

static void sift_down(merger *m, int i)
{
    for (;;) {
        int l = 2 * i + 1, s = i;
        if (l < m->nheap && head_less(m, m->heap[l], m->heap[s]))
            s = l;
        if (l + 1 < m->nheap && head_less(m, m->heap[l + 1], m->heap[s]))
            s = l + 1;
        if (s == i)
            return;
        int t = m->heap[i];
        m->heap[i] = m->heap[s];
        m->heap[s] = t;
        i = s;
    }
}

static void merger_free(merger *m)
{
    for (int i = 0; i < m->k; i++)
        free(m->rr[i].b);
    free(m->rr);
    free(m->heap);
    memset(m, 0, sizeof *m);
    m->pending = -1;
}

static int merger_open(tupe_xshuf *x, merger *m, int fd, const run *runs, int k, size_t bufsz,
                       tupe_err *e)
{
    memset(m, 0, sizeof *m);
    m->pending = -1;
    m->fd = fd;
    m->unit = x->unit;
    m->rr = calloc((size_t)k, sizeof *m->rr);
    m->heap = calloc((size_t)k, sizeof *m->heap);
    if (!m->rr || !m->heap) {
        merger_free(m);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    m->k = k;
    bufsz = bufsz / m->unit * m->unit;
    for (int i = 0; i < k; i++) {
        rrun *r = &m->rr[i];
        r->off = runs[i].off;
        r->left = runs[i].count;
        r->cap = bufsz;
        if (!(r->b = malloc(bufsz))) {
            merger_free(m);
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        }
        int rc = rr_fill(x, m, r, e);
        if (rc) {
            merger_free(m);
            return rc;
        }
        if (r->len > 0)
            m->heap[m->nheap++] = i;
    }
    for (int i = m->nheap / 2 - 1; i >= 0; i--)
        sift_down(m, i);
    return 0;
}

/* Next unit in (key, idx) order: 1 with *u, 0 at the end, -1 on error. */
static int merger_next(tupe_xshuf *x, merger *m, const unsigned char **u, tupe_err *e)
{
    if (m->pending >= 0) {
        rrun *r = &m->rr[m->pending];
        r->pos += m->unit;
        if (r->pos == r->len && rr_fill(x, m, r, e))
            return -1;
        if (r->len == 0) {
            m->heap[0] = m->heap[--m->nheap];
        }
        if (m->nheap > 0)
            sift_down(m, 0);
        m->pending = -1;
    }
    if (m->nheap == 0)
        return 0;
    rrun *r = &m->rr[m->heap[0]];
    *u = r->b + r->pos;
    m->pending = m->heap[0];
    return 1;
}

/* Merge groups of `fan` runs of fd[cur] into single runs of fd[!cur], until at most `fan`
 * runs are left. */
static int reduce_runs(tupe_xshuf *x, int fan, size_t bufsz, tupe_err *e)
{
    while (x->nruns > (size_t)fan) {
        int src = x->cur, dst = !x->cur;
        int rc = open_spill(x, dst, e);
        if (rc)
            return rc;
        /* Spill files are written with write(): rewind as well as empty. */
        if (ftruncate(x->fd[dst], 0) != 0 || lseek(x->fd[dst], 0, SEEK_SET) != 0)
            return tupe_fail_errno(e, TUPE_EIO, errno, "%s: truncating a spill file failed",
                                   tmp_name(x));
        x->end[dst] = 0;
        size_t nout = 0;
        for (size_t g = 0; g < x->nruns; g += (size_t)fan) {
            int k = (int)(x->nruns - g < (size_t)fan ? x->nruns - g : (size_t)fan);
            run out = {x->end[dst], 0};
            for (int i = 0; i < k; i++)
                out.count += x->runs[g + (size_t)i].count;
            merger m;
            rc = merger_open(x, &m, x->fd[src], x->runs + g, k, bufsz, e);
            if (rc)
                return rc;
            const unsigned char *u;
            int got;
            while ((got = merger_next(x, &m, &u, e)) == 1)
                if ((rc = wput(x, x->fd[dst], u, x->unit, NULL, 0, e)))
                    break;
            merger_free(&m);
            if (got < 0 || rc || (rc = wflush(x, x->fd[dst], e)) || (rc = wwait(x, e)))
                return rc ? rc : e->code;
            x->end[dst] += out.count * x->unit;
            x->st.spilled += out.count * x->unit;
            x->runs[nout++] = out;
        }
        x->nruns = nout;
        x->cur = dst;
        x->st.passes++;
        if (ftruncate(x->fd[src], 0) != 0)
            return tupe_fail_errno(e, TUPE_EIO, errno, "%s: truncating a spill file failed",
                                   tmp_name(x));
    }
    return 0;
}

int tupe_xshuf_finish(tupe_xshuf *x, tupe_err *e)
{
    if (x->mode != MODE_ADD)
        return 0;
    x->st.records = x->total;
    if (x->nruns == 0) {
        if (x->o.shuffle)
            sort_buffer(x);
        x->mode = x->o.shuffle ? MODE_MEM_SORTED : MODE_MEM_SEQ;
        return 0;
    }
    if (!x->o.shuffle) {
        /* Runs are consecutive in the file: read it back in order, then the buffer. */
        x->mode = MODE_SEQ_SPILL;
        x->seq_end = x->end[0];
        return 0;
    }
    int rc = spill(x, e);
    if (rc)
        return rc;
    stop_prefault(x);
    big_free(x->buf, x->cap * x->o.rec_bytes);
    big_free(x->ents, x->cap * sizeof(ent));
    x->buf = NULL;
    x->ents = NULL;
    x->cap = 0;
    /* The whole budget now goes to merge buffers (the staging buffers included). */
    size_t avail = x->o.memory > 2 * x->wcap ? x->o.memory - 2 * x->wcap : 0;
    size_t minbuf = RUNBUF_MIN > 4 * x->unit ? RUNBUF_MIN : 4 * x->unit;
    int fan = (int)(avail / minbuf);
    if (fan < 2)
        fan = 2;
    size_t passbuf = avail / (size_t)(fan + 1);
    rc = reduce_runs(x, fan, passbuf > x->unit ? passbuf : x->unit, e);
    if (rc)
        return rc;
    stop_writer(x);
    free(x->wbuf);
    free(x->wbuf2);
    x->wbuf = x->wbuf2 = NULL;
    size_t bufsz = x->o.memory / x->nruns;
    if (bufsz < x->unit)
        bufsz = x->unit;
    rc = merger_open(x, &x->m, x->fd[x->cur], x->runs, (int)x->nruns, bufsz, e);
    if (rc)
        return rc;
    x->mode = MODE_MERGE;
    return 0;
}

int tupe_xshuf_next(tupe_xshuf *x, const void **rec, tupe_err *e)
{
    switch (x->mode) {
    case MODE_MEM_SORTED:
        if (x->out_pos == x->nbuf)
            return 0;
        *rec = x->buf + (x->ents[x->out_pos++].idx - x->base) * x->o.rec_bytes;
        return 1;
    case MODE_MEM_SEQ:
        if (x->out_pos == x->nbuf)
            return 0;
        *rec = x->buf + x->out_pos++ * x->o.rec_bytes;
        return 1;
    case MODE_SEQ_SPILL:
        if (x->seq_pos == x->seq_len) {
            if (x->seq_off == x->seq_end) {
                x->mode = MODE_MEM_SEQ;
                return tupe_xshuf_next(x, rec, e);
            }
            uint64_t n = x->wcap / x->unit * x->unit;
            if (n > x->seq_end - x->seq_off)
                n = x->seq_end - x->seq_off;
            if (pread_all(x, x->fd[0], x->wbuf, (size_t)n, x->seq_off, e))
                return -1;
            x->seq_off += n;
            x->seq_pos = 0;
            x->seq_len = (size_t)n;
        }
        *rec = x->wbuf + x->seq_pos;
        x->seq_pos += x->unit;
        return 1;
    case MODE_MERGE: {
        const unsigned char *u;
        int got = merger_next(x, &x->m, &u, e);
        if (got == 1)
            *rec = u + 16;
        return got;
    }
    default:
        tupe_fail(e, TUPE_EFAIL, "shuffle: records read before finish");
        return -1;
    }
}

void tupe_xshuf_stats_get(const tupe_xshuf *x, tupe_xshuf_stats *s)
{
    *s = x->st;
    s->records = x->total;
}

void tupe_xshuf_free(tupe_xshuf *x)
{
    if (!x)
        return;
    stop_writer(x);
    stop_prefault(x);
    pthread_mutex_destroy(&x->wmu);
    pthread_cond_destroy(&x->wcv);
    pthread_mutex_destroy(&x->pmu);
    pthread_cond_destroy(&x->pcv);
    merger_free(&x->m);
    for (int i = 0; i < 2; i++)
        if (x->fd[i] >= 0)
            close(x->fd[i]);
    big_free(x->buf, x->cap * x->o.rec_bytes);
    if (x->ents)
        big_free(x->ents, x->cap * sizeof(ent));
    free(x->wbuf);
    free(x->wbuf2);
    free(x->runs);
    free(x->tmpdir);
    free(x);
}
