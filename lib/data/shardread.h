/* Reading a shard directory for training: random access, a per-epoch order, rank partitions,
 * prefetching, and verification.
 *
 * The epoch order. Position p (0 <= p < N) of epoch e holds one sequence of the split; the
 * order is a permutation of all N sequences that depends only on (seed, e) and the directory:
 * the frames are visited in a seeded random order and the records of each frame in a seeded
 * random order (Philox: word 1 = epoch, word 2 = 0 for the frame order or frame + 1, word 3 =
 * TUPE_RNG_SHUFFLE). Since tupe-shard already shuffled the whole corpus globally, this keeps
 * reads sequential (one frame decoded at a time) while every epoch sees a new order.
 *
 * Ranks. Rank r of W reads the positions p = r, r + W, r + 2W, ... : the ranks' sets are
 * disjoint and together cover the epoch, and the order does not depend on W. So the global
 * batch of a step with B sequences (B a multiple of W) is positions [sB, sB + B) whatever the
 * number of ranks: each rank reads B / W of them with tupe_shardr_next. To resume exactly,
 * save (epoch, consumed) where consumed = steps taken in the epoch * B, and call
 * tupe_shardr_seek with them (with any W that divides B).
 *
 * Prefetch: with opts.prefetch > 0 a background thread (pthreads) checks and decodes the next
 * frames of this rank's order while the caller works. One reader is used by one thread.
 *
 * Errors name the directory, the file, the frame and its byte offset; a directory made for
 * another vocabulary or sequence length is refused at open with both values in the message. */
#ifndef TUPE_SHARDREAD_H
#define TUPE_SHARDREAD_H

#include <stdint.h>

#include "base/error.h"
#include "data/shard.h"

typedef struct tupe_shardr_opts {
    int split;              /* TUPE_SPLIT_TRAIN or TUPE_SPLIT_VALID */
    uint32_t rank, world;   /* 0 and 1 for a single process */
    int shuffle;            /* per-epoch permutation (1); 0: the stored order */
    uint64_t seed;          /* of the per-epoch permutation */
    int prefetch;           /* frames decoded ahead by a background thread (0: none) */
    uint32_t seq_len;       /* expected sequence length; 0 accepts any */
    uint32_t vocab_size;    /* expected vocabulary; 0 accepts any */
    uint64_t vocab_hash;    /* checked when vocab_size is set */
} tupe_shardr_opts;

/* split train, rank 0 of 1, shuffle, seed 1, prefetch 2, no expectations. */
void tupe_shardr_opts_init(tupe_shardr_opts *o);

typedef struct tupe_shardr tupe_shardr;

int tupe_shardr_open(tupe_shardr **r, const char *dir, const tupe_shardr_opts *o, tupe_err *e);
const tupe_shard_meta *tupe_shardr_meta(const tupe_shardr *r);
/* Sequences in the split (N). */
uint64_t tupe_shardr_size(const tupe_shardr *r);
/* Positions of one epoch that belong to this rank. */
uint64_t tupe_shardr_epoch_len(const tupe_shardr *r);

/* Random access: sequence `index` of the split (stored order). ids receives seq_len ids
 * (padding included), *length the true length. */
int tupe_shardr_get(tupe_shardr *r, uint64_t index, uint32_t *ids, uint32_t *length,
                    tupe_err *e);
/* The sequence at position pos of epoch `epoch` (a pure function; for tests and tools). */
int tupe_shardr_order(tupe_shardr *r, uint64_t epoch, uint64_t pos, uint64_t *index,
                      tupe_err *e);

/* Read epoch `epoch` from the point where `consumed` positions have been read by all ranks
 * together (0: its start). Called implicitly with (0, 0) by the first tupe_shardr_next. */
int tupe_shardr_seek(tupe_shardr *r, uint64_t epoch, uint64_t consumed, tupe_err *e);
/* This rank's next sequence: 1 with ids, *length and *index (the stored-order index, for
 * masking seeds), 0 at the end of the epoch (seek to the next one), -1 on error. */
int tupe_shardr_next(tupe_shardr *r, uint32_t *ids, uint32_t *length, uint64_t *index,
                     tupe_err *e);
/* This rank's share of the next global batch of `batch` sequences (a multiple of the world
 * size): batch / world sequences into ids (seq_len each, row after row), lengths and indexes
 * (each may be NULL). An epoch holds floor(N / batch) batches; the positions left over at its
 * end are skipped by every rank alike and reading goes on with the next epoch, so every rank
 * takes the same number of steps. 0 or an error code. */
int tupe_shardr_batch(tupe_shardr *r, uint32_t batch, uint32_t *ids, uint32_t *lengths,
                      uint64_t *indexes, tupe_err *e);
/* Where this rank stands: the epoch, and the positions consumed by all ranks together if
 * every rank has read as many as this one. */
void tupe_shardr_tell(const tupe_shardr *r, uint64_t *epoch, uint64_t *consumed);
void tupe_shardr_close(tupe_shardr *r);

/* ---- verification (tupe-shard verify) --------------------------------------------------------- */

/* Called for every problem found; verification goes on after it. */
typedef void (*tupe_verify_cb)(void *ctx, const tupe_err *problem);

typedef struct tupe_verify_stats {
    uint64_t files, frames, sequences, problems;
} tupe_verify_stats;

/* Every file listed in the manifest: its header against the manifest, its size, its index,
 * every frame's check and decompression, every record's length, ids and padding (Megatron
 * layout: the recorded file checks and the .idx structure). Returns 0 when the directory is
 * sound, TUPE_EDATA when problems were reported, another code if it cannot be read. */
int tupe_shard_verify(const char *dir, tupe_verify_cb cb, void *ctx, tupe_verify_stats *st,
                      tupe_err *e);

#endif
