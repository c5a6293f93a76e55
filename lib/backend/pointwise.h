/* Per-element math of the model, shared by the CPU backend (gcc) and the CUDA kernels (nvcc):
 * exp, erf, the erf form of GELU and its derivative, the dropout decisions drawn from Philox,
 * and the AdamW update of one element. Float (_f) and double (_d) forms; the double ones use
 * libm and serve the double-precision backend that the gradient checks run on. */
#ifndef TUPE_POINTWISE_H
#define TUPE_POINTWISE_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#include "base/dtype.h"
#include "base/hd.h"
#include "base/philox.h"

/* ---- exp and erf from +, *, comparisons and bit moves only ----------------------------------
 * so that loops over them vectorize on the CPU (libm's calls do not) and both backends round
 * alike. tupe_expf: Cephes' range reduction and polynomial, within 2 ulp; 0 below -87.3.
 * tupe_erff: Abramowitz & Stegun 7.1.26 (as PyTorch's vectorized CPU erf): |error| < 1.5e-7 in exact
 * arithmetic, < 5e-7 in float; GELU built on it is within 2e-7 max(1, |x|) of the exact one. */

TUPE_HD float tupe_expf(float x)
{
    const float lo = -87.3365447505531f, hi = 88.3762626647949f;
    float xc = x < lo ? lo : (x > hi ? hi : (x == x ? x : 0.0f)); /* NaN: kept apart below */
    /* n = round(x / ln 2): adding and removing 1.5 * 2^23 rounds to the nearest integer */
    float n = (xc * 1.44269504088896341f + 12582912.0f) - 12582912.0f;
    float r = xc - n * 0.693359375f;
    r = r + n * 2.12194440e-4f;
    float y = 1.9875691500e-4f;
    y = y * r + 1.3981999507e-3f;
    y = y * r + 8.3334519073e-3f;
    y = y * r + 4.1665795894e-2f;
    y = y * r + 1.6666665459e-1f;
    y = y * r + 5.0000001201e-1f;
    y = y * r * r + r + 1.0f;
    uint32_t e = (uint32_t)((int32_t)n + 127) << 23;
    float s;
    memcpy(&s, &e, 4);
    return x < lo ? 0.0f : (x == x ? y * s : x);
}

/* erf(x), and exp(-x^2) in *e (which GELU's gradient needs as well). */
TUPE_HD float tupe_erf_e(float x, float *e)
{
    float a = x < 0 ? -x : x;
    float t = 1.0f / (1.0f + 0.3275911f * a);
    float y = ((((1.061405429f * t - 1.453152027f) * t + 1.421413741f) * t - 0.284496736f) * t +
               0.254829592f) * t;
    *e = tupe_expf(-a * a);
    float r = 1.0f - y * *e;
    return x < 0 ? -r : r;
}

TUPE_HD float tupe_erff(float x)
{
    float e;
    return tupe_erf_e(x, &e);
}

/* ---- GELU, exact (erf) form as fairseq and PyTorch compute it ----------------------------
 * GELU(x) = x Phi(x), GELU'(x) = Phi(x) + x phi(x). The _fg forms give both from one erf, the
 * density phi(x) = exp(-x^2/2) / sqrt(2 pi) from the exponential inside that erf, with the same
 * value as the plain form (the backward recomputes the activation). */

TUPE_HD float tupe_gelu_f(float x)
{
    return x * (0.5f * (1.0f + tupe_erff(x * 0.70710678118654752440f)));
}
TUPE_HD double tupe_gelu_d(double x) { return x * (0.5 * (1.0 + erf(x * 0.70710678118654752440))); }

TUPE_HD float tupe_gelu_fg_f(float x, float *grad)
{
    float e, cdf = 0.5f * (1.0f + tupe_erf_e(x * 0.70710678118654752440f, &e));
    float pdf = 0.39894228040143267794f * e;
    *grad = cdf + x * pdf;
    return x * cdf;
}
TUPE_HD double tupe_gelu_fg_d(double x, double *grad)
{
    double cdf = 0.5 * (1.0 + erf(x * 0.70710678118654752440));
    double pdf = 0.39894228040143267794 * exp(-0.5 * x * x);
    *grad = cdf + x * pdf;
    return x * cdf;
}

