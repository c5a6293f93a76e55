/* tupe-glue: GLUE tasks: inspect the data, fine-tune and evaluate, score predictions, and
 * build a leaderboard submission. The algorithms live in lib/glue/glue.c and lib/glue/metrics.c. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "backend/backend.h"
#include "base/fileio.h"
#include "cli/cli.h"
#include "cli/devicearg.h"
#include "glue/finetune.h"
#include "glue/glue.h"

enum {
    O_TASK = 1, O_DATA, O_FORMAT, O_SPLIT, O_PRED, O_OUT, O_WNLI, O_CKPT, O_VOCAB, O_RECIPE, O_LR,
    O_GRID, O_SEEDS, O_SEED, O_LAYER_DECAY, O_EPOCHS, O_BATCH, O_MAXLEN, O_WARMUP, O_DROPOUT, O_WD, O_CLIP, O_EPS,
    O_BETA2, O_CASED, O_LOWER, O_EVALS, O_MAXTRAIN, O_MAXDEV, O_DEVICE, O_PRECISION, O_TB, O_NO_TB
};

/* AX (the diagnostic set) has only a test file: completed where it can be used (info, predict). */
#define LABELLED_TASKS "list:CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI"
#define TASK_LIST LABELLED_TASKS " AX"

/* Rows that several subcommands share, each defined once. */
#define OPT_DATA {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "the glue_data directory (default: glue_data)", "dir"}
#define OPT_FINETUNED {O_CKPT, "checkpoint", 'c', TUPE_REQARG, "DIR", "a checkpoint written by tupe-glue train (required)", "dir"}
#define OPT_ITS_VOCAB {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "its vocabulary (required)", "file"}
#define OPT_PASS_BATCH {O_BATCH, "batch", 'b', TUPE_REQARG, "N", "sentences per forward pass (default: 32)", NULL}
#define OPT_MAXDEV {O_MAXDEV, "max-dev", 0, TUPE_REQARG, "N", "evaluate on the first N dev examples", NULL}

