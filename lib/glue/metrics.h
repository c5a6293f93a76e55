/* Evaluation metrics for GLUE, defined as scikit-learn and SciPy define them, with their
 * degenerate cases (tests/reference/make_glue_fixtures.py checks against both):
 *
 *   accuracy     fraction of exact matches; NaN for n = 0
 *   f1           F1 of the positive class (label index 1), as sklearn's f1_score: 0 when there
 *                are no true positives (including no positives at all, sklearn's zero_division)
 *   mcc          Matthews correlation, multi-class (sklearn's matthews_corrcoef); 0 when its
 *                denominator is 0, e.g. when one class is predicted for everything
 *   pearson      Pearson's r; NaN when either side is constant (scipy warns and returns nan)
 *   spearman     Pearson's r of the ranks, ties given their average rank; NaN when constant */
#ifndef TUPE_METRICS_H
#define TUPE_METRICS_H

#include <stddef.h>

double tupe_accuracy(const int *pred, const int *gold, size_t n);
double tupe_f1(const int *pred, const int *gold, size_t n);
/* Classes are 0 .. nclass-1. */
double tupe_mcc(const int *pred, const int *gold, size_t n, int nclass);
double tupe_pearson(const double *x, const double *y, size_t n);
double tupe_spearman(const double *x, const double *y, size_t n);
/* Average ranks (1-based, ties averaged) of x into r. Returns 0, or -1 when out of memory. */
int tupe_rank_average(const double *x, double *r, size_t n);
/* Median of n values (sorted copy; mean of the two middle ones for even n). NaN for n = 0;
 * a NaN counts as the lowest value. */
double tupe_median(const double *x, size_t n);

#endif
