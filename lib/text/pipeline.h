/* Ordered parallel processing of a corpus: the calling thread reads chunks (corpus.h), worker
 * threads process them in any order, and the calling thread consumes the results strictly in
 * input order. Memory stays bounded: at most 2 * threads + 2 chunks are in flight.
 *
 * With threads == 1 everything runs on the calling thread, one chunk after another.
 * Errors come out in input order too: a worker's error on chunk k is reported after chunks
 * 0..k-1 have been consumed, and nothing after it is consumed. */
#ifndef TUPE_PIPELINE_H
#define TUPE_PIPELINE_H

#include <stddef.h>

#include "base/error.h"
#include "text/corpus.h"

typedef struct tupe_job {
    tupe_chunk chunk;
    void *result; /* the worker's output; kept in the slot and offered again for reuse */
} tupe_job;

typedef struct tupe_pipeline_ops {
    /* Per-worker state (NULL means out of memory), and its release. */
    void *(*ctx_new)(void *arg);
    void (*ctx_free)(void *ctx);
    /* On a worker: process job->chunk into job->result. 0 or an error code (e set). */
    int (*work)(void *ctx, tupe_job *job, tupe_err *e);
    /* On the calling thread, in input order. 0 or an error code (e set). */
    int (*consume)(void *arg, tupe_job *job, tupe_err *e);
    /* Release a job's result at the end (NULL results are skipped). */
    void (*result_free)(void *result);
} tupe_pipeline_ops;

int tupe_pipeline_run(tupe_corpus *c, size_t chunk_bytes, int threads,
                      const tupe_pipeline_ops *ops, void *arg, tupe_err *e);

#endif
