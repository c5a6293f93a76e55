/* The positional terms of the encoder, in one place: every variant is a composition of the
 * terms of config.h (tupe_cfg_terms), and the model calls these functions at the same few
 * points whatever the variant is:
 *
 *   once per forward pass   tupe_posenc_fwd: what all layers share (TUPE's correlation, the
 *                           relative and linear biases into one [H,T,T] bias, BERT-Ad's
 *                           projections, RoPE's angles)
 *   in every layer          tupe_posenc_qk after the Q|K|V projection (BERT-Ad's positions
 *                           added, RoPE's rotation, DeBERTa's disentangled scores into a
 *                           per-sequence bias), tupe_posenc_bias for the attention
 *   backward, every layer   tupe_posenc_bias_layer before the attention's backward (the
 *                           layer's own bias again where it depends on content),
 *                           tupe_posenc_qk_bwd after it
 *   backward, once          tupe_posenc_bwd: the shared terms' gradients
 *
 * The absolute input term (BERT's P[k]) is part of the embedding operation (embed_fwd). */
#ifndef TUPE_POSENC_H
#define TUPE_POSENC_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "model/config.h"
#include "model/params.h"

/* How the model lends arena space: kind 'r' real, 'w' wide, 'i' int32 elements. */
typedef void (*tupe_posenc_plan_fn)(void *ctx, tupe_dev **p, size_t n, int kind);

/* RoPE at evaluation beyond the trained length (tupe_posenc_rope_scaling). */
enum tupe_rope_scaling {
    TUPE_ROPE_PLAIN = 0,  /* the trained angles */
    TUPE_ROPE_PI,         /* position interpolation: positions x 1/factor */
    TUPE_ROPE_NTK         /* NTK-aware: base x factor^(d/(d-2)) */
};

typedef struct tupe_posenc {
    tupe_config cfg;
    unsigned terms;
    int cap_seq;
    /* untied absolute terms (BERT-Ad, TUPE): the table's LN, its projections, the correlation */
    tupe_dev *p_y, *p_xh, *p_rs, *pq, *pk, *pA, *dA, *dpq, *dpk, *dpy;
    /* the additive bias [H,T,T] (wide) and its gradient accumulator (wide) */
    tupe_dev *bias, *G;
    tupe_dev *buckets;    /* int32 [cap_seq, cap_seq] T5 buckets */
    tupe_dev *rot;        /* RoPE: wide [cap_seq, d]: cos of every pair, then their sin */
    int table_T;          /* the T the fixed tables (ALiBi bias, RoPE angles) were made for */
    int scaling;          /* enum tupe_rope_scaling */
    double factor;
    /* DeBERTa: the W rows [lo, lo + W) of the relative table that T positions use, the row of
     * every (i, j) among them (int32 [T*T]), the content's scores against them ([H, B*T, W]),
     * each layer's projections of the table ([L, W, 2D]: its queries, then its keys) and their
     * gradient, the table after the layer's dropout and its gradient ([W, D]). The bias and G
     * are [B,H,T,T] (one per sequence). p_y, p_xh, p_rs, dpy hold the table's LayerNorm. */
    int cap_batch, dis_T, dis_lo, dis_W, cap_W;
    tupe_dev *dis_idx, *c2p, *p2c, *pqk, *dpqk, *rpd, *drpd;
} tupe_posenc;

/* Arena space for a capacity of cap_batch sequences of cap_seq positions. */
void tupe_posenc_plan(tupe_posenc *pe, const tupe_config *c, int cap_batch, int cap_seq,
                      tupe_posenc_plan_fn fn, void *ctx);
/* After the arena exists: the tables that depend on the capacity only. */
int tupe_posenc_setup(tupe_posenc *pe, tupe_backend *be, tupe_err *e);

/* RoPE's angles at evaluation: scaling (enum tupe_rope_scaling) with factor >= 1. Other
 * variants: TUPE_EUSAGE. */
int tupe_posenc_rope_scaling(tupe_posenc *pe, int scaling, double factor, tupe_err *e);

/* The forward pass's shared terms for sequences of T. params: the flat parameters. */
int tupe_posenc_fwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                    int T, tupe_err *e);
/* The bias the attention adds ([H,T,T], wide), or NULL; with a bias_bstride (attn_fwd's) of
 * tupe_posenc_bias_bstride: 0 when the sequences share it, H*T*T for DeBERTa's, which is the
 * last layer's that tupe_posenc_qk or tupe_posenc_bias_layer made. */
const tupe_dev *tupe_posenc_bias(const tupe_posenc *pe);
size_t tupe_posenc_bias_bstride(const tupe_posenc *pe, int T);
/* Layer l's Q|K|V ([B*T, 3D], after their biases) given its positions. y, params: the layout
 * and the flat parameters (DeBERTa projects the table with the layer's own W_q, W_k); drop:
 * the dropout of the relative table in this layer (DeBERTa's pos_dropout), or NULL. */
void tupe_posenc_qk(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                    int l, tupe_dev *qkv, int B, int T, const tupe_drop *drop);
/* Layer l's bias again from its qkv (DeBERTa's; nothing for the others): before the attention's
 * backward where the forward kept no probabilities, and for probes. */
void tupe_posenc_bias_layer(tupe_posenc *pe, tupe_backend *be, int l, const tupe_dev *qkv,
                            int B, int T);

/* Backward: begin (zero the accumulators), per layer with dqkv after the attention's backward,
 * then the shared terms into grads (the flat gradient buffer). */
void tupe_posenc_bwd_begin(tupe_posenc *pe, tupe_backend *be, int B, int T);
/* The accumulator ([H,T,T], wide) the attention's backward adds the bias gradient into, summed
 * over the batch (backend.h's attn_bwd G), or NULL where the bias has no gradient (none, ALiBi's
 * fixed slopes). */
tupe_dev *tupe_posenc_bias_acc(const tupe_posenc *pe);
/* Layer l's terms' backward: dqkv (+=) and, for DeBERTa, the layer's W_q, W_k gradients in
 * grads (+=); qkv and drop as the forward's. */
void tupe_posenc_qk_bwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y,
                        tupe_dev *params, tupe_dev *grads, int l, tupe_dev *dqkv,
                        const tupe_dev *qkv, int B, int T, const tupe_drop *drop);
void tupe_posenc_bwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                     tupe_dev *grads, int T);

/* The T5 relative-position bucket of key j for query i (spec §4; num_buckets covers both
 * directions), without the [CLS] overrides. */
int tupe_rel_bucket(int i, int j, int num_buckets, int max_distance);
/* The bucket table of a configuration for a T x T attention map (row-major): TUPE-R with the
 * [CLS] reset puts bucket 32 in column 0 and then 16 in row 0. */
void tupe_rel_buckets(const tupe_config *c, int T, int32_t *out);
/* ALiBi's slope of every head (Press et al.'s rule, for any head count): out[H]. */
void tupe_alibi_slopes(int H, double *out);
/* DeBERTa v2/v3's log bucket of the relative position r = i - j (make_log_bucket_position with
 * bucket_size k, max_position maxpos): r itself for |r| <= k/2, else the sign of r times
 * ceil(log(|r| / (k/2)) / log((maxpos - 1) / (k/2)) (k/2 - 1)) + k/2, in float as transformers
 * computes it. The row of the table is then clamp(bucket + k, 0, 2k - 1). */
int tupe_deberta_bucket(int r, int k, int maxpos);
/* RoPE's angle of pair t (0 <= t < d/2) at position p: p x base^(-2t/d). */
double tupe_rope_angle(double base, int d, int t, double p);

#endif
