/* FLOPs per real token of a training step (flops.h). */
#include "model/flops.h"

double tupe_flops_matmul_params(const tupe_config *c)
{
    double d = c->hidden_size, F = c->intermediate_size;
    return c->num_layers * (4 * d * d + 2 * d * F);
}

double tupe_flops_per_token(const tupe_config *c, int T, double mask_frac)
{
    double d = c->hidden_size, V = c->vocab_size;
    return 6 * tupe_flops_matmul_params(c) + 12.0 * c->num_layers * d * T +
           6 * mask_frac * (d * d + d * V);
}
