#include "train/masking.h"

#include <math.h>
#include <stdlib.h>

#include "base/rng.h"

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

int tupe_mask_sample(const tupe_mask_cfg *cfg, uint32_t epoch, uint64_t sample, int32_t *ids,
                     int len, int32_t *pos, int32_t *label)
{
    if (len <= 0)
        return 0;
    tupe_rng r;
    tupe_rng_init(&r, cfg->seed, epoch, (uint32_t)sample,
                  TUPE_RNG_MASK | (uint32_t)(sample >> 32) << 8);
    int count = (int)floor(cfg->prob * len + tupe_rng_uniform(&r));
    if (count > len)
        count = len;
    /* Partial Fisher-Yates over the positions: pos doubles as the index array. */
    for (int i = 0; i < len; i++)
        pos[i] = i;
    for (int i = 0; i < count; i++) {
        int j = i + (int)tupe_rng_below(&r, (uint32_t)(len - i));
        int32_t t = pos[i];
        pos[i] = pos[j];
        pos[j] = t;
    }
    qsort(pos, (size_t)count, sizeof *pos, cmp_i32);
    for (int k = 0; k < count; k++) {
        int p = pos[k];
        label[k] = ids[p];
        double u = tupe_rng_uniform(&r);
        if (u < cfg->mask_frac)
            ids[p] = cfg->mask_id;
        else if (u < cfg->mask_frac + cfg->random_frac && cfg->n_random > 0)
            ids[p] = cfg->random_ids[tupe_rng_below64(&r, cfg->n_random)];
    }
    return count;
}

int tupe_mask_electra(const tupe_mask_cfg *cfg, const int32_t *special, int nspecial, int cap,
                      uint32_t epoch, uint64_t sample, int32_t *ids, int len, int32_t *pos,
                      int32_t *label)
{
    int n = 0;
    for (int i = 0; i < len; i++) {
        int sp = 0;
        for (int k = 0; k < nspecial; k++)
            sp |= ids[i] == special[k];
        if (!sp)
            pos[n++] = i;
    }
    if (n == 0)
        return 0;
    int count = (int)nearbyint(cfg->prob * len);
    if (count < 1)
        count = 1;
    if (cap > 0 && count > cap)
        count = cap;
    if (count > n)
        count = n;
    tupe_rng r;
    tupe_rng_init(&r, cfg->seed, epoch, (uint32_t)sample,
                  TUPE_RNG_ELECTRA_MASK | (uint32_t)(sample >> 32) << 8);
    for (int i = 0; i < count; i++) {
        int j = i + (int)tupe_rng_below(&r, (uint32_t)(n - i));
        int32_t t = pos[i];
        pos[i] = pos[j];
        pos[j] = t;
    }
    qsort(pos, (size_t)count, sizeof *pos, cmp_i32);
    for (int k = 0; k < count; k++) {
        label[k] = ids[pos[k]];
        if (tupe_rng_uniform(&r) < cfg->mask_frac)
            ids[pos[k]] = cfg->mask_id;
    }
    return count;
}
