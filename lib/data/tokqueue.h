/* Token streams read on a background thread (pthreads), handed over in batches of documents,
 * so that reading, checking and decoding the input overlaps with what the caller does with it.
 * Several inputs are read one after the other, as if concatenated. */
#ifndef TUPE_TOKQUEUE_H
#define TUPE_TOKQUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/tokstream.h"

typedef struct tupe_tokbatch {
    int input;              /* which input the documents come from */
    const tupe_tok_header *header;   /* that input's header */
    size_t ndocs;
    const uint32_t *lens;   /* ndocs document lengths */
    const uint32_t *ids;    /* their ids, back to back */
    uint64_t offset;        /* bytes of all inputs consumed once this batch was read */
} tupe_tokbatch;

typedef struct tupe_tokq tupe_tokq;

/* paths: token streams ("-" is stdin). batch_ids: ids per batch (a longer document gets a
 * batch of its own). */
int tupe_tokq_open(tupe_tokq **q, const char *const *paths, int npaths, size_t batch_ids,
                   tupe_err *e);
/* Next batch: 1 with *b (valid until the next call), 0 after the last, -1 on error (e names
 * the file and byte offset). */
int tupe_tokq_next(tupe_tokq *q, const tupe_tokbatch **b, tupe_err *e);
/* Memory the queue uses for a batch size (its buffers, for budgets). */
size_t tupe_tokq_memory(size_t batch_ids);
void tupe_tokq_close(tupe_tokq *q);

#endif
