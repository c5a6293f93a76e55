#include "text/pipeline.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

enum { S_FREE, S_READY, S_BUSY, S_DONE };

typedef struct slot {
    tupe_job job;
    int state, rc;
    uint64_t seq;
    tupe_err err;
} slot;

typedef struct pool {
    pthread_mutex_t mu;
    pthread_cond_t work, done;
    slot *s;
    size_t n;
    int stop;
    const tupe_pipeline_ops *ops;
    void *arg;
    int ctx_failed;
} pool;

static void *worker(void *p_)
{
    pool *p = p_;
    void *ctx = p->ops->ctx_new(p->arg);
    pthread_mutex_lock(&p->mu);
    if (!ctx)
        p->ctx_failed = 1;
    for (;;) {
        slot *best = NULL;
        for (size_t i = 0; i < p->n; i++)
            if (p->s[i].state == S_READY && (!best || p->s[i].seq < best->seq))
                best = &p->s[i];
        if (!best) {
            if (p->stop)
                break;
            pthread_cond_wait(&p->work, &p->mu);
            continue;
        }
        best->state = S_BUSY;
        pthread_mutex_unlock(&p->mu);
        int rc = ctx ? p->ops->work(ctx, &best->job, &best->err)
                     : tupe_fail(&best->err, TUPE_EFAIL, "out of memory");
        pthread_mutex_lock(&p->mu);
        best->rc = rc;
        best->state = S_DONE;
        pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    if (ctx)
        p->ops->ctx_free(ctx);
    return NULL;
}

static int run_serial(tupe_corpus *c, size_t chunk_bytes, const tupe_pipeline_ops *ops,
                      void *arg, tupe_err *e)
{
    void *ctx = ops->ctx_new(arg);
    if (!ctx)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_job job;
    memset(&job, 0, sizeof job);
    int rc = 0, r;
    while ((r = tupe_corpus_next(c, &job.chunk, chunk_bytes, e)) == 1) {
        if ((rc = ops->work(ctx, &job, e)) || (rc = ops->consume(arg, &job, e)))
            break;
    }
    if (r < 0)
        rc = e->code;
    ops->ctx_free(ctx);
    tupe_chunk_free(&job.chunk);
    if (job.result)
        ops->result_free(job.result);
    return rc;
}

int tupe_pipeline_run(tupe_corpus *c, size_t chunk_bytes, int threads,
                      const tupe_pipeline_ops *ops, void *arg, tupe_err *e)
{
    if (threads <= 1)
        return run_serial(c, chunk_bytes, ops, arg, e);
    pool p;
    memset(&p, 0, sizeof p);
    p.n = 2 * (size_t)threads + 2;
    p.ops = ops;
    p.arg = arg;
    p.s = calloc(p.n, sizeof *p.s);
    pthread_t *tid = calloc((size_t)threads, sizeof *tid);
    if (!p.s || !tid) {
        free(p.s);
        free(tid);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    pthread_mutex_init(&p.mu, NULL);
    pthread_cond_init(&p.work, NULL);
    pthread_cond_init(&p.done, NULL);
    int started = 0, rc = 0;
    for (; started < threads; started++)
        if (pthread_create(&tid[started], NULL, worker, &p) != 0)
            break;
    if (started == 0)
        rc = tupe_fail(e, TUPE_EFAIL, "cannot start worker threads");

    uint64_t next_seq = 0, consume_seq = 0;
    int eof = 0, read_rc = 0;
    tupe_err read_err;
    size_t fill = 0, take = 0;
    while (!rc) {
        /* keep every free slot filled */
        while (!eof && !read_rc) {
            pthread_mutex_lock(&p.mu);
            int is_free = p.s[fill].state == S_FREE;
            pthread_mutex_unlock(&p.mu);
            if (!is_free)
                break;
            int r = tupe_corpus_next(c, &p.s[fill].job.chunk, chunk_bytes, &read_err);
            if (r == 0) {
                eof = 1;
                break;
            }
            if (r < 0) {
                read_rc = read_err.code;
                break;
            }
            pthread_mutex_lock(&p.mu);
            p.s[fill].seq = next_seq++;
            p.s[fill].state = S_READY;
            pthread_cond_signal(&p.work);
            pthread_mutex_unlock(&p.mu);
            fill = (fill + 1) % p.n;
        }
        if (consume_seq == next_seq) {
            if (read_rc) {
                *e = read_err;
                rc = read_rc;
            }
            break;
        }
        pthread_mutex_lock(&p.mu);
        while (p.s[take].state != S_DONE)
            pthread_cond_wait(&p.done, &p.mu);
        pthread_mutex_unlock(&p.mu);
        slot *s = &p.s[take];
        if (s->rc) {
            *e = s->err;
            rc = s->rc;
        } else {
            rc = ops->consume(arg, &s->job, e);
        }
        pthread_mutex_lock(&p.mu);
        s->state = S_FREE;
        pthread_mutex_unlock(&p.mu);
        consume_seq++;
        take = (take + 1) % p.n;
    }

    pthread_mutex_lock(&p.mu);
    p.stop = 1;
    /* work that is no longer needed is dropped */
    for (size_t i = 0; i < p.n; i++)
        if (p.s[i].state == S_READY)
            p.s[i].state = S_FREE;
    pthread_cond_broadcast(&p.work);
    pthread_mutex_unlock(&p.mu);
    for (int i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    if (!rc && p.ctx_failed)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (size_t i = 0; i < p.n; i++) {
        tupe_chunk_free(&p.s[i].job.chunk);
        if (p.s[i].job.result)
            ops->result_free(p.s[i].job.result);
    }
    pthread_cond_destroy(&p.work);
    pthread_cond_destroy(&p.done);
    pthread_mutex_destroy(&p.mu);
    free(p.s);
    free(tid);
    return rc;
}
