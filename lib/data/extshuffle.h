/* A seeded global shuffle of fixed-size records in bounded memory.
 *
 * Record i (0-based, in the order added) gets the key Philox(seed, i, stream); the output is
 * the records sorted by (key, i). That order is a uniformly random permutation that depends
 * only on the records, the seed and the stream, never on the memory budget: records are
 * buffered up to the budget, each full buffer is sorted and spilled as a run to an unnamed
 * temporary file (nothing is left behind if the process dies), and the runs are merged, in
 * several passes when there are too many to merge at once within the budget.
 *
 * With shuffle off, the same machinery keeps the input order (a bounded-memory spool).
 *
 * Memory: the buffer, its sort index and the merge buffers together stay within `memory`. */
#ifndef TUPE_EXTSHUFFLE_H
#define TUPE_EXTSHUFFLE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct tupe_xshuf_opts {
    size_t rec_bytes;     /* size of every record */
    uint64_t seed;
    uint32_t stream;      /* separates shuffles that share a seed (e.g. one per split) */
    int shuffle;          /* 0: output in the order added */
    size_t memory;        /* bytes for buffered records, sort index and merge buffers */
    const char *tmpdir;   /* directory for spill files (NULL: $TMPDIR or /tmp) */
} tupe_xshuf_opts;

typedef struct tupe_xshuf tupe_xshuf;

typedef struct tupe_xshuf_stats {
    uint64_t records;
    uint64_t runs;          /* sorted runs spilled (0: everything stayed in memory) */
    uint64_t spilled;       /* bytes written to spill files, all passes */
    uint64_t passes;        /* merge passes before the final one */
} tupe_xshuf_stats;

int tupe_xshuf_new(tupe_xshuf **x, const tupe_xshuf_opts *o, tupe_err *e);
/* Room for the next record (rec_bytes, to be filled by the caller before the next call). */
int tupe_xshuf_slot(tupe_xshuf *x, void **rec, tupe_err *e);
/* Copy one record in. */
int tupe_xshuf_add(tupe_xshuf *x, const void *rec, tupe_err *e);
/* No more records: sort what is buffered, prepare the merge. */
int tupe_xshuf_finish(tupe_xshuf *x, tupe_err *e);
/* Next record in output order: 1 with *rec (valid until the next call), 0 at the end, -1 on
 * error. Only after tupe_xshuf_finish. */
int tupe_xshuf_next(tupe_xshuf *x, const void **rec, tupe_err *e);
void tupe_xshuf_stats_get(const tupe_xshuf *x, tupe_xshuf_stats *s);
/* The sort key of record i (exposed for tests: the output is sorted by (key, i)). */
uint64_t tupe_xshuf_key(uint64_t seed, uint32_t stream, uint64_t i);
void tupe_xshuf_free(tupe_xshuf *x);

#endif
