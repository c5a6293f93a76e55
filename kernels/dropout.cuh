/* Dropout decisions on the device, the CPU's element for element (lib/backend/pointwise.h):
 * element g of a site is kept per bit g % 8 of block g / 8. */
#ifndef TUPE_KERNELS_DROPOUT_CUH
#define TUPE_KERNELS_DROPOUT_CUH

struct dropk {
    uint64_t seed, base;
    uint32_t step, site, thr;
    float sc;
    int on;
};

static inline dropk mkdrop(const tupe_drop *d)
{
    dropk k;
    memset(&k, 0, sizeof k);
    k.sc = 1.0f;
    if (d && d->p > 0) {
        k.on = 1;
        k.seed = d->seed;
        k.base = d->base;
        k.step = d->step;
        k.site = d->site;
        k.thr = tupe_dropout_thr(d->p);
        k.sc = (float)tupe_dropout_scale(k.thr);
    }
    return k;
}

__device__ __forceinline__ bool keep(const dropk &d, uint64_t g)
{
    TUPE_DEV_COUNT("philox_calls", 1);
    TUPE_DEV_COUNT("dropout_decisions", 1);
    uint32_t bits = tupe_dropout_bits8(d.seed, d.step, d.site, g >> 3, d.thr);
    return (bits >> (unsigned)(g & 7u)) & 1u;
}

/* The dropout factor of logical element g: 1 without dropout, else 0 or the scale. */
__device__ __forceinline__ float dfac(const dropk &d, uint64_t g)
{
    if (!d.on)
        return 1.0f;
    return keep(d, g) ? d.sc : 0.0f;
}

/* drop(v) as the CPU's drop_apply computes it: v * scale when kept, else 0. */
__device__ __forceinline__ float dropv(const dropk &d, uint64_t g, float v)
{
    if (!d.on)
        return v;
    return keep(d, g) ? v * d.sc : 0.0f;
}

#endif
