/* BPE with fastBPE / subword-nmt semantics (the segmentation TUPE used).
 *
 * A word is split into characters, "</w>" is appended to the last one, and merges are applied
 * the way fastBPE's applybpe does: find the adjacent pair with the lowest rank (its line in the
 * codes file), merge every occurrence of it from left to right, repeat until no pair has a
 * rank. Pieces other than the last get "@@" appended, the last loses "</w>"; each piece is
 * then looked up in the dictionary (fairseq maps a missing piece to <unk>).
 *
 * Codes file: one merge per line, "left right count" (count is informational).
 * A tupe_bpe is immutable once loaded; each thread brings its own tupe_bpe_cache, a bounded
 * cache of words already segmented. */
#ifndef TUPE_BPE_H
#define TUPE_BPE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/vocab.h"

typedef struct tupe_bpe tupe_bpe;
typedef struct tupe_bpe_cache tupe_bpe_cache;

#define TUPE_BPE_END "</w>"
#define TUPE_BPE_SEP "@@"

/* Load merges from a codes file; pieces are mapped to ids of v (a BPE vocabulary), or all to
 * -1 when v is NULL. Errors name the line (TUPE_EDATA) or the file (TUPE_ENOINPUT). */
int tupe_bpe_load(tupe_bpe **b, const char *codes_path, const tupe_vocab *v, tupe_err *e);
/* The same from the bytes of a codes file in memory; `name` stands for the file in messages. */
int tupe_bpe_parse(tupe_bpe **b, const char *buf, size_t len, const char *name,
                   const tupe_vocab *v, tupe_err *e);
/* An empty model; merges are then added in rank order (used by training). */
tupe_bpe *tupe_bpe_new(void);
/* 0; -1 if the pair is already there; -2 when out of memory. */
int tupe_bpe_add_merge(tupe_bpe *b, const void *l, size_t ln, const void *r, size_t rn);
/* Map pieces to the ids of v (after tupe_bpe_new and the merges). */
int tupe_bpe_bind(tupe_bpe *b, const tupe_vocab *v);
size_t tupe_bpe_merges(const tupe_bpe *b);
void tupe_bpe_free(tupe_bpe *b);

tupe_bpe_cache *tupe_bpe_cache_new(void);
void tupe_bpe_cache_free(tupe_bpe_cache *c);

/* Segment word[0..len). Writes each piece's id (or the <unk> id, or -1 without a vocabulary)
 * to ids and, when ends is not NULL, the byte offset where each piece ends; both need room for
 * len entries. Returns the number of pieces (0 only for an empty word, or when out of memory
 * for a word over 64 bytes); *unk counts pieces that became <unk>. c is the calling thread's
 * cache. */
size_t tupe_bpe_encode(const tupe_bpe *b, tupe_bpe_cache *c, const uint8_t *word, size_t len,
                       uint32_t *ids, uint32_t *ends, size_t *unk);

#endif
