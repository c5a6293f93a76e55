#include "base/dtype.h"

#include <string.h>

static const struct {
    const char *name;
    unsigned bits;
} table[TUPE_DTYPE_COUNT] = {
    [TUPE_BOOL] = {"BOOL", 8},         [TUPE_F4] = {"F4", 4},
    [TUPE_F6_E2M3] = {"F6_E2M3", 6},   [TUPE_F6_E3M2] = {"F6_E3M2", 6},
    [TUPE_U8] = {"U8", 8},             [TUPE_I8] = {"I8", 8},
    [TUPE_F8_E5M2] = {"F8_E5M2", 8},   [TUPE_F8_E4M3] = {"F8_E4M3", 8},
    [TUPE_F8_E8M0] = {"F8_E8M0", 8},   [TUPE_F8_E4M3FNUZ] = {"F8_E4M3FNUZ", 8},
    [TUPE_F8_E5M2FNUZ] = {"F8_E5M2FNUZ", 8},
    [TUPE_I16] = {"I16", 16},          [TUPE_U16] = {"U16", 16},
    [TUPE_F16] = {"F16", 16},          [TUPE_BF16] = {"BF16", 16},
    [TUPE_I32] = {"I32", 32},          [TUPE_U32] = {"U32", 32},
    [TUPE_F32] = {"F32", 32},          [TUPE_C64] = {"C64", 64},
    [TUPE_F64] = {"F64", 64},          [TUPE_I64] = {"I64", 64},
    [TUPE_U64] = {"U64", 64},
};

const char *tupe_dtype_name(int dt)
{
    return dt >= 0 && dt < TUPE_DTYPE_COUNT ? table[dt].name : NULL;
}

int tupe_dtype_parse(const char *name)
{
    for (int i = 0; i < TUPE_DTYPE_COUNT; i++)
        if (strcmp(table[i].name, name) == 0)
            return i;
    return -1;
}

unsigned tupe_dtype_bits(int dt) { return dt >= 0 && dt < TUPE_DTYPE_COUNT ? table[dt].bits : 0; }

int tupe_to_f32(int dt, const void *src, float *dst, size_t n)
{
    const unsigned char *s = src;
    switch (dt) {
    case TUPE_F32:
        memcpy(dst, s, n * 4);
        return 0;
    case TUPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = tupe_f16_to_f32(h);
        }
        return 0;
    case TUPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h;
            memcpy(&h, s + 2 * i, 2);
            dst[i] = tupe_bf16_to_f32(h);
        }
        return 0;
    case TUPE_F64:
        for (size_t i = 0; i < n; i++) {
            double d;
            memcpy(&d, s + 8 * i, 8);
            dst[i] = (float)d;
        }
        return 0;
    default:
        return -1;
    }
}

int tupe_from_f32(int dt, const float *src, void *dstv, size_t n)
{
    unsigned char *d = dstv;
    switch (dt) {
    case TUPE_F32:
        memcpy(d, src, n * 4);
        return 0;
    case TUPE_F16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = tupe_f32_to_f16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
        return 0;
    case TUPE_BF16:
        for (size_t i = 0; i < n; i++) {
            uint16_t h = tupe_f32_to_bf16(src[i]);
            memcpy(d + 2 * i, &h, 2);
        }
        return 0;
    case TUPE_F64:
        for (size_t i = 0; i < n; i++) {
            double v = src[i];
            memcpy(d + 8 * i, &v, 8);
        }
        return 0;
    default:
        return -1;
    }
}