static const tupe_opt info_opts[] = {
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI,\nQNLI, RTE, WNLI, AX)", TASK_LIST},
    OPT_DATA,
    TUPE_OPT_FORMAT_JSON(O_FORMAT),
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt score_opts[] = {
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task; MNLI-m and MNLI-mm choose the MNLI dev set", LABELLED_TASKS " MNLI-m MNLI-mm"},
    OPT_DATA,
    {O_SPLIT, "split", 0, TUPE_REQARG, "NAME", "the labelled split to score against (default: dev)", "list:dev train dev_matched dev_mismatched"},
    TUPE_OPT_FORMAT_JSON(O_FORMAT),
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt submit_opts[] = {
    {O_PRED, "predictions", 'p', TUPE_REQARG, "DIR", "directory with the 11 leaderboard files", "dir"},
    {O_OUT, "output", 'o', TUPE_REQARG, "ZIP", "the submission archive (default: submission.zip)", "out:file"},
    {O_WNLI, "wnli-majority", 0, TUPE_NOARG, NULL, "write WNLI.tsv with WNLI's majority training class\n(needs --data) when it is missing", NULL},
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "the glue_data directory (for --wnli-majority)", "dir"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};


#define FT_COMMON \
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task (CoLA, SST-2, MRPC, STS-B, QQP, MNLI,\nQNLI, RTE, WNLI)", LABELLED_TASKS}, \
    OPT_DATA, \
    {O_CKPT, "checkpoint", 'c', TUPE_REQARG, "DIR", "the pre-trained checkpoint (required)", "dir"}, \
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "its vocabulary: vocab.txt or a BPE directory (required)", "file"}, \
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "run directory (required)", "out:dir"}, \
    {O_RECIPE, "recipe", 0, TUPE_REQARG, "NAME", "tupe (default), bert, roberta or electra: the\nsettings below", "list:tupe bert roberta electra"}, \
    {O_EPOCHS, "epochs", 0, TUPE_REQARG, "N", "epochs (tupe: 10, 5 for MNLI, QNLI, QQP)", NULL}, \
    {O_BATCH, "batch", 'b', TUPE_REQARG, "N", "sentences per step (tupe: 32)", NULL}, \
    {O_MAXLEN, "max-len", 0, TUPE_REQARG, "N", "longest input in tokens, specials included\n(tupe: 512)", NULL}, \
    {O_WARMUP, "warmup-ratio", 0, TUPE_REQARG, "X", "fraction of the steps for warmup (tupe: 0.06)", NULL}, \
    {O_DROPOUT, "dropout", 0, TUPE_REQARG, "P", "hidden, attention and head dropout (0.1)", NULL}, \
    {O_WD, "weight-decay", 0, TUPE_REQARG, "X", "decoupled weight decay (tupe: 0.01)", NULL}, \
    {O_CLIP, "clip", 0, TUPE_REQARG, "X", "global gradient-norm clip, 0 = off (tupe: 1)", NULL}, \
    {O_EPS, "adam-eps", 0, TUPE_REQARG, "X", "Adam epsilon (1e-6)", NULL}, \
    {O_LAYER_DECAY, "layer-decay", 0, TUPE_REQARG, "X", "layer-wise learning-rate decay, 1 = off\n(electra: 0.8; others: off)", NULL}, \
    {O_BETA2, "beta2", 0, TUPE_REQARG, "X", "Adam beta2 (tupe: 0.999)", NULL}, \
    {O_CASED, "cased", 0, TUPE_NOARG, NULL, "the vocabulary is cased (do not lowercase)", NULL}, \
    {O_EVALS, "evals-per-epoch", 0, TUPE_REQARG, "N", "dev evaluations per epoch (2)", NULL}, \
    {O_MAXTRAIN, "max-train", 0, TUPE_REQARG, "N", "use the first N training examples", NULL}, \
    OPT_MAXDEV, \
    TUPE_DEVICEARG_OPTS(O_DEVICE, O_PRECISION), \
    TUPE_OPT_TENSORBOARD(O_TB, O_NO_TB)

static const tupe_opt train_opts[] = {
    FT_COMMON,
    {O_LR, "lr", 0, TUPE_REQARG, "X", "peak learning rate (tupe: 2e-5)", NULL},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "head initialization, order, dropout (default: 1)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt sweep_opts[] = {
    FT_COMMON,
    {O_GRID, "lr-grid", 0, TUPE_REQARG, "X,X...", "learning rates (tupe: 2e-5,3e-5,4e-5,5e-5)", NULL},
    {O_SEEDS, "seeds", 0, TUPE_REQARG, "N", "seeds per learning rate (default: 5)", NULL},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "first seed (default: 1)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt eval_opts[] = {
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task", LABELLED_TASKS},
    OPT_DATA,
    OPT_FINETUNED,
    OPT_ITS_VOCAB,
    OPT_PASS_BATCH,
    OPT_MAXDEV,
    TUPE_OPT_FORMAT_JSON(O_FORMAT),
    TUPE_DEVICEARG_OPTS(O_DEVICE, O_PRECISION),
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt predict_opts[] = {
    {O_TASK, "task", 't', TUPE_REQARG, "TASK", "the task (AX: with an MNLI checkpoint)", TASK_LIST},
    OPT_DATA,
    OPT_FINETUNED,
    OPT_ITS_VOCAB,
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "directory for the leaderboard file(s) (required)", "into:dir"},
    OPT_PASS_BATCH,
    TUPE_DEVICEARG_OPTS(O_DEVICE, O_PRECISION),
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int cmd_info(tupe_cli *c, void *opts);
static int cmd_train(tupe_cli *c, void *opts);
static int cmd_sweep(tupe_cli *c, void *opts);
static int cmd_table(tupe_cli *c, void *opts);
static int cmd_eval(tupe_cli *c, void *opts);
static int cmd_predict(tupe_cli *c, void *opts);
static int cmd_score(tupe_cli *c, void *opts);
static int cmd_submit(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"info", NULL, "rows, skipped rows and label distribution of a task's files",
     "Reads every split of the task present under the data directory and reports rows per\n"
     "split, malformed rows skipped (and why), and the label distribution.", info_opts, NULL, cmd_info},
    {"train", NULL, "fine-tune a pre-trained checkpoint on a task",
     "Adds a classification head (a regression head for STS-B, on scores / 5 with squared\n"
     "error) to the pre-trained encoder, trains with the recipe's settings, evaluates on the\n"
     "dev set(s) twice per epoch and keeps the best checkpoint by the task's selection metric\n"
     "(accuracy; Matthews correlation for CoLA; Pearson for STS-B) in OUTPUT/best.", train_opts, NULL,
     cmd_train},
    {"sweep", NULL, "the paper's protocol: learning-rate grid x seeds, medians",
     "Runs every learning rate of the grid with --seeds seeds (OUTPUT/lr-X/seed-N, resumable:\n"
     "finished runs are read, not redone), takes the median over seeds for each learning rate\n"
     "and reports the best learning rate's median. Writes OUTPUT/sweep.{tsv,json,md}.\n"
     "--tensorboard DIR gives each run DIR/lr-X/seed-N.", sweep_opts, NULL,
     cmd_sweep},
    {"table", "DIR", "the paper's Table 1 from the sweeps under DIR",
     "Reads DIR/<TASK>/sweep.json for MNLI, QNLI, QQP, SST-2, CoLA, MRPC, RTE and STS-B and\n"
     "writes DIR/table.{md,tsv,json}: the nine columns of the paper and their average.", NULL, "dir",
     cmd_table},
    {"eval", NULL, "dev scores of a fine-tuned checkpoint", NULL, eval_opts, NULL, cmd_eval},
    {"predict", NULL, "test-set predictions in the leaderboard format", NULL, predict_opts, NULL, cmd_predict},
    {"score", "PREDICTIONS", "score a predictions file against the dev labels",
     "PREDICTIONS is in the leaderboard format (a header \"index<TAB>prediction\", then one\n"
     "row per example, index = 0-based row of the dev file), so predictions from any system\n"
     "are scored the same way.", score_opts, "file", cmd_score},
    {"submit", NULL, "check the 11 leaderboard files and zip them",
     "Refuses an incomplete or malformed set: every file must exist with the header\n"
     "\"index<TAB>prediction\", the task's label strings and the leaderboard's line count.",
     submit_opts, NULL, cmd_submit},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

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

static int show_info(tupe_cli *c, const tupe_glue_task *t, const char *data, int json)
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

static int score_file(tupe_cli *c, const tupe_glue_task *t, const char *task_arg, const char *data,
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

static int submit(tupe_cli *c, const char *dir, const char *out, int wnli, const char *data)
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

static int parse_grid(tupe_cli *c, const char *arg, tupe_ft_opts *o)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", arg);
    o->ngrid = 0;
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (o->ngrid == TUPE_FT_MAX_GRID)
            return tupe_cli_usage(c, "--lr-grid: at most %d values", TUPE_FT_MAX_GRID);
        if (tupe_cli_double(c, t, 1e-9, 1, &o->grid[o->ngrid++]))
            return TUPE_EUSAGE;
        for (int i = 0; i + 1 < o->ngrid; i++)
            if (o->grid[i] == o->grid[o->ngrid - 1])
                return tupe_cli_usage(c, "--lr-grid: %g appears twice", o->grid[i]);
    }
    if (!o->ngrid)
        return tupe_cli_usage(c, "--lr-grid: no learning rate in '%s'", arg);
    return 0;
}

/* Options that override the recipe, remembered until the task (and so the recipe) is known. */
typedef struct overrides {
    double lr, warmup, dropout, wd, clip, eps, beta2;
    long epochs, batch, max_len, evals, seeds;
    uint64_t seed, max_train, max_dev;
    int cased, have_grid;
    tupe_ft_opts grid;
    const char *tensorboard;
    int no_tensorboard;
    double layer_decay;
} overrides;

/* Every subcommand's options, as parsed. */
typedef struct args {
    const char *task, *data, *split, *pred, *out, *ckpt, *vocab, *device, *precision;
    int fmt, wnli, recipe;
    overrides ov;
} args;

static int cmd_submit(tupe_cli *c, void *opts)
{
    const args *a = opts;
    return submit(c, a->pred, a->out ? a->out : "submission.zip", a->wnli, a->wnli ? a->data : NULL);
}

static int cmd_table(tupe_cli *c, void *opts)
{
    (void)opts;
    tupe_err e;
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one DIR");
    if (tupe_ft_table(c->args[0], &e))
        return tupe_cli_error(c, &e);
    char path[4200];
    snprintf(path, sizeof path, "%s/table.md", c->args[0]);
    char *md;
    size_t n;
    if (tupe_read_file(path, &md, &n, 1 << 20, &e) == 0) {
        fputs(md, stdout);
        free(md);
    }
    return 0;
}

/* --task, which every other subcommand needs. */
static int find_task(tupe_cli *c, const args *a, const tupe_glue_task **t)
{
    *t = a->task ? tupe_glue_task_find(a->task) : NULL;
    if (!a->task)
        return tupe_cli_usage(c, "--task is required");
    if (!*t)
        return tupe_cli_usage(c, "--task: unknown task '%s'", a->task);
    return 0;
}

static int cmd_info(tupe_cli *c, void *opts)
{
    const args *a = opts;
    const tupe_glue_task *t;
    int rc = find_task(c, a, &t);
    return rc ? rc : show_info(c, t, a->data, a->fmt == 1);
}

static int cmd_score(tupe_cli *c, void *opts)
{
    const args *a = opts;
    const tupe_glue_task *t;
    int rc = find_task(c, a, &t);
    return rc ? rc : score_file(c, t, a->task, a->data, a->split, a->fmt == 1);
}

/* What train, sweep, eval and predict share: the task, the checkpoint and its vocabulary, the
 * output directory of those that write one (not '-'), the recipe with the options over it,
 * and the device. Errors printed, exit status returned. */
static int ft_setup(tupe_cli *c, const args *a, int training, int writes, const tupe_glue_task **t,
                    tupe_ft_opts *o, tupe_backend **be)
{
    const overrides *ov = &a->ov;
    int rc = find_task(c, a, t);
    if (rc)
        return rc;
    if (!a->ckpt)
        return tupe_cli_usage(c, "--checkpoint is required");
    if (!a->vocab)
        return tupe_cli_usage(c, "--vocab is required (the vocabulary the model was trained with)");
    if (writes && !a->out)
        return tupe_cli_usage(c, "--output DIR is required");
    if (writes && strcmp(a->out, "-") == 0)
        return tupe_cli_usage(c, "%s writes a directory, not '-'", c->cmd->name);
    if (c->nargs)
        return tupe_cli_usage(c, "unexpected argument '%s'", c->args[0]);
    memset(o, 0, sizeof *o);
    tupe_ft_recipe(o, a->recipe, *t);
    if (!training)
        o->batch = 32, o->max_len = 0; /* the checkpoint's max_len */
    o->data = a->data, o->checkpoint = a->ckpt, o->vocab = a->vocab, o->out = a->out;
    o->inputs = tupe_cli_inputs(c);
    o->lowercase = !ov->cased;
    o->quiet = c->quiet;
    o->note = tupe_cli_on_note;
    o->note_ctx = c;
    o->seed = ov->seed;
    if (ov->lr > 0) o->lr = ov->lr;
    if (ov->have_grid) {
        memcpy(o->grid, ov->grid.grid, sizeof o->grid);
        o->ngrid = ov->grid.ngrid;
    }
    if (ov->seeds > 0) o->seeds = (int)ov->seeds;
    if (ov->epochs > 0) o->epochs = (int)ov->epochs;
    if (ov->batch > 0) o->batch = (int)ov->batch;
    if (ov->max_len > 0) o->max_len = (int)ov->max_len;
    if (ov->warmup >= 0) o->warmup_ratio = ov->warmup;
    if (ov->dropout >= 0) o->dropout = ov->dropout;
    if (ov->wd >= 0) o->adam.weight_decay = ov->wd;
    if (ov->clip >= 0) o->adam.clip = ov->clip;
    if (ov->eps >= 0) o->adam.eps = ov->eps;
    if (ov->beta2 >= 0) o->adam.beta2 = ov->beta2;
    if (ov->layer_decay > 0) o->layer_decay = ov->layer_decay;
    if (ov->evals > 0) o->evals_per_epoch = (int)ov->evals;
    o->max_train = (int64_t)ov->max_train;
    o->max_dev = (int64_t)ov->max_dev;
    o->tensorboard = ov->tensorboard;
    o->no_tensorboard = ov->no_tensorboard;
    return tupe_devicearg_open(c, a->device, a->precision, be);
}

static int cmd_train(tupe_cli *c, void *opts)
{
    const tupe_glue_task *t;
    tupe_ft_opts o;
    tupe_backend *be;
    int rc = ft_setup(c, opts, 1, 1, &t, &o, &be);
    if (rc)
        return rc;
    tupe_ft_scores best;
    tupe_err e;
    if (tupe_ft_train(&o, t, be, &best, &e))
        rc = tupe_cli_error(c, &e);
    else if (!c->quiet) {
        fprintf(stderr, "tupe-glue: best %s %.2f at epoch %.2f (step %lld); checkpoint %s/best\n", t->select,
                100 * best.select, best.epoch, (long long)best.step, o.out);
    }
    if (!rc)
        printf("%s\t%s\t%.4f\n", t->name, t->select, best.select);
    tupe_backend_destroy(be);
    return rc;
}

static int cmd_sweep(tupe_cli *c, void *opts)
{
    const tupe_glue_task *t;
    tupe_ft_opts o;
    tupe_backend *be;
    int rc = ft_setup(c, opts, 1, 1, &t, &o, &be);
    if (rc)
        return rc;
    double med, lr;
    tupe_err e;
    if (tupe_ft_sweep(&o, t, be, &med, &lr, &e))
        rc = tupe_cli_error(c, &e);
    else
        printf("%s\t%s\tmedian of %d seeds %.2f\tbest lr %g\n", t->name, t->select, o.seeds, 100 * med, lr);
    tupe_backend_destroy(be);
    return rc;
}

static int cmd_eval(tupe_cli *c, void *opts)
{
    const args *a = opts;
    const tupe_glue_task *t;
    tupe_ft_opts o;
    tupe_backend *be;
    int rc = ft_setup(c, a, 0, 0, &t, &o, &be);
    if (rc)
        return rc;
    tupe_ft_scores s;
    tupe_err e;
    if (tupe_ft_eval(&o, t, be, &s, &e))
        rc = tupe_cli_error(c, &e);
    else {
        for (int k = 0; k < s.nsets; k++) {
            if (a->fmt == 1) {
                printf("{\"task\":\"%s\"", s.set[k]);
                for (int i = 0; i < s.s[k].n; i++) /* undefined (NaN) is null, as in score */
                    printf(isnan(s.s[k].value[i]) ? ",\"%s\":null" : ",\"%s\":%.6f", s.s[k].name[i],
                           s.s[k].value[i]);
                printf("}\n");
            } else {
                printf("%s:", s.set[k]);
                for (int i = 0; i < s.s[k].n; i++)
                    printf(" %s %.2f", s.s[k].name[i], 100 * s.s[k].value[i]);
                printf("\n");
            }
        }
    }
    tupe_backend_destroy(be);
    return rc;
}

static int cmd_predict(tupe_cli *c, void *opts)
{
    const tupe_glue_task *t;
    tupe_ft_opts o;
    tupe_backend *be;
    int rc = ft_setup(c, opts, 0, 1, &t, &o, &be);
    if (rc)
        return rc;
    tupe_err e;
    if (tupe_ft_predict(&o, t, be, &e))
        rc = tupe_cli_error(c, &e);
    else
        tupe_cli_note(c, "predictions written to %s", o.out);
    tupe_backend_destroy(be);
    return rc;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a = {.data = "glue_data",
              .ov = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, {0}, NULL, 0, -1}};
    a.ov.seed = 1;
    overrides *ov = &a.ov;
    const char *arg;
    int id, rc = 0;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        uint64_t u;
        switch (id) {
        case O_TASK: a.task = arg; break;
        case O_DATA: a.data = arg; break;
        case O_SPLIT: a.split = arg; break;
        case O_PRED: a.pred = arg; break;
        case O_OUT: a.out = arg; break;
        case O_WNLI: a.wnli = 1; break;
        case O_CKPT: a.ckpt = arg; break;
        case O_VOCAB: a.vocab = arg; break;
        case O_FORMAT: rc = tupe_cli_choice(&c, arg, "text|json", &a.fmt); break;
        case O_RECIPE: rc = tupe_cli_choice(&c, arg, "tupe|bert|roberta|electra", &a.recipe); break;
        case O_LAYER_DECAY: rc = tupe_cli_double(&c, arg, 1e-6, 1, &ov->layer_decay); break;
        case O_DEVICE: rc = tupe_devicearg_device(&c, arg, &a.device); break;
        case O_PRECISION: rc = tupe_devicearg_precision(&c, arg, &a.precision); break;
        case O_LR: rc = tupe_cli_double(&c, arg, 1e-9, 1, &ov->lr); break;
        case O_GRID: rc = parse_grid(&c, arg, &ov->grid); ov->have_grid = 1; break;
        case O_SEEDS: rc = tupe_cli_long(&c, arg, 1, 64, &ov->seeds); break;
        case O_SEED: rc = tupe_cli_u64(&c, arg, 0, UINT64_MAX / 2, &ov->seed); break;
        case O_EPOCHS: rc = tupe_cli_long(&c, arg, 1, 1000, &ov->epochs); break;
        case O_BATCH: rc = tupe_cli_long(&c, arg, 1, 65536, &ov->batch); break;
        case O_MAXLEN: rc = tupe_cli_long(&c, arg, 8, 65536, &ov->max_len); break;
        case O_WARMUP: rc = tupe_cli_double(&c, arg, 0, 1, &ov->warmup); break;
        case O_DROPOUT: rc = tupe_cli_double(&c, arg, 0, 0.99, &ov->dropout); break;
        case O_WD: rc = tupe_cli_double(&c, arg, 0, 10, &ov->wd); break;
        case O_CLIP: rc = tupe_cli_double(&c, arg, 0, 1e9, &ov->clip); break;
        case O_EPS: rc = tupe_cli_double(&c, arg, 0, 1, &ov->eps); break;
        case O_BETA2: rc = tupe_cli_double(&c, arg, 0, 0.999999999, &ov->beta2); break;
        case O_CASED: ov->cased = 1; break;
        case O_EVALS: rc = tupe_cli_long(&c, arg, 1, 1000, &ov->evals); break;
        case O_MAXTRAIN: rc = tupe_cli_u64(&c, arg, 1, 1ULL << 40, &u); ov->max_train = u; break;
        case O_MAXDEV: rc = tupe_cli_u64(&c, arg, 1, 1ULL << 40, &u); ov->max_dev = u; break;
        case O_TB: ov->tensorboard = arg; break;
        case O_NO_TB: ov->no_tensorboard = 1; break;
        }
        if (rc) {
            tupe_cli_end(&c);
            return TUPE_EUSAGE;
        }
    }
    if (id < 0)
        return c.exit_code;
    tupe_cli_default(&c, "data", a.data);
    tupe_cli_default(&c, "output", "submission.zip"); /* submit's; the others require -o */
    rc = tupe_cli_run(&c, &a);
    tupe_cli_end(&c);
    return rc;
}
