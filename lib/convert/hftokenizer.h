/* tokenizer.json, the Hugging Face `tokenizers` format, for a WordPiece vocabulary: the BERT
 * normalizer and pre-tokenizer, WordPiece with "##" and 100 characters per word, and the
 * [CLS] A [SEP] (B [SEP]) template tupe-glue frames sentences with. AutoTokenizer then gives
 * tupe-tokenize's ids (literal special tokens in the text matched, as with --match-special).
 *
 * A BPE vocabulary has none: the `tokenizers` BPE model keys its merges on vocabulary ids, so
 * every intermediate piece of every merge needs an id of its own, while a fairseq dict.txt
 * holds only the pieces the codes produced on the training words (the others become <unk>);
 * the ids could not be the same. */
#ifndef TUPE_HFTOKENIZER_H
#define TUPE_HFTOKENIZER_H

#include "base/error.h"
#include "text/vocab.h"

/* Write `path` (atomically). lowercase: the BERT normalizer's lowercase and accent stripping;
 * token_types: the second sentence of a pair gets type 1 (else 0, for a model without a
 * token-type embedding). TUPE_EUSAGE for a BPE vocabulary. */
int tupe_hf_tokenizer_write(const tupe_vocab *v, int lowercase, int token_types, const char *path,
                            tupe_err *e);

#endif
