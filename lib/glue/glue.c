#include "glue/glue.h"

#include <archive.h>
#include <archive_entry.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "glue/metrics.h"
#include "text/unicode.h"

#define L2 {"0", "1", NULL}
#define NLI3 {"entailment", "neutral", "contradiction"}
#define NLI2 {"entailment", "not_entailment", NULL}

static const tupe_glue_task tasks[] = {
    {"CoLA", 2, L2, "mcc", "mcc", 0, 4, 4, 2, 3, -1, 1, 1, -1, 10, 1, 3,
     {{"train", "CoLA/train.tsv", TUPE_GLUE_TRAIN, "CoLA", 8551},
      {"dev", "CoLA/dev.tsv", TUPE_GLUE_DEV, "CoLA", 1043},
      {"test", "CoLA/test.tsv", TUPE_GLUE_TEST, "CoLA", 1063}}},
    {"SST-2", 2, L2, "acc", "acc", 1, 2, 2, 2, 0, -1, 1, 1, -1, 10, 1, 3,
     {{"train", "SST-2/train.tsv", TUPE_GLUE_TRAIN, "SST-2", 67349},
      {"dev", "SST-2/dev.tsv", TUPE_GLUE_DEV, "SST-2", 872},
      {"test", "SST-2/test.tsv", TUPE_GLUE_TEST, "SST-2", 1821}}},
    {"MRPC", 2, L2, "acc,f1", "acc", 1, 5, 5, 5, 3, 4, 0, 3, 4, 10, 1, 3,
     {{"train", "MRPC/train.tsv", TUPE_GLUE_TRAIN, "MRPC", 3668},
      {"dev", "MRPC/dev.tsv", TUPE_GLUE_DEV, "MRPC", 408},
      {"test", "MRPC/test.tsv", TUPE_GLUE_TEST, "MRPC", 1725}}},
    {"STS-B", 1, {NULL, NULL, NULL}, "pearson,spearman", "pearson", 1, 10, 10, 9, 7, 8, -1, 7, 8, 10, 1, 3,
     {{"train", "STS-B/train.tsv", TUPE_GLUE_TRAIN, "STS-B", 5749},
      {"dev", "STS-B/dev.tsv", TUPE_GLUE_DEV, "STS-B", 1500},
      {"test", "STS-B/test.tsv", TUPE_GLUE_TEST, "STS-B", 1379}}},
    {"QQP", 2, L2, "acc,f1", "acc", 1, 6, 6, 3, 3, 4, 5, 1, 2, 5, 1, 3,
     {{"train", "QQP/train.tsv", TUPE_GLUE_TRAIN, "QQP", 363846},
      {"dev", "QQP/dev.tsv", TUPE_GLUE_DEV, "QQP", 40430},
      {"test", "QQP/test.tsv", TUPE_GLUE_TEST, "QQP", 390965}}},
    {"MNLI", 3, NLI3, "acc", "acc", 1, 12, 16, 10, 8, 9, -1, 8, 9, 5, 1, 5,
     {{"train", "MNLI/train.tsv", TUPE_GLUE_TRAIN, "MNLI", 392702},
      {"dev_matched", "MNLI/dev_matched.tsv", TUPE_GLUE_DEV, "MNLI-m", 9815},
      {"dev_mismatched", "MNLI/dev_mismatched.tsv", TUPE_GLUE_DEV, "MNLI-mm", 9832},
      {"test_matched", "MNLI/test_matched.tsv", TUPE_GLUE_TEST, "MNLI-m", 9796},
      {"test_mismatched", "MNLI/test_mismatched.tsv", TUPE_GLUE_TEST, "MNLI-mm", 9847}}},
    {"QNLI", 2, NLI2, "acc", "acc", 1, 4, 4, 3, 1, 2, -1, 1, 2, 5, 1, 3,
     {{"train", "QNLI/train.tsv", TUPE_GLUE_TRAIN, "QNLI", 104743},
      {"dev", "QNLI/dev.tsv", TUPE_GLUE_DEV, "QNLI", 5463},
      {"test", "QNLI/test.tsv", TUPE_GLUE_TEST, "QNLI", 5463}}},
    {"RTE", 2, NLI2, "acc", "acc", 1, 4, 4, 3, 1, 2, -1, 1, 2, 10, 1, 3,
     {{"train", "RTE/train.tsv", TUPE_GLUE_TRAIN, "RTE", 2490},
      {"dev", "RTE/dev.tsv", TUPE_GLUE_DEV, "RTE", 277},
      {"test", "RTE/test.tsv", TUPE_GLUE_TEST, "RTE", 3000}}},
    {"WNLI", 2, L2, "acc", "acc", 1, 4, 4, 3, 1, 2, -1, 1, 2, 10, 0, 3,
     {{"train", "WNLI/train.tsv", TUPE_GLUE_TRAIN, "WNLI", 635},
      {"dev", "WNLI/dev.tsv", TUPE_GLUE_DEV, "WNLI", 71},
      {"test", "WNLI/test.tsv", TUPE_GLUE_TEST, "WNLI", 146}}},
    {"AX", 3, NLI3, "", "", 1, 3, 3, 3, 1, 2, -1, 1, 2, 0, 0, 1,
     {{"test", "diagnostic/diagnostic.tsv", TUPE_GLUE_TEST, "AX", 1104}}},
};

