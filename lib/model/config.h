/* Model configuration: the JSON of the model contract (Hugging Face-like field names), the
 * presets in share/tupe/models/, and the questions every other module asks of it (which
 * positional encoding, which tensors exist, how big the position table is).
 *
 * A configuration file is a JSON object; unknown fields are refused (a typo must not silently
 * fall back to a default), missing fields take the `bert-base` defaults. */
#ifndef TUPE_CONFIG_H
#define TUPE_CONFIG_H

#include <stddef.h>

#include "base/error.h"

/* The positional encodings: the paper's variants (spec §2), then later ones
 * (../shared/docs/positional-encodings.md). Each is a composition of the terms below. */
enum tupe_position {
    TUPE_POS_BERT_A = 0,  /* absolute position added to the input */
    TUPE_POS_BERT_R,      /* input as BERT-A plus a T5 relative bias */
    TUPE_POS_BERT_AD,     /* positions projected separately, added into Q and K of every layer */
    TUPE_POS_TUPE_A,      /* untied absolute correlation, [CLS] reset unless untie_cls=false */
    TUPE_POS_TUPE_R,      /* TUPE-A plus the relative bias with the two [CLS] buckets */
    TUPE_POS_ROPE,        /* rotary: Q and K rotated by their position (RoFormer) */
    TUPE_POS_ALIBI,       /* symmetric linear bias -m_h |i - j| (MosaicBERT, JinaBERT) */
    TUPE_POS_NOPE,        /* no positional information at all: the lower bound */
    TUPE_POS_DEBERTA,     /* DeBERTa v2/v3's disentangled attention (c2p + p2c, log buckets) */
    TUPE_POS_COUNT
};

/* The positional terms a variant is made of (model/posenc.c computes each in one place). */
enum tupe_pe_term {
    TUPE_PE_ABS_INPUT = 1 << 0,   /* a learned P[k] added to the input embedding */
    TUPE_PE_ABS_QK = 1 << 1,      /* LN(P) U^Q, LN(P) U^K added into every layer's Q and K */
    TUPE_PE_UNTIED_ABS = 1 << 2,  /* (LN(P) U^Q)(LN(P) U^K)^T as a bias, [CLS] reset (TUPE) */
    TUPE_PE_REL_BUCKET = 1 << 3,  /* a learned bias per head and T5 bucket of j - i */
    TUPE_PE_LINEAR_BIAS = 1 << 4, /* the fixed bias -m_h |i - j| (ALiBi) */
    TUPE_PE_ROTATION = 1 << 5,    /* Q and K rotated by angles proportional to the position */
    TUPE_PE_DISENTANGLED = 1 << 6 /* DeBERTa's content-to-position and position-to-content
                                     scores against one shared relative table (per sequence) */
};

/* RoPE's two layouts of the rotated pairs within a head of d columns. They compute the same
 * function only with the query and key columns (and biases) permuted. */
enum tupe_rope_layout {
    TUPE_ROPE_INTERLEAVED = 0,    /* pairs (x_2t, x_2t+1): RoFormer, GPT-J */
    TUPE_ROPE_HALF                /* pairs (x_t, x_t+d/2): GPT-NeoX, Llama, ModernBERT */
};

typedef struct tupe_config {
    int position;              /* enum tupe_position */
    int untie_cls;             /* TUPE variants: 1 = [CLS] reset (the paper's TUPE), 0 = tie-cls */
    int vocab_size;            /* 0 in presets: set from the vocabulary before building a model */
    int hidden_size;
    int num_layers;
    int num_heads;
    int intermediate_size;
    int max_position;          /* max_position_embeddings */
    int type_vocab_size;       /* 0 = no token-type embedding */
    double hidden_dropout;
    double attention_dropout;
    double activation_dropout;
    double classifier_dropout;
    double layer_norm_eps;
    double initializer_range;
    int rel_pos_buckets;       /* buckets of the T5 table (both directions together); deberta:
                                  DeBERTa's position_buckets k (a table of 2k rows, |i-j| up
                                  to k/2 exact) */
    int max_rel_pos;           /* distance at which the log buckets end (deberta: DeBERTa's
                                  max_relative_positions) */
    int num_labels;            /* 0 = masked-LM head; 1 = regression head; >= 2 = classes */
    double rope_base;          /* RoPE: angle of pair t is position x rope_base^(-2t/d) */
    int rope_layout;           /* RoPE: enum tupe_rope_layout */
    int embedding_size;        /* width E of the word, position and token-type tables and their
                                  LayerNorm; 0 = hidden_size. E != hidden_size adds the
                                  projection embeddings_project (ELECTRA's) */
    double generator_hidden_size; /* > 0: an ELECTRA pair (model/electra.h): this configuration
                                  is the discriminator's, the generator's width is this fraction
                                  of hidden_size (ELECTRA's name and meaning); 0: one network */
    int rtd_head;              /* not in the JSON: the replaced-token head instead of the MLM
                                  head (the discriminator inside an ELECTRA pair) */
} tupe_config;

/* The bert-base preset with the tupe-r variant (the defaults of missing JSON fields). */
void tupe_config_default(tupe_config *c);

