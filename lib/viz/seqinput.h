/* Token sequences to look at through a model: sentences encoded with its vocabulary, framed as
 * tupe-glue frames a single sentence ([CLS] tokens [SEP], or <s> tokens </s> with a BPE
 * vocabulary), or sequences read from a shard directory (already framed and packed). */
#ifndef TUPE_SEQINPUT_H
#define TUPE_SEQINPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "text/vocab.h"

typedef struct tupe_seqs {
    size_t n;            /* sequences */
    int32_t *ids;        /* their ids, one sequence after the other */
    size_t *off;         /* [n] where each starts in ids */
    int32_t *len;        /* [n] */
    int maxlen;          /* the longest */
    size_t truncated;    /* sequences cut to max_len */
    size_t nids, cap_ids, cap_off, cap_len;
} tupe_seqs;

void tupe_seqs_free(tupe_seqs *s);

/* A tokenizer over a vocabulary (vocab.txt, or a BPE directory with codes and dict.txt). */
typedef struct tupe_textenc tupe_textenc;
int tupe_textenc_new(tupe_textenc **t, const char *vocab_path, int lowercase, tupe_err *e);
void tupe_textenc_free(tupe_textenc *t);
const tupe_vocab *tupe_textenc_vocab(const tupe_textenc *t);

/* One sentence as one sequence: [CLS] tokens [SEP], at most max_len ids (longer text loses its
 * last tokens; [SEP] stays). Text that is not UTF-8 is TUPE_EDATA ("the text: byte N: invalid
 * UTF-8"; a file's name and offset for tupe_seqs_add_lines), as in every program. */
int tupe_seqs_add_text(tupe_seqs *s, tupe_textenc *t, const char *text, size_t len, int max_len,
                       tupe_err *e);
/* Every line of a file ('-': standard input) that is not blank, one sequence each, until
 * max_seqs sequences are held (0: no limit). */
int tupe_seqs_add_lines(tupe_seqs *s, tupe_textenc *t, const char *path, int max_len,
                        size_t max_seqs, tupe_err *e);
/* Sequences of a shard directory in stored order, from its validation split (its training
 * split when it holds out none), cut to max_len ids, until max_seqs are held (0: all). The
 * directory's vocabulary size and hash go to *vocab_size and *vocab_hash. */
int tupe_seqs_add_shards(tupe_seqs *s, const char *dir, int max_len, size_t max_seqs,
                         uint32_t *vocab_size, uint64_t *vocab_hash, tupe_err *e);

#endif
