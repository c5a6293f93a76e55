/* The per-element math shared with the GPU: the vectorizable exp and erf against libm, GELU
 * and its derivative against the double-precision forms, and the loop-free dropout Philox
 * against philox.h's generator. */
#include "backend/pointwise.h"
#include "base/philox.h"
#include "base/rng.h"
#include "unit.h"

static void expf_accuracy(void)
{
    double worst = 0;
    for (double x = -87.0; x <= 88.0; x += 0.001) {
        float f = (float)x;
        double want = exp((double)f), got = tupe_expf(f);
        double rel = fabs(got - want) / want;
        worst = rel > worst ? rel : worst;
    }
    CHECK_MSG(worst < 2.5e-7, "exp: worst relative error %.3g", worst); /* 2 ulp */
    CHECK(tupe_expf(-100.0f) == 0.0f);
    CHECK(tupe_expf(0.0f) == 1.0f);
    CHECK(isnan(tupe_expf(NAN)));
    CHECK(isinf(tupe_expf(INFINITY)) || tupe_expf(INFINITY) > 1e38f);
}

static void erf_and_gelu(void)
{
    double werf = 0, wg = 0, wgg = 0;
    for (double x = -12.0; x <= 12.0; x += 0.0005) {
        float f = (float)x;
        werf = fmax(werf, fabs((double)tupe_erff(f) - erf((double)f)));
        wg = fmax(wg, fabs((double)tupe_gelu_f(f) - tupe_gelu_d(f)) / fmax(1.0, fabs(x)));
        wgg = fmax(wgg, fabs((double)tupe_gelu_grad_f(f) - tupe_gelu_grad_d(f)));
    }
    CHECK_MSG(werf < 5e-7, "erf: worst absolute error %.3g", werf);
    CHECK_MSG(wg < 2e-7, "gelu: worst error %.3g", wg);
    CHECK_MSG(wgg < 3e-7, "gelu': worst error %.3g", wgg);
    CHECK_NEAR(tupe_gelu_d(1.0), 0.8413447460685429, 1e-15);
}

static void dropout_bits_are_philox(void)
{
    tupe_rng r;
    tupe_rng_init(&r, 5, 0, 0, TUPE_RNG_USER);
    for (int k = 0; k < 20000; k++) {
        uint64_t seed = tupe_rng_u64(&r), block = tupe_rng_u64(&r) >> (k % 40);
        uint32_t step = tupe_rng_u32(&r), site = tupe_rng_u32(&r) >> 8;
        uint32_t thr = tupe_rng_below(&r, 65536);
        tupe_u32x4 b = tupe_philox_block(seed, (uint32_t)(block >> 32), step,
                                         (site << 8) | TUPE_RNG_DROPOUT, (uint32_t)block);
        uint32_t want = 0;
        for (int i = 0; i < 4; i++) {
            want |= (uint32_t)((b.v[i] & 0xffff) >= thr) << (2 * i);
            want |= (uint32_t)((b.v[i] >> 16) >= thr) << (2 * i + 1);
        }
        uint32_t got = tupe_dropout_bits8(seed, step, site, block, thr);
        if (got != want) {
            CHECK_MSG(0, "block %llu: bits %02x, philox.h gives %02x", (unsigned long long)block,
                      got, want);
            break;
        }
    }
    CHECK_INT(tupe_dropout_thr(0.1), 6554);
    CHECK_INT(tupe_dropout_thr(0), 0);
    CHECK_NEAR(tupe_dropout_scale(6554), 65536.0 / (65536 - 6554), 1e-15);
}

static void adamw_element(void)
{
    float p = 0.5f, m = 0.1f, v = 0.01f;
    tupe_adamw_f(&p, &m, &v, 0.2f, 0.9f, 0.999f, 1e-6f, 1e-3f, 0.01f);
    double mm = 0.9 * 0.1 + 0.1 * 0.2, vv = 0.999 * 0.01 + 0.001 * 0.04;
    double pp = 0.5 - 1e-3 * 0.5;
    pp -= 0.01 * mm / (sqrt(vv) + 1e-6);
    CHECK_NEAR(m, mm, 1e-7);
    CHECK_NEAR(v, vv, 1e-8);
    CHECK_NEAR(p, pp, 1e-7);
}

UNIT_MAIN(T(expf_accuracy), T(erf_and_gelu), T(dropout_bits_are_philox), T(adamw_element))
