/* The start-up check of the BLAS kernels (backend/blas.h) on products of known quality: a plain
 * loop in either summation order passes; a product that drops a term, ignores beta, mixes up a
 * transpose, writes past the row into the leading dimension's padding, or rounds its inputs to
 * bf16 fails, with the place named. And the selection itself, whatever this machine is (oneDNN's
 * sgemm unless OPENBLAS_CORETYPE is set), and the chosen sgemm passing the check on any thread. The
 * selection's behaviour end to end (a generic core undone, OPENBLAS_CORETYPE kept, a failing
 * core avoided) is tests/cli/blas.sh. */
#include <omp.h>

#include "backend/blas.h"
#include "base/dtype.h"
#include "unit.h"

enum { GOOD, REVERSED, DROP_LAST, NO_BETA, WRONG_TRANS, PADDING, BF16 };
static int flaw;

#define GEMM_BODY(real)                                                                           \
    for (int i = 0; i < M; i++)                                                                   \
        for (int j = 0; j < N; j++) {                                                             \
            int tA = flaw == WRONG_TRANS && ta && tb ? 0 : ta;                                    \
            real s = 0;                                                                           \
            for (int kk = 0; kk < K; kk++) {                                                      \
                int k = flaw == REVERSED ? K - 1 - kk : kk;                                       \
                if (flaw == DROP_LAST && k == K - 1)                                              \
                    continue;                                                                     \
                real a = A[tA ? (size_t)k * lda + i : (size_t)i * lda + k];                       \
                real b = B[tb ? (size_t)j * ldb + k : (size_t)k * ldb + j];                       \
                if (flaw == BF16)                                                                 \
                    a = (real)tupe_bf16_to_f32(tupe_f32_to_bf16((float)a)),                       \
                    b = (real)tupe_bf16_to_f32(tupe_f32_to_bf16((float)b));                       \
                s += a * b;                                                                       \
            }                                                                                     \
            real *c = &C[(size_t)i * ldc + j];                                                    \
            *c = alpha * s + (flaw == NO_BETA ? 0 : beta * *c);                                   \
            if (flaw == PADDING && j == N - 1 && ldc > N)                                         \
                c[1] = 0;                                                                         \
        }

static void sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                  const float *B, int ldb, float beta, float *C, int ldc)
{
    GEMM_BODY(float)
}

static void dgemm(int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda,
                  const double *B, int ldb, double beta, double *C, int ldc)
{
    GEMM_BODY(double)
}

static void right_products_pass(void)
{
    char why[256] = "";
    flaw = GOOD;
    CHECK_MSG(tupe_blas_check(sgemm, dgemm, why, sizeof why) == 0, "plain loop refused: %s", why);
    flaw = REVERSED; /* another order of summation rounds differently, and is right */
    CHECK_MSG(tupe_blas_check(sgemm, dgemm, why, sizeof why) == 0, "reversed sum refused: %s", why);
    CHECK_MSG(tupe_blas_check(sgemm, NULL, why, sizeof why) == 0, "sgemm alone refused: %s", why);
}

static void wrong_products_fail(void)
{
    static const struct {
        int flaw;
        const char *says;
    } cases[] = {
        {DROP_LAST, "sgemm NN 5x3x7: C[0,0] = "},
        {NO_BETA, "sgemm NN 5x3x7: C[0,0] = "},
        {WRONG_TRANS, "sgemm TT 5x3x7: "},
        {PADDING, "padding overwritten"},
        {BF16, "sgemm NN 5x3x7: "},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char why[256] = "";
        flaw = cases[i].flaw;
        CHECK_MSG(tupe_blas_check(sgemm, dgemm, why, sizeof why) == 1, "flaw %d passed", flaw);
        CHECK_HAS(why, cases[i].says);
        CHECK_HAS(why, flaw == PADDING ? ", was " : "a plain loop gives");
    }
}

static void selection_reports(void)
{
    tupe_err e;
    CHECK_INT(tupe_blas_select(&e), 0);
    const tupe_blas_info *bi = tupe_blas_info_get();
    CHECK(bi != NULL);
    if (!bi)
        return;
    CHECK(strncmp(bi->library, "OpenBLAS", 8) == 0);
    CHECK(bi->core[0] != 0);
    CHECK_HAS(bi->line, bi->core);
    CHECK(strchr(bi->line, '\n') == NULL);
    /* The best core named (bench/model --sgemm's "best core" row) is the one the selection
     * runs when nothing was set: OpenBLAS's own at the processor's level, or the one chosen. */
    if ((bi->how == TUPE_BLAS_OWN || bi->how == TUPE_BLAS_CHOSEN) && bi->best[0])
        CHECK_STR(bi->best, bi->core);
    /* oneDNN's sgemm unless OPENBLAS_CORETYPE is set; the line leads with it when it is used */
    const char *user = getenv("OPENBLAS_CORETYPE");
    if (user && *user)
        CHECK_STR(bi->sgemm, "");
    if (bi->sgemm[0]) {
        CHECK(strncmp(bi->sgemm, "oneDNN ", 7) == 0);
        CHECK(strncmp(bi->line, bi->sgemm, strlen(bi->sgemm)) == 0);
        CHECK_HAS(bi->line, " for single precision; OpenBLAS ");
    } else {
        CHECK(strncmp(bi->line, "OpenBLAS", 8) == 0);
    }
    CHECK_INT(tupe_blas_select(&e), 0); /* once: the same answer */
    CHECK(tupe_blas_info_get() == bi);
}

/* The products the backend makes with the chosen kernels pass the check themselves, and leave
 * the thread count of later parallel regions alone (oneDNN's is given a team of one). */
static void chosen_sgemm_checks(void)
{
    tupe_err e;
    CHECK_INT(tupe_blas_select(&e), 0);
    char why[256] = "";
    int before = omp_get_max_threads();
    CHECK_MSG(tupe_blas_check(tupe_blas_sgemm, NULL, why, sizeof why) == 0, "chosen sgemm: %s", why);
    CHECK_INT(omp_get_max_threads(), before);
    int bad = 0;
#pragma omp parallel num_threads(2) reduction(+ : bad)
    {
        char w[256] = "";
        bad += tupe_blas_check(tupe_blas_sgemm, NULL, w, sizeof w);
    }
    CHECK_INT(bad, 0);
}

UNIT_MAIN(T(right_products_pass), T(wrong_products_fail), T(selection_reports),
          T(chosen_sgemm_checks))
