/* DeBERTa v2/v3 in the Hugging Face layout (transformers' DebertaV2ForMaskedLM / DebertaV2Model):
 * the part of hfbert.c's export and import that differs from BERT's.
 *
 * A tupe deberta model is exactly DebertaV2 with relative_attention, pos_att_type c2p|p2c,
 * share_att_key, norm_rel_ebd layer_norm, position_biased_input false, log buckets
 * (position_buckets > 0; our rel_pos_buckets) up to max_relative_positions (our max_rel_pos),
 * no convolution layer, embedding_size = hidden_size, and the legacy masked-LM head (BERT's).
 * Names: ours as BERT's (hfbert.h), under "deberta." instead of "bert.", with the attention's
 * query/key/value as query_proj/key_proj/value_proj; the relative table and its LayerNorm are
 * deberta.encoder.rel_embeddings.weight and deberta.encoder.LayerNorm.*. A checkpoint with the
 * newer head (legacy false: lm_predictions.lm_head.*) reads as the same function. */
#ifndef TUPE_HFDEBERTA_H
#define TUPE_HFDEBERTA_H

#include <jansson.h>
#include <stddef.h>

#include "base/error.h"
#include "model/config.h"

/* The DebertaV2 name of a tensor from its BERT spelling (tupe_hf_name's), rewritten in place. */
void tupe_hfdeb_name(char *hf, size_t cap);
/* A DebertaV2 checkpoint's tensor name in our BERT spelling (what tupe_hf_name gives), into out;
 * names of nothing we read (a classifier, mask_predictions) stay as they are. */
void tupe_hfdeb_to_bert(const char *name, char *out, size_t cap);
/* config.json's DeBERTa fields into c (position deberta, rel_pos_buckets, max_rel_pos), after
 * the BERT fields; what tupe cannot represent is TUPE_EDATA naming the field. */
int tupe_hfdeb_read_config(const json_t *j, const char *cfgpath, tupe_config *c, tupe_err *e);
/* The DeBERTa fields of an export's config.json. */
void tupe_hfdeb_write_config(json_t *j, const tupe_config *c);
/* The vocabulary of a DeBERTa directory: a WordPiece vocab.txt is read by tupe-tokenize; one
 * with only a SentencePiece model (spm.model, DeBERTa v3's) is TUPE_EDATA saying so. */
int tupe_hfdeb_check_vocab(const char *dir, tupe_err *e);

#endif
