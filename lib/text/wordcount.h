/* Word counts for vocabulary training, with a memory bound.
 *
 * Pruning rule (man tupe-tokenize(1), "Memory"): when the table holds more than its limit,
 * every word whose count is at most k is dropped, for the smallest k that brings the table
 * under half the limit. Counts of words that survive are exact up to that point; a word
 * dropped and seen again later starts over, so its final count is an underestimate by at most
 * the largest k used. Pruning happens at points that depend only on the input (callers merge
 * per-chunk tables in input order), so the result does not depend on the thread count. */
#ifndef TUPE_WORDCOUNT_H
#define TUPE_WORDCOUNT_H

#include <stddef.h>
#include <stdint.h>

#include "base/strtab.h"

typedef struct tupe_wordcount {
    tupe_strtab words;
    uint64_t *count;
    size_t cap;
    uint64_t total; /* sum of counts added */
} tupe_wordcount;

void tupe_wordcount_init(tupe_wordcount *w);
void tupe_wordcount_free(tupe_wordcount *w);
void tupe_wordcount_clear(tupe_wordcount *w);
/* 0, or -2 when out of memory. */
int tupe_wordcount_add(tupe_wordcount *w, const void *s, size_t n, uint64_t k);
int tupe_wordcount_merge(tupe_wordcount *dst, const tupe_wordcount *src);
static inline uint32_t tupe_wordcount_size(const tupe_wordcount *w) { return w->words.n; }
size_t tupe_wordcount_bytes(const tupe_wordcount *w);
/* Apply the pruning rule to get under limit/2 bytes. Returns the k used (0 if nothing was
 * dropped); *dropped receives the number of words removed. -1 (as uint64_t max) when out of
 * memory. */
uint64_t tupe_wordcount_prune(tupe_wordcount *w, size_t limit, uint64_t *dropped);
/* Ids of the words sorted by their bytes (caller frees); NULL when out of memory. */
uint32_t *tupe_wordcount_sorted(const tupe_wordcount *w);

#endif
