/* Hugging Face ELECTRA: an ELECTRA pair (model/electra.h) as the two directories transformers
 * loads as they are, and back (tupe-convert(1), "HUGGING FACE LAYOUT"; electra.md section 4).
 *
 * An export directory of a pair holds
 *
 *   discriminator/   ElectraForPreTraining (ElectraModel, AutoModelForSequenceClassification
 *                    load it too): the shared tables, embeddings_project where the widths
 *                    differ, the encoder, discriminator_predictions.{dense,dense_prediction}
 *   generator/       ElectraForMaskedLM: its own copy of the shared tables (the hub's
 *                    google/electra-*-generator layout), its projection and encoder,
 *                    generator_predictions.{dense,LayerNorm}, generator_lm_head.bias (the
 *                    weight is the word table, tied)
 *
 * each with config.json (model_type "electra") and the tokenizer files. Names:
 *
 *   ours                                   Hugging Face (directory)
 *   embeddings.*                           electra.embeddings.* (both)
 *   embeddings_project.* / encoder.*       electra.embeddings_project.* / electra.encoder.* (D)
 *   discriminator_predictions.*            discriminator_predictions.* (D)
 *   generator.embeddings_project.*         electra.embeddings_project.* (G)
 *   generator.encoder.*                    electra.encoder.* (G)
 *   generator_predictions.*, generator_lm_head.bias    the same (G)
 *
 * A BERT-A pair is transformers' own ELECTRA (model_type "electra"). The TUPE paper's other
 * variants (BERT-R, BERT-Ad, TUPE-A, TUPE-R) are the remote-code model (model_type "tupe",
 * share/tupe/hf/modeling_tupe_electra.py beside modeling_tupe.py): tupe's names under
 * "bert." as convert/hfbert.h has them, bert.embeddings_project.*, the discriminator's
 * discriminator_predictions.* and the generator's head as cls.predictions.transform.* and
 * cls.predictions.bias (TupeElectraForPreTraining, TupeElectraForMaskedLM). RoPE, ALiBi and
 * NoPE pairs are refused. Without token types an "electra" directory gets one all-zero
 * token-type row, which adds nothing. Import reads such a directory pair back into the pair
 * bit for bit: the generator's copy of the shared tables must equal the discriminator's, and
 * its configuration must be the one tupe derives from the discriminator's (depth, width / 64
 * heads, FFN 4 x width, the same encoding). */
#ifndef TUPE_HFELECTRA_H
#define TUPE_HFELECTRA_H

#include <jansson.h>

#include "base/error.h"
#include "convert/hfbert.h"
#include "convert/import.h"
#include "model/config.h"
#include "text/vocab.h"

#define TUPE_HFELECTRA_DISC "discriminator"
#define TUPE_HFELECTRA_GEN "generator"

/* Fills the (temporary) export directory `dir` from the pair checkpoint s of configuration
 * pair (tupe_hf_export's checks done: vocabulary, position BERT-A). */
int tupe_hfelectra_write(const char *dir, tupe_tset *s, const tupe_config *pair,
                         const tupe_vocab *v, const json_t *state, const tupe_hf_export_opts *o,
                         tupe_err *e);

/* 1 when `src` is a directory pair as written above (discriminator/config.json there). */
int tupe_hfelectra_is_pair(const char *src);

/* Reads the directory pair `src` into the pair checkpoint `ckpt`. */
int tupe_hfelectra_import(const char *src, const char *ckpt, const tupe_hf_import_opts *o,
                          tupe_err *e);

#endif
