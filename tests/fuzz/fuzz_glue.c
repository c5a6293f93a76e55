/* GLUE files (glue.h): the rows of every task's train, dev and test TSVs, and prediction
 * files. The first byte picks the file (bits 0-6: the task and split, in table order; bit 7: a
 * predictions file of that task); the rest is its content. Rows taken must hold what the task
 * says (sentences without tabs or line ends, a label of the task, a finite score), in file
 * order, and together with the rows skipped account for every data line; predictions read
 * must survive tupe_glue_write_predictions. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "glue/glue.h"

static void skip_cb(void *ctx, const char *path, uint64_t line, const char *why)
{
    (void)path;
    FUZZ_CHECK(line > 0 && why[0]);
    ++*(size_t *)ctx;
}

static void check_text(const char *s)
{
    FUZZ_CHECK(s != NULL && !strchr(s, '\t') && !strchr(s, '\n'));
}

static void rows(const tupe_glue_task *t, const tupe_glue_split *s, const uint8_t *d, size_t n)
{
    tupe_glue_data g;
    tupe_err e;
    size_t skipped = 0;
    if (tupe_glue_parse(t, s, (const char *)d, n, "fuzz.tsv", &g, skip_cb, &skipped, &e) != 0) {
        FUZZ_ERR(&e);
        return;
    }
    FUZZ_CHECK(g.n > 0 && g.skipped == skipped);
    int test = s->kind == TUPE_GLUE_TEST;
    if (test)
        FUZZ_CHECK(skipped == 0);
    for (size_t i = 0; i < g.n; i++) {
        const tupe_glue_example *x = &g.ex[i];
        check_text(x->s1);
        if ((test ? t->test_s2 : t->s2) >= 0)
            check_text(x->s2);
        else
            FUZZ_CHECK(x->s2 == NULL);
        if (test)
            FUZZ_CHECK(x->label == -1);
        else if (t->nlabels == 1)
            FUZZ_CHECK(isfinite(x->value));
        else
            FUZZ_CHECK(x->label >= 0 && x->label < t->nlabels);
        if (i)
            FUZZ_CHECK(x->row > g.ex[i - 1].row && x->line > g.ex[i - 1].line);
    }
    /* every data row is taken or skipped; rows are numbered from 0 */
    FUZZ_CHECK((size_t)g.ex[g.n - 1].row < g.n + skipped);
    tupe_glue_free(&g);
}

static void predictions(const tupe_glue_task *t, const uint8_t *d, size_t n)
{
    /* the number of examples: the count of line ends, so that complete files are common */
    size_t count = 0;
    for (size_t i = 0; i < n; i++)
        count += d[i] == '\n';
    char path[64];
    int fd = fuzz_memfile(d, n, path, sizeof path);
    int *labels;
    double *values;
    tupe_err e;
    int rc = tupe_glue_read_predictions(path, t, count ? count - 1 : 0, &labels, &values, &e);
    close(fd);
    if (rc) {
        FUZZ_ERR(&e);
        return;
    }
    size_t m = count ? count - 1 : 0;
    for (size_t i = 0; i < m; i++)
        FUZZ_CHECK(t->nlabels == 1 ? isfinite(values[i]) : labels[i] >= 0 && labels[i] < t->nlabels);
    char out[4200];
    snprintf(out, sizeof out, "%s/pred.tsv", fuzz_dir());
    FUZZ_CHECK(tupe_glue_write_predictions(out, t, labels, values, m, &e) == 0);
    int *l2;
    double *v2;
    FUZZ_CHECK(tupe_glue_read_predictions(out, t, m, &l2, &v2, &e) == 0);
    for (size_t i = 0; i < m; i++) {
        if (t->nlabels > 1)
            FUZZ_CHECK(l2[i] == labels[i]);
        else /* written as "%.3f", clipped to [0, 5] */
            FUZZ_CHECK(fabs(v2[i] - fmin(fmax(values[i], 0), 5)) <= 0.0005 + 1e-12);
    }
    free(labels), free(values), free(l2), free(v2);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int ntasks, pick = data[0] & 0x7f, total = 0;
    const tupe_glue_task *tasks = tupe_glue_tasks(&ntasks);
    for (int i = 0; i < ntasks; i++)
        total += tasks[i].nsplits;
    pick %= total;
    for (int i = 0; i < ntasks; i++) {
        if (pick >= tasks[i].nsplits) {
            pick -= tasks[i].nsplits;
            continue;
        }
        if (data[0] & 0x80)
            predictions(&tasks[i], data + 1, size - 1);
        else
            rows(&tasks[i], &tasks[i].splits[pick], data + 1, size - 1);
        break;
    }
    return 0;
}
