/* Locality and symmetry measures of attention maps on maps whose values are known. */
#include "viz/attnstats.h"
#include "unit.h"

enum { N = 7 };

static void diagonal_and_next_token(void)
{
    float a[N * N] = {0};
    tupe_attn_stats s;
    for (int i = 0; i < N; i++)
        a[i * N + i] = 1;
    tupe_attn_stats_of(a, N, 0, &s);
    CHECK_NEAR(s.distance, 0, 0);
    CHECK_NEAR(s.local, 1, 0);
    CHECK_NEAR(s.forward, 0, 0);
    CHECK_NEAR(s.symmetry, 1, 0);
    /* each query on the next token (the last on the one before): no cell shared with A^T
     * but the last row's, which mirrors row N-2's */
    for (int i = 0; i < N; i++) {
        a[i * N + i] = 0;
        a[i * N + (i + 1 < N ? i + 1 : i - 1)] = 1;
    }
    tupe_attn_stats_of(a, N, 1, &s);
    CHECK_NEAR(s.distance, 1, 1e-12);
    CHECK_NEAR(s.local, 1, 1e-12);
    CHECK_NEAR(s.forward, (N - 2.0) / N, 1e-12);
    CHECK_NEAR(s.symmetry, 2.0 / N, 1e-12);
    tupe_attn_stats_of(a, N, 0, &s);
    CHECK_NEAR(s.local, 0, 0);
}

static void uniform(void)
{
    float a[N * N];
    for (int i = 0; i < N * N; i++)
        a[i] = 1.0f / N;
    tupe_attn_stats s;
    tupe_attn_stats_of(a, N, 2, &s);
    CHECK_NEAR(s.distance, tupe_attn_uniform_distance(N), 1e-6);
    CHECK_NEAR(tupe_attn_uniform_distance(N), 48.0 / 21, 1e-12);
    /* within +-2 of query i: min(i,2) + min(N-1-i,2) + 1 keys */
    double want = 0;
    for (int i = 0; i < N; i++)
        want += ((i < 2 ? i : 2) + (N - 1 - i < 2 ? N - 1 - i : 2) + 1.0) / N;
    CHECK_NEAR(s.local, want / N, 1e-6);
    CHECK_NEAR(s.forward, 0, 1e-6);
    CHECK_NEAR(s.symmetry, 1, 1e-6);
}

UNIT_MAIN(T(diagonal_and_next_token), T(uniform))
