/* The tokenizer: text to ids and back, for a WordPiece or a BPE vocabulary.
 *
 * Encoding a piece of text:
 *   1. (optional, --match-special) literal special tokens in the raw text ([CLS], [SEP], ...
 *      or <s>, </s>, ...) become their ids, as Hugging Face does with special added tokens:
 *      leftmost-longest matching before any normalization;
 *   2. the rest is normalized and split into words (pretok.h): the BERT `hf` profile for
 *      WordPiece, whitespace splitting for BPE;
 *   3. each word is segmented (wordpiece.h or bpe.h).
 * Encoding a chunk of a corpus frames documents (corpus.h) and writes token-stream records,
 * or text. A tupe_tokenizer is immutable once made; each thread has its own tupe_tokctx. */
#ifndef TUPE_TOKENIZER_H
#define TUPE_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/fileio.h"
#include "base/grow.h"
#include "text/bpe.h"
#include "text/corpus.h"
#include "text/pretok.h"
#include "text/tokstream.h"
#include "text/vocab.h"
#include "text/wordpiece.h"

typedef struct tupe_tokenizer_opts {
    int lowercase;
    int strip_accents;  /* WordPiece; -1: the same as lowercase (Hugging Face's default) */
    int invalid;        /* enum tupe_invalid */
    size_t max_chars;   /* WordPiece: longer words are [UNK] (Hugging Face: 100) */
    int match_special;  /* step 1 above */
} tupe_tokenizer_opts;

typedef struct tupe_tokenizer tupe_tokenizer;

/* For a BPE vocabulary, codes_path is its `codes` file. */
int tupe_tokenizer_new(tupe_tokenizer **t, const tupe_vocab *v, const char *codes_path,
                       const tupe_tokenizer_opts *o, tupe_err *e);
void tupe_tokenizer_free(tupe_tokenizer *t);

typedef struct tupe_tokstats {
    uint64_t docs, lines, bytes, words, tokens;
    uint64_t unk_tokens; /* ids that are <unk>/[UNK] */
    uint64_t unk_words;  /* words with at least one unknown piece */
    uint64_t ids;        /* ids written, separators included */
} tupe_tokstats;

typedef struct tupe_tokctx {
    tupe_words words;
    tupe_bpe_cache *cache;
    uint32_t *ids;       /* ids of the text encoded so far */
    size_t n, cap;
    uint32_t *scratch;   /* piece ends (BPE) */
    size_t scratch_cap;
    char *line;          /* unescaped WIKI lines */
    size_t line_cap;
    tupe_tokstats st;
} tupe_tokctx;

tupe_tokctx *tupe_tokctx_new(const tupe_tokenizer *t);
void tupe_tokctx_free(tupe_tokctx *c);

/* Encode text[0..len), appending to c->ids. 0; -1 when the text is not UTF-8 (and --invalid
 * is `error`; *bad_at is the offset of the first bad byte); -2 when out of memory. */
int tupe_tokenizer_encode(const tupe_tokenizer *t, tupe_tokctx *c, const char *text, size_t len,
                          size_t *bad_at);

/* ---- chunks of a corpus ------------------------------------------------------------------- */

enum tupe_enc_format { TUPE_ENC_BINARY = 0, TUPE_ENC_TEXT = 1, TUPE_ENC_TOKENS = 2 };

typedef struct tupe_encode_opts {
    int docs;        /* enum tupe_docs */
    int keep_title;  /* WIKI */
    int add_special; /* [CLS] ... [SEP] (<s> ... </s>) around every document */
    int line_sep;    /* [SEP] (</s>) after every line of a document */
    int format;      /* enum tupe_enc_format */
    size_t chunk;    /* bytes of text per chunk of work (0: 1 MiB) */
} tupe_encode_opts;


/* Encode the documents of a chunk and append their output to out: token-stream records (h
 * gives the id width), or one line per document (ids, or tokens, separated by spaces); the
 * parts of documents shared with other chunks go to pc (NULL: the chunk has none).
 * In BLANK and WIKI framing a document without tokens is left out; in LINE framing every
 * line gives a document, so that output line N belongs to input line N. Invalid UTF-8 is
 * reported as "member: byte N" (TUPE_EDATA). Counts go to c->st. */
/* The parts of a document that runs over several chunks (corpus.h): the lead piece continues
 * the document left open by the chunks before (and may close it), the trail piece starts the
 * one this chunk leaves open. The caller joins them in input order. */
typedef struct tupe_enc_pieces {
    tupe_u32vec lead, trail;
    int has_lead, lead_closes, has_trail;
    uint64_t lead_text, trail_text; /* ids that came from text, separators not counted */
} tupe_enc_pieces;

int tupe_encode_chunk(const tupe_tokenizer *t, tupe_tokctx *c, const tupe_encode_opts *o,
                      const tupe_tok_header *h, const tupe_chunk *ch, tupe_buf *out,
                      tupe_enc_pieces *pc, tupe_err *e);

/* Encode a whole corpus on `threads` threads (pipeline.h). The output of each chunk goes to
 * sink, on the calling thread and in input order, with the documents and ids it holds. The
 * totals of every counter are added to *st. */
typedef int (*tupe_encode_sink)(void *arg, const uint8_t *buf, size_t len, uint64_t docs,
                                uint64_t ids, tupe_err *e);
int tupe_encode_corpus(const tupe_tokenizer *t, tupe_corpus *c, const tupe_encode_opts *o,
                       const tupe_tok_header *h, int threads, tupe_encode_sink sink, void *arg,
                       tupe_tokstats *st, tupe_err *e);

/* ---- decoding ------------------------------------------------------------------------------ */

/* Append the text of ids to out: tokens separated by spaces, WordPiece "##" pieces joined to
 * the piece before (and, as Hugging Face's decoder does, no space before a token that starts
 * with . ? ! , or a clitic such as 's), BPE "@@" pieces joined to the piece after.
 * skip_special leaves out the special tokens. Ids must be < the vocabulary size. */
int tupe_decode_ids(const tupe_vocab *v, const uint32_t *ids, size_t n, int skip_special,
                    tupe_buf *out);

/* Decode one input to text, one line per document: a token stream (TUPE_DEC_BINARY; refused
 * if made with another vocabulary) or lines of ids separated by spaces (TUPE_DEC_TEXT).
 * TUPE_DEC_AUTO: a file's first bytes decide, stdin is a token stream. b is scratch. */
enum { TUPE_DEC_AUTO = -1, TUPE_DEC_BINARY = 0, TUPE_DEC_TEXT = 1 };
int tupe_decode_input(const tupe_vocab *v, const char *path, int format, int skip_special,
                      tupe_out *o, tupe_buf *b, tupe_err *e);

#endif
