/* fp16 and bf16 conversions against numpy (fp16) and torch (bf16), bit for bit, on edge cases
 * (overflow, subnormals, ties) and random values. Fixture: make_base_fixtures.py. */
#include "base/dtype.h"
#include "unit.h"

static void matches_numpy_and_torch(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/dtype/halfconv.bin", unit_src());
    size_t n;
    unsigned char *b = (unsigned char *)unit_slurp(path, &n);
    CHECK(n > 1000 && n % 8 == 0);
    int bad16 = 0, badbf = 0, badback = 0;
    for (size_t i = 0; i + 8 <= n; i += 8) {
        uint32_t fb;
        uint16_t h, bf;
        memcpy(&fb, b + i, 4);
        memcpy(&h, b + i + 4, 2);
        memcpy(&bf, b + i + 6, 2);
        float f = tupe_bits_f32(fb);
        uint16_t mh = tupe_f32_to_f16(f), mb = tupe_f32_to_bf16(f);
        if (mh != h && bad16++ < 5)
            CHECK_MSG(0, "f16(%08x = %g) = %04x, numpy %04x", fb, f, mh, h);
        if (mb != bf && badbf++ < 5)
            CHECK_MSG(0, "bf16(%08x = %g) = %04x, torch %04x", fb, f, mb, bf);
        /* Back to fp32 is exact: re-rounding gives the same half. */
        if (tupe_f32_to_f16(tupe_f16_to_f32(h)) != h && (h & 0x7c00) != 0x7c00 && badback++ < 5)
            CHECK_MSG(0, "f16 %04x does not round-trip", h);
        if (tupe_f32_to_bf16(tupe_bf16_to_f32(bf)) != bf && badback++ < 5)
            CHECK_MSG(0, "bf16 %04x does not round-trip", bf);
    }
    CHECK_INT(bad16, 0);
    CHECK_INT(badbf, 0);
    CHECK_INT(badback, 0);
    free(b);
}

static void every_half_round_trips(void)
{
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tupe_f16_to_f32((uint16_t)h);
        if ((h & 0x7c00) == 0x7c00 && (h & 0x3ff))
            CHECK(f != f); /* NaN stays NaN */
        else if (tupe_f32_to_f16(f) != h)
            CHECK_MSG(0, "half %04x -> %g -> %04x", h, f, tupe_f32_to_f16(f));
    }
}

static void nan_handling(void)
{
    float nan = tupe_bits_f32(0x7fc00000u);
    CHECK_U64(tupe_f32_to_bf16(nan), 0x7fc0);
    CHECK_U64(tupe_f32_to_bf16(tupe_bits_f32(0xffc00001u)), 0x7fc0); /* sign dropped, as torch */
    CHECK_U64(tupe_f32_to_f16(nan) & 0x7e00, 0x7e00);
}

static void names_and_sizes(void)
{
    CHECK_STR(tupe_dtype_name(TUPE_BF16), "BF16");
    CHECK_INT(tupe_dtype_parse("F8_E4M3"), TUPE_F8_E4M3);
    CHECK_INT(tupe_dtype_parse("f32"), -1);
    CHECK_INT(tupe_dtype_bits(TUPE_F4), 4);
    CHECK_INT(tupe_dtype_bits(TUPE_C64), 64);
    float src[3] = {1.5f, -2.25f, 65504.0f}, back[3];
    uint16_t h[3];
    CHECK_INT(tupe_from_f32(TUPE_F16, src, h, 3), 0);
    CHECK_INT(tupe_to_f32(TUPE_F16, h, back, 3), 0);
    CHECK(memcmp(src, back, sizeof src) == 0);
    CHECK_INT(tupe_to_f32(TUPE_I32, h, back, 1), -1);
}

UNIT_MAIN(T(matches_numpy_and_torch), T(every_half_round_trips), T(nan_handling), T(names_and_sizes))
