/* tupe-shard's write path: token streams in, a shard directory out, in bounded memory.
 *
 *   1. Read the documents of every input stream in order (one vocabulary).
 *   2. Hold out the validation split by whole documents, before any shuffling: each document
 *      goes to validation with probability valid_fraction (Philox on its index), or, for
 *      valid_sequences, validation takes the documents of smallest Philox key until their
 *      sequences reach the count (an exact choice that needs only those documents in memory).
 *   3. Pack each split (pack.h) and feed the sequences to a bounded-memory shuffle
 *      (extshuffle.h; validation keeps its order).
 *   4. Write the sequences in shuffled order into shards of (almost) equal counts (the first
 *      count % shards files get one more), frames compressed on `threads` workers, under a
 *      temporary directory committed in one step with the manifest (fileio.h tupe_dirtx).
 *
 * The output bytes depend on the input and the options, never on the memory budget or on the
 * thread count. */
#ifndef TUPE_SHARDBUILD_H
#define TUPE_SHARDBUILD_H

#include <stdint.h>

#include "base/error.h"
#include "data/shard.h"

typedef struct tupe_shard_opts {
    const char *output;
    const char *const *inputs;   /* token streams; "-" is stdin; none: stdin */
    int ninputs;
    uint32_t seq_len;            /* 512 */
    int brk;                     /* TUPE_BREAK_FULL */
    uint64_t seed;               /* 1 */
    int shuffle;                 /* 1 */
    double valid_fraction;       /* 0: no validation split unless valid_sequences */
    uint64_t valid_sequences;    /* 0 */
    uint32_t shards;             /* 16 */
    uint32_t valid_shards;       /* 1 */
    int layout;                  /* TUPE_LAYOUT_ZSTD, _RAW or _MEGATRON */
    int level;                   /* zstd level, 3 */
    uint64_t frame_bytes;        /* uncompressed bytes per frame, 4 MiB */
    uint64_t memory;             /* budget for everything but code and stacks, 1 GiB */
    int threads;                 /* compression workers (>= 1) */
    const char *tmpdir;          /* spill files; NULL: $TMPDIR or /tmp */
    int32_t special[TUPE_SP_COUNT]; /* overrides of the stream's special ids; -2: keep */
    int quiet;                   /* no progress on stderr */
} tupe_shard_opts;

typedef struct tupe_shard_report {
    uint64_t input_bytes;
    uint64_t runs, spilled, passes;  /* of the training shuffle */
    uint64_t framed;                 /* documents that already begin with cls and end with sep */
    double seconds;
} tupe_shard_report;

void tupe_shard_opts_init(tupe_shard_opts *o);
/* Memory the shuffle gets out of o->memory (what is left after buffers); 0 if too little. */
uint64_t tupe_shard_sort_memory(const tupe_shard_opts *o);
/* meta (may be NULL) receives the manifest that was written; free it with
 * tupe_shard_meta_free. */
int tupe_shard_build(const tupe_shard_opts *o, tupe_shard_meta *meta, tupe_shard_report *rep,
                     tupe_err *e);

#endif
