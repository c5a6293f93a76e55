/* The bounded-memory shuffle: the output is the permutation "sorted by (key, index)",
 * identical whatever the memory budget (in memory, a few runs, many runs merged in several
 * passes), and the input order when shuffling is off. */
#include "data/extshuffle.h"
#include "unit.h"

#define REC 40

static void fill(unsigned char *rec, uint64_t i)
{
    for (int b = 0; b < REC; b++)
        rec[b] = (unsigned char)(i * 131 + (uint64_t)b * 7);
    memcpy(rec, &i, sizeof i);
}

/* Run n records through a shuffle with this budget; returns the output order of indexes. */
static uint64_t *run(uint64_t n, size_t memory, int shuffle, uint64_t seed, tupe_xshuf_stats *st)
{
    tupe_xshuf_opts o = {REC, seed, 3, shuffle, memory, unit_tmpdir()};
    tupe_xshuf *x;
    tupe_err e;
    CHECK_INT(tupe_xshuf_new(&x, &o, &e), 0);
    unsigned char rec[REC];
    for (uint64_t i = 0; i < n; i++) {
        fill(rec, i);
        if (i % 2) {
            CHECK_INT(tupe_xshuf_add(x, rec, &e), 0);
        } else {
            void *slot;
            CHECK_INT(tupe_xshuf_slot(x, &slot, &e), 0);
            memcpy(slot, rec, REC);
        }
    }
    CHECK_INT(tupe_xshuf_finish(x, &e), 0);
    uint64_t *out = malloc(n * sizeof *out);
    const void *p;
    uint64_t k = 0;
    int got;
    while ((got = tupe_xshuf_next(x, &p, &e)) == 1) {
        uint64_t i;
        memcpy(&i, p, sizeof i);
        fill(rec, i);
        CHECK_MSG(memcmp(rec, p, REC) == 0, "record %llu damaged", (unsigned long long)i);
        if (k < n)
            out[k] = i;
        k++;
    }
    CHECK_INT(got, 0);
    CHECK_U64(k, n);
    tupe_xshuf_stats_get(x, st);
    tupe_xshuf_free(x);
    return out;
}

static uint64_t gseed;
static int by_key(const void *a, const void *b)
{
    uint64_t i = *(const uint64_t *)a, j = *(const uint64_t *)b;
    uint64_t ki = tupe_xshuf_key(gseed, 3, i), kj = tupe_xshuf_key(gseed, 3, j);
    if (ki != kj)
        return ki < kj ? -1 : 1;
    return i < j ? -1 : i > j;
}

static void order_is_independent_of_memory(void)
{
    const uint64_t n = 30000;
    tupe_xshuf_stats s1, s2, s3;
    uint64_t *big = run(n, 64u << 20, 1, 42, &s1);     /* all in memory */
    uint64_t *mid = run(n, 600u << 10, 1, 42, &s2);    /* a few runs, one merge */
    uint64_t *tiny = run(n, 48u << 10, 1, 42, &s3);    /* many runs, several merge passes */
    CHECK_U64(s1.runs, 0);
    CHECK(s2.runs >= 3);
    CHECK_U64(s2.passes, 0);
    CHECK(s3.runs > 20);
    CHECK(s3.passes >= 2);
    CHECK(memcmp(big, mid, n * sizeof *big) == 0);
    CHECK(memcmp(big, tiny, n * sizeof *big) == 0);
    /* It is the documented order, and a permutation. */
    uint64_t *want = malloc(n * sizeof *want);
    for (uint64_t i = 0; i < n; i++)
        want[i] = i;
    gseed = 42;
    qsort(want, n, sizeof *want, by_key);
    CHECK(memcmp(big, want, n * sizeof *big) == 0);
    uint64_t moved = 0;
    for (uint64_t i = 0; i < n; i++)
        moved += big[i] != i;
    CHECK(moved > n * 9 / 10);
    /* Another seed, another order. */
    tupe_xshuf_stats s4;
    uint64_t *other = run(n, 64u << 20, 1, 43, &s4);
    CHECK(memcmp(big, other, n * sizeof *big) != 0);
    free(big), free(mid), free(tiny), free(want), free(other);
}

static void unshuffled_keeps_order(void)
{
    const uint64_t n = 20000;
    size_t mems[] = {48u << 10, 64u << 20};
    for (int m = 0; m < 2; m++) {
        tupe_xshuf_stats st;
        uint64_t *o = run(n, mems[m], 0, 42, &st);
        for (uint64_t i = 0; i < n; i++)
            if (o[i] != i) {
                CHECK_MSG(0, "position %llu holds %llu", (unsigned long long)i,
                          (unsigned long long)o[i]);
                break;
            }
        CHECK(m == 1 || st.runs > 5);
        free(o);
    }
}

static void empty_and_tiny(void)
{
    tupe_xshuf_stats st;
    uint64_t *o = run(0, 1u << 20, 1, 1, &st);
    free(o);
    o = run(1, 1u << 20, 1, 1, &st);
    CHECK_U64(o[0], 0);
    free(o);
    tupe_xshuf_opts bad = {REC, 1, 0, 1, 100, NULL};
    tupe_xshuf *x;
    tupe_err e;
    CHECK_INT(tupe_xshuf_new(&x, &bad, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "too small");
}

static void unwritable_spill_directory(void)
{
    tupe_xshuf_opts o = {REC, 1, 0, 1, 48u << 10, "/nonexistent/dir"};
    tupe_xshuf *x;
    tupe_err e;
    CHECK_INT(tupe_xshuf_new(&x, &o, &e), 0);
    unsigned char rec[REC] = {0};
    int rc = 0;
    for (int i = 0; i < 5000 && !rc; i++)
        rc = tupe_xshuf_add(x, rec, &e);
    CHECK_INT(rc, TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "/nonexistent/dir: cannot create a spill file");
    tupe_xshuf_free(x);
}

UNIT_MAIN(T(order_is_independent_of_memory), T(unshuffled_keeps_order), T(empty_and_tiny),
          T(unwritable_spill_directory))