const tupe_glue_task *tupe_glue_tasks(int *n)
{
    *n = (int)(sizeof tasks / sizeof tasks[0]);
    return tasks;
}

const tupe_glue_task *tupe_glue_task_find(const char *name)
{
    static const struct { const char *alias, *name; } alias[] = {
        {"SST2", "SST-2"}, {"STSB", "STS-B"}, {"STS", "STS-B"}, {"SST", "SST-2"},
        {"diagnostic", "AX"}, {"MNLI-m", "MNLI"}, {"MNLI-mm", "MNLI"}};
    for (size_t i = 0; i < sizeof alias / sizeof alias[0]; i++)
        if (strcasecmp(name, alias[i].alias) == 0)
            name = alias[i].name;
    for (size_t i = 0; i < sizeof tasks / sizeof tasks[0]; i++)
        if (strcasecmp(name, tasks[i].name) == 0)
            return &tasks[i];
    return NULL;
}

const tupe_glue_split *tupe_glue_split_find(const tupe_glue_task *t, const char *name)
{
    for (int i = 0; i < t->nsplits; i++)
        if (strcmp(t->splits[i].name, name) == 0)
            return &t->splits[i];
    /* "dev"/"test" pick the first split of that kind (MNLI: matched). */
    int kind = strcmp(name, "dev") == 0 ? TUPE_GLUE_DEV : strcmp(name, "test") == 0 ? TUPE_GLUE_TEST : -1;
    for (int i = 0; i < t->nsplits; i++)
        if (t->splits[i].kind == kind)
            return &t->splits[i];
    return NULL;
}

int tupe_glue_label_index(const tupe_glue_task *t, const char *s)
{
    for (int i = 0; i < t->nlabels && i < 3; i++)
        if (t->labels[i] && strcmp(t->labels[i], s) == 0)
            return i;
    return -1;
}

static int parse_score(const char *s, double *v)
{
    if (!*s || isspace((unsigned char)*s))
        return -1;
    char *end;
    errno = 0;
    double d = strtod(s, &end);
    if (errno || *end || !isfinite(d))
        return -1;
    *v = d;
    return 0;
}

void tupe_glue_free(tupe_glue_data *d)
{
    if (!d)
        return;
    free(d->ex);
    free(d->buf);
    free(d->path);
    memset(d, 0, sizeof *d);
}

