/* MLM masking: rate, 80/10/10 split, targets, reproducibility by (seed, epoch, sample). */
#include "train/masking.h"
#include "unit.h"

enum { MASK = 4, V = 1000 };

static tupe_mask_cfg cfg(int32_t *cand, size_t n)
{
    tupe_mask_cfg c = {1234, 0.15, 0.8, 0.1, MASK, cand, n};
    return c;
}

static void statistics(void)
{
    int32_t cand[V - 5];
    for (int i = 0; i < V - 5; i++)
        cand[i] = i + 5;
    tupe_mask_cfg c = cfg(cand, V - 5);
    int32_t ids[512], orig[512], pos[512], lab[512];
    long chosen = 0, total = 0, masked = 0, random = 0, kept = 0, count_floor_ok = 0;
    for (uint64_t s = 0; s < 4000; s++) {
        int len = 20 + (int)(s % 493);
        for (int i = 0; i < len; i++)
            ids[i] = orig[i] = 5 + (int32_t)((s * 31 + (uint64_t)i * 17) % (V - 5));
        int n = tupe_mask_sample(&c, 0, s, ids, len, pos, lab);
        double expect = 0.15 * len;
        count_floor_ok += n == (int)expect || n == (int)expect + 1;
        chosen += n;
        total += len;
        for (int k = 0; k < n; k++) {
            CHECK(k == 0 || pos[k] > pos[k - 1]);
            CHECK_INT(lab[k], orig[pos[k]]);
            if (ids[pos[k]] == MASK)
                masked++;
            else if (ids[pos[k]] == orig[pos[k]])
                kept++;
            else
                random++;
        }
        /* Positions not chosen are untouched. */
        int k = 0;
        for (int i = 0; i < len; i++) {
            if (k < n && pos[k] == i) {
                k++;
                continue;
            }
            if (ids[i] != orig[i]) {
                CHECK_MSG(0, "unchosen position %d changed", i);
                break;
            }
        }
    }
    CHECK_INT(count_floor_ok, 4000);
    double rate = (double)chosen / (double)total;
    CHECK_NEAR(rate, 0.15, 0.002);
    /* A random replacement can equal the original (1 in 995): it then counts as kept. */
    CHECK_NEAR((double)masked / (double)chosen, 0.8, 0.01);
    CHECK_NEAR((double)random / (double)chosen, 0.1, 0.01);
    CHECK_NEAR((double)kept / (double)chosen, 0.1, 0.01);
}

static void reproducible_and_fresh_per_epoch(void)
{
    int32_t cand[10] = {10, 11, 12, 13, 14, 15, 16, 17, 18, 19};
    tupe_mask_cfg c = cfg(cand, 10);
    int32_t a[300], b[300], pa[300], pb[300], la[300], lb[300];
    for (int i = 0; i < 300; i++)
        a[i] = b[i] = 20 + i;
    int na = tupe_mask_sample(&c, 3, 77, a, 300, pa, la);
    int nb = tupe_mask_sample(&c, 3, 77, b, 300, pb, lb);
    CHECK_INT(na, nb);
    CHECK(memcmp(a, b, sizeof a) == 0 && memcmp(pa, pb, (size_t)na * 4) == 0);
    for (int i = 0; i < 300; i++)
        b[i] = 20 + i;
    nb = tupe_mask_sample(&c, 4, 77, b, 300, pb, lb);
    CHECK(na != nb || memcmp(pa, pb, (size_t)na * 4) != 0);
    for (int i = 0; i < 300; i++)
        b[i] = 20 + i;
    nb = tupe_mask_sample(&c, 3, 78, b, 300, pb, lb);
    CHECK(na != nb || memcmp(pa, pb, (size_t)na * 4) != 0);
    /* A sample index beyond 2^32 is its own stream. */
    for (int i = 0; i < 300; i++)
        b[i] = 20 + i;
    nb = tupe_mask_sample(&c, 3, 77 + (1ULL << 32), b, 300, pb, lb);
    CHECK(na != nb || memcmp(pa, pb, (size_t)na * 4) != 0);
    /* Short samples: never more positions than tokens, never negative. */
    int32_t one[1] = {30}, p1[1], l1[1];
    for (uint64_t s = 0; s < 100; s++) {
        one[0] = 30;
        int n = tupe_mask_sample(&c, 0, s, one, 1, p1, l1);
        CHECK(n == 0 || n == 1);
    }
}

UNIT_MAIN(T(statistics), T(reproducible_and_fresh_per_epoch))
