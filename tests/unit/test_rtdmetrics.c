/* The discriminator's AUC, precision and recall (train/rtdmetrics.h) against scikit-learn's
 * (tests/reference/make_rtd_fixtures.py -> tests/fixtures/electra/rtd_metrics.json). */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "train/rtdmetrics.h"
#include "unit.h"

static void sklearn(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/electra/rtd_metrics.json", unit_src());
    json_error_t je;
    json_t *doc = json_load_file(path, 0, &je);
    CHECK_MSG(doc != NULL, "%s: %s", path, je.text);
    json_t *cases = json_object_get(doc, "cases");
    CHECK(json_array_size(cases) >= 6);
    for (size_t c = 0; c < json_array_size(cases); c++) {
        json_t *k = json_array_get(cases, c);
        json_t *js = json_object_get(k, "score"), *jl = json_object_get(k, "label");
        size_t n = json_array_size(js);
        double *s = malloc(n * sizeof *s);
        int32_t *y = malloc(n * sizeof *y);
        for (size_t i = 0; i < n; i++) {
            s[i] = json_number_value(json_array_get(js, i));
            y[i] = (int32_t)json_integer_value(json_array_get(jl, i));
        }
        tupe_rtd_metrics m;
        CHECK_INT(tupe_rtd_metrics_of(s, y, n, &m), 0);
        const char *name = json_string_value(json_object_get(k, "name"));
        json_t *auc = json_object_get(k, "auc");
        if (json_is_null(auc))
            CHECK_MSG(isnan(m.auc), "%s: AUC %g where sklearn has none", name, m.auc);
        else
            CHECK_MSG(fabs(m.auc - json_number_value(auc)) <= 1e-12, "%s: AUC %.15g, sklearn %.15g",
                      name, m.auc, json_number_value(auc));
        CHECK_MSG(fabs(m.precision - json_number_value(json_object_get(k, "precision"))) <= 1e-12,
                  "%s: precision %.15g", name, m.precision);
        CHECK_MSG(fabs(m.recall - json_number_value(json_object_get(k, "recall"))) <= 1e-12,
                  "%s: recall %.15g", name, m.recall);
        printf("# %s: %zu tokens, AUC %.6f, precision %.4f, recall %.4f\n", name, n, m.auc,
               m.precision, m.recall);
        free(s), free(y);
    }
    json_decref(doc);
}

UNIT_MAIN(T(sklearn))
