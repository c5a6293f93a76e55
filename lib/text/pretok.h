/* Normalization and pre-tokenization: text in, words out.
 *
 * TUPE_PRETOK_BERT is the `hf` profile: exactly what Hugging Face `tokenizers` does with
 * BertNormalizer(clean_text, handle_chinese_chars, strip_accents, lowercase) followed by
 * BertPreTokenizer:
 *   1. clean: drop NUL, U+FFFD and control characters (Cc, Cf, Co but tab, LF, CR); turn
 *      whitespace into spaces;
 *   2. put spaces around CJK ideographs (HF's ranges, U+2B920 typo included);
 *   3. strip accents: NFD (Unicode 9.0, canonical reordering included), then drop Mn;
 *   4. lowercase each character on its own (no final-sigma rule);
 *   5. split on whitespace, and make every punctuation character (ASCII symbols included)
 *      a word by itself.
 * The tables behind each step are in unicode.h.
 *
 * TUPE_PRETOK_WHITESPACE is for fastBPE-style models: words are the runs of characters
 * between ASCII spaces, tabs, CRs and LFs, optionally lowercased (same per-character rule).
 *
 * A tupe_pretok is immutable once made, so threads share one. */
#ifndef TUPE_PRETOK_H
#define TUPE_PRETOK_H

#include <stddef.h>
#include <stdint.h>

enum tupe_pretok_kind { TUPE_PRETOK_BERT = 0, TUPE_PRETOK_WHITESPACE = 1 };
/* What to do with bytes that are not UTF-8. */
enum tupe_invalid { TUPE_INVALID_ERROR = 0, TUPE_INVALID_REPLACE = 1, TUPE_INVALID_SKIP = 2 };

typedef struct tupe_pretok_opts {
    int kind;          /* enum tupe_pretok_kind */
    int lowercase;
    int strip_accents; /* BERT only */
    int invalid;       /* enum tupe_invalid; REPLACE gives U+FFFD (which BERT cleaning drops) */
} tupe_pretok_opts;

typedef struct tupe_pretok tupe_pretok;

typedef struct tupe_word {
    uint32_t off;    /* in tupe_words.buf */
    uint32_t len;    /* bytes */
    uint32_t nchars; /* characters */
} tupe_word;

/* A growing list of words. Reset with tupe_words_clear; free with tupe_words_free. */
typedef struct tupe_words {
    uint8_t *buf;
    size_t len, cap;
    tupe_word *w;
    size_t n, wcap;
} tupe_words;

tupe_pretok *tupe_pretok_new(const tupe_pretok_opts *o); /* NULL when out of memory */
void tupe_pretok_free(tupe_pretok *p);

/* Normalize and split text[0..len), appending words to out. Returns 0; -1 when the text is not
 * UTF-8 under TUPE_INVALID_ERROR (*bad_at: offset of the first offending byte; out is then as
 * it was on entry); -2 when out of memory. */
int tupe_pretok_run(const tupe_pretok *p, const char *text, size_t len, tupe_words *out,
                    size_t *bad_at);

/* The same result computed the plain way, one step after another over the whole text (the
 * fast path falls back to it for the rare text where canonical reordering matters; tests
 * compare the two). */
int tupe_pretok_run_reference(const tupe_pretok *p, const char *text, size_t len,
                              tupe_words *out, size_t *bad_at);

void tupe_words_clear(tupe_words *w);
void tupe_words_free(tupe_words *w);

#endif
