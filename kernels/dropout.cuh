/* Dropout decisions on the device, the CPU's element for element (lib/backend/pointwise.h):
 * element g of a site is kept per bit g % 8 of block g / 8. One Philox call decides a block of
 * 8 elements; a site's keep bits are made once per block (drop_bits, dropout.cu) and kept,
 * so that the operations of the forward and backward passes read them instead of calling
 * Philox for each element. */
#ifndef TUPE_KERNELS_DROPOUT_CUH
#define TUPE_KERNELS_DROPOUT_CUH

struct dropk {
    uint64_t seed, base;
    uint32_t step, site, thr;
    float sc;
    int on;
    const uint8_t *km; /* keep bits: byte k is block (base >> 3) + k; NULL: Philox per element */
    /* A step's parameter block (backend.h, TUPE_PAR_*) or NULL: step and base are read from
     * it on the device (dpar), so that the launch does not change from step to step. */
    const double *par;
    uint64_t per;
    int slot;
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
        k.par = (const double *)d->par;
        k.per = d->per;
        k.slot = d->slot;
    }
    return k;
}

/* step and base from the step's parameter block, where d has one: the first statement of
 * every kernel that takes a dropk (the values equal the host's: backend.h). */
__device__ __forceinline__ void dpar(dropk &d)
{
    if (d.on && d.par) {
        d.step = (uint32_t)d.par[TUPE_PAR_STEP];
        d.base = (uint64_t)d.par[TUPE_PAR_OFFSET + d.slot] * d.per;
    }
}

/* The keep bits of block `blk` (elements 8 blk .. 8 blk + 7): one Philox call. */
__device__ __forceinline__ uint32_t keep8(const dropk &d, uint64_t blk)
{
    TUPE_DEV_COUNT("philox_calls", 1);
    return tupe_dropout_bits8(d.seed, d.step, d.site, blk, d.thr);
}

__device__ __forceinline__ bool keep(const dropk &d, uint64_t g)
{
    TUPE_DEV_COUNT("dropout_decisions", 1);
    uint32_t bits = d.km ? d.km[(g >> 3) - (d.base >> 3)] : keep8(d, g >> 3);
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

/* The dropout of elements base .. base + n - 1 of the site d names, reading keep bits: those
 * the last call for the same stream and elements made (a backward pass reads its forward's),
 * else bits made now on the stream, one Philox call per block of 8. Without dropout (d NULL or
 * p = 0), mkdrop(d). Host side; the bits stay until the backend is destroyed. */
dropk drop_bits(cu_priv *pr, const tupe_drop *d, size_t n);
void drop_bits_free(cu_priv *pr);

#endif
