#include "train/rtdmetrics.h"

#include <math.h>
#include <stdlib.h>

typedef struct scored {
    double s;
    int32_t y;
} scored;

static int by_score(const void *a, const void *b)
{
    double x = ((const scored *)a)->s, y = ((const scored *)b)->s;
    return (x > y) - (x < y);
}

int tupe_rtd_metrics_of(const double *score, const int32_t *label, size_t n, tupe_rtd_metrics *m)
{
    size_t pos = 0, tp = 0, pp = 0;
    for (size_t i = 0; i < n; i++) {
        int y = label[i] != 0, p = score[i] > 0;
        pos += (size_t)y;
        pp += (size_t)p;
        tp += (size_t)(y && p);
    }
    m->precision = pp ? (double)tp / (double)pp : 0;
    m->recall = pos ? (double)tp / (double)pos : 0;
    m->auc = NAN;
    if (pos == 0 || pos == n)
        return 0;
    scored *v = malloc(n * sizeof *v);
    if (!v)
        return -1;
    for (size_t i = 0; i < n; i++)
        v[i] = (scored){score[i], label[i] != 0};
    qsort(v, n, sizeof *v, by_score);
    /* Mann-Whitney: the sum of the positives' ranks (ties averaged), which is sklearn's
     * trapezoidal area for a ROC curve through every distinct threshold */
    double rank_sum = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i, npos = 0;
        while (j < n && v[j].s == v[i].s)
            npos += (size_t)v[j++].y;
        rank_sum += (double)npos * ((double)(i + 1) + (double)j) / 2;
        i = j;
    }
    double P = (double)pos, N = (double)(n - pos);
    m->auc = (rank_sum - P * (P + 1) / 2) / (P * N);
    free(v);
    return 0;
}
