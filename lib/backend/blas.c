#include "backend/blas.h"

#include <cblas.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <omp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fault.h"

/* OpenBLAS's own functions. The first three are in every build; the dynamic-architecture
 * entry points exist only where OpenBLAS carries several cores (DYNAMIC_ARCH), hence weak:
 * NULL in a build for one core. gotoblas_dynamic_init is what OpenBLAS's constructor calls:
 * it reads OPENBLAS_CORETYPE and initialises the core's parameters; _quit forgets the core. */
char *openblas_get_config(void);
char *openblas_get_corename(void);
void openblas_set_num_threads(int num_threads);
extern void gotoblas_dynamic_init(void) __attribute__((weak));
extern void gotoblas_dynamic_quit(void) __attribute__((weak));

/* OpenBLAS's x86-64 cores by the instruction set their kernels need: 4 AVX-512, 3 AVX2 and
 * FMA, 2 AVX, 1 SSE2/SSE3 (every x86-64). Names as openblas_get_corename() spells them;
 * a name not listed (another architecture's core) is left alone. */
static const struct {
    const char *name;
    int level;
} cores[] = {
    {"SkylakeX", 4}, {"Cooperlake", 4}, {"SapphireRapids", 4},
    {"Haswell", 3}, {"Zen", 3},
    {"Sandybridge", 2}, {"Bulldozer", 2}, {"Piledriver", 2}, {"Steamroller", 2}, {"Excavator", 2},
    {"Prescott", 1}, {"Core2", 1}, {"Penryn", 1}, {"Dunnington", 1}, {"Nehalem", 1}, {"Atom", 1},
    {"Barcelona", 1}, {"Opteron", 1}, {"Opteron_SSE3", 1}, {"Nano", 1}, {"Bobcat", 1},
    {"Athlon", 1}, {"Katmai", 1}, {"Coppermine", 1}, {"Northwood", 1}, {"Banias", 1},
};

/* The core taken for each level. For AVX-512, SkylakeX, or Cooperlake where the processor
 * has AVX512-BF16: OpenBLAS's own choice on such processors (its sgemm and dgemm are
 * SkylakeX's; it adds bf16 kernels), so that the best core named is the one it would run. */
static const char *const ladder[5] = {"", "Prescott", "Sandybridge", "Haswell", "SkylakeX"};
static const char *const isa_name[5] = {"", "SSE3", "AVX", "AVX2", "AVX-512"};

static int core_level(const char *name)
{
    for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
        if (strcasecmp(name, cores[i].name) == 0)
            return cores[i].level;
    return 0;
}

/* The instruction set this processor and its operating system support (the compiler's cpuid
 * reading checks that the OS saves the AVX and AVX-512 registers). */
static int cpu_level(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq"))
        return 4;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return 3;
    if (__builtin_cpu_supports("avx"))
        return 2;
    return 1;
#else
    return 0;
#endif
}

static int cpu_bf16(void)
{
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512bf16") != 0;
#else
    return 0;
#endif
}

static const char *level_core(int level)
{
    return level == 4 && cpu_bf16() ? "Cooperlake" : ladder[level];
}

const char *tupe_blas_best_core(void) { return level_core(cpu_level()); }

/* ---- the check ------------------------------------------------------------------------ */

/* Values in [-1, 1) from a counter, the same on every run. */
static double val(unsigned i, unsigned salt)
{
    unsigned x = i * 2654435761u ^ salt * 40503u;
    x ^= x >> 13;
    x *= 0x5bd1e995u;
    x ^= x >> 15;
    return (double)(x & 0xffff) / 32768.0 - 1.0;
}

/* Shapes that reach OpenBLAS's small-matrix kernels (M N K <= 100^3), its blocked path with
 * K over two blocks and edges that are no multiple of the unrolling, and an empty sum (K = 0:
 * C = beta C), each with every transpose, alpha and beta not 1 and 0, and leading dimensions
 * wider than the rows. */
static const int shapes[][3] = {{5, 3, 7}, {33, 17, 65}, {45, 37, 700}, {4, 3, 0}};
#define NSHAPES (sizeof shapes / sizeof *shapes)
#define PAD 3

/* One array of the check, of float or double elements. */
typedef struct arr {
    int dbl;
    void *p;
} arr;

static double get(arr a, size_t i) { return a.dbl ? ((double *)a.p)[i] : ((float *)a.p)[i]; }
static void put(arr a, size_t i, double v)
{
    if (a.dbl)
        ((double *)a.p)[i] = v;
    else
        ((float *)a.p)[i] = (float)v;
}
/* the value as stored in the array's type */
static double stored(int dbl, double v) { return dbl ? v : (double)(float)v; }

