/* Metrics against scikit-learn and SciPy (tests/reference/make_glue_fixtures.py), including
 * ties and the degenerate cases (constant predictions, a single class). */
#include "glue/metrics.h"
#include "unit.h"

static int parse_ints(char *s, int *out, int cap)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < cap; t = strtok(NULL, ","))
        out[n++] = atoi(t);
    return n;
}

static int parse_doubles(char *s, double *out, int cap)
{
    int n = 0;
    for (char *t = strtok(s, ","); t && n < cap; t = strtok(NULL, ","))
        out[n++] = strtod(t, NULL);
    return n;
}

static void same(double got, const char *want, const char *what, const char *name)
{
    double w = strcmp(want, "nan") == 0 ? NAN : strtod(want, NULL);
    if (isnan(w))
        CHECK_MSG(isnan(got), "%s %s: %.17g, expected nan", name, what, got);
    else
        CHECK_MSG(fabs(got - w) <= 1e-12, "%s %s: %.17g, expected %.17g", name, what, got, w);
}

static void against_sklearn_and_scipy(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/glue/metrics.txt", unit_src());
    char *text = unit_slurp(path, NULL);
    int cases = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        if (line[0] == '#')
            continue;
        char *f[8];
        int nf = 0;
        for (char *q = line; nf < 8;) {
            f[nf++] = q;
            char *tab = strchr(q, '\t');
            if (!tab)
                break;
            *tab = 0;
            q = tab + 1;
        }
        static int pred[4096], gold[4096];
        static double x[4096], y[4096];
        if (strcmp(f[0], "cls") == 0 && nf == 8) {
            int k = atoi(f[2]);
            int n = parse_ints(f[3], pred, 4096);
            CHECK_INT(parse_ints(f[4], gold, 4096), n);
            same(tupe_accuracy(pred, gold, (size_t)n), f[5], "accuracy", f[1]);
            if (k == 2)
                same(tupe_f1(pred, gold, (size_t)n), f[6], "f1", f[1]);
            same(tupe_mcc(pred, gold, (size_t)n, k), f[7], "mcc", f[1]);
            cases++;
        } else if (strcmp(f[0], "reg") == 0 && nf == 6) {
            int n = parse_doubles(f[2], x, 4096);
            CHECK_INT(parse_doubles(f[3], y, 4096), n);
            same(tupe_pearson(x, y, (size_t)n), f[4], "pearson", f[1]);
            same(tupe_spearman(x, y, (size_t)n), f[5], "spearman", f[1]);
            cases++;
        } else {
            CHECK_MSG(0, "bad fixture line starting %s", f[0]);
        }
    }
    CHECK(cases >= 20);
    free(text);
}

static void ranks_and_median(void)
{
    double x[] = {3, 1, 4, 1, 5, 9, 2, 6, 5}, r[9];
    CHECK_INT(tupe_rank_average(x, r, 9), 0);
    double want[] = {4, 1.5, 5, 1.5, 6.5, 9, 3, 8, 6.5};
    for (int i = 0; i < 9; i++)
        CHECK_NEAR(r[i], want[i], 0);
    CHECK_NEAR(tupe_median(x, 9), 4, 0);
    CHECK_NEAR(tupe_median(x, 4), 2, 0);
    CHECK(isnan(tupe_median(x, 0)));
    /* An undefined score (a run whose predictions were constant) counts as the lowest. */
    double u[5] = {0.5, NAN, 0.7, 0.6, 0.4};
    CHECK_NEAR(tupe_median(u, 5), 0.5, 0);
    double v[3] = {NAN, 0.3, NAN};
    CHECK(isnan(tupe_median(v, 3)));
}

UNIT_MAIN(T(against_sklearn_and_scipy), T(ranks_and_median))
