/* The word/position decomposition of the first layer's attention scores of an absolute-position
 * model (BERT-A, BERT-R; a BERT imported by tupe-convert), the paper's Figure 2 (formats.md
 * §4.3). For head h with W_Q, W_K restricted to the head's rows, d the head size and
 * s = 1/sqrt(d), token i with word row w_i = E[id_i] and position row p_i = P[i]:
 *
 *   paper  (Eq. 6: raw embedding rows; no LayerNorm, token type or biases)
 *            ww = s (W_Q w_i).(W_K w_j)   wp = s (W_Q w_i).(W_K p_j)
 *            pw = s (W_Q p_i).(W_K w_j)   pp = s (W_Q p_i).(W_K p_j)
 *   exact  the embedding LayerNorm split exactly per token: x_i = w_i + p_i + t_i (t_i the
 *          token-type row 0, when the model has token types), sigma_i = sqrt(var(x_i) + eps),
 *            w^_i = g * (w_i - mean(w_i)) / sigma_i      p^_i likewise
 *            c^_i = g * (t_i - mean(t_i)) / sigma_i + b  (so that LN(x_i) = w^_i + p^_i + c^_i)
 *          and with q^w_i = W_Q w^_i, q^p_i = W_Q p^_i, q^c_i = W_Q c^_i + b_Q (k likewise):
 *            ww = s q^w_i.k^w_j  wp = s q^w_i.k^p_j  pw = s q^p_i.k^w_j  pp = s q^p_i.k^p_j
 *            rest = s (q^w_i + q^p_i).k^c_j + s q^c_i.(k^w_j + k^p_j + k^c_j) [+ R_h[i,j], BERT-R]
 *          so that ww + wp + pw + pp + rest is exactly the layer's pre-softmax score.
 *
 * Averaging over inputs aligns them by position: cell (i, j) is the mean over the inputs longer
 * than max(i, j) (padding never counts). */
#ifndef TUPE_DECOMP_H
#define TUPE_DECOMP_H

#include <stdint.h>

#include "base/error.h"
#include "viz/inspect.h"

enum tupe_decomp_mode { TUPE_DECOMP_PAPER = 0, TUPE_DECOMP_EXACT = 1 };
enum tupe_decomp_term { TUPE_TERM_WW = 0, TUPE_TERM_WP, TUPE_TERM_PW, TUPE_TERM_PP, TUPE_TERM_REST };

/* Terms of a mode: 4 (paper) or 5 (exact). */
static inline int tupe_decomp_nterms(int mode) { return mode == TUPE_DECOMP_EXACT ? 5 : 4; }
/* "ww", "wp", "pw", "pp", "rest" and "word-word", ..., "rest (type, biases)". */
const char *tupe_decomp_term_key(int term);
const char *tupe_decomp_term_name(int term);

typedef struct tupe_decomp tupe_decomp;

/* For inputs of up to n tokens (n <= max_position_embeddings). A model without position
 * embeddings in its input (TUPE, BERT-Ad) is refused with TUPE_EUSAGE. */
int tupe_decomp_new(tupe_decomp **d, tupe_inspect *in, int mode, int n, tupe_err *e);
void tupe_decomp_free(tupe_decomp *d);

/* The terms of one input ids[0..len) (1 <= len <= n, token type 0), not averaged:
 * out[K, H, len, len] with K = tupe_decomp_nterms(mode). */
int tupe_decomp_one(tupe_decomp *d, const int32_t *ids, int len, double *out, tupe_err *e);
/* Add one input to the averages. */
int tupe_decomp_add(tupe_decomp *d, const int32_t *ids, int len, tupe_err *e);
/* The averages, mean[K, H, n, n] (NaN where no input reached), and count[k] = inputs longer
 * than k, for k < n: the number of inputs behind cell (i, j) is count[max(i, j)]. */
void tupe_decomp_mean(const tupe_decomp *d, float *mean, int64_t *count);

#endif
