/* GLUE readers on the real files (../shared/data/glue; skipped without them) with the published
 * row counts, the QQP/MNLI layouts from fixtures, the malformed-row rules, and the leaderboard
 * files. */
#include "base/fileio.h"
#include "glue/glue.h"
#include "unit.h"

static int skips;
static char last_skip[512];
static void on_skip(void *ctx, const char *path, uint64_t line, const char *why)
{
    (void)ctx;
    skips++;
    snprintf(last_skip, sizeof last_skip, "%s:%llu: %s", path, (unsigned long long)line, why);
}

/* A read the rest of the test builds on: on failure, say why and end the test. */
#define READ(t, split, dir, d) do { \
    tupe_err e_; \
    if (tupe_glue_read(t, tupe_glue_split_find(t, split), dir, d, NULL, NULL, &e_) != 0) { \
        unit_fail(__FILE__, __LINE__, "%s", e_.msg); \
        return; \
    } } while (0)

static void real_files_have_published_counts(void)
{
    const char *dir = unit_need_data("glue");
    if (!dir)
        return;
    static const char *present[] = {"CoLA", "SST-2", "MRPC", "STS-B", "RTE", "WNLI", "AX"};
    for (size_t i = 0; i < sizeof present / sizeof present[0]; i++) {
        const tupe_glue_task *t = tupe_glue_task_find(present[i]);
        CHECK(t != NULL);
        for (int s = 0; t && s < t->nsplits; s++) {
            tupe_glue_data d;
            tupe_err e;
            skips = 0;
            int rc = tupe_glue_read(t, &t->splits[s], dir, &d, on_skip, NULL, &e);
            CHECK_MSG(rc == 0, "%s", e.msg);
            if (rc)
                continue;
            CHECK_MSG((long)d.n == t->splits[s].rows, "%s %s: %zu rows, published %ld", t->name,
                      t->splits[s].name, d.n, t->splits[s].rows);
            CHECK_INT(skips, 0);
            tupe_glue_free(&d);
        }
    }
    /* QNLI: only dev and test are in the shared data. */
    const tupe_glue_task *q = tupe_glue_task_find("QNLI");
    for (int s = 1; s < 3; s++) {
        tupe_glue_data d;
        tupe_err e;
        int rc = tupe_glue_read(q, &q->splits[s], dir, &d, on_skip, NULL, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (rc)
            continue;
        CHECK_INT(d.n, q->splits[s].rows);
        tupe_glue_free(&d);
    }
}

static void quirks_of_the_real_files(void)
{
    const char *dir = unit_need_data("glue");
    if (!dir)
        return;
    tupe_glue_data d;
    const tupe_glue_task *t = tupe_glue_task_find("MRPC");
    READ(t, "train", dir, &d);
    /* BOM stripped (the header is recognized), labels are column 0, strings columns 3 and 4. */
    CHECK(d.ex[0].label == 0 || d.ex[0].label == 1);
    CHECK(d.ex[0].s2 != NULL && strchr(d.ex[0].s1, '\t') == NULL);
    int pos = 0;
    for (size_t i = 0; i < d.n; i++)
        pos += d.ex[i].label == 1;
    CHECK_INT(pos, 2474);
    tupe_glue_free(&d);
    /* CoLA: no header in train/dev, and dev has no final newline. */
    t = tupe_glue_task_find("cola");
    READ(t, "dev", dir, &d);
    CHECK_STR(d.ex[0].s1, "The sailors rode the breeze clear of the rocks.");
    CHECK_INT(d.ex[0].label, 1);
    int acc = 0;
    for (size_t i = 0; i < d.n; i++)
        acc += d.ex[i].label == 1;
    CHECK_INT(acc, 721);
    tupe_glue_free(&d);
    /* STS-B: the score is the last column, kept as in the file (0..5). */
    t = tupe_glue_task_find("STSB");
    READ(t, "dev", dir, &d);
    for (size_t i = 0; i < d.n; i++)
        CHECK(d.ex[i].value >= 0 && d.ex[i].value <= 5);
    tupe_glue_free(&d);
    /* QNLI dev: sentences that start with a quote are kept whole (no quote processing). */
    t = tupe_glue_task_find("QNLI");
    READ(t, "dev", dir, &d);
    int quoted = 0;
    for (size_t i = 0; i < d.n; i++)
        quoted += d.ex[i].s2[0] == '"';
    CHECK_INT(quoted, 19);
    tupe_glue_free(&d);
    /* Test rows: index is the row number. */
    t = tupe_glue_task_find("RTE");
    READ(t, "test", dir, &d);
    CHECK_INT(d.ex[2999].row, 2999);
    CHECK_INT(d.ex[5].label, -1);
    tupe_glue_free(&d);
}

static void qqp_and_mnli_layouts(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/tests/fixtures/glue/data", unit_src());
    tupe_glue_data d;
    tupe_err e;
    const tupe_glue_task *t = tupe_glue_task_find("QQP");
    skips = 0;
    CHECK_INT(tupe_glue_read(t, tupe_glue_split_find(t, "train"), dir, &d, on_skip, NULL, &e), 0);
    CHECK_INT(d.n, 12);
    CHECK_INT(d.skipped, 2);
    CHECK_INT(skips, 2);
    CHECK_HAS(last_skip, "QQP/train.tsv:10: unknown label 'maybe'");
    CHECK_STR(d.ex[1].s2, "\"Quoted\" question number 1?");
    tupe_glue_free(&d);
    READ(t, "test", dir, &d);
    CHECK_INT(d.n, 5);
    CHECK_STR(d.ex[4].s1, "t a 4");
    tupe_glue_free(&d);
    t = tupe_glue_task_find("MNLI");
    READ(t, "train", dir, &d);
    CHECK_INT(d.n, 9);
    CHECK_INT(d.ex[4].label, 1); /* "neutral": label from column 11 */
    tupe_glue_free(&d);
    const tupe_glue_split *mm = tupe_glue_split_find(t, "dev_mismatched");
    CHECK_STR(mm->board, "MNLI-mm");
    CHECK_INT(tupe_glue_read(t, mm, dir, &d, NULL, NULL, &e), 0);
    CHECK_INT(d.n, 5);
    CHECK_INT(d.ex[0].label, 1); /* gold label = column 15, not label1..5 */
    CHECK_STR(d.ex[3].s1, "dev premise 3");
    tupe_glue_free(&d);
    CHECK_STR(tupe_glue_split_find(t, "dev")->name, "dev_matched");
    READ(t, "test_mismatched", dir, &d);
    CHECK_INT(d.n, 3);
    tupe_glue_free(&d);
}

static void malformed_rows(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", unit_tmpdir());
    char sub[4200];
    snprintf(sub, sizeof sub, "%s/RTE", dir);
    tupe_err e;
    tupe_mkdir_p(sub, &e);
    char path[4300];
    snprintf(path, sizeof path, "%s/train.tsv", sub);
    const char *train = "\xef\xbb\xbfindex\tsentence1\tsentence2\tlabel\r\n"
                        "0\ta\tb\tentailment\r\n"
                        "1\tonly two\r\n"
                        "\r\n"
                        "2\t\"open quote\tc\tnot_entailment\r\n"
                        "3\tx\ty\tcontradiction\r\n"
                        "\r\n\r\n";
    unit_write(path, train, strlen(train));
    const tupe_glue_task *t = tupe_glue_task_find("RTE");
    tupe_glue_data d;
    skips = 0;
    CHECK_INT(tupe_glue_read(t, tupe_glue_split_find(t, "train"), dir, &d, on_skip, NULL, &e), 0);
    CHECK_INT(d.n, 2);
    CHECK_INT(skips, 3); /* wrong arity, blank line inside, unknown label */
    CHECK_HAS(last_skip, "train.tsv:6: unknown label 'contradiction'");
    CHECK_STR(d.ex[1].s1, "\"open quote");
    CHECK_STR(d.ex[1].s2, "c");
    CHECK_INT(d.ex[1].line, 5);
    tupe_glue_free(&d);
    snprintf(path, sizeof path, "%s/test.tsv", sub);
    const char *test = "index\tsentence1\tsentence2\n0\ta\tb\n1\tbroken\n";
    unit_write(path, test, strlen(test));
    CHECK_INT(tupe_glue_read(t, tupe_glue_split_find(t, "test"), dir, &d, NULL, NULL, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "test.tsv:3: expected 3 fields, got 2 (every test row needs a prediction)");
    snprintf(path, sizeof path, "%s/dev.tsv", sub);
    CHECK_INT(tupe_glue_read(t, tupe_glue_split_find(t, "dev"), dir, &d, NULL, NULL, &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "RTE/dev.tsv");
}

static void write_board(const char *dir, const char *only_missing, long short_by)
{
    int n;
    const tupe_glue_board_file *b = tupe_glue_board_files(&n);
    for (int i = 0; i < n; i++) {
        if (only_missing && strcmp(b[i].file, only_missing) == 0)
            continue;
        const tupe_glue_task *t = tupe_glue_task_find(b[i].task);
        size_t rows = (size_t)b[i].lines - 1 - (i == 3 ? (size_t)short_by : 0);
        int *lab = calloc(rows, sizeof *lab);
        double *val = calloc(rows, sizeof *val);
        for (size_t r = 0; r < rows; r++)
            lab[r] = (int)(r % (size_t)t->nlabels), val[r] = (double)(r % 60) / 10.0;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, b[i].file);
        tupe_err e;
        CHECK_INT(tupe_glue_write_predictions(path, t, t->nlabels > 1 ? lab : NULL, t->nlabels > 1 ? NULL : val, rows, &e), 0);
        free(lab), free(val);
    }
}

static void submission_files(void)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/sub", unit_tmpdir());
    tupe_err e;
    tupe_mkdir_p(dir, &e);
    write_board(dir, NULL, 0);
    CHECK_INT(tupe_glue_check_submission(dir, &e), 0);
    char zip[4200];
    snprintf(zip, sizeof zip, "%s/submission.zip", unit_tmpdir());
    CHECK_INT(tupe_glue_zip_submission(dir, zip, &e), 0);
    size_t n;
    char *z = unit_slurp(zip, &n);
    CHECK(n > 1000 && z[0] == 'P' && z[1] == 'K');
    free(z);
    char sts[4300];
    snprintf(sts, sizeof sts, "%s/STS-B.tsv", dir);
    char *s = unit_slurp(sts, NULL);
    CHECK(strncmp(s, "index\tprediction\n0\t0.000\n1\t0.100\n", 33) == 0);
    CHECK_HAS(s, "\n59\t5.000\n"); /* 5.9 clipped to 5 */
    free(s);
    char mnli[4300];
    snprintf(mnli, sizeof mnli, "%s/MNLI-mm.tsv", dir);
    s = unit_slurp(mnli, NULL);
    CHECK(strncmp(s, "index\tprediction\n0\tentailment\n1\tneutral\n2\tcontradiction\n", 56) == 0);
    free(s);
    /* Incomplete sets are refused. */
    char dir2[4096];
    snprintf(dir2, sizeof dir2, "%s/sub2", unit_tmpdir());
    tupe_mkdir_p(dir2, &e);
    write_board(dir2, "WNLI.tsv", 0);
    CHECK_INT(tupe_glue_check_submission(dir2, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "WNLI.tsv: missing");
    CHECK_INT(tupe_glue_zip_submission(dir2, zip, &e), TUPE_EDATA);
    char dir3[4096];
    snprintf(dir3, sizeof dir3, "%s/sub3", unit_tmpdir());
    tupe_mkdir_p(dir3, &e);
    write_board(dir3, NULL, 2);
    CHECK_INT(tupe_glue_check_submission(dir3, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "MNLI-mm.tsv: 9845 predictions for 9847 examples");
}

static void predictions_round_trip(void)
{
    const tupe_glue_task *t = tupe_glue_task_find("QNLI");
    int lab[4] = {1, 0, 0, 1};
    const char *p = unit_path("p.tsv");
    tupe_err e;
    CHECK_INT(tupe_glue_write_predictions(p, t, lab, NULL, 4, &e), 0);
    int *l;
    double *v;
    CHECK_INT(tupe_glue_read_predictions(p, t, 4, &l, &v, &e), 0);
    CHECK(memcmp(l, lab, sizeof lab) == 0);
    free(l), free(v);
    const char *bad = "index\tprediction\n0\tentailment\n0\tentailment\n";
    unit_write(p, bad, strlen(bad));
    CHECK_INT(tupe_glue_read_predictions(p, t, 2, &l, &v, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "p.tsv:3: index 0 appears twice");
    const char *bad2 = "index\tprediction\n0\tyes\n";
    unit_write(p, bad2, strlen(bad2));
    CHECK_INT(tupe_glue_read_predictions(p, t, 1, &l, &v, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "'yes' is not a QNLI prediction");
}

static void scores_use_the_task_metrics(void)
{
    const char *dir = unit_need_data("glue");
    if (!dir)
        return;
    tupe_glue_data d;
    tupe_err e;
    const tupe_glue_task *t = tupe_glue_task_find("MRPC");
    READ(t, "dev", dir, &d);
    int *lab = malloc(d.n * sizeof *lab);
    for (size_t i = 0; i < d.n; i++)
        lab[i] = 1; /* the majority-class baseline */
    tupe_glue_scores s;
    CHECK_INT(tupe_glue_score(&d, lab, NULL, &s, &e), 0);
    CHECK_INT(s.n, 2);
    CHECK_NEAR(tupe_glue_scores_get(&s, "acc"), 279.0 / 408.0, 1e-12); /* 68.4%, the known MRPC dev majority */
    CHECK(tupe_glue_scores_get(&s, "f1") > 0.81);
    CHECK(isnan(tupe_glue_scores_get(&s, "mcc")));
    free(lab);
    tupe_glue_free(&d);
    t = tupe_glue_task_find("STS-B");
    READ(t, "dev", dir, &d);
    double *v = malloc(d.n * sizeof *v);
    for (size_t i = 0; i < d.n; i++)
        v[i] = d.ex[i].value / 5.0; /* scale-invariant: perfect correlation */
    CHECK_INT(tupe_glue_score(&d, NULL, v, &s, &e), 0);
    CHECK_NEAR(tupe_glue_scores_get(&s, "pearson"), 1.0, 1e-12);
    CHECK_NEAR(tupe_glue_scores_get(&s, "spearman"), 1.0, 1e-12);
    CHECK_INT(tupe_glue_score(&d, NULL, NULL, &s, &e), TUPE_EFAIL);
    free(v);
    tupe_glue_free(&d);
}

UNIT_MAIN(T(scores_use_the_task_metrics), T(real_files_have_published_counts), T(quirks_of_the_real_files), T(qqp_and_mnli_layouts),
          T(malformed_rows), T(submission_files), T(predictions_round_trip))
