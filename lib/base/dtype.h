/* Element types of tensors on disk (the safetensors set) and the float conversions between
 * them. The conversions are TUPE_HD: the CUDA kernels round exactly as the CPU does.
 *
 * fp32 -> bf16: round to nearest even on the top 16 bits; NaN becomes 0x7FC0 (as PyTorch).
 * fp32 -> fp16: IEEE binary16, round to nearest even, overflow to infinity, subnormals kept. */
#ifndef TUPE_DTYPE_H
#define TUPE_DTYPE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "base/hd.h"

/* In the order the reference safetensors writer ranks them (it writes higher ranks first). */
enum tupe_dtype {
    TUPE_BOOL, TUPE_F4, TUPE_F6_E2M3, TUPE_F6_E3M2, TUPE_U8, TUPE_I8, TUPE_F8_E5M2,
    TUPE_F8_E4M3, TUPE_F8_E8M0, TUPE_F8_E4M3FNUZ, TUPE_F8_E5M2FNUZ, TUPE_I16, TUPE_U16,
    TUPE_F16, TUPE_BF16, TUPE_I32, TUPE_U32, TUPE_F32, TUPE_C64, TUPE_F64, TUPE_I64, TUPE_U64,
    TUPE_DTYPE_COUNT
};

/* "F32" etc.; NULL for an invalid value. */
const char *tupe_dtype_name(int dt);
/* -1 if unknown. */
int tupe_dtype_parse(const char *name);
/* Size of one element in bits (4 for F4, 6 for F6_*, 8 for U8, ...). */
unsigned tupe_dtype_bits(int dt);

TUPE_HD uint32_t tupe_f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

TUPE_HD float tupe_bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

TUPE_HD uint16_t tupe_f32_to_bf16(float f)
{
    uint32_t u = tupe_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return 0x7fc0;
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

TUPE_HD float tupe_bf16_to_f32(uint16_t h) { return tupe_bits_f32((uint32_t)h << 16); }

TUPE_HD uint16_t tupe_f32_to_f16(float f)
{
    uint32_t u = tupe_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    u &= 0x7fffffffu;
    if (u >= 0x47800000u) /* >= 65536, inf or nan */
        return (uint16_t)(sign | (u > 0x7f800000u ? 0x7e00u | ((u >> 13) & 0x3ffu) : 0x7c00u));
    if (u < 0x38800000u) { /* below the smallest normal half, 2^-14: subnormal or zero */
        /* Adding 0.5 (2^-1) puts the half's subnormal unit (2^-24) at the float's last
         * mantissa bit, so the FPU's own round-to-nearest-even does the rounding. */
        float t = tupe_bits_f32(u) + 0.5f;
        return (uint16_t)(sign | (tupe_f32_bits(t) - 0x3f000000u));
    }
    uint32_t odd = (u >> 13) & 1u;
    u += 0xc8000fffu + odd; /* rebias exponent (-112 << 23) and round half to even */
    return (uint16_t)(sign | (u >> 13));
}

TUPE_HD float tupe_f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t ex = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (ex == 0) {
        /* zero or subnormal: m * 2^-24, exact in float */
        float v = (float)m * 5.9604644775390625e-08f;
        return tupe_bits_f32(sign | tupe_f32_bits(v));
    }
    if (ex == 31)
        return tupe_bits_f32(sign | 0x7f800000u | (m << 13));
    return tupe_bits_f32(sign | ((ex + 112u) << 23) | (m << 13));
}

/* Convert n elements of a float tensor (F32, F16, BF16, F64) to/from fp32.
 * Returns 0, or -1 for a dtype that is not a float type. */
int tupe_to_f32(int dt, const void *src, float *dst, size_t n);
int tupe_from_f32(int dt, const float *src, void *dst, size_t n);

#endif
