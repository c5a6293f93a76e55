#include "base/rng.h"

#include <math.h>
#include <string.h>

#include "base/checksum.h"

void tupe_rng_init(tupe_rng *r, uint64_t seed, uint32_t s1, uint32_t s2, uint32_t s3)
{
    memset(r, 0, sizeof *r);
    r->seed = seed;
    r->s1 = s1;
    r->s2 = s2;
    r->s3 = s3;
}

uint32_t tupe_rng_u32(tupe_rng *r)
{
    if (r->avail == 0) {
        tupe_u32x4 b = tupe_philox_block(r->seed, r->s1, r->s2, r->s3, r->block++);
        /* Stored reversed so that values come out in stream order v[0], v[1], ... */
        r->buf[3] = b.v[0];
        r->buf[2] = b.v[1];
        r->buf[1] = b.v[2];
        r->buf[0] = b.v[3];
        r->avail = 4;
    }
    return r->buf[--r->avail];
}

uint64_t tupe_rng_u64(tupe_rng *r)
{
    uint64_t hi = tupe_rng_u32(r);
    return hi << 32 | tupe_rng_u32(r);
}

double tupe_rng_uniform(tupe_rng *r)
{
    return (double)(tupe_rng_u64(r) >> 11) * (1.0 / 9007199254740992.0);
}

uint32_t tupe_rng_below(tupe_rng *r, uint32_t n)
{
    uint64_t m = (uint64_t)tupe_rng_u32(r) * n;
    uint32_t lo = (uint32_t)m;
    if (lo < n) {
        uint32_t t = (uint32_t)(-n) % n;
        while (lo < t) {
            m = (uint64_t)tupe_rng_u32(r) * n;
            lo = (uint32_t)m;
        }
    }
    return (uint32_t)(m >> 32);
}

uint64_t tupe_rng_below64(tupe_rng *r, uint64_t n)
{
    if (n <= UINT32_MAX)
        return tupe_rng_below(r, (uint32_t)n);
    /* Rejection on the smallest power-of-two mask that covers n. */
    uint64_t mask = n - 1;
    mask |= mask >> 1, mask |= mask >> 2, mask |= mask >> 4;
    mask |= mask >> 8, mask |= mask >> 16, mask |= mask >> 32;
    for (;;) {
        uint64_t x = tupe_rng_u64(r) & mask;
        if (x < n)
            return x;
    }
}

double tupe_rng_normal(tupe_rng *r)
{
    if (r->has_normal) {
        r->has_normal = 0;
        return r->normal;
    }
    double u1, u2;
    do
        u1 = tupe_rng_uniform(r);
    while (u1 <= 0.0);
    u2 = tupe_rng_uniform(r);
    double rad = sqrt(-2.0 * log(u1)), th = 6.283185307179586 * u2;
    r->normal = rad * sin(th);
    r->has_normal = 1;
    return rad * cos(th);
}

void tupe_rng_shuffle_u32(tupe_rng *r, uint32_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tupe_rng_below64(r, i);
        uint32_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

void tupe_rng_shuffle_u64(tupe_rng *r, uint64_t *a, size_t n)
{
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)tupe_rng_below64(r, i);
        uint64_t t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

uint64_t tupe_seed_from(const char *s, uint64_t base)
{
    return tupe_hash64_seed(s, strlen(s), base);
}
