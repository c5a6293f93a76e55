#define ZSTD_STATIC_LINKING_ONLY /* ZSTD_estimateCCtxSize_usingCParams, for memory budgets */
#include "data/framepool.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/checksum.h"

enum { S_FREE, S_FILLING, S_QUEUED, S_WORKING, S_DONE };

typedef struct slot {
    int state;
    unsigned char *in, *out;
    size_t len, out_len;
    uint64_t tag, check, seq;
    int err;               /* a ZSTD error code turned into TUPE_EFAIL, 0 if fine */
    char why[128];
} slot;

struct tupe_fpool {
    int threads, level, nslots;
    size_t cap, bound;
    slot *slots;
    uint64_t next_fill, next_deliver, next_work;  /* sequence numbers */
    pthread_t *tids;
    int started, stop;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    tupe_fpool_sink sink;
    void *ctx;
    ZSTD_CCtx *inline_cctx;   /* threads == 0: compress on the caller's thread */
};

static int nslots_for(int threads) { return threads > 0 ? threads + 2 : 1; }

size_t tupe_fpool_memory(int threads, int level, size_t frame_cap)
{
    size_t per = frame_cap + (level > 0 ? ZSTD_compressBound(frame_cap) : 0);
    size_t cctx = 0;
    if (level > 0)
        cctx = ZSTD_estimateCCtxSize_usingCParams(ZSTD_getCParams(level, frame_cap, 0));
    int ctxs = threads > 0 ? threads : 1;
    return (size_t)nslots_for(threads) * per + (size_t)ctxs * cctx;
}

static void compress_slot(tupe_fpool *p, ZSTD_CCtx *cc, slot *s)
{
    s->err = 0;
    if (p->level <= 0) {
        s->out_len = s->len;
        s->check = tupe_hash64(s->in, s->len);
        return;
    }
    size_t r = ZSTD_compressCCtx(cc, s->out, p->bound, s->in, s->len, p->level);
    if (ZSTD_isError(r)) {
        s->err = TUPE_EFAIL;
        snprintf(s->why, sizeof s->why, "zstd compression failed: %s", ZSTD_getErrorName(r));
        return;
    }
    s->out_len = r;
    s->check = tupe_hash64(s->out, r);
}

static void *worker(void *arg)
{
    tupe_fpool *p = arg;
    pthread_setname_np(pthread_self(), "tupe-compress");
    ZSTD_CCtx *cc = p->level > 0 ? ZSTD_createCCtx() : NULL;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        slot *s = NULL;
        while (!p->stop) {
            if (p->next_work < p->next_fill) {
                slot *c = &p->slots[p->next_work % (uint64_t)p->nslots];
                if (c->state == S_QUEUED) {
                    s = c;
                    p->next_work++;
                    break;
                }
            }
            pthread_cond_wait(&p->work_cv, &p->mu);
        }
        if (!s)
            break;
        s->state = S_WORKING;
        pthread_mutex_unlock(&p->mu);
        if (p->level > 0 && !cc) {
            s->err = TUPE_EFAIL;
            snprintf(s->why, sizeof s->why, "out of memory (zstd context)");
        } else {
            compress_slot(p, cc, s);
        }
        pthread_mutex_lock(&p->mu);
        s->state = S_DONE;
        pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    ZSTD_freeCCtx(cc);
    return NULL;
}

int tupe_fpool_new(tupe_fpool **pp, int threads, int level, size_t frame_cap,
                   tupe_fpool_sink sink, void *ctx, tupe_err *e)
{
    tupe_fpool *p = calloc(1, sizeof *p);
    if (!p)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    p->threads = threads < 0 ? 0 : threads;
    p->level = level;
    p->cap = frame_cap;
    p->bound = level > 0 ? ZSTD_compressBound(frame_cap) : 0;
    p->nslots = nslots_for(p->threads);
    p->sink = sink;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    p->slots = calloc((size_t)p->nslots, sizeof *p->slots);
    if (!p->slots)
        goto oom;
    for (int i = 0; i < p->nslots; i++) {
        p->slots[i].in = malloc(frame_cap);
        if (!p->slots[i].in)
            goto oom;
        if (level > 0 && !(p->slots[i].out = malloc(p->bound)))
            goto oom;
    }
    if (p->threads == 0) {
        if (level > 0 && !(p->inline_cctx = ZSTD_createCCtx()))
            goto oom;
    } else {
        p->tids = calloc((size_t)p->threads, sizeof *p->tids);
        if (!p->tids)
            goto oom;
        for (int i = 0; i < p->threads; i++) {
            if (pthread_create(&p->tids[i], NULL, worker, p) != 0) {
                tupe_fpool_free(p);
                return tupe_fail(e, TUPE_EFAIL, "cannot start compression threads");
            }
            p->started++;
        }
    }
    *pp = p;
    return 0;
oom:
    tupe_fpool_free(p);
    return tupe_fail(e, TUPE_EFAIL, "out of memory (compression buffers)");
}

