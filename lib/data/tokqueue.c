#include "data/tokqueue.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define NBUF 3   /* one being filled, one ready, one held by the caller */

typedef struct buf {
    tupe_tokbatch b;
    uint32_t *ids, *lens;
    size_t nids, cap_ids, cap_lens;
} buf;

struct tupe_tokq {
    const char *const *paths;
    int npaths;
    size_t batch_ids;
    tupe_tok_header *headers;
    buf bufs[NBUF];
    int head, filled, held, done, stop;
    int rc;
    tupe_err err;
    pthread_t tid;
    int started;
    pthread_mutex_t mu;
    pthread_cond_t cv_free, cv_full;
};

size_t tupe_tokq_memory(size_t batch_ids)
{
    return NBUF * (batch_ids * sizeof(uint32_t) + batch_ids / 4 * sizeof(uint32_t));
}

static int grow32(uint32_t **p, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    size_t nc = *cap ? *cap : 1024;
    while (nc < need)
        nc *= 2;
    uint32_t *np = realloc(*p, nc * sizeof *np);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

/* Wait for a free buffer and make it current (under no lock on return). */
static buf *take_free(tupe_tokq *q)
{
    pthread_mutex_lock(&q->mu);
    while (!q->stop && q->filled >= NBUF)
        pthread_cond_wait(&q->cv_free, &q->mu);
    buf *f = q->stop ? NULL : &q->bufs[(q->head + q->filled) % NBUF];
    pthread_mutex_unlock(&q->mu);
    if (f) {
        f->nids = 0;
        f->b.ndocs = 0;
    }
    return f;
}

static void publish(tupe_tokq *q)
{
    pthread_mutex_lock(&q->mu);
    q->filled++;
    pthread_cond_signal(&q->cv_full);
    pthread_mutex_unlock(&q->mu);
}

static void *reader(void *arg)
{
    tupe_tokq *q = arg;
    pthread_setname_np(pthread_self(), "tupe-read");
    tupe_err e;
    tupe_err_clear(&e);
    int rc = 0;
    uint64_t before = 0;
    buf *f = take_free(q);
    for (int i = 0; f && i < q->npaths && !rc; i++) {
        tupe_tokr *r;
        if ((rc = tupe_tokr_open(&r, q->paths[i], &e)))
            break;
        q->headers[i] = *tupe_tokr_header(r);
        const uint32_t *ids;
        size_t n;
        int got;
        while ((got = tupe_tokr_next(r, &ids, &n, &e)) == 1) {
            if (f->b.ndocs > 0 && (f->nids + n > q->batch_ids || f->b.input != i)) {
                publish(q);
                if (!(f = take_free(q)))
                    break;
            }
            if (grow32(&f->ids, &f->cap_ids, f->nids + n) ||
                grow32(&f->lens, &f->cap_lens, f->b.ndocs + 1)) {
                rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
                break;
            }
            memcpy(f->ids + f->nids, ids, n * sizeof *ids);
            f->lens[f->b.ndocs++] = (uint32_t)n;
            f->nids += n;
            f->b.input = i;
            f->b.header = &q->headers[i];
            f->b.offset = before + tupe_tokr_offset(r);
        }
        if (got < 0 && !rc)
            rc = e.code ? e.code : TUPE_EFAIL;
        before += tupe_tokr_offset(r);
        tupe_tokr_close(r);
    }
    pthread_mutex_lock(&q->mu);
    if (f && f->b.ndocs > 0) {
        f->b.ids = f->ids;
        q->filled++;
    }
    q->rc = rc;
    q->err = e;
    q->done = 1;
    pthread_cond_signal(&q->cv_full);
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int tupe_tokq_open(tupe_tokq **qp, const char *const *paths, int npaths, size_t batch_ids,
                   tupe_err *e)
{
    tupe_tokq *q = calloc(1, sizeof *q);
    if (!q)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    q->paths = paths;
    q->npaths = npaths;
    q->batch_ids = batch_ids ? batch_ids : 1;
    q->headers = calloc((size_t)(npaths > 0 ? npaths : 1), sizeof *q->headers);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv_free, NULL);
    pthread_cond_init(&q->cv_full, NULL);
    int ok = q->headers != NULL;
    for (int i = 0; ok && i < NBUF; i++)
        ok = !grow32(&q->bufs[i].ids, &q->bufs[i].cap_ids, q->batch_ids) &&
             !grow32(&q->bufs[i].lens, &q->bufs[i].cap_lens, q->batch_ids / 4 + 1);
    if (!ok) {
        tupe_tokq_close(q);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    if (pthread_create(&q->tid, NULL, reader, q) != 0) {
        tupe_tokq_close(q);
        return tupe_fail(e, TUPE_EFAIL, "cannot start the input thread");
    }
    q->started = 1;
    *qp = q;
    return 0;
}

int tupe_tokq_next(tupe_tokq *q, const tupe_tokbatch **b, tupe_err *e)
{
    pthread_mutex_lock(&q->mu);
    if (q->held) {
        q->head = (q->head + 1) % NBUF;
        q->filled--;
        q->held = 0;
        pthread_cond_signal(&q->cv_free);
    }
    while (q->filled == 0 && !q->done)
        pthread_cond_wait(&q->cv_full, &q->mu);
    int r;
    if (q->filled > 0) {
        buf *f = &q->bufs[q->head];
        f->b.ids = f->ids;
        f->b.lens = f->lens;
        *b = &f->b;
        q->held = 1;
        r = 1;
    } else if (q->rc) {
        if (e)
            *e = q->err;
        r = -1;
    } else {
        r = 0;
    }
    pthread_mutex_unlock(&q->mu);
    return r;
}

void tupe_tokq_close(tupe_tokq *q)
{
    if (!q)
        return;
    if (q->started) {
        pthread_mutex_lock(&q->mu);
        q->stop = 1;
        pthread_cond_broadcast(&q->cv_free);
        pthread_mutex_unlock(&q->mu);
        pthread_join(q->tid, NULL);
    }
    for (int i = 0; i < NBUF; i++) {
        free(q->bufs[i].ids);
        free(q->bufs[i].lens);
    }
    free(q->headers);
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv_free);
    pthread_cond_destroy(&q->cv_full);
    free(q);
}
