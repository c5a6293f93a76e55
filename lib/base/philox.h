/* Philox4x32-10 (Salmon et al., SC'11, "Parallel random numbers: as easy as 1, 2, 3"):
 * a counter-based generator, so any rank, thread, step or sample computes its own random
 * numbers from (seed, counter) alone. That is what makes masks, dropout and shuffles
 * independent of thread count and exactly reproducible on resume.
 *
 * Header-only and TUPE_HD so the CUDA kernels draw the same numbers as the CPU. */
#ifndef TUPE_PHILOX_H
#define TUPE_PHILOX_H

#include <stdint.h>

#include "base/hd.h"

typedef struct tupe_u32x4 {
    uint32_t v[4];
} tupe_u32x4;

TUPE_HD tupe_u32x4 tupe_philox4x32_10(tupe_u32x4 c, uint32_t k0, uint32_t k1)
{
    for (int r = 0; r < 10; r++) {
        if (r > 0) {
            k0 += 0x9E3779B9u;
            k1 += 0xBB67AE85u;
        }
        uint64_t p0 = (uint64_t)0xD2511F53u * c.v[0];
        uint64_t p1 = (uint64_t)0xCD9E8D57u * c.v[2];
        uint32_t hi0 = (uint32_t)(p0 >> 32), lo0 = (uint32_t)p0;
        uint32_t hi1 = (uint32_t)(p1 >> 32), lo1 = (uint32_t)p1;
        tupe_u32x4 n;
        n.v[0] = hi1 ^ c.v[1] ^ k0;
        n.v[1] = lo1;
        n.v[2] = hi0 ^ c.v[3] ^ k1;
        n.v[3] = lo0;
        c = n;
    }
    return c;
}

/* The counter layout used across tupe: word 0 is the block index within a stream (four
 * 32-bit values per block), words 1-3 name the stream (caller-defined: e.g. epoch and sample
 * for masking, step and layer for dropout, with a purpose tag in word 3). The key is the seed. */
TUPE_HD tupe_u32x4 tupe_philox_block(uint64_t seed, uint32_t s1, uint32_t s2, uint32_t s3,
                                     uint32_t block)
{
    tupe_u32x4 c;
    c.v[0] = block;
    c.v[1] = s1;
    c.v[2] = s2;
    c.v[3] = s3;
    return tupe_philox4x32_10(c, (uint32_t)seed, (uint32_t)(seed >> 32));
}

/* The i-th 32-bit value of a stream. */
TUPE_HD uint32_t tupe_philox_at(uint64_t seed, uint32_t s1, uint32_t s2, uint32_t s3, uint64_t i)
{
    tupe_u32x4 b = tupe_philox_block(seed, s1, s2, s3, (uint32_t)(i >> 2));
    return b.v[i & 3];
}

/* Uniform float in [0, 1) from the top 24 bits (exactly representable, never 1.0). */
TUPE_HD float tupe_u01f(uint32_t x) { return (float)(x >> 8) * (1.0f / 16777216.0f); }

/* Purpose tags for word 3, so that streams for different uses never collide. */
enum {
    TUPE_RNG_INIT = 1,     /* parameter initialization */
    TUPE_RNG_DROPOUT = 2,  /* dropout masks */
    TUPE_RNG_MASK = 3,     /* MLM masking */
    TUPE_RNG_SHUFFLE = 4,  /* data order */
    TUPE_RNG_SPLIT = 5,    /* train/validation split */
    TUPE_RNG_SAMPLE = 6,   /* vocabulary sampling, misc */
    TUPE_RNG_ELECTRA_MASK = 7, /* ELECTRA's masking */
    TUPE_RNG_GUMBEL = 8,   /* the noise of ELECTRA's generator samples */
    TUPE_RNG_USER = 16     /* first tag free for callers */
};

#endif
