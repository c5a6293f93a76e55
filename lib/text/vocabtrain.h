/* Vocabulary training: count words (in parallel, deterministically, within a memory budget),
 * then learn a WordPiece vocabulary or fastBPE codes.
 *
 * WordPiece, Hugging Face WordPieceTrainer semantics (BPE merges with a "##" prefix):
 *   ids: [PAD] [UNK] [CLS] [SEP] [MASK]; the alphabet (at most limit_alphabet characters, the
 *   most frequent) by code point; the "##" forms of the alphabet by code point; then the merges
 *   in the order learned, until vocab_size entries or the best pair is rarer than
 *   min_frequency. Where Hugging Face depends on hash-map order (the ids of "##" forms, ties
 *   in the alphabet limit), the order here is fixed, so the result is the same on every run.
 * BPE, fastBPE learnbpe semantics: words are split into characters with "</w>" on the last,
 *   `merges` merges are learned, and codes ("left right count") are written with a fairseq
 *   dict.txt of the pieces the codes give on the training words (most frequent first, ties by
 *   bytes; vocab_size entries with the 4 specials, padded to a multiple of 8 with
 *   madeupwordNNNN, as fairseq-preprocess --nwordssrc does). */
#ifndef TUPE_VOCABTRAIN_H
#define TUPE_VOCABTRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/corpus.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "text/wordcount.h"

/* The word-count table is kept under memory / TUPE_TRAIN_TABLE_SHARE: learning the merges
 * then needs a few times the table (on the test corpus the whole run peaked at 3.6 times it
 * for WordPiece and 6 times for BPE). */
#define TUPE_TRAIN_TABLE_SHARE 6
/* What a BPE vocabulary directory's .tupe-kind says (base/outdir.h). */
#define TUPE_BPE_KIND "BPE vocabulary"

typedef struct tupe_vocabtrain_opts {
    int kind;                /* TUPE_VOCAB_WORDPIECE or TUPE_VOCAB_BPE */
    size_t vocab_size;       /* entries, specials included (BPE: fairseq's nwords) */
    size_t merges;           /* BPE */
    uint64_t min_frequency;
    size_t limit_alphabet;   /* WordPiece; 0: no limit */
    uint64_t memory;         /* budget of training, in bytes (see TUPE_TRAIN_TABLE_SHARE) */
    int lowercase, strip_accents, invalid; /* as in tupe_tokenizer_opts */
    int docs, keep_title;
    int threads, quiet, verbose;
} tupe_vocabtrain_opts;

typedef struct tupe_vocabtrain_report {
    uint64_t words, distinct;  /* words counted, distinct words kept */
    uint64_t pruned_words;     /* words dropped by the memory rule */
    uint64_t prune_max;        /* the largest count dropped */
    size_t vocab_size, merges;
} tupe_vocabtrain_report;

/* Defaults: vocab_size 32768, merges 32640, min_frequency 2 (WordPiece, as Hugging Face's
 * BertWordPieceTokenizer.train) or 1 (BPE, as fastBPE), limit_alphabet 1000 (WordPiece),
 * memory 2 GiB, lowercase. */
void tupe_vocabtrain_defaults(tupe_vocabtrain_opts *o, int kind);

/* Everything: count, learn, write `out` (WordPiece: a vocab.txt, "-" for stdout; BPE: a
 * directory with codes and dict.txt, replaced atomically). */
int tupe_vocabtrain(tupe_corpus *c, const tupe_vocabtrain_opts *o, const char *out,
                    tupe_vocabtrain_report *r, tupe_err *e);

/* The steps. */
int tupe_vocabtrain_count(tupe_corpus *c, const tupe_vocabtrain_opts *o, tupe_wordcount *wc,
                          tupe_vocabtrain_report *r, tupe_err *e);
/* wc is emptied (its memory released) once the words have been taken from it. */
int tupe_vocabtrain_wordpiece(tupe_wordcount *wc, const tupe_vocabtrain_opts *o, tupe_vocab **v,
                              tupe_vocabtrain_report *r, tupe_err *e);
/* codes receives the text of the codes file. */
int tupe_vocabtrain_bpe(const tupe_wordcount *wc, const tupe_vocabtrain_opts *o, tupe_buf *codes,
                        tupe_vocab **dict, tupe_vocabtrain_report *r, tupe_err *e);

#endif