/* The rows of out->buf (len bytes and a NUL after them), which out owns. */
static int parse_rows(const tupe_glue_task *t, const tupe_glue_split *s, size_t len,
                      tupe_glue_data *out, tupe_glue_skip_fn skip, void *ctx, tupe_err *e)
{
    /* Text that is not UTF-8 is refused, as tupe-tokenize refuses it, rather than dropped
     * silently when the sentences are tokenized. */
    size_t bad = tupe_utf8_first_bad(out->buf, len);
    if (bad < len) {
        int rc = tupe_fail_byte(e, TUPE_EDATA, out->path, bad, "invalid UTF-8");
        tupe_glue_free(out);
        return rc;
    }
    int rc;
    char *p = out->buf, *end = out->buf + len;
    if (len >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0) /* MRPC starts with a UTF-8 BOM */
        p += 3;
    /* Trailing blank lines are tolerated (a common artifact of the downloads). */
    while (end > p && (end[-1] == '\n' || end[-1] == '\r'))
        end--;
    *end = 0;
    int test = s->kind == TUPE_GLUE_TEST;
    int want = test ? t->fields_test : s->kind == TUPE_GLUE_DEV ? t->fields_dev : t->fields_train;
    int header = test ? 1 : t->header;
    int c1 = test ? t->test_s1 : t->s1, c2 = test ? t->test_s2 : t->s2;
    int cl = test ? -2 : t->label < 0 ? want - 1 : t->label;
    size_t cap = 1024;
    out->ex = malloc(cap * sizeof *out->ex);
    if (!out->ex) {
        tupe_glue_free(out);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    uint64_t line = 0;
    long row = 0;
    char *f[32];
    while (p < end) {
        char *nl = memchr(p, '\n', (size_t)(end - p));
        char *le = nl ? nl : end;
        line++;
        if (le > p && le[-1] == '\r')
            le[-1] = 0;
        *le = 0;
        char *cur = p;
        p = nl ? nl + 1 : end;
        if (header && line == 1)
            continue;
        int nf = 0;
        for (char *q = cur;; ) {
            if (nf < 32)
                f[nf] = q;
            nf++;
            char *tab = strchr(q, '\t');
            if (!tab)
                break;
            *tab = 0;
            q = tab + 1;
        }
        char why[160] = "";
        tupe_glue_example x = {NULL, NULL, -1, NAN, row, line};
        if (nf != want) {
            snprintf(why, sizeof why, "expected %d fields, got %d", want, nf);
        } else {
            x.s1 = f[c1];
            x.s2 = c2 >= 0 ? f[c2] : NULL;
            if (!test) {
                if (t->nlabels == 1) {
                    if (parse_score(f[cl], &x.value))
                        snprintf(why, sizeof why, "score '%.40s' is not a number", f[cl]);
                } else if ((x.label = tupe_glue_label_index(t, f[cl])) < 0) {
                    snprintf(why, sizeof why, "unknown label '%.40s'", f[cl]);
                }
            }
        }
        row++;
        if (why[0]) {
            if (test) {
                rc = tupe_fail_line(e, TUPE_EDATA, out->path, line, "%s (every test row needs a prediction)", why);
                tupe_glue_free(out);
                return rc;
            }
            out->skipped++;
            if (skip)
                skip(ctx, out->path, line, why);
            continue;
        }
        if (out->n == cap) {
            cap *= 2;
            tupe_glue_example *ne = realloc(out->ex, cap * sizeof *ne);
            if (!ne) {
                tupe_glue_free(out);
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            }
            out->ex = ne;
        }
        out->ex[out->n++] = x;
    }
    if (out->n == 0) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: no %s rows", out->path, t->name);
        tupe_glue_free(out);
        return rc;
    }
    return 0;
}

int tupe_glue_read(const tupe_glue_task *t, const tupe_glue_split *s, const char *data_dir,
                   tupe_glue_data *out, tupe_glue_skip_fn skip, void *ctx, tupe_err *e)
{
    memset(out, 0, sizeof *out);
    out->task = t;
    out->split = s;
    size_t plen = strlen(data_dir) + strlen(s->file) + 2;
    out->path = malloc(plen);
    if (!out->path)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    snprintf(out->path, plen, "%s/%s", data_dir, s->file);
    size_t len;
    int rc = tupe_read_text(out->path, &out->buf, &len, (size_t)4 << 30, e);
    if (rc) {
        tupe_glue_free(out);
        return rc;
    }
    return parse_rows(t, s, len, out, skip, ctx, e);
}