/* Parse a JSON object. `name` is used in messages ("name:line:col: ..."). */
int tupe_config_parse(tupe_config *c, const char *json, size_t len, const char *name, tupe_err *e);
/* A preset name (tiny, small, bert-base, bert-large) or a path to a JSON file. Presets are read
 * from share/tupe/models/ beside the running program (PREFIX/share/tupe/models when installed,
 * the source tree when run from the build directory). */
int tupe_config_load(tupe_config *c, const char *name_or_path, tupe_err *e);
/* Where a preset file lives: the first existing candidate is written to dst. 0, or -1 when
 * no candidate exists (dst then holds the last one tried). */
int tupe_config_preset_path(const char *name, char *dst, size_t cap);
/* The same for any installed file: share/tupe/REL (e.g. "hf/modeling_tupe.py"). */
int tupe_share_path(const char *rel, char *dst, size_t cap);
/* The configuration as JSON (pretty when indent > 0, compact otherwise). malloc'd; NULL only
 * when out of memory. Parsing it back gives the same configuration. */
char *tupe_config_json(const tupe_config *c, int indent);
/* Consistency (head size divides hidden size, probabilities in [0, 1), ...). With
 * need_vocab, vocab_size must be set (> 0): required before building a model. */
int tupe_config_check(const tupe_config *c, int need_vocab, tupe_err *e);
/* 1 when every field that shapes the parameters or the function they compute is equal
 * (dropouts, initializer_range and num_labels may differ); otherwise 0 with the name of the
 * first differing field in `field`. */
int tupe_config_same_encoder(const tupe_config *a, const tupe_config *b, char *field, size_t cap);

const char *tupe_position_name(int position);
int tupe_position_parse(const char *name);   /* -1 if unknown */

/* The terms of a variant (enum tupe_pe_term). */
unsigned tupe_cfg_terms(const tupe_config *c);
/* The width of the embedding tables (E). */
static inline int tupe_cfg_emb(const tupe_config *c)
{
    return c->embedding_size > 0 ? c->embedding_size : c->hidden_size;
}
/* An ELECTRA generator + discriminator pair (model/electra.h). */
static inline int tupe_cfg_pair(const tupe_config *c) { return c->generator_hidden_size > 0; }

/* What a variant has. */
static inline int tupe_cfg_abs_input(const tupe_config *c)  /* P[k] added to the input */
{
    return (tupe_cfg_terms(c) & TUPE_PE_ABS_INPUT) != 0;
}
static inline int tupe_cfg_pos_proj(const tupe_config *c)   /* position table + LN + U^Q, U^K */
{
    return (tupe_cfg_terms(c) & (TUPE_PE_ABS_QK | TUPE_PE_UNTIED_ABS)) != 0;
}
static inline int tupe_cfg_tupe(const tupe_config *c)
{
    return (tupe_cfg_terms(c) & TUPE_PE_UNTIED_ABS) != 0;
}
static inline int tupe_cfg_rel(const tupe_config *c)
{
    return (tupe_cfg_terms(c) & TUPE_PE_REL_BUCKET) != 0;
}
static inline int tupe_cfg_rope(const tupe_config *c)
{
    return (tupe_cfg_terms(c) & TUPE_PE_ROTATION) != 0;
}
static inline int tupe_cfg_deberta(const tupe_config *c)
{
    return (tupe_cfg_terms(c) & TUPE_PE_DISENTANGLED) != 0;
}
/* A learned table of positions exists (so no position past max_position_embeddings). */
static inline int tupe_cfg_pos_table(const tupe_config *c)
{
    return tupe_cfg_abs_input(c) || tupe_cfg_pos_proj(c);
}
/* TUPE's [CLS] reset is on. */
static inline int tupe_cfg_reset(const tupe_config *c) { return tupe_cfg_tupe(c) && c->untie_cls; }
/* Rows of the relative-bias table: 33 for TUPE-R (two [CLS] buckets, spec §4), 32 for BERT-R. */
static inline int tupe_cfg_rel_rows(const tupe_config *c)
{
    return c->rel_pos_buckets + (c->position == TUPE_POS_TUPE_R ? 1 : 0);
}
/* Rows of the position table: P+1 for TUPE (row 0 = p_θ1, row 1 = p_θ2, row k+1 = token k),
 * P otherwise (row k = token k). */
static inline int tupe_cfg_pos_rows(const tupe_config *c)
{
    return c->max_position + (tupe_cfg_tupe(c) ? 1 : 0);
}
/* A per-head additive bias [H, T, T] exists (learned or fixed). */
static inline int tupe_cfg_has_bias(const tupe_config *c)
{
    return (tupe_cfg_terms(c) &
            (TUPE_PE_UNTIED_ABS | TUPE_PE_REL_BUCKET | TUPE_PE_LINEAR_BIAS)) != 0;
}
/* That bias has parameters (its gradient is needed). */
static inline int tupe_cfg_learned_bias(const tupe_config *c)
{
    return (tupe_cfg_terms(c) & (TUPE_PE_UNTIED_ABS | TUPE_PE_REL_BUCKET)) != 0;
}
/* Scale of the content scores: 1/sqrt(2d) for TUPE, 1/sqrt(4d) for BERT-Ad, 1/sqrt(3d) for
 * DeBERTa (its code's scale_factor 1 + #{c2p, p2c}), 1/sqrt(d) else. */
double tupe_cfg_score_scale(const tupe_config *c);

#endif
