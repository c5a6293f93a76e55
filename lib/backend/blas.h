/* The BLAS behind the CPU backend: oneDNN's sgemm for single-precision products, OpenBLAS for
 * double precision (and for single precision where oneDNN is not used), each checked before
 * the first product.
 *
 * oneDNN generates its sgemm kernels at run time for the instruction set the processor reports
 * (AVX-512, AVX2, AVX, SSE4.1), whatever the model, and was measured faster than OpenBLAS on
 * the products of the model's step (docs: README's performance section). It is used unless
 * OPENBLAS_CORETYPE is set: a core set by hand means OpenBLAS's kernels for every product.
 *
 * OpenBLAS built with DYNAMIC_ARCH (Debian's) picks a kernel set ("core") from the processor
 * when it is loaded, before main(); OpenBLAS 0.3.21 falls back to its SSE3 "Prescott" core on
 * processors it does not know (Emerald Rapids, Raptor and Arrow Lake: an Intel family-6 model
 * whose extended model has no case in its cpuid switch falls through to the Pentium 4 case),
 * at a fifth of the speed. tupe_blas_select() then re-selects the core OpenBLAS itself would
 * take for the processor's instruction set (SkylakeX for AVX-512, Haswell for AVX2 and FMA,
 * Sandybridge for AVX), through OpenBLAS's own initialisation (gotoblas_dynamic_init with
 * OPENBLAS_CORETYPE set for that call only). A core set by the user in OPENBLAS_CORETYPE is
 * kept. Whatever the kernels, a start-up check compares sgemm and dgemm (both transposes,
 * alpha, beta, leading dimensions, the small-matrix and the blocked paths) with a plain loop;
 * an OpenBLAS core that fails it is not used (the next one down is tried), nor is oneDNN's
 * sgemm if it fails (OpenBLAS's is used), and the notice says so.
 *
 * Once per process, thread-safe; call it before other threads use BLAS (the CPU backend calls
 * it when it is created). The library never prints: the one-line description and the notice
 * are for the caller to show. */
#ifndef TUPE_BLAS_H
#define TUPE_BLAS_H

#include <stddef.h>

#include "base/error.h"

enum tupe_blas_how {
    TUPE_BLAS_OWN = 0,    /* OpenBLAS's own choice was kept */
    TUPE_BLAS_CHOSEN,     /* re-selected from the processor's features (OpenBLAS fell back) */
    TUPE_BLAS_USER,       /* OPENBLAS_CORETYPE, set by the user */
    TUPE_BLAS_FIXED,      /* a build for one core: nothing to choose */
    TUPE_BLAS_AVOIDED     /* the core first meant failed the check: a lower one is used */
};

typedef struct tupe_blas_info {
    char library[48];     /* "OpenBLAS 0.3.21" */
    char core[32];        /* the kernels in use: "SkylakeX" */
    char own[32];         /* OpenBLAS's own choice when it was loaded */
    char best[32];        /* the best core this processor runs ("" where not x86-64) */
    char isa[16];         /* that core's instruction set: "AVX-512", "AVX2", "AVX", "SSE3" */
    char sgemm[48];       /* the single-precision products' library: "oneDNN 2.6.3", or
                           * "" for OpenBLAS */
    char sgemm_isa[16];   /* oneDNN's instruction set: "AVX-512", "AVX2", "AVX", "SSE4.1" */
    int how;              /* enum tupe_blas_how */
    char line[448];       /* one line: libraries, kernels and why (no newline) */
    char notice[512];     /* "" or one line: kernels avoided because they computed wrong */
} tupe_blas_info;

/* Choose and check the kernels (the first call; later calls return the first one's result).
 * Fails (TUPE_EFAIL) only when no core tried computes right. */
int tupe_blas_select(tupe_err *e);
/* What tupe_blas_select chose (NULL before it was called). */
const tupe_blas_info *tupe_blas_info_get(void);

/* C = alpha op(A) op(B) + beta C in single precision (row-major; ta: op(A) = A^T) with the
 * kernels chosen; on one thread (the backend splits its products over its own threads), also
 * when called outside a parallel region. Call tupe_blas_select first. */
void tupe_blas_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc);

/* The best OpenBLAS x86-64 core for this processor's instruction set ("SkylakeX", "Haswell",
 * "Sandybridge", "Prescott"; "" elsewhere). */
const char *tupe_blas_best_core(void);

/* The check itself, on any implementation of C = alpha op(A) op(B) + beta C (row-major; tX:
 * op(X) = X^T), for tests: 0 when every product matches the plain loop within rounding, else
 * 1 with the first mismatch described in why (cap bytes). dgemm may be NULL. */
typedef void (*tupe_sgemm_fn)(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                              int lda, const float *B, int ldb, float beta, float *C, int ldc);
typedef void (*tupe_dgemm_fn)(int ta, int tb, int M, int N, int K, double alpha, const double *A,
                              int lda, const double *B, int ldb, double beta, double *C, int ldc);
int tupe_blas_check(tupe_sgemm_fn sgemm, tupe_dgemm_fn dgemm, char *why, size_t cap);

#endif
