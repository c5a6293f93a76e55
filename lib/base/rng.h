/* Sequential draws from one Philox stream: the convenient form for host code that needs
 * "the next random number" (shuffles, initialization, sampling). Two generators with the same
 * seed and stream give the same sequence, whatever thread runs them. */
#ifndef TUPE_RNG_H
#define TUPE_RNG_H

#include <stddef.h>
#include <stdint.h>

#include "base/philox.h"

typedef struct tupe_rng {
    uint64_t seed;
    uint32_t s1, s2, s3;
    uint32_t block;      /* next block to generate */
    uint32_t buf[4];
    int avail;           /* unread values left in buf (taken from the end) */
    int has_normal;      /* Box-Muller yields two values; the second is kept */
    double normal;
} tupe_rng;

void tupe_rng_init(tupe_rng *r, uint64_t seed, uint32_t s1, uint32_t s2, uint32_t s3);
uint32_t tupe_rng_u32(tupe_rng *r);
uint64_t tupe_rng_u64(tupe_rng *r);
/* Uniform double in [0, 1), 53 random bits. */
double tupe_rng_uniform(tupe_rng *r);
/* Uniform integer in [0, n), no modulo bias (Lemire's method with rejection). n > 0. */
uint32_t tupe_rng_below(tupe_rng *r, uint32_t n);
uint64_t tupe_rng_below64(tupe_rng *r, uint64_t n);
/* Standard normal (Box-Muller on two uniforms). */
double tupe_rng_normal(tupe_rng *r);
/* Fisher-Yates shuffle of a[0..n). */
void tupe_rng_shuffle_u32(tupe_rng *r, uint32_t *a, size_t n);
void tupe_rng_shuffle_u64(tupe_rng *r, uint64_t *a, size_t n);
/* Seed a generator from a string (e.g. a derived name): stable 64-bit hash of the bytes. */
uint64_t tupe_seed_from(const char *s, uint64_t base);

#endif