int tupe_glue_parse(const tupe_glue_task *t, const tupe_glue_split *s, const char *buf,
                    size_t len, const char *name, tupe_glue_data *out, tupe_glue_skip_fn skip,
                    void *ctx, tupe_err *e)
{
    memset(out, 0, sizeof *out);
    out->task = t;
    out->split = s;
    out->path = strdup(name ? name : "(buffer)");
    out->buf = malloc(len + 1);
    if (!out->path || !out->buf) {
        tupe_glue_free(out);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    memcpy(out->buf, buf, len);
    out->buf[len] = 0;
    return parse_rows(t, s, len, out, skip, ctx, e);
}

/* ---- scoring ------------------------------------------------------------------------------ */

int tupe_glue_score(const tupe_glue_data *d, const int *labels, const double *values,
                    tupe_glue_scores *out, tupe_err *e)
{
    const tupe_glue_task *t = d->task;
    memset(out, 0, sizeof *out);
    if (d->split->kind == TUPE_GLUE_TEST)
        return tupe_fail(e, TUPE_EUSAGE, "%s has no labels: test sets are scored by the leaderboard",
                         d->path);
    size_t n = d->n;
    int *gold = malloc((n ? n : 1) * sizeof *gold);
    double *gv = malloc((n ? n : 1) * sizeof *gv);
    if (!gold || !gv) {
        free(gold), free(gv);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (size_t i = 0; i < n; i++)
        gold[i] = d->ex[i].label, gv[i] = d->ex[i].value;
    char list[64];
    snprintf(list, sizeof list, "%s", t->metrics);
    int rc = 0;
    for (char *m = strtok(list, ","); m && out->n < 4; m = strtok(NULL, ",")) {
        double v = NAN;
        if (t->nlabels == 1 && !values) {
            rc = tupe_fail(e, TUPE_EFAIL, "%s is a regression task: scores need values", t->name);
            break;
        }
        if (t->nlabels > 1 && !labels) {
            rc = tupe_fail(e, TUPE_EFAIL, "%s is a classification task: scores need labels", t->name);
            break;
        }
        if (strcmp(m, "acc") == 0)
            v = tupe_accuracy(labels, gold, n);
        else if (strcmp(m, "f1") == 0)
            v = tupe_f1(labels, gold, n);
        else if (strcmp(m, "mcc") == 0)
            v = tupe_mcc(labels, gold, n, t->nlabels);
        else if (strcmp(m, "pearson") == 0)
            v = tupe_pearson(values, gv, n);
        else if (strcmp(m, "spearman") == 0)
            v = tupe_spearman(values, gv, n);
        /* metric names come from the static task table: they outlive the scores */
        out->name[out->n] = strcmp(m, "acc") == 0 ? "acc" : strcmp(m, "f1") == 0 ? "f1"
                          : strcmp(m, "mcc") == 0 ? "mcc" : strcmp(m, "pearson") == 0 ? "pearson" : "spearman";
        out->value[out->n++] = v;
    }
    free(gold), free(gv);
    return rc;
}

double tupe_glue_scores_get(const tupe_glue_scores *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->name[i], name) == 0)
            return s->value[i];
    return NAN;
}

/* ---- leaderboard files -------------------------------------------------------------------- */

static const tupe_glue_board_file board[] = {
    {"AX.tsv", 1105, "AX"},         {"CoLA.tsv", 1064, "CoLA"},   {"MNLI-m.tsv", 9797, "MNLI"},
    {"MNLI-mm.tsv", 9848, "MNLI"},  {"MRPC.tsv", 1726, "MRPC"},   {"QNLI.tsv", 5464, "QNLI"},
    {"QQP.tsv", 390966, "QQP"},     {"RTE.tsv", 3001, "RTE"},     {"SST-2.tsv", 1822, "SST-2"},
    {"STS-B.tsv", 1380, "STS-B"},   {"WNLI.tsv", 147, "WNLI"},
};

