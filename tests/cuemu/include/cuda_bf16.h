/* cuemu: __nv_bfloat16 as its 16 bits, with the device's conversions: round to nearest even,
 * and NaN to the canonical 0x7fff as __float2bfloat16_rn gives it. No arithmetic operators:
 * code that needs them does its arithmetic in float, as tupe's kernels do. */
#ifndef CUEMU_CUDA_BF16_H
#define CUEMU_CUDA_BF16_H
#include "cuemu.h"

struct __nv_bfloat16 {
    unsigned short __x;
};
typedef __nv_bfloat16 nv_bfloat16;

static inline float __bfloat162float(__nv_bfloat16 h)
{
    uint32_t u = (uint32_t)h.__x << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    __nv_bfloat16 r;
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        r.__x = 0x7fff;
        return r;
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    r.__x = (unsigned short)(u >> 16);
    return r;
}

static inline __nv_bfloat16 __float2bfloat16(float f) { return __float2bfloat16_rn(f); }
#endif