/* Hand the oldest finished frame to the sink; `wait` blocks until it is finished. Returns 1 if
 * one was delivered, 0 if none was ready (or none pending), or an error code (negative). */
static int deliver_one(tupe_fpool *p, int wait, tupe_err *e)
{
    if (p->next_deliver == p->next_fill)
        return 0;
    slot *s = &p->slots[p->next_deliver % (uint64_t)p->nslots];
    if (p->threads > 0) {
        pthread_mutex_lock(&p->mu);
        while (wait && s->state != S_DONE)
            pthread_cond_wait(&p->done_cv, &p->mu);
        int ready = s->state == S_DONE;
        pthread_mutex_unlock(&p->mu);
        if (!ready)
            return 0;
    }
    int rc;
    if (s->err)
        rc = tupe_fail(e, s->err, "%s", s->why);
    else
        rc = p->sink(p->ctx, p->level > 0 ? s->out : s->in, s->out_len, s->check, s->len, s->tag,
                     e);
    s->state = S_FREE;
    p->next_deliver++;
    return rc ? -rc : 1;
}

int tupe_fpool_buffer(tupe_fpool *p, unsigned char **buf, tupe_err *e)
{
    /* The slot of the next frame is free once the frame nslots earlier has been delivered. */
    while (p->next_fill - p->next_deliver >= (uint64_t)p->nslots) {
        int r = deliver_one(p, 1, e);
        if (r < 0)
            return -r;
    }
    slot *s = &p->slots[p->next_fill % (uint64_t)p->nslots];
    s->state = S_FILLING;
    *buf = s->in;
    return 0;
}

int tupe_fpool_submit(tupe_fpool *p, size_t len, uint64_t tag, tupe_err *e)
{
    slot *s = &p->slots[p->next_fill % (uint64_t)p->nslots];
    if (s->state != S_FILLING || len > p->cap)
        return tupe_fail(e, TUPE_EFAIL, "frame pool: submit without a buffer");
    s->len = len;
    s->tag = tag;
    s->seq = p->next_fill;
    if (p->threads == 0) {
        compress_slot(p, p->inline_cctx, s);
        s->state = S_DONE;
        p->next_fill++;
        int r = deliver_one(p, 1, e);
        return r < 0 ? -r : 0;
    }
    pthread_mutex_lock(&p->mu);
    s->state = S_QUEUED;
    p->next_fill++;
    pthread_cond_signal(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    /* Write out whatever is already finished, so the disk works while workers compress. */
    for (;;) {
        int r = deliver_one(p, 0, e);
        if (r < 0)
            return -r;
        if (r == 0)
            return 0;
    }
}

int tupe_fpool_flush(tupe_fpool *p, tupe_err *e)
{
    for (;;) {
        int r = deliver_one(p, 1, e);
        if (r < 0)
            return -r;
        if (r == 0)
            return 0;
    }
}

void tupe_fpool_free(tupe_fpool *p)
{
    if (!p)
        return;
    if (p->started) {
        pthread_mutex_lock(&p->mu);
        p->stop = 1;
        pthread_cond_broadcast(&p->work_cv);
        pthread_mutex_unlock(&p->mu);
        for (int i = 0; i < p->started; i++)
            pthread_join(p->tids[i], NULL);
    }
    if (p->slots)
        for (int i = 0; i < p->nslots; i++) {
            free(p->slots[i].in);
            free(p->slots[i].out);
        }
    free(p->slots);
    free(p->tids);
    ZSTD_freeCCtx(p->inline_cctx);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p);
}