static int check_one(int dbl, tupe_sgemm_fn sg, tupe_dgemm_fn dg, int s, int ta, int tb,
                     char *why, size_t cap)
{
    int M = shapes[s][0], N = shapes[s][1], K = shapes[s][2];
    int ar = ta ? K : M, ac = ta ? M : K, br = tb ? N : K, bc = tb ? K : N;
    int lda = ac + PAD, ldb = bc + PAD, ldc = N + PAD;
    size_t na = (size_t)ar * lda, nb = (size_t)br * ldb, nc = (size_t)M * ldc;
    size_t es = dbl ? sizeof(double) : sizeof(float);
    arr A = {dbl, malloc((na + 1) * es)}, B = {dbl, malloc((nb + 1) * es)}, C = {dbl, malloc(nc * es)};
    double *ref = malloc(nc * sizeof *ref), *bound = malloc(nc * sizeof *bound);
    int bad = 0;
    if (!A.p || !B.p || !C.p || !ref || !bound) {
        snprintf(why, cap, "out of memory");
        bad = 1;
        goto out;
    }
    double alpha = 0.75, beta = 0.5;
    for (size_t i = 0; i < na; i++)
        put(A, i, val((unsigned)i, 1));
    for (size_t i = 0; i < nb; i++)
        put(B, i, val((unsigned)i, 2));
    for (size_t i = 0; i < nc; i++)
        put(C, i, val((unsigned)i, 3));
    /* the plain loop, in double, and a bound on the rounding of the product in its type */
    double eps = dbl ? 0x1p-52 : 0x1p-23;
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double sum = 0, mag = 0;
            for (int k = 0; k < K; k++) {
                double x = get(A, ta ? (size_t)k * lda + i : (size_t)i * lda + k);
                double y = get(B, tb ? (size_t)j * ldb + k : (size_t)k * ldb + j);
                sum += x * y;
                mag += fabs(x * y);
            }
            size_t o = (size_t)i * ldc + j;
            double c = get(C, o);
            ref[o] = alpha * sum + beta * c;
            bound[o] = 2 * (K + 4) * eps * (alpha * mag + beta * fabs(c)) + 1e-30;
        }
    if (dbl)
        dg(ta, tb, M, N, K, alpha, A.p, lda, B.p, ldb, beta, C.p, ldc);
    else
        sg(ta, tb, M, N, K, (float)alpha, A.p, lda, B.p, ldb, (float)beta, C.p, ldc);
    /* test hook: this product comes out wrong, as a broken kernel's would */
    if (tupe_fault_hit("blas.check")) {
        size_t o = (size_t)(M / 2) * ldc + N / 2;
        put(C, o, get(C, o) + 0.5);
    }
    for (int i = 0; i < M && !bad; i++)
        for (int j = 0; j < ldc && !bad; j++) {
            size_t o = (size_t)i * ldc + j;
            double got = get(C, o);
            /* columns past N (the leading dimension's padding) are not to be touched */
            if (j < N ? !(fabs(got - ref[o]) <= bound[o]) : got != stored(dbl, val((unsigned)o, 3)))
                bad = 1 + (j >= N);
            if (bad)
                snprintf(why, cap, "%cgemm %c%c %dx%dx%d: C[%d,%d] = %.9g, %s %.9g", dbl ? 'd' : 's',
                         ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, i, j, got,
                         j < N ? "a plain loop gives" : "padding overwritten, was",
                         j < N ? ref[o] : stored(dbl, val((unsigned)o, 3)));
        }
out:
    free(A.p), free(B.p), free(C.p), free(ref), free(bound);
    return bad != 0;
}

int tupe_blas_check(tupe_sgemm_fn sgemm, tupe_dgemm_fn dgemm, char *why, size_t cap)
{
    for (int dbl = 0; dbl < (dgemm ? 2 : 1); dbl++)
        for (size_t s = 0; s < NSHAPES; s++)
            for (int t = 0; t < 4; t++)
                if (check_one(dbl, sgemm, dgemm, (int)s, t >> 1, t & 1, why, cap))
                    return 1;
    return 0;
}

