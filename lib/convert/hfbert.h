/* Hugging Face BERT directories: export of a tupe checkpoint that `transformers` loads as it
 * is, and import of such a directory (or of any BERT saved by transformers) into a tupe
 * checkpoint (man tupe-convert(1), "HUGGING FACE LAYOUT").
 *
 * A directory holds model.safetensors (or shards and model.safetensors.index.json),
 * config.json, vocab.txt, tokenizer_config.json and (WordPiece) tokenizer.json. Our parameter names are already BERT's
 * inside `bert.`; the differences are:
 *
 *   ours                              Hugging Face
 *   embeddings.* / encoder.*          bert.embeddings.* / bert.encoder.*
 *   cls.predictions.*                 cls.predictions.* (decoder.weight and decoder.bias are
 *                                     tied to the word embeddings and cls.predictions.bias:
 *                                     not written; checked equal when read)
 *   classifier.dense.*                bert.pooler.dense.*  (dense + tanh on token 0)
 *   classifier.out_proj.*             classifier.*
 *   position.embeddings.weight        bert.tupe.pos.weight          } only in model_type
 *   position.LayerNorm.*              bert.tupe.pos_ln.*            } "tupe": the variants a
 *   position.query.* / .key.*         bert.tupe.pos_q.* / pos_k.*   } stock BERT cannot
 *   position.relative_bias.weight     bert.tupe.rel_bias.weight     } compute
 *
 * BERT-A exports as model_type "bert" (BertForMaskedLM, or BertForSequenceClassification for
 * a model with a classification head); without token types it gets one all-zero
 * token_type_embeddings row (type_vocab_size 1), which adds nothing. Every other variant
 * exports as model_type "tupe" with share/tupe/hf/{configuration,modeling}_tupe.py copied
 * beside config.json and an auto_map naming them: transformers runs it with
 * trust_remote_code=True (AutoModel, AutoModelForMaskedLM,
 * AutoModelForSequenceClassification). A rope model exports as model_type "roformer"
 * (RoFormerForMaskedLM: the same names under "roformer.", RoFormer's sinusoidal table written;
 * a half-split model with its query and key rows permuted to RoFormer's interleaved pairs);
 * a rope base other than 10000, a rope classifier, ALiBi and NoPE are refused. A deberta model
 * exports as model_type "deberta-v2" (DebertaV2ForMaskedLM; hfdeberta.h) and imports back. Import reads
 * all three back (RoFormerForMaskedLM / RoFormerModel as rope, interleaved); a BERT's legacy LayerNorm.gamma/beta names,
 * F16/BF16 tensors, position_ids buffers and token types are handled as transformers does. */
#ifndef TUPE_HFBERT_H
#define TUPE_HFBERT_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "convert/import.h"
#include "model/config.h"
#include "text/vocab.h"

/* What an exported directory's .tupe-kind says (base/outdir.h). */
#define TUPE_HF_KIND "Hugging Face model"

/* Our parameter name -> the Hugging Face name. 0, or -1 for a name without a mapping. */
int tupe_hf_name(const char *ours, char *hf, size_t cap);

typedef struct tupe_hf_export_opts {
    const char *vocab;       /* vocab.txt or a BPE directory: must match the checkpoint */
    int dtype;               /* TUPE_F32, TUPE_BF16 or TUPE_F16 (rounded to nearest even) */
    int lowercase;           /* do_lower_case: 1, 0, or -1 = the checkpoint's (default 1) */
    tupe_note_fn note;
    void *note_ctx;
} tupe_hf_export_opts;

/* Write the directory `dir` (atomically: complete or not there) from the checkpoint `ckpt`;
 * an ELECTRA pair as convert/hfelectra.h's two directories. */
int tupe_hf_export(const char *ckpt, const char *dir, const tupe_hf_export_opts *o, tupe_err *e);

/* The pieces of an export that convert/hfelectra.c shares: a JSON file as transformers writes
 * them (sorted keys, 2-space indent), and the tokenizer files of vocabulary v in `dir`
 * (the casing: o->lowercase, else the training state's, else lower case). */
int tupe_hf_write_json(const char *path, const json_t *v, tupe_err *e);
/* config.json's fields of every BERT-like class (sizes, dropouts, LayerNorm, padding, dtype);
 * type_vocab_size 1 with zero_type_row (the all-zero row written for a model without types). */
void tupe_hf_config_fields(json_t *j, const tupe_config *c, const tupe_vocab *v, int dtype,
                           int zero_type_row);
/* model_type "tupe"'s fields beyond BERT's (the variant, untie_cls, attn_scale_factor, the
 * relative buckets, activation_dropout), and the remote code beside config.json
 * (configuration_tupe.py, modeling_tupe.py; with electra, modeling_tupe_electra.py). */
void tupe_hf_tupe_fields(json_t *j, const tupe_config *c);
int tupe_hf_write_code(const char *dir, int electra, tupe_err *e);
/* A config.json's configuration as import reads it (model_type bert, roformer or tupe; the
 * message names cfgpath). */
int tupe_hf_read_config(json_t *j, const char *cfgpath, tupe_config *c, tupe_err *e);
int tupe_hf_write_tokenizer(const char *dir, const tupe_vocab *v, const tupe_hf_export_opts *o,
                            const json_t *state, int max_position, int types, tupe_err *e);

typedef struct tupe_hf_import_opts {
    uint64_t seed;           /* initial values of a masked-LM head the directory lacks */
    tupe_note_fn note;
    void *note_ctx;
} tupe_hf_import_opts;

/* Read the Hugging Face directory `src` into the checkpoint directory `ckpt` (a directory
 * pair of convert/hfelectra.h as an ELECTRA pair). A directory with only pytorch_model.bin
 * is TUPE_ENOINPUT with the command that converts it. */
int tupe_hf_import(const char *src, const char *ckpt, const tupe_hf_import_opts *o, tupe_err *e);

#endif
