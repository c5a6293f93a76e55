/* Locality and symmetry of attention maps (tupe-attnviz attn): what RoPE's and DeBERTa's
 * content-dependent positional parts do to the probabilities, measured where no
 * content-free term can be drawn, and for every other encoding alike.
 *
 * For one map A [T, T] (row i = query i, rows sum to 1), each a mean over the T queries:
 *   distance  sum_j A_ij |i - j|: the expected distance attended to (uniform attention over
 *             the T keys gives (T^2 - 1) / (3T), tupe_attn_uniform_distance);
 *   local     sum_{|i - j| <= k} A_ij: the share of the mass within +-k of the query;
 *   forward   sum_{j > i} A_ij - sum_{j < i} A_ij: -1 all backward, +1 all forward, 0 balanced;
 * and over the whole map
 *   symmetry  <A, A^T> / <A, A> (Frobenius): 1 for a symmetric map, 0 when A and its
 *             transpose share no cell (attending only to the next token). */
#ifndef TUPE_ATTNSTATS_H
#define TUPE_ATTNSTATS_H

typedef struct tupe_attn_stats {
    double distance, local, forward, symmetry;
} tupe_attn_stats;

/* The measures of the map a [T, T] (float, row-major) with the window +-k. */
void tupe_attn_stats_of(const float *a, int T, int k, tupe_attn_stats *out);
/* distance of uniform attention over T keys. */
double tupe_attn_uniform_distance(int T);

#endif
