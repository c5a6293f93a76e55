/* Per-element math of the model, shared by the CPU backend (gcc) and the CUDA kernels (nvcc):
 * exact-erf GELU and its derivative, tanh's derivative, the dropout decisions drawn from
 * Philox, and the AdamW update of one element. Each comes in float (_f) and double (_d); the
 * double forms serve the double-precision backend that the gradient checks run on. */
#ifndef TUPE_POINTWISE_H
#define TUPE_POINTWISE_H

#include <math.h>
#include <stdint.h>

#include "hd.h"
#include "philox.h"

/* ---- GELU, exact (erf) form as fairseq and PyTorch compute it ---------------------------- */

TUPE_HD float tupe_gelu_f(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752440f)); }
TUPE_HD double tupe_gelu_d(double x) { return 0.5 * x * (1.0 + erf(x * 0.70710678118654752440)); }

/* d/dx GELU(x) = Phi(x) + x phi(x). */
TUPE_HD float tupe_gelu_grad_f(float x)
{
    float cdf = 0.5f * (1.0f + erff(x * 0.70710678118654752440f));
    float pdf = 0.39894228040143267794f * expf(-0.5f * x * x);
    return cdf + x * pdf;
}
TUPE_HD double tupe_gelu_grad_d(double x)
{
    double cdf = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
    double pdf = 0.39894228040143267794 * exp(-0.5 * x * x);
    return cdf + x * pdf;
}

/* ---- dropout ------------------------------------------------------------------------------
 * Every dropout site (a tensor of a layer) draws from its own Philox stream, keyed by the seed
 * and named by (training step, site); element i of the site's logical tensor takes the 16-bit
 * half (i % 8) of block i / 8. The logical tensor counts samples globally (the caller gives the
 * index of the batch's first sample), so the decisions do not depend on thread count, rank,
 * micro-batch split or device. An element is dropped when its 16-bit value is below
 * thr = round(p * 65536); kept values are scaled by 65536 / (65536 - thr), which keeps the
 * expectation exact. */

TUPE_HD uint32_t tupe_dropout_thr(double p)
{
    double t = p * 65536.0 + 0.5;
    return t <= 0 ? 0u : t >= 65535.0 ? 65535u : (uint32_t)t;
}

TUPE_HD double tupe_dropout_scale(uint32_t thr) { return 65536.0 / (65536.0 - (double)thr); }

/* Keep bits of elements 8*block .. 8*block+7 (bit k = element 8*block + k). */
TUPE_HD uint32_t tupe_dropout_bits8(uint64_t seed, uint32_t step, uint32_t site, uint64_t block,
                                    uint32_t thr)
{
    tupe_u32x4 r = tupe_philox_block(seed, (uint32_t)(block >> 32), step,
                                     (site << 8) | (uint32_t)TUPE_RNG_DROPOUT, (uint32_t)block);
    uint32_t bits = 0;
    for (int k = 0; k < 4; k++) {
        bits |= (uint32_t)((r.v[k] & 0xffffu) >= thr) << (2 * k);
        bits |= (uint32_t)((r.v[k] >> 16) >= thr) << (2 * k + 1);
    }
    return bits;
}

/* ---- AdamW (fairseq's Adam with decoupled decay; model contract §5) ------------------------
 * m <- b1 m + (1-b1) g;  v <- b2 v + (1-b2) g^2;  p <- p - lr*wd*p;  p <- p - step*m/(sqrt(v)+eps)
 * with g already multiplied by the clipping factor gscale. */

typedef struct tupe_adamw_args {
    double lr;          /* learning rate of this step (for the decay term) */
    double wd;          /* weight decay of this tensor (0 when excluded) */
    double beta1, beta2, eps;
    double step_size;   /* lr * sqrt(1 - beta2^t) / (1 - beta1^t) */
    double gscale;      /* gradient clipping factor, 1 when not clipped */
} tupe_adamw_args;

TUPE_HD void tupe_adamw_f(float *p, float *m, float *v, float g, float b1, float b2, float eps,
                          float decay, float step_size)
{
    float mm = b1 * *m + (1.0f - b1) * g;
    float vv = b2 * *v + (1.0f - b2) * g * g;
    *m = mm;
    *v = vv;
    float pp = *p;
    pp -= decay * pp;
    *p = pp - step_size * mm / (sqrtf(vv) + eps);
}

TUPE_HD void tupe_adamw_d(double *p, double *m, double *v, double g, double b1, double b2,
                          double eps, double decay, double step_size)
{
    double mm = b1 * *m + (1.0 - b1) * g;
    double vv = b2 * *v + (1.0 - b2) * g * g;
    *m = mm;
    *v = vv;
    double pp = *p;
    pp -= decay * pp;
    *p = pp - step_size * mm / (sqrt(vv) + eps);
}

#endif
