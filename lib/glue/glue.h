/* GLUE tasks: the glue_data/ layout, per-task readers with the quirks that bite (tab split
 * with no quote processing, BOM and '\r' stripped, CoLA's missing header, MNLI's last-column
 * labels, malformed rows), label strings as the canonical values, and the leaderboard
 * submission files (names, headers, prediction strings, line counts).
 *
 * The rules are those of ../shared/docs/formats.md §1; man tupe-glue(1) restates them. */
#ifndef TUPE_GLUE_H
#define TUPE_GLUE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum { TUPE_GLUE_TRAIN, TUPE_GLUE_DEV, TUPE_GLUE_TEST };

typedef struct tupe_glue_split {
    const char *name;     /* "train", "dev", "dev_matched", "test_mismatched", ... */
    const char *file;     /* path under the data directory: "MNLI/dev_matched.tsv" */
    int kind;             /* TUPE_GLUE_TRAIN / DEV / TEST */
    const char *board;    /* leaderboard name of this evaluation set: "MNLI-m", "AX", ... */
    long rows;            /* published number of data rows (formats.md §1.2) */
} tupe_glue_split;

typedef struct tupe_glue_task {
    const char *name;          /* "CoLA", "SST-2", "MRPC", "STS-B", "QQP", "MNLI", "QNLI", "RTE", "WNLI", "AX" */
    int nlabels;               /* 1 = regression */
    const char *labels[3];     /* label strings as in the files, in index order */
    const char *metrics;       /* reported metrics, e.g. "acc,f1" */
    const char *select;        /* checkpoint-selection metric (the TUPE paper's) */
    int header;                /* 1 when train/dev files start with a header row */
    int fields_train, fields_dev, fields_test;
    int s1, s2, label;         /* train/dev columns; s2 < 0 for single sentences; label < 0: last */
    int test_s1, test_s2;
    int epochs;                /* TUPE recipe: 10, or 5 for MNLI/QNLI/QQP */
    int in_avg;                /* counted in the paper's GLUE average */
    int nsplits;
    tupe_glue_split splits[5];
} tupe_glue_task;

/* All tasks (CoLA SST-2 MRPC STS-B QQP MNLI QNLI RTE WNLI AX), and lookup by name
 * (case-insensitive; "SST2", "STSB", "diagnostic" accepted). */
const tupe_glue_task *tupe_glue_tasks(int *n);
const tupe_glue_task *tupe_glue_task_find(const char *name);
/* A split by name; "dev"/"test" also select MNLI's matched splits. NULL if none. */
const tupe_glue_split *tupe_glue_split_find(const tupe_glue_task *t, const char *name);
/* Index of a label string, or -1. */
int tupe_glue_label_index(const tupe_glue_task *t, const char *s);

typedef struct tupe_glue_example {
    const char *s1, *s2;       /* s2 NULL for single-sentence tasks */
    int label;                 /* label index; -1 in test splits */
    double value;              /* regression target as in the file (STS-B 0..5); NaN if none */
    long row;                  /* 0-based data row: the leaderboard "index" */
    uint64_t line;             /* 1-based line in the file */
} tupe_glue_example;

typedef struct tupe_glue_data {
    const tupe_glue_task *task;
    const tupe_glue_split *split;
    char *path;
    tupe_glue_example *ex;
    size_t n;
    size_t skipped;            /* malformed rows skipped (train/dev only) */
    char *buf;                 /* the file's bytes; the strings point into it */
} tupe_glue_data;

/* Called for every skipped row: path, 1-based line, why. */
typedef void (*tupe_glue_skip_fn)(void *ctx, const char *path, uint64_t line, const char *why);

/* Read a split. Malformed rows (wrong number of fields, unknown label, unparsable score) are
 * skipped and reported through `skip` in train and dev files; in test files they are an
 * error (every test row needs a prediction). */
int tupe_glue_read(const tupe_glue_task *t, const tupe_glue_split *s, const char *data_dir,
                   tupe_glue_data *out, tupe_glue_skip_fn skip, void *ctx, tupe_err *e);
/* The same from the bytes of a file in memory (copied); `name` stands for the file in
 * messages. */
int tupe_glue_parse(const tupe_glue_task *t, const tupe_glue_split *s, const char *buf,
                    size_t len, const char *name, tupe_glue_data *out, tupe_glue_skip_fn skip,
                    void *ctx, tupe_err *e);
void tupe_glue_free(tupe_glue_data *d);

/* ---- scoring ------------------------------------------------------------------------------ */

typedef struct tupe_glue_scores {
    int n;
    const char *name[4];     /* "acc", "f1", "mcc", "pearson", "spearman" */
    double value[4];
} tupe_glue_scores;

/* The task's metrics (t->metrics) for predictions against the gold labels of d: labels for
 * classification, values for regression (either may be NULL when not applicable). */
int tupe_glue_score(const tupe_glue_data *d, const int *labels, const double *values,
                    tupe_glue_scores *out, tupe_err *e);
/* One metric by name; NaN when absent. */
double tupe_glue_scores_get(const tupe_glue_scores *s, const char *name);

/* ---- leaderboard files -------------------------------------------------------------------- */

/* The 11 files of a submission, and the line count of each (with its header). */
typedef struct tupe_glue_board_file {
    const char *file;          /* "MNLI-m.tsv" */
    long lines;                /* 9797 */
    const char *task;          /* task whose predictions it holds: "MNLI" */
} tupe_glue_board_file;
const tupe_glue_board_file *tupe_glue_board_files(int *n);

/* The prediction string for a class index ("0"/"1", "entailment", ...) or a regression value
 * (STS-B: "%.3f", clipped to [0, 5]); writes into buf. */
void tupe_glue_pred_string(const tupe_glue_task *t, int label, double value, char *buf, size_t cap);
/* Parse a prediction string back; 0 on success. */
int tupe_glue_pred_parse(const tupe_glue_task *t, const char *s, int *label, double *value);

/* Write "index<TAB>prediction" lines, atomically. labels or values (regression) has n entries. */
int tupe_glue_write_predictions(const char *path, const tupe_glue_task *t, const int *labels,
                                const double *values, size_t n, tupe_err *e);
/* Read a predictions file in that format (rows in any order; every index 0..n-1 exactly once).
 * labels/values are allocated (values NaN / labels -1 where not applicable). */
int tupe_glue_read_predictions(const char *path, const tupe_glue_task *t, size_t n, int **labels,
                               double **values, tupe_err *e);
/* Check a directory holding the 11 files: names, header, line counts, prediction strings.
 * The first problem found is the error (TUPE_EDATA), naming file and line. */
int tupe_glue_check_submission(const char *dir, tupe_err *e);
/* Zip the 11 files of a checked directory into `zip_path` (flat, as the leaderboard wants). */
int tupe_glue_zip_submission(const char *dir, const char *zip_path, tupe_err *e);

#endif
