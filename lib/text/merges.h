/* Learning pair merges over counted words: the loop shared by Hugging Face's BPE/WordPiece
 * trainer and fastBPE's learnbpe.
 *
 * Words are sequences of token ids with a count. Repeatedly, the adjacent pair with the
 * highest total count (ties: the smaller left id, then the smaller right id) becomes a new
 * token, left string + right string, and every occurrence in every word is replaced, left to
 * right. Pair counts are 64-bit (Hugging Face uses 32-bit ones, which overflow on big corpora).
 *
 * The two flavours differ where their references differ:
 *   HF       a merge whose string is already a token reuses that token; the merged pair's
 *            count is left as it is; `strip_prefix` ("##") is removed from the right string;
 *            stops when there are max_tokens tokens.
 *   FASTBPE  every merge makes a new token; the merged pair's count is zeroed; stops after
 *            max_merges merges.
 * Both stop when the best count is below max(1, min_frequency). */
#ifndef TUPE_MERGES_H
#define TUPE_MERGES_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/progress.h"
#include "base/strtab.h"

enum tupe_merges_flavor { TUPE_MERGES_HF = 0, TUPE_MERGES_FASTBPE = 1 };

typedef struct tupe_merges_opts {
    int flavor;
    size_t max_tokens;      /* HF; 0: no limit */
    size_t max_merges;      /* 0: no limit */
    uint64_t min_frequency;
    const char *strip_prefix;
} tupe_merges_opts;

typedef struct tupe_merge {
    uint32_t left, right, result;
    uint64_t count;
} tupe_merge;

/* The problem: tokens (strings in a string table, ids 0..ntok-1 in order) and words. */
typedef struct tupe_merges {
    tupe_strtab *strings; /* token strings; new ones are added here */
    uint32_t *tok_str;    /* token id -> string id */
    size_t ntok, tok_cap;
    uint32_t *sym;        /* the words' tokens, back to back */
    uint64_t *wstart;     /* per word: offset in sym */
    uint32_t *wlen;       /* per word: current length */
    uint64_t *wcount;     /* per word: count */
    size_t nwords;
    tupe_merge *merges;   /* the result */
    size_t nmerges;
} tupe_merges;

/* Run the loop. Progress (merges done) goes to p when not NULL. 0 or TUPE_EFAIL (memory). */
int tupe_merges_learn(tupe_merges *m, const tupe_merges_opts *o, tupe_progress *p, tupe_err *e);

/* Add token `str_id` (a string of m->strings) as the next token id; -1 when out of memory. */
int64_t tupe_merges_add_token(tupe_merges *m, uint32_t str_id);
void tupe_merges_free(tupe_merges *m);

#endif