TUPE_HD float tupe_gelu_grad_f(float x)
{
    float g;
    (void)tupe_gelu_fg_f(x, &g);
    return g;
}
TUPE_HD double tupe_gelu_grad_d(double x)
{
    double g;
    (void)tupe_gelu_fg_d(x, &g);
    return g;
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

/* One Philox4x32 round on (c0, c1, c2, c3) with key (k0, k1). */
#define TUPE_PHILOX_ROUND(k0, k1) \
    do { \
        uint64_t p0_ = (uint64_t)0xD2511F53u * c0, p1_ = (uint64_t)0xCD9E8D57u * c2; \
        uint32_t n0_ = (uint32_t)(p1_ >> 32) ^ c1 ^ (k0), n2_ = (uint32_t)(p0_ >> 32) ^ c3 ^ (k1); \
        c1 = (uint32_t)p1_; \
        c3 = (uint32_t)p0_; \
        c0 = n0_; \
        c2 = n2_; \
    } while (0)

/* Keep bits of elements 8*block .. 8*block+7 (bit k = element 8*block + k): the block of
 * tupe_philox_block(seed, block >> 32, step, site << 8 | TUPE_RNG_DROPOUT, block), written out
 * without loops so that a loop over blocks vectorizes (the unit tests check it is the same). */
TUPE_HD uint32_t tupe_dropout_bits8(uint64_t seed, uint32_t step, uint32_t site, uint64_t block,
                                    uint32_t thr)
{
    uint32_t c0 = (uint32_t)block, c1 = (uint32_t)(block >> 32), c2 = step;
    uint32_t c3 = (site << 8) | (uint32_t)TUPE_RNG_DROPOUT;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    const uint32_t w0 = 0x9E3779B9u, w1 = 0xBB67AE85u;
    TUPE_PHILOX_ROUND(k0, k1);
    TUPE_PHILOX_ROUND(k0 + w0, k1 + w1);
    TUPE_PHILOX_ROUND(k0 + 2u * w0, k1 + 2u * w1);
    TUPE_PHILOX_ROUND(k0 + 3u * w0, k1 + 3u * w1);
    TUPE_PHILOX_ROUND(k0 + 4u * w0, k1 + 4u * w1);
    TUPE_PHILOX_ROUND(k0 + 5u * w0, k1 + 5u * w1);
    TUPE_PHILOX_ROUND(k0 + 6u * w0, k1 + 6u * w1);
    TUPE_PHILOX_ROUND(k0 + 7u * w0, k1 + 7u * w1);
    TUPE_PHILOX_ROUND(k0 + 8u * w0, k1 + 8u * w1);
    TUPE_PHILOX_ROUND(k0 + 9u * w0, k1 + 9u * w1);
    return (uint32_t)((c0 & 0xffffu) >= thr) | (uint32_t)((c0 >> 16) >= thr) << 1 |
           (uint32_t)((c1 & 0xffffu) >= thr) << 2 | (uint32_t)((c1 >> 16) >= thr) << 3 |
           (uint32_t)((c2 & 0xffffu) >= thr) << 4 | (uint32_t)((c2 >> 16) >= thr) << 5 |
           (uint32_t)((c3 & 0xffffu) >= thr) << 6 | (uint32_t)((c3 >> 16) >= thr) << 7;
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
    double clip;        /* where the factor is the device's (backend.h's adamw with a sum of */
    int clip_tf;        /* squares): tupe_clip_scale's clip and rule */
    /* A step's parameter block (backend.h, TUPE_PAR_*) or NULL: a device backend then takes
     * lr and step_size from it, times sc (the tensors' scale: lr = block lr x sc), the same
     * doubles as the two above. */
    const struct tupe_dev *par;
    double sc;
} tupe_adamw_args;

/* The clipping factor of a gradient of global norm `norm` for the threshold clip (0: none):
 * fairseq's min(1, clip / (norm + 1e-6)), or TensorFlow's clip / max(norm, clip) (tf, the
 * ELECTRA recipe); 1 for a norm that is not finite. In double, the same on host and device. */
TUPE_HD double tupe_clip_scale(double norm, double clip, int tf)
{
    if (!(clip > 0) || !isfinite(norm))
        return 1.0;
    return tf ? clip / fmax(norm, clip) : fmin(1.0, clip / (norm + 1e-6));
}

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

/* ---- the fixed-order sum of partial gradients -------------------------------------------
 * Leaves j = 0..n-1 (micro-batches, or ranks) are summed by the tree T(c, m) = T(c, 2m) +
 * T(c + m, 2m) over the leaves j = c (mod m), a lone leaf being itself: for n = 4,
 * (v0 + v2) + (v1 + v3). Rank r of W (W a power of two) holding leaves j = r (mod W) holds a
 * subtree, and the ranks' subtrees combine by the same tree over r: so W ranks summing their
 * leaves, then their sums, get the bits of one process summing all. In place over v[0..n),
 * the result in v[0]; with bf16, each sum rounded to bf16 (as stored in a bf16 buffer). */
TUPE_HD float tupe_tree_sum_f(float *v, int n, int bf16)
{
    int m = 1;
    while (m < n)
        m <<= 1;
    for (m >>= 1; m >= 1; m >>= 1)
        for (int c = 0; c < m && c + m < n; c++) {
            float s = v[c] + v[c + m];
            v[c] = bf16 ? tupe_bf16_to_f32(tupe_f32_to_bf16(s)) : s;
        }
    return v[0];
}

/* The same tree over doubles (the losses of the micro-batches, on the host). */
TUPE_HD double tupe_tree_sum_d(double *v, int n)
{
    int m = 1;
    while (m < n)
        m <<= 1;
    for (m >>= 1; m >= 1; m >>= 1)
        for (int c = 0; c < m && c + m < n; c++)
            v[c] = v[c] + v[c + m];
    return n > 0 ? v[0] : 0.0;
}

#endif
