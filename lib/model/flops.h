/* The work of a training step, counted the way the field counts it for MFU (model FLOPs
 * utilization): the floating-point operations of the model's products per real token, padding
 * excluded, whatever a backend actually computes.
 *
 *   FLOPs per real token = 6 N + 12 L d T + 6 m (d^2 + d V)
 *
 * N = L (4 d^2 + 2 d F), the weights of the encoder's products (Q, K, V and output
 * projections, the two feed-forward products; forward, and twice as much backward: 6 per
 * weight); 12 L d T the attention's scores and context (Q K^T and P V, 2 d T each per token
 * and layer, forward and backward); 6 m (d^2 + d V) the masked-LM head (its transform and its
 * decoder), which runs only at the fraction m of tokens that are masked. bert-base with m =
 * 0.15: 588 MFLOP at T = 512, 545 at T = 128 (../shared/docs/gpu-performance.md). The
 * positional variants' own work (TUPE's correlation, the relative bias) is not counted: it is
 * what they cost, and MFU shows it. */
#ifndef TUPE_FLOPS_H
#define TUPE_FLOPS_H

#include "model/config.h"

/* N: the weights of the encoder's products, L (4 d^2 + 2 d F). */
double tupe_flops_matmul_params(const tupe_config *c);
/* FLOPs per real token of a training step at sequence length T (the padded length of the
 * batch), with the fraction mask_frac of tokens masked (0.15 in BERT's recipe). */
double tupe_flops_per_token(const tupe_config *c, int T, double mask_frac);

#endif
