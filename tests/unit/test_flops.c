/* FLOPs per real token (model/flops.h) against the figures the field's MFU uses for bert-base
 * (../shared/docs/gpu-performance.md: 588 MFLOP at T = 512 and 545 at T = 128 with 15% of the
 * tokens masked), term by term. */
#include "model/flops.h"
#include "unit.h"

static void bert_base(void)
{
    tupe_config c;
    tupe_err e;
    CHECK_INT(tupe_config_load(&c, "bert-base", &e), 0);
    c.vocab_size = 30522;
    /* 12 layers of 4 d^2 + 2 d F weights, d = 768, F = 3072 */
    CHECK_NEAR(tupe_flops_matmul_params(&c), 84934656, 0);
    /* 6 N = 509,607,936; 12 L d T = 56,623,104 (T = 512) or 14,155,776 (T = 128);
     * 6 m (d^2 + d V) = 0.9 x 24,030,720 = 21,627,648 */
    CHECK_NEAR(tupe_flops_per_token(&c, 512, 0.15), 587858688, 1e-3);
    CHECK_NEAR(tupe_flops_per_token(&c, 128, 0.15), 545391360, 1e-3);
    CHECK_NEAR(tupe_flops_per_token(&c, 512, 0.15) / 1e6, 588, 0.5);
    CHECK_NEAR(tupe_flops_per_token(&c, 128, 0.15) / 1e6, 545, 0.5);
    /* no masked token: no head */
    CHECK_NEAR(tupe_flops_per_token(&c, 128, 0), 509607936 + 14155776, 1e-3);
    /* the positional variant does not change the count */
    c.position = TUPE_POS_BERT_A;
    CHECK_NEAR(tupe_flops_per_token(&c, 512, 0.15), 587858688, 1e-3);
}

UNIT_MAIN(T(bert_base))
