/* Philox4x32-10 against the Random123 known-answer vectors, and reproducibility of the
 * counter-based streams whatever the thread count. */
#include <omp.h>

#include "base/rng.h"
#include "unit.h"

static void known_answers(void)
{
    static const struct { uint32_t c[4], k[2], want[4]; } kat[] = {
        {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
        {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff},
         {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
        {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0},
         {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
    };
    for (size_t i = 0; i < 3; i++) {
        tupe_u32x4 c = {{kat[i].c[0], kat[i].c[1], kat[i].c[2], kat[i].c[3]}};
        tupe_u32x4 r = tupe_philox4x32_10(c, kat[i].k[0], kat[i].k[1]);
        for (int j = 0; j < 4; j++)
            CHECK_MSG(r.v[j] == kat[i].want[j], "vector %zu word %d: %08x, expected %08x", i, j,
                      r.v[j], kat[i].want[j]);
    }
}

static void sequential_equals_random_access(void)
{
    tupe_rng r;
    tupe_rng_init(&r, 0x1234567890abcdefULL, 7, 8, TUPE_RNG_USER);
    for (uint64_t i = 0; i < 1000; i++)
        CHECK_U64(tupe_rng_u32(&r), tupe_philox_at(0x1234567890abcdefULL, 7, 8, TUPE_RNG_USER, i));
}

static void streams_differ(void)
{
    tupe_rng a, b, c;
    tupe_rng_init(&a, 1, 0, 0, TUPE_RNG_MASK);
    tupe_rng_init(&b, 1, 1, 0, TUPE_RNG_MASK);
    tupe_rng_init(&c, 2, 0, 0, TUPE_RNG_MASK);
    int same_ab = 0, same_ac = 0;
    for (int i = 0; i < 64; i++) {
        uint32_t x = tupe_rng_u32(&a), y = tupe_rng_u32(&b), z = tupe_rng_u32(&c);
        same_ab += x == y;
        same_ac += x == z;
    }
    CHECK(same_ab < 2 && same_ac < 2);
}

/* The same array filled with 1, 2 and 4 threads and different schedules must be identical:
 * each element's value depends only on (seed, stream, index). */
static void reproducible_across_thread_counts(void)
{
    enum { N = 1 << 20 };
    float *a[3];
    int threads[3] = {1, 2, 4};
    for (int t = 0; t < 3; t++) {
        a[t] = malloc(N * sizeof(float));
        omp_set_num_threads(threads[t]);
        #pragma omp parallel for schedule(dynamic, 1000)
        for (long i = 0; i < N; i++)
            a[t][i] = tupe_u01f(tupe_philox_at(42, 3, 5, TUPE_RNG_DROPOUT, (uint64_t)i));
    }
    CHECK(memcmp(a[0], a[1], N * sizeof(float)) == 0);
    CHECK(memcmp(a[0], a[2], N * sizeof(float)) == 0);
    double sum = 0;
    float lo = 1, hi = 0;
    for (long i = 0; i < N; i++) {
        sum += a[0][i];
        lo = a[0][i] < lo ? a[0][i] : lo;
        hi = a[0][i] > hi ? a[0][i] : hi;
    }
    CHECK_NEAR(sum / N, 0.5, 0.002);
    CHECK(lo >= 0.0f && hi < 1.0f);
    for (int t = 0; t < 3; t++)
        free(a[t]);
}

static void below_is_in_range_and_unbiased(void)
{
    tupe_rng r;
    tupe_rng_init(&r, 99, 0, 0, TUPE_RNG_USER);
    enum { K = 7, N = 700000 };
    long count[K] = {0};
    for (int i = 0; i < N; i++) {
        uint32_t v = tupe_rng_below(&r, K);
        CHECK(v < K);
        if (v < K)
            count[v]++;
    }
    /* Chi-square with 6 degrees of freedom; 22.46 is the 0.1% critical value. */
    double chi = 0;
    for (int k = 0; k < K; k++)
        chi += (count[k] - N / K) * (double)(count[k] - N / K) / (N / K);
    CHECK_MSG(chi < 22.46, "chi-square %.2f", chi);
    for (int i = 0; i < 1000; i++)
        CHECK(tupe_rng_below64(&r, 5000000000ULL) < 5000000000ULL);
    CHECK_INT(tupe_rng_below(&r, 1), 0);
}

static void normal_moments(void)
{
    tupe_rng r;
    tupe_rng_init(&r, 5, 0, 0, TUPE_RNG_INIT);
    double s = 0, s2 = 0;
    enum { N = 200000 };
    for (int i = 0; i < N; i++) {
        double x = tupe_rng_normal(&r);
        s += x;
        s2 += x * x;
    }
    CHECK_NEAR(s / N, 0.0, 0.01);
    CHECK_NEAR(s2 / N, 1.0, 0.01);
}

static void shuffle_is_a_deterministic_permutation(void)
{
    enum { N = 10000 };
    uint32_t *a = malloc(N * 4), *b = malloc(N * 4);
    for (uint32_t i = 0; i < N; i++)
        a[i] = b[i] = i;
    tupe_rng r1, r2;
    tupe_rng_init(&r1, 7, 1, 0, TUPE_RNG_SHUFFLE);
    tupe_rng_init(&r2, 7, 1, 0, TUPE_RNG_SHUFFLE);
    tupe_rng_shuffle_u32(&r1, a, N);
    tupe_rng_shuffle_u32(&r2, b, N);
    CHECK(memcmp(a, b, N * 4) == 0);
    char *seen = calloc(N, 1);
    int fixed = 0;
    for (uint32_t i = 0; i < N; i++) {
        CHECK(a[i] < N && !seen[a[i]]);
        if (a[i] < N)
            seen[a[i]] = 1;
        fixed += a[i] == i;
    }
    CHECK(fixed < 10);
    free(a), free(b), free(seen);
}

UNIT_MAIN(T(known_answers), T(sequential_equals_random_access), T(streams_differ),
          T(reproducible_across_thread_counts), T(below_is_in_range_and_unbiased),
          T(normal_moments), T(shuffle_is_a_deterministic_permutation))
