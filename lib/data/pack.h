/* Packing documents into fixed-length training sequences, and the record that holds one.
 *
 * Two styles (RoBERTa, Liu et al. 2019, section 4.2):
 *   TUPE_BREAK_FULL  FULL-SENTENCES: the documents are concatenated, each followed by the
 *                    separator, and the result is cut into pieces of seq_len - 1 ids; every
 *                    sequence starts with [CLS]/<s>. Sequences cross document boundaries.
 *   TUPE_BREAK_DOC   DOC-SENTENCES: the same, but a sequence never holds ids of two documents;
 *                    a long document continues in further sequences, each starting with [CLS].
 * The last partial sequence (and, with TUPE_BREAK_DOC, the last one of every document) is
 * filled with the pad id; its true length is recorded. Empty documents contribute nothing.
 *
 * A record (the unit of the shuffle and of a shard file, man tupe-formats(5)):
 *   4              u32 true length (ids before the padding; 1..seq_len)
 *   seq_len * w    the ids, w = 2 or 4 bytes each, little-endian, padding included
 *   0..3           zero bytes up to a multiple of 4 */
#ifndef TUPE_PACK_H
#define TUPE_PACK_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum tupe_break { TUPE_BREAK_FULL = 0, TUPE_BREAK_DOC = 1 };

static inline size_t tupe_rec_bytes(uint32_t seq_len, uint32_t id_bytes)
{
    return (4 + (size_t)seq_len * id_bytes + 3) & ~(size_t)3;
}

/* Decode a record: ids[0..seq_len) (padding included) and the true length. */
void tupe_rec_decode(const void *rec, uint32_t seq_len, uint32_t id_bytes, uint32_t *ids,
                     uint32_t *length);
/* The true length alone. */
uint32_t tupe_rec_length(const void *rec);

/* Room for the next record (rec_bytes bytes): the packer writes it in place, completely,
 * before it asks for another, so records go straight into the caller's buffers. */
typedef int (*tupe_pack_slot)(void *ctx, void **rec, tupe_err *e);

typedef struct tupe_packer {
    uint32_t seq_len, id_bytes, cls, sep, pad;
    int brk;
    size_t rec_bytes;
    unsigned char *rec;   /* the record being filled (NULL: none open) */
    uint32_t fill;        /* ids in it so far */
    tupe_pack_slot slot;
    void *ctx;
    /* totals */
    uint64_t sequences, documents, tokens, padding;   /* tokens: non-pad ids incl. specials */
} tupe_packer;

int tupe_packer_init(tupe_packer *p, uint32_t seq_len, uint32_t id_bytes, int brk, uint32_t cls,
                     uint32_t sep, uint32_t pad, tupe_pack_slot slot, void *ctx, tupe_err *e);
/* Add one document (without special ids). */
int tupe_packer_doc(tupe_packer *p, const uint32_t *ids, size_t n, tupe_err *e);
/* Complete the last partial sequence, padded. */
int tupe_packer_finish(tupe_packer *p, tupe_err *e);

/* Sequences a set of documents packs into, knowing only their lengths: with TUPE_BREAK_FULL
 * the total of (n + 1) over the documents, with TUPE_BREAK_DOC one document at a time. */
static inline uint64_t tupe_pack_count_full(uint64_t items, uint32_t seq_len)
{
    return (items + seq_len - 2) / (seq_len - 1);
}

#endif