static void cblas_s(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                    const float *B, int ldb, float beta, float *C, int ldc)
{
    cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

static void cblas_d(int ta, int tb, int M, int N, int K, double alpha, const double *A, int lda,
                    const double *B, int ldb, double beta, double *C, int ldc)
{
    cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M,
                N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* oneDNN's sgemm, on one thread: inside a parallel region it runs on the calling thread; outside
 * one it would start its own team of omp_get_max_threads(), so it is given a team of one. */
static void onednn_s(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    if (M <= 0 || N <= 0)
        return;
    if (K <= 0) { /* C = beta C, which oneDNN does not do for an empty sum (C not read at 0) */
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++)
                C[(size_t)i * ldc + j] = beta == 0 ? 0 : beta * C[(size_t)i * ldc + j];
        return;
    }
    int outside = !omp_in_parallel(), was = outside ? omp_get_max_threads() : 1;
    if (outside)
        omp_set_num_threads(1);
    /* it refuses only arguments a BLAS would refuse too (short leading dimensions), which the
     * callers never pass; OpenBLAS's then says what is wrong */
    if (dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', M, N, K, alpha, A, lda, B, ldb, beta, C, ldc) !=
        dnnl_success)
        cblas_s(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    if (outside)
        omp_set_num_threads(was);
}

/* test hook: oneDNN's sgemm computes wrong (one element of every product off by 0.5) */
static void onednn_s_wrong(int ta, int tb, int M, int N, int K, float alpha, const float *A,
                           int lda, const float *B, int ldb, float beta, float *C, int ldc)
{
    onednn_s(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    C[0] += 0.5f;
}

static tupe_sgemm_fn sgemm_impl = cblas_s;

void tupe_blas_sgemm(int ta, int tb, int M, int N, int K, float alpha, const float *A, int lda,
                     const float *B, int ldb, float beta, float *C, int ldc)
{
    sgemm_impl(ta, tb, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

/* The instruction set of oneDNN's sgemm kernels: the widest of those it has kernels for
 * (AVX-512, AVX2, AVX, SSE4.1) within what it found the processor to have. */
static const char *onednn_isa(void)
{
    dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    static const struct {
        dnnl_cpu_isa_t bits;
        const char *name;
    } levels[] = {{dnnl_cpu_isa_avx512_core, "AVX-512"}, {dnnl_cpu_isa_avx2, "AVX2"},
                  {dnnl_cpu_isa_avx, "AVX"}, {dnnl_cpu_isa_sse41, "SSE4.1"}};
    for (size_t i = 0; i < sizeof levels / sizeof *levels; i++)
        if (((unsigned)isa & (unsigned)levels[i].bits) == (unsigned)levels[i].bits)
            return levels[i].name;
    return "";
}

/* ---- the choice ------------------------------------------------------------------------- */

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int done, result;
static tupe_blas_info info;
static tupe_err failure;

/* OpenBLAS re-initialised on core `name`, as its constructor would with OPENBLAS_CORETYPE
 * set; the variable is set for that call only (it is read nowhere else). */
static void use_core(const char *name)
{
    gotoblas_dynamic_quit();
    setenv("OPENBLAS_CORETYPE", name, 1);
    gotoblas_dynamic_init();
    unsetenv("OPENBLAS_CORETYPE");
}

/* src into dst[cap], cut to fit (a bounded copy, not snprintf: the cut is intended here) */
static void copy(char *dst, size_t cap, const char *src)
{
    size_t n = src ? strnlen(src, cap - 1) : 0;
    memcpy(dst, src ? src : "", n);
    dst[n] = 0;
}

static int choose(tupe_err *e)
{
    tupe_blas_info *in = &info;
    memset(in, 0, sizeof *in);
    /* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY Prescott MAX_THREADS=64" */
    const char *cfg = openblas_get_config();
    char ver[32] = "";
    if (cfg && sscanf(cfg, "OpenBLAS %31s", ver) == 1)
        snprintf(in->library, sizeof in->library, "OpenBLAS %s", ver);
    else
        copy(in->library, sizeof in->library, "OpenBLAS");
    int dynamic = gotoblas_dynamic_init && gotoblas_dynamic_quit && cfg && strstr(cfg, "DYNAMIC_ARCH");
    const char *user = getenv("OPENBLAS_CORETYPE");
    int level = cpu_level();
    copy(in->isa, sizeof in->isa, isa_name[level]);
    /* test hook: OpenBLAS fell back to its generic core, as 0.3.21 does on unknown processors */
    if (dynamic && level > 0 && !(user && *user) && tupe_fault_hit("blas.generic"))
        use_core("Prescott");
    copy(in->own, sizeof in->own, openblas_get_corename());
    /* The best core: OpenBLAS's own where it reached the processor's level (the one the
     * selection keeps, e.g. Cooperlake, not the ladder's SkylakeX), else the ladder's. */
    snprintf(in->best, sizeof in->best, "%.31s",
             level > 0 && core_level(in->own) == level ? in->own : level_core(level));

    /* The cores to try, best first: the processor's and those down to OpenBLAS's own (when
     * OpenBLAS fell back below it), OpenBLAS's or the user's, then the ladder below that. */
    const char *try[8];
    int n = 0, own = core_level(in->own);
    if (!dynamic) {
        in->how = TUPE_BLAS_FIXED;
    } else if (user && *user) {
        in->how = TUPE_BLAS_USER;
    } else if (own > 0 && own < level) {
        in->how = TUPE_BLAS_CHOSEN;
        for (int l = level; l > own; l--)
            try[n++] = l == level ? in->best : ladder[l];
    } else {
        in->how = TUPE_BLAS_OWN;
    }
    try[n++] = in->own;
    if (dynamic)
        for (int l = own - 1; l >= 1; l--)
            try[n++] = ladder[l];

    char why[256] = "", failed[128] = "";
    const char *current = in->own;
    int ok = -1;
    for (int i = 0; i < n && ok < 0; i++) {
        if (dynamic && strcasecmp(try[i], current) != 0) {
            use_core(try[i]);
            current = openblas_get_corename();
        }
        if (tupe_blas_check(cblas_s, cblas_d, why, sizeof why) == 0) {
            ok = i;
        } else {
            size_t l = strlen(failed);
            snprintf(failed + l, sizeof failed - l, "%s%.31s", l ? ", " : "", current);
        }
    }
    if (ok < 0) {
        snprintf(in->line, sizeof in->line, "%.47s: no kernels", in->library);
        return tupe_fail(e, TUPE_EFAIL, "%s computes wrong matrix products with every core tried "
                         "(%s): %s", in->library, failed, why);
    }
    copy(in->core, sizeof in->core, openblas_get_corename());
    int lv = core_level(in->core);
    const char *isa = lv > 0 ? isa_name[lv] : "";
    if (failed[0]) {
        snprintf(in->notice, sizeof in->notice, "%.47s's %.100s kernels failed the start-up check of "
                 "matrix products against a plain loop (%.200s): using its %.31s kernels", in->library,
                 failed, why, in->core);
        in->how = TUPE_BLAS_AVOIDED;
    }
    char reason[200];
    switch (in->how) {
    case TUPE_BLAS_CHOSEN:
        snprintf(reason, sizeof reason, "chosen for this processor: OpenBLAS's own choice was %.31s",
                 in->own);
        break;
    case TUPE_BLAS_USER: /* the value named only where it is a plain word */
        snprintf(reason, sizeof reason, "OPENBLAS_CORETYPE=%s",
                 strlen(user) < 32 && strspn(user, "abcdefghijklmnopqrstuvwxyz"
                                             "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") == strlen(user)
                     ? user : "(set)");
        break;
    case TUPE_BLAS_FIXED:
        snprintf(reason, sizeof reason, "a build for one core");
        break;
    case TUPE_BLAS_AVOIDED:
        snprintf(reason, sizeof reason, "in place of %.100s, which failed the start-up check", failed);
        break;
    default:
        snprintf(reason, sizeof reason, "OpenBLAS's choice for this processor");
    }
    char ob[320];
    snprintf(ob, sizeof ob, "%.47s %.31s kernels%s%s%s, %.200s", in->library, in->core,
             isa[0] ? " (" : "", isa, isa[0] ? ")" : "", reason);

    /* oneDNN's sgemm, unless the user set OpenBLAS's core (then OpenBLAS's for every product) */
    sgemm_impl = cblas_s;
    if (in->how != TUPE_BLAS_USER) {
        const dnnl_version_t *v = dnnl_version();
        char dn[48];
        snprintf(dn, sizeof dn, "oneDNN %d.%d.%d", v->major, v->minor, v->patch);
        tupe_sgemm_fn f = tupe_fault_hit("blas.onednn") ? onednn_s_wrong : onednn_s;
        if (tupe_blas_check(f, NULL, why, sizeof why) == 0) {
            sgemm_impl = onednn_s;
            copy(in->sgemm, sizeof in->sgemm, dn);
            copy(in->sgemm_isa, sizeof in->sgemm_isa, onednn_isa());
        } else {
            size_t l = strlen(in->notice);
            snprintf(in->notice + l, sizeof in->notice - l, "%s%.47s's sgemm failed the start-up check "
                     "of matrix products against a plain loop (%.200s): using %.47s's", l ? "; " : "",
                     dn, why, in->library);
        }
    }
    if (in->sgemm[0])
        snprintf(in->line, sizeof in->line, "%.47s sgemm%s%.15s%s for single precision; %.319s",
                 in->sgemm, in->sgemm_isa[0] ? " (" : "", in->sgemm_isa, in->sgemm_isa[0] ? ")" : "",
                 ob);
    else
        copy(in->line, sizeof in->line, ob);
    return 0;
}

int tupe_blas_select(tupe_err *e)
{
    pthread_mutex_lock(&lock);
    if (!done) {
        result = choose(&failure);
        done = 1;
    }
    int rc = result;
    pthread_mutex_unlock(&lock);
    if (rc && e)
        *e = failure;
    return rc;
}

const tupe_blas_info *tupe_blas_info_get(void)
{
    pthread_mutex_lock(&lock);
    const tupe_blas_info *p = done ? &info : NULL;
    pthread_mutex_unlock(&lock);
    return p;
}