const tupe_glue_board_file *tupe_glue_board_files(int *n)
{
    *n = (int)(sizeof board / sizeof board[0]);
    return board;
}

void tupe_glue_pred_string(const tupe_glue_task *t, int label, double value, char *buf, size_t cap)
{
    if (t->nlabels == 1) {
        double v = value < 0 ? 0 : value > 5 ? 5 : value;
        snprintf(buf, cap, "%.3f", isnan(v) ? 0.0 : v);
    } else {
        snprintf(buf, cap, "%s", label >= 0 && label < t->nlabels ? t->labels[label] : "?");
    }
}

int tupe_glue_pred_parse(const tupe_glue_task *t, const char *s, int *label, double *value)
{
    *label = -1;
    *value = NAN;
    if (t->nlabels == 1)
        return parse_score(s, value);
    *label = tupe_glue_label_index(t, s);
    return *label < 0 ? -1 : 0;
}

int tupe_glue_write_predictions(const char *path, const tupe_glue_task *t, const int *labels,
                                const double *values, size_t n, tupe_err *e)
{
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (rc)
        return rc;
    rc = tupe_out_printf(o, e, "index\tprediction\n");
    char buf[64];
    for (size_t i = 0; !rc && i < n; i++) {
        tupe_glue_pred_string(t, labels ? labels[i] : -1, values ? values[i] : NAN, buf, sizeof buf);
        rc = tupe_out_printf(o, e, "%zu\t%s\n", i, buf);
    }
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}

int tupe_glue_read_predictions(const char *path, const tupe_glue_task *t, size_t n, int **labels,
                               double **values, tupe_err *e)
{
    tupe_in *in;
    int rc = tupe_in_open(&in, path, e);
    if (rc)
        return rc;
    tupe_in_max_line(in, 1 << 20); /* "index<TAB>label": short lines */
    int *lab = malloc((n ? n : 1) * sizeof *lab);
    double *val = malloc((n ? n : 1) * sizeof *val);
    char *seen = calloc(n ? n : 1, 1);
    if (!lab || !val || !seen) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    char *line;
    size_t len;
    int r;
    size_t got = 0;
    while ((r = tupe_in_getline(in, &line, &len, e)) == 1) {
        uint64_t ln = tupe_in_lineno(in);
        if (len && line[len - 1] == '\r')
            line[--len] = 0;
        if (ln == 1) {
            if (len >= 3 && memcmp(line, "\xef\xbb\xbf", 3) == 0)
                line += 3;
            if (strcmp(line, "index\tprediction") != 0) {
                rc = tupe_fail_line(e, TUPE_EDATA, path, ln, "expected the header \"index<TAB>prediction\"");
                goto out;
            }
            continue;
        }
        if (len == 0)
            continue;
        char *tab = strchr(line, '\t');
        if (!tab) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, ln, "expected \"index<TAB>prediction\"");
            goto out;
        }
        *tab = 0;
        char *endp;
        errno = 0;
        long idx = strtol(line, &endp, 10);
        if (errno || *endp || endp == line || idx < 0 || (size_t)idx >= n) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, ln, "index '%s' is not in 0..%zu", line, n ? n - 1 : 0);
            goto out;
        }
        if (seen[idx]) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, ln, "index %ld appears twice", idx);
            goto out;
        }
        if (tupe_glue_pred_parse(t, tab + 1, &lab[idx], &val[idx])) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, ln, "'%s' is not a %s prediction", tab + 1, t->name);
            goto out;
        }
        seen[idx] = 1;
        got++;
    }
    if (r < 0) {
        rc = e->code;
        goto out;
    }
    if (got != n) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: %zu predictions for %zu examples", path, got, n);
        goto out;
    }
    *labels = lab;
    *values = val;
    lab = NULL;
    val = NULL;
out:
    free(lab), free(val), free(seen);
    tupe_in_close(in);
    return rc;
}

