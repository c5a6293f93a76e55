/* The discriminator's metrics of replaced-token detection (ELECTRA, model/electra.h), as
 * scikit-learn defines them (tests/reference/make_rtd_fixtures.py checks against it), over the
 * non-padding tokens of a fixed probe:
 *
 *   auc        area under the ROC curve of the score for "replaced" (sklearn's roc_auc_score:
 *              ties count one half); NaN when one class is absent
 *   precision  of "replaced" predicted where the logit > 0 (probability > 1/2, ELECTRA's
 *              rounding); 0 when nothing is predicted replaced (sklearn's zero_division)
 *   recall     of "replaced": the replaced tokens predicted so; 0 when none was replaced
 *
 * The original's metric_fn multiplies by the input mask, so that padding enters its AUC as
 * (label 0, score 0); here padding is left out. */
#ifndef TUPE_RTDMETRICS_H
#define TUPE_RTDMETRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct tupe_rtd_metrics {
    double auc, precision, recall;
} tupe_rtd_metrics;

/* score[i] the logit of "replaced", label[i] 1 when replaced; returns 0, or -1 when out of
 * memory. */
int tupe_rtd_metrics_of(const double *score, const int32_t *label, size_t n, tupe_rtd_metrics *m);

#endif
