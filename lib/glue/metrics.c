#include "glue/metrics.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double tupe_accuracy(const int *pred, const int *gold, size_t n)
{
    if (n == 0)
        return NAN;
    size_t ok = 0;
    for (size_t i = 0; i < n; i++)
        ok += pred[i] == gold[i];
    return (double)ok / (double)n;
}

double tupe_f1(const int *pred, const int *gold, size_t n)
{
    size_t tp = 0, fp = 0, fn = 0;
    for (size_t i = 0; i < n; i++) {
        tp += pred[i] == 1 && gold[i] == 1;
        fp += pred[i] == 1 && gold[i] != 1;
        fn += pred[i] != 1 && gold[i] == 1;
    }
    if (tp == 0)
        return 0.0;
    return 2.0 * (double)tp / (2.0 * (double)tp + (double)fp + (double)fn);
}

double tupe_mcc(const int *pred, const int *gold, size_t n, int k)
{
    /* sklearn: with the confusion matrix C, t_k = row sums (true), p_k = column sums (pred),
     * c = trace, s = n: (c·s − Σ t_k p_k) / sqrt((s² − Σ p_k²)(s² − Σ t_k²)). */
    if (k <= 0 || n == 0)
        return 0.0;
    double *t = calloc((size_t)k, sizeof *t), *p = calloc((size_t)k, sizeof *p);
    if (!t || !p) {
        free(t), free(p);
        return NAN;
    }
    double c = 0, s = (double)n;
    for (size_t i = 0; i < n; i++) {
        if (gold[i] >= 0 && gold[i] < k)
            t[gold[i]] += 1;
        if (pred[i] >= 0 && pred[i] < k)
            p[pred[i]] += 1;
        c += pred[i] == gold[i];
    }
    double tp = 0, pp = 0, tt = 0;
    for (int j = 0; j < k; j++) {
        tp += t[j] * p[j];
        pp += p[j] * p[j];
        tt += t[j] * t[j];
    }
    free(t), free(p);
    double den = (s * s - pp) * (s * s - tt);
    if (den == 0)
        return 0.0;
    return (c * s - tp) / sqrt(den);
}

double tupe_pearson(const double *x, const double *y, size_t n)
{
    if (n < 2)
        return NAN;
    double mx = 0, my = 0;
    for (size_t i = 0; i < n; i++)
        mx += x[i], my += y[i];
    mx /= (double)n, my /= (double)n;
    double sxy = 0, sxx = 0, syy = 0;
    for (size_t i = 0; i < n; i++) {
        double a = x[i] - mx, b = y[i] - my;
        sxy += a * b, sxx += a * a, syy += b * b;
    }
    if (sxx == 0 || syy == 0)
        return NAN;
    double r = sxy / sqrt(sxx * syy);
    /* Rounding can push |r| a hair past 1, as scipy also clips. */
    return r > 1 ? 1 : r < -1 ? -1 : r;
}

typedef struct {
    double v;
    size_t i;
} vi;

static int cmp_vi(const void *a, const void *b)
{
    const vi *x = a, *y = b;
    if (x->v < y->v)
        return -1;
    if (x->v > y->v)
        return 1;
    return x->i < y->i ? -1 : x->i > y->i;
}

int tupe_rank_average(const double *x, double *r, size_t n)
{
    vi *a = malloc((n ? n : 1) * sizeof *a);
    if (!a)
        return -1;
    for (size_t i = 0; i < n; i++)
        a[i].v = x[i], a[i].i = i;
    qsort(a, n, sizeof *a, cmp_vi);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && a[j + 1].v == a[i].v)
            j++;
        double rank = ((double)i + (double)j) / 2.0 + 1.0;
        for (size_t k = i; k <= j; k++)
            r[a[k].i] = rank;
        i = j + 1;
    }
    free(a);
    return 0;
}

double tupe_spearman(const double *x, const double *y, size_t n)
{
    if (n < 2)
        return NAN;
    double *rx = malloc(n * sizeof *rx), *ry = malloc(n * sizeof *ry);
    double r = NAN;
    if (rx && ry && tupe_rank_average(x, rx, n) == 0 && tupe_rank_average(y, ry, n) == 0)
        r = tupe_pearson(rx, ry, n);
    free(rx), free(ry);
    return r;
}

/* NaN sorts first: an undefined score counts as the lowest (a total order for qsort). */
static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    if (isnan(x) || isnan(y))
        return isnan(y) - isnan(x);
    return x < y ? -1 : x > y;
}

double tupe_median(const double *x, size_t n)
{
    if (n == 0)
        return NAN;
    double *s = malloc(n * sizeof *s);
    if (!s)
        return NAN;
    memcpy(s, x, n * sizeof *s);
    qsort(s, n, sizeof *s, cmp_d);
    double m = n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2.0;
    free(s);
    return m;
}