int tupe_glue_check_submission(const char *dir, tupe_err *e)
{
    /* A missing directory is a missing input (66), as everywhere; a missing file in it is an
     * incomplete set (65). */
    struct stat st;
    if (stat(dir, &st) != 0)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", dir);
    if (!S_ISDIR(st.st_mode))
        return tupe_fail(e, TUPE_ENOINPUT, "%s: not a directory (expected the directory of the 11 "
                         "leaderboard files)", dir);
    for (size_t i = 0; i < sizeof board / sizeof board[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, board[i].file);
        const tupe_glue_task *t = tupe_glue_task_find(board[i].task);
        size_t n = (size_t)board[i].lines - 1;
        int *lab;
        double *val;
        int rc = tupe_glue_read_predictions(path, t, n, &lab, &val, e);
        if (rc) {
            if (rc == TUPE_ENOINPUT)
                return tupe_fail(e, TUPE_EDATA, "%s: missing (a submission needs all %zu files)", path,
                                 sizeof board / sizeof board[0]);
            return rc;
        }
        free(lab), free(val);
        /* Line count, header included, exactly as the leaderboard expects. */
        tupe_in *in;
        if ((rc = tupe_in_open(&in, path, e)))
            return rc;
        char *line;
        size_t len;
        long lines = 0;
        int r;
        while ((r = tupe_in_getline(in, &line, &len, e)) == 1)
            lines++;
        tupe_in_close(in);
        if (r < 0)
            return e->code;
        if (lines != board[i].lines)
            return tupe_fail(e, TUPE_EDATA, "%s: %ld lines, the leaderboard expects %ld", path, lines,
                             board[i].lines);
    }
    return 0;
}

typedef struct {
    tupe_out *o;
    tupe_err *e;
    int failed;
} zip_ctx;

static la_ssize_t zip_write(struct archive *a, void *ctx, const void *buf, size_t n)
{
    (void)a;
    zip_ctx *z = ctx;
    if (tupe_out_write(z->o, buf, n, z->e)) {
        z->failed = 1;
        return -1;
    }
    return (la_ssize_t)n;
}

int tupe_glue_zip_submission(const char *dir, const char *zip_path, tupe_err *e)
{
    int rc = tupe_glue_check_submission(dir, e);
    if (rc)
        return rc;
    zip_ctx z = {NULL, e, 0};
    if ((rc = tupe_out_open(&z.o, zip_path, e)))
        return rc;
    struct archive *a = archive_write_new();
    if (!a || archive_write_set_format_zip(a) != ARCHIVE_OK ||
        archive_write_open(a, &z, NULL, zip_write, NULL) != ARCHIVE_OK) {
        rc = tupe_fail(e, TUPE_EFAIL, "%s: %s", zip_path, a ? archive_error_string(a) : "out of memory");
        if (a)
            archive_write_free(a);
        tupe_out_abort(z.o);
        return rc;
    }
    for (size_t i = 0; !rc && i < sizeof board / sizeof board[0]; i++) {
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, board[i].file);
        char *buf;
        size_t len;
        if ((rc = tupe_read_text(path, &buf, &len, (size_t)1 << 30, e)))
            break;
        struct archive_entry *en = archive_entry_new();
        archive_entry_set_pathname(en, board[i].file);
        archive_entry_set_size(en, (la_int64_t)len);
        archive_entry_set_filetype(en, AE_IFREG);
        archive_entry_set_perm(en, 0644);
        if (archive_write_header(a, en) != ARCHIVE_OK ||
            archive_write_data(a, buf, len) != (la_ssize_t)len)
            rc = z.failed ? e->code : tupe_fail(e, TUPE_EIO, "%s: %s", zip_path, archive_error_string(a));
        archive_entry_free(en);
        free(buf);
    }
    if (!rc && archive_write_close(a) != ARCHIVE_OK)
        rc = z.failed ? e->code : tupe_fail(e, TUPE_EIO, "%s: %s", zip_path, archive_error_string(a));
    archive_write_free(a);
    if (rc) {
        tupe_out_abort(z.o);
        return rc;
    }
    return tupe_out_commit(z.o, e);
}
