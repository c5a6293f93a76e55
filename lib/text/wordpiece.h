/* WordPiece: greedy longest-match-first segmentation of one word against a vocabulary, as
 * Google BERT and Hugging Face `tokenizers` do it:
 *   - a word longer than max_chars characters is one [UNK];
 *   - from the start, take the longest vocabulary token that is a prefix of the rest of the
 *     word (with the "##" prefix after the first piece), and repeat;
 *   - if at some point no token matches, the whole word is one [UNK].
 *
 * The vocabulary is compiled into a double-array trie over bytes, so that one walk down the
 * trie finds the longest match: the cost is linear in the word length. Immutable once built;
 * threads share one. */
#ifndef TUPE_WORDPIECE_H
#define TUPE_WORDPIECE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/vocab.h"

typedef struct tupe_wordpiece tupe_wordpiece;

/* Needs [UNK] in the vocabulary. prefix is the continuation prefix ("##"). */
int tupe_wordpiece_new(tupe_wordpiece **wp, const tupe_vocab *v, const char *prefix, tupe_err *e);
void tupe_wordpiece_free(tupe_wordpiece *wp);

/* Segment word[0..len) (nchars characters); writes the ids to out, which must have room for
 * len ids; returns how many (at least 1 for a non-empty word). *unk is set to 1 when the word
 * became [UNK]. */
size_t tupe_wordpiece_encode(const tupe_wordpiece *wp, const uint8_t *word, size_t len,
                             size_t nchars, size_t max_chars, uint32_t *out, int *unk);

#endif
