/* The content-free positional terms of a model, computed from its parameters (formats.md
 * §4.3; tupe-spec §2-§4): what every layer adds to its attention scores whatever the input,
 * for the first n positions (n x n per head, row i = query, column j = key).
 *
 *   abs    TUPE-A, TUPE-R: the untied absolute correlation. With P' = LN_pos(pos[0..n]),
 *          Q = P' U_Q^T + b_Q, K = P' U_K^T + b_K and s = 1/sqrt(2d) (d = head size):
 *          A_h = s Q_h K_h^T ((n+1) x (n+1)), V_h[i,j] = A_h[i+1, j+1]; with the [CLS] reset
 *          (untie_cls, the paper's TUPE) column 0 is θ2_h = A_h[1,1] and row 0 is
 *          θ1_h = A_h[0,0] (so V_h[0,0] = θ1_h); tie-cls keeps A_h[i+1, j+1] everywhere.
 *          BERT-Ad: the position-position term of every layer's score,
 *          s (LN(p_i) U_Q^T + b_Q)_h . (LN(p_j) U_K^T + b_K)_h with s = 1/sqrt(4d) (table row k
 *          = token k); its word-position terms depend on the input and are not here.
 *   rel    TUPE-R, BERT-R: R_h[i,j] = rel_bias[bucket(i,j), h] with the model's bucket table
 *          (TUPE-R with the [CLS] reset: bucket 32 in column 0, then 16 in row 0).
 *          ALiBi: its fixed linear bias R_h[i,j] = -m_h |i - j| (posenc.h's slopes).
 *   bias   abs + rel: the whole additive term (the model's TUPE_PROBE_POS_BIAS).
 * BERT-A has none: its positions are added to the word embeddings before layer 1; nor have
 * RoPE, whose rotation acts on the content's queries and keys, and NoPE. */
#ifndef TUPE_POSCORR_H
#define TUPE_POSCORR_H

#include <stddef.h>

#include "base/error.h"
#include "model/config.h"
#include "viz/inspect.h"

typedef struct tupe_poscorr {
    int heads, n;
    float *abs;     /* [heads, n, n], or NULL when the variant has no absolute term */
    float *rel;     /* [heads, n, n], or NULL when it has no relative term */
    float *bias;    /* [heads, n, n]: abs + rel (a copy of the one that exists) */
} tupe_poscorr;

/* Whether a variant has each term. */
static inline int tupe_poscorr_has_abs(const tupe_config *c) { return tupe_cfg_pos_proj(c); }
static inline int tupe_poscorr_has_rel(const tupe_config *c)
{
    return (tupe_cfg_terms(c) & (TUPE_PE_REL_BUCKET | TUPE_PE_LINEAR_BIAS)) != 0;
}

/* The terms for positions 0..n-1 (1 <= n <= max_position_embeddings). BERT-A: TUPE_EUSAGE. */
int tupe_poscorr_compute(tupe_inspect *in, int n, tupe_poscorr *pc, tupe_err *e);
void tupe_poscorr_free(tupe_poscorr *pc);

/* out[r] = softmax(in[r]) over each of `rows` rows of `cols` values (computed in double). */
void tupe_softmax_rows(const float *in, float *out, size_t rows, int cols);

#endif
