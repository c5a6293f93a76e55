/* tupe-glue: GLUE tasks: inspect the data, fine-tune and evaluate, score predictions, and
 * build a leaderboard submission. The algorithms live in lib/glue.c and lib/metrics.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cli.h"
#include "fileio.h"
#include "glue.h"

enum { O_TASK = 1, O_DATA, O_FORMAT, O_SPLIT, O_PRED, O_OUT, O_WNLI };

#define TASK_LIST "list:CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI AX"

static const tupe_opt info_opts[] = {
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI,\nQNLI, RTE, WNLI, AX)", TASK_LIST},
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "the glue_data directory (default: glue_data)", "dir"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FMT", "text (default) or json", "list:text json"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt score_opts[] = {
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task; MNLI-m and MNLI-mm choose the MNLI dev set", TASK_LIST " MNLI-m MNLI-mm"},
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "the glue_data directory (default: glue_data)", "dir"},
    {O_SPLIT, "split", 0, TUPE_REQARG, "NAME", "the labelled split to score against (default: dev)", "list:dev train dev_matched dev_mismatched"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FMT", "text (default) or json", "list:text json"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt submit_opts[] = {
    {O_PRED, "predictions", 'p', TUPE_REQARG, "DIR", "directory with the 11 leaderboard files", "dir"},
    {O_OUT, "output", 'o', TUPE_REQARG, "ZIP", "the submission archive (default: submission.zip)", "file"},
    {O_WNLI, "wnli-majority", 0, TUPE_NOARG, NULL, "write WNLI.tsv with WNLI's majority training class\n(needs --data) when it is missing", NULL},
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "the glue_data directory (for --wnli-majority)", "dir"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static const tupe_cmd cmds[] = {
    {"info", NULL, "rows, skipped rows and label distribution of a task's files",
     "Reads every split of the task present under the data directory and reports rows per\n"
     "split, malformed rows skipped (and why), and the label distribution.", info_opts, NULL},
    {"score", "PREDICTIONS", "score a predictions file against the dev labels",
     "PREDICTIONS is in the leaderboard format (a header \"index<TAB>prediction\", then one\n"
     "row per example, index = 0-based row of the dev file), so predictions from any system\n"
     "are scored the same way.", score_opts, "file"},
    {"submit", NULL, "check the 11 leaderboard files and zip them",
     "Refuses an incomplete or malformed set: every file must exist with the header\n"
     "\"index<TAB>prediction\", the task's label strings and the leaderboard's line count.",
     submit_opts, NULL},
    {NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-glue", "fine-tune and evaluate on GLUE", cmds, NULL};

static void on_skip(void *ctx, const char *path, uint64_t line, const char *why)
{
    const tupe_cli *c = ctx;
    if (!c->quiet)
        fprintf(stderr, "tupe-glue: %s:%llu: skipped: %s\n", path, (unsigned long long)line, why);
}

static void report_skips(const tupe_cli *c, const tupe_glue_data *d)
{
    if (d->skipped)
        tupe_cli_note(c, "%s: skipped %zu malformed rows", d->path, d->skipped);
}

static int cmd_info(tupe_cli *c, const tupe_glue_task *t, const char *data, int json)
{
    json_t *root = json_object(), *splits = json_array();
    json_object_set_new(root, "task", json_string(t->name));
    json_object_set_new(root, "splits", splits);
    int found = 0;
    for (int s = 0; s < t->nsplits; s++) {
        tupe_glue_data d;
        tupe_err e;
        int rc = tupe_glue_read(t, &t->splits[s], data, &d, on_skip, c, &e);
        json_t *js = json_object();
        json_object_set_new(js, "split", json_string(t->splits[s].name));
        json_object_set_new(js, "file", json_string(t->splits[s].file));
        json_object_set_new(js, "published_rows", json_integer(t->splits[s].rows));
        if (rc == TUPE_ENOINPUT) {
            json_object_set_new(js, "present", json_false());
            json_array_append_new(splits, js);
            if (!json)
                printf("%-16s absent (%s)\n", t->splits[s].name, t->splits[s].file);
            continue;
        }
        if (rc) {
            json_decref(js);
            json_decref(root);
            return tupe_cli_error(c, &e);
        }
        found++;
        report_skips(c, &d);
        json_object_set_new(js, "present", json_true());
        json_object_set_new(js, "rows", json_integer((json_int_t)d.n));
        json_object_set_new(js, "skipped", json_integer((json_int_t)d.skipped));
        if (!json)
            printf("%-16s %7zu rows%s, %zu skipped", t->splits[s].name, d.n,
                   (long)d.n == t->splits[s].rows ? "" : " (published count differs)", d.skipped);
        if (t->splits[s].kind != TUPE_GLUE_TEST) {
            json_t *lab = json_object();
            if (t->nlabels > 1) {
                size_t cnt[3] = {0, 0, 0};
                for (size_t i = 0; i < d.n; i++)
                    cnt[d.ex[i].label]++;
                for (int k = 0; k < t->nlabels; k++) {
                    json_object_set_new(lab, t->labels[k], json_integer((json_int_t)cnt[k]));
                    if (!json)
                        printf("%s %s %zu (%.1f%%)", k ? "," : ";", t->labels[k], cnt[k],
                               100.0 * (double)cnt[k] / (double)d.n);
                }
            } else {
                double lo = INFINITY, hi = -INFINITY, sum = 0;
                for (size_t i = 0; i < d.n; i++) {
                    double v = d.ex[i].value;
                    lo = v < lo ? v : lo, hi = v > hi ? v : hi, sum += v;
                }
                json_object_set_new(lab, "min", json_real(lo));
                json_object_set_new(lab, "max", json_real(hi));
                json_object_set_new(lab, "mean", json_real(sum / (double)d.n));
                if (!json)
                    printf("; score %.2f to %.2f, mean %.3f", lo, hi, sum / (double)d.n);
            }
            json_object_set_new(js, "labels", lab);
        }
        if (!json)
            printf("\n");
        json_array_append_new(splits, js);
        tupe_glue_free(&d);
    }
    if (json) {
        char *s = json_dumps(root, JSON_INDENT(2));
        printf("%s\n", s);
        free(s);
    }
    json_decref(root);
    if (!found) {
        tupe_err e;
        tupe_fail(&e, TUPE_ENOINPUT, "%s: no %s files found (expected %s)", data, t->name,
                  t->splits[0].file);
        return tupe_cli_error(c, &e);
    }
    return 0;
}

static int cmd_score(tupe_cli *c, const tupe_glue_task *t, const char *task_arg, const char *data,
                     const char *split, int json)
{
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one PREDICTIONS file");
    if (!split)
        split = strcasecmp(task_arg, "MNLI-mm") == 0 ? "dev_mismatched" : "dev";
    const tupe_glue_split *s = tupe_glue_split_find(t, split);
    if (!s || s->kind == TUPE_GLUE_TEST)
        return tupe_cli_usage(c, "--split: %s has no labelled split '%s'", t->name, split);
    tupe_glue_data d;
    tupe_err e;
    if (tupe_glue_read(t, s, data, &d, on_skip, c, &e))
        return tupe_cli_error(c, &e);
    report_skips(c, &d);
    int *lab = NULL;
    double *val = NULL;
    int rc = tupe_glue_read_predictions(c->args[0], t, d.n, &lab, &val, &e);
    tupe_glue_scores sc;
    if (!rc)
        rc = tupe_glue_score(&d, t->nlabels > 1 ? lab : NULL, t->nlabels > 1 ? NULL : val, &sc, &e);
    if (rc) {
        free(lab), free(val);
        tupe_glue_free(&d);
        return tupe_cli_error(c, &e);
    }
    if (json) {
        json_t *o = json_object();
        json_object_set_new(o, "task", json_string(s->board));
        json_object_set_new(o, "split", json_string(s->name));
        json_object_set_new(o, "examples", json_integer((json_int_t)d.n));
        for (int i = 0; i < sc.n; i++)
            json_object_set_new(o, sc.name[i], isnan(sc.value[i]) ? json_null() : json_real(sc.value[i]));
        char *str = json_dumps(o, JSON_COMPACT);
        printf("%s\n", str);
        free(str);
        json_decref(o);
    } else {
        printf("%s %s (%zu examples):", s->board, s->name, d.n);
        for (int i = 0; i < sc.n; i++)
            printf(" %s %.2f", sc.name[i], 100.0 * sc.value[i]);
        printf("\n");
    }
    free(lab), free(val);
    tupe_glue_free(&d);
    return 0;
}

static int cmd_submit(tupe_cli *c, const char *dir, const char *out, int wnli, const char *data)
{
    tupe_err e;
    if (!dir)
        return tupe_cli_usage(c, "--predictions DIR is required");
    if (wnli) {
        char path[4096];
        snprintf(path, sizeof path, "%s/WNLI.tsv", dir);
        if (!tupe_path_exists(path)) {
            if (!data)
                return tupe_cli_usage(c, "--wnli-majority needs --data (to find WNLI's majority class)");
            const tupe_glue_task *t = tupe_glue_task_find("WNLI");
            tupe_glue_data tr, te;
            if (tupe_glue_read(t, tupe_glue_split_find(t, "train"), data, &tr, on_skip, c, &e))
                return tupe_cli_error(c, &e);
            size_t ones = 0;
            for (size_t i = 0; i < tr.n; i++)
                ones += tr.ex[i].label == 1;
            int major = ones * 2 > tr.n ? 1 : 0;
            tupe_glue_free(&tr);
            if (tupe_glue_read(t, tupe_glue_split_find(t, "test"), data, &te, NULL, NULL, &e))
                return tupe_cli_error(c, &e);
            int *lab = malloc(te.n * sizeof *lab);
            for (size_t i = 0; lab && i < te.n; i++)
                lab[i] = major;
            int rc = lab ? tupe_glue_write_predictions(path, t, lab, NULL, te.n, &e)
                         : tupe_fail(&e, TUPE_EFAIL, "out of memory");
            free(lab);
            tupe_glue_free(&te);
            if (rc)
                return tupe_cli_error(c, &e);
            tupe_cli_note(c, "wrote %s: the majority class '%s' for all rows", path, t->labels[major]);
        }
    }
    if (tupe_glue_zip_submission(dir, out, &e))
        return tupe_cli_error(c, &e);
    tupe_cli_note(c, "%s: 11 files checked and written", out);
    return 0;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    const char *task = NULL, *data = "glue_data", *split = NULL, *pred = NULL, *out = "submission.zip", *arg;
    int fmt = 0, wnli = 0, id;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_TASK: task = arg; break;
        case O_DATA: data = arg; break;
        case O_SPLIT: split = arg; break;
        case O_PRED: pred = arg; break;
        case O_OUT: out = arg; break;
        case O_WNLI: wnli = 1; break;
        case O_FORMAT:
            if (tupe_cli_choice(&c, arg, "text|json", &fmt))
                id = -1;
            break;
        }
        if (id < 0)
            break;
    }
    if (id < 0) {
        tupe_cli_end(&c);
        return c.exit_code;
    }
    int rc;
    const char *name = c.cmd->name;
    if (strcmp(name, "submit") == 0) {
        rc = cmd_submit(&c, pred, out, wnli, wnli ? data : NULL);
    } else {
        const tupe_glue_task *t = task ? tupe_glue_task_find(task) : NULL;
        if (!task)
            rc = tupe_cli_usage(&c, "--task is required");
        else if (!t)
            rc = tupe_cli_usage(&c, "--task: unknown task '%s'", task);
        else if (strcmp(name, "info") == 0)
            rc = cmd_info(&c, t, data, fmt == 1);
        else
            rc = cmd_score(&c, t, task, data, split, fmt == 1);
    }
    tupe_cli_end(&c);
    return rc;
}
