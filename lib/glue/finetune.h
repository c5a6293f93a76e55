/* Fine-tuning on GLUE: a pre-trained encoder gets a classification or regression head
 * (tupe-spec §5, §8) and is trained on a task's training split, evaluated on its dev split(s)
 * a few times per epoch, and the best checkpoint by the task's selection metric is kept.
 *
 * Inputs are built from the tokenizer's ids: [CLS] A [SEP] or [CLS] A [SEP] B [SEP] with a
 * WordPiece vocabulary, <s> A </s> or <s> A </s> </s> B </s> with a BPE one, the longer segment
 * shortened first (the second on ties) until the whole fits --max-len. Token types (0 up to
 * and including the first separator, 1 after) are given to models that have a token-type
 * embedding (imported BERTs).
 *
 * A run directory (train/rundir.h: the rules every run directory follows) holds best/ (a
 * checkpoint: the model with its head, and in its training state the task, the label strings
 * in index order, the dev scores and the input settings), metrics.jsonl (every evaluation,
 * and as TensorBoard event files in tensorboard/) and results.json (the best scores). */
#ifndef TUPE_FINETUNE_H
#define TUPE_FINETUNE_H

#include <stdint.h>

#include "backend/backend.h"
#include "base/pathguard.h"
#include "base/error.h"
#include "base/note.h"
#include "glue/glue.h"
#include "model/optim.h"

enum tupe_recipe { TUPE_RECIPE_TUPE = 0, TUPE_RECIPE_BERT, TUPE_RECIPE_ROBERTA, TUPE_RECIPE_ELECTRA };

#define TUPE_FT_MAX_GRID 8
/* What the directories tupe-glue writes say in their .tupe-kind (base/outdir.h); a run's is
 * train/rundir's "fine-tuning run". */
#define TUPE_SWEEP_KIND "GLUE sweep"
#define TUPE_PREDICTIONS_KIND "GLUE predictions"

typedef struct tupe_ft_opts {
    const char *data;          /* the glue_data directory */
    const char *checkpoint;    /* pre-trained model (train, sweep) or fine-tuned (eval, predict) */
    const char *vocab;         /* vocab.txt or a BPE directory */
    const char *out;           /* run directory (train, sweep) or predictions directory */
    const char *tensorboard;   /* train: event files of the metrics (train/rundir.h), NULL: OUT/tensorboard;
                                  sweep: one subdirectory lr-X/seed-N per run */
    int no_tensorboard;        /* metrics.jsonl only */
    const tupe_guard *inputs;  /* the command line's inputs (train/rundir.h), or NULL */
    int recipe;
    int lowercase;             /* the vocabulary's casing (1: uncased) */
    int max_len;
    int batch;
    int epochs;                /* 0: the recipe's for the task */
    double lr;                 /* 0: the first of the recipe's grid */
    double warmup_ratio;
    double dropout;            /* hidden, attention and classifier dropout */
    tupe_adamw_cfg adam;
    double layer_decay;        /* layer-wise learning-rate decay (ELECTRA's): a tensor at depth
                                  k (0: embeddings and positional terms, l + 1: layer l, L + 2:
                                  the head) learns at lr x layer_decay^(L + 2 - k); 0 or 1: off */
    uint64_t seed;
    int evals_per_epoch;
    int64_t max_train;         /* use the first N training examples (0: all) */
    int64_t max_dev;           /* evaluate on the first N dev examples (0: all) */
    int quiet;                 /* no progress display */
    tupe_note_fn note;         /* progress lines and remarks, or NULL */
    void *note_ctx;
    /* sweep */
    double grid[TUPE_FT_MAX_GRID];
    int ngrid;                 /* 0: the recipe's grid */
    int seeds;                 /* seeds per learning rate (the paper: 5) */
} tupe_ft_opts;

/* The recipe's settings for a task (man tupe-glue(1) lists them): batch, epochs, warmup,
 * optimizer, learning-rate grid. Fields the caller sets afterwards win. */
void tupe_ft_recipe(tupe_ft_opts *o, int recipe, const tupe_glue_task *t);

typedef struct tupe_ft_scores {
    int nsets;                       /* dev splits (MNLI: matched and mismatched) */
    const char *set[2];              /* leaderboard names */
    tupe_glue_scores s[2];
    double select;                   /* the selection metric of set 0 */
    int64_t step;
    double epoch;
} tupe_ft_scores;

/* Fine-tune one run (one learning rate, one seed). best receives the best dev scores. */
int tupe_ft_train(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                  tupe_ft_scores *best, tupe_err *e);
/* Dev scores of a fine-tuned checkpoint. */
int tupe_ft_eval(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                 tupe_ft_scores *s, tupe_err *e);
/* Test predictions of a fine-tuned checkpoint: one leaderboard file per test split of the
 * task (MNLI: MNLI-m.tsv and MNLI-mm.tsv; AX with an MNLI checkpoint: AX.tsv) in o->out. */
int tupe_ft_predict(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                    tupe_err *e);

/* The paper's protocol: every learning rate of the grid times `seeds` seeds, each run in
 * OUT/lr-<lr>/seed-<s>/ (finished runs are not redone: resumable), the median over seeds per
 * learning rate, the best learning rate's median reported. Writes OUT/sweep.tsv,
 * OUT/sweep.json and OUT/sweep.md; *median receives the reported score (selection metric). */
int tupe_ft_sweep(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                  double *median, double *best_lr, tupe_err *e);

/* Collect the sweep results of several tasks under a directory (DIR/<task>/sweep.json) into
 * the paper's Table 1 layout (MNLI-m/mm, QNLI, QQP, SST, CoLA, MRPC, RTE, STS, Avg), written
 * as TSV, JSON and Markdown next to them (DIR/table.*). Missing tasks are left blank and the
 * average is then marked partial. */
int tupe_ft_table(const char *dir, tupe_err *e);

#endif
