/* The authors' TUPE checkpoints (fairseq, github.com/guolinke/TUPE) into tupe checkpoints.
 *
 * The input is the model state dict of the released .pt file saved as safetensors (the
 * script share/tupe/fairseq2safetensors.py does that with PyTorch; tupe reads no pickle).
 * Names (../shared/docs/formats.md §3.3), under decoder.sentence_encoder. (or encoder. in
 * later fairseq versions):
 *
 *   embed_tokens.weight [V, D]                 embeddings.word_embeddings.weight
 *   emb_layer_norm.*                           embeddings.LayerNorm.*
 *   pos.weight [P+1, D]                        position.embeddings.weight (same row layout:
 *                                              0 = θ1 vector, 1 = θ2 vector, k+1 = token k)
 *   pos_ln.*, pos_q_linear.*, pos_k_linear.*   position.LayerNorm.*, position.query.*, .key.*
 *   relative_attention_bias.weight [33, H]     position.relative_bias.weight (TUPE-R; absent:
 *                                              TUPE-A)
 *   layers.N.self_attn.in_proj_weight [3D, D]  rows [0, D) query, [D, 2D) key, [2D, 3D) value
 *   layers.N.self_attn.in_proj_bias [3D]       the same split
 *   layers.N.self_attn.out_proj.*              encoder.layer.N.attention.output.dense.*
 *   layers.N.self_attn_layer_norm.*            encoder.layer.N.attention.output.LayerNorm.*
 *   layers.N.fc1.*, fc2.*, final_layer_norm.*  intermediate.dense.*, output.dense.*,
 *                                              output.LayerNorm.*
 *   (decoder.)lm_head.dense.*, .layer_norm.*,  cls.predictions.transform.dense.*, .LayerNorm.*,
 *   .bias; .weight must equal embed_tokens     cls.predictions.bias
 *   classification_heads.NAME.dense.*,         classifier.dense.*, classifier.out_proj.*
 *   .out_proj.*
 *
 * Sizes come from the tensors (vocabulary, hidden, layers, FFN, positions); the number of
 * heads from the relative bias, else the option, else the file's "args" metadata, else 12. */
#ifndef TUPE_FAIRSEQ_H
#define TUPE_FAIRSEQ_H

#include <stdint.h>

#include "base/error.h"
#include "convert/import.h"

typedef struct tupe_fairseq_opts {
    int heads;               /* 0: as above */
    const char *head;        /* the classification head to take; NULL: the only one */
    uint64_t seed;           /* values of tensors the file does not give (none normally) */
    tupe_note_fn note;
    void *note_ctx;
} tupe_fairseq_opts;

int tupe_fairseq_import(const char *file, const char *ckpt, const tupe_fairseq_opts *o,
                        tupe_err *e);

#endif
