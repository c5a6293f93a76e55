#include "train/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/fileio.h"
#include "model/checkpoint.h"

const tupe_run_kind tupe_run_pretrain = {{"checkpoints/", "metrics.jsonl", NULL}, NULL};
const tupe_run_kind tupe_run_finetune = {{"metrics.jsonl", "best/", "results.json", NULL},
                                         "results.json"};

struct tupe_rundir {
    FILE *metrics;
};

static int is_mark(const tupe_run_kind *k, const char *name)
{
    for (int i = 0; k->marks[i]; i++) {
        size_t n = strlen(k->marks[i]);
        if (k->marks[i][n - 1] == '/')
            n--;
        if (strncmp(name, k->marks[i], n) == 0 && name[n] == 0)
            return 1;
    }
    return 0;
}

int tupe_rundir_check(const char *dir, const tupe_run_kind *k, tupe_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0; /* missing (created later), or not a directory (reported when created) */
    struct dirent *de;
    int others = 0, run = 0;
    while ((de = readdir(d))) {
        const char *n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0)
            continue;
        if (is_mark(k, n))
            run = 1;
        else
            others = 1;
    }
    closedir(d);
    if (!others || run)
        return 0;
    char marks[256] = "";
    size_t len = 0;
    for (int i = 0; k->marks[i] && len < sizeof marks; i++)
        len += (size_t)snprintf(marks + len, sizeof marks - len, "%s%s", !i ? "" : k->marks[i + 1] ? ", " : " or ",
                                k->marks[i]);
    return tupe_fail(e, TUPE_ECANTCREAT, "%s exists and is not a run directory (no %s): not written "
                     "into (choose another -o)", dir, marks);
}

/* Keep the lines of steps up to `step` (a killed run may have logged a few more). */
static int trim_metrics(const char *path, int64_t step, tupe_err *e)
{
    if (!tupe_path_exists(path))
        return 0;
    char *buf;
    size_t len;
    int rc = tupe_read_file(path, &buf, &len, (size_t)1 << 32, e);
    if (rc)
        return rc;
    tupe_out *o;
    if ((rc = tupe_out_open(&o, path, e))) {
        free(buf);
        return rc;
    }
    for (char *p = buf; *p && !rc;) {
        char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) + 1 : strlen(p);
        long long s = -1;
        if (sscanf(p, "{\"step\":%lld", &s) == 1 && s <= step && nl)
            rc = tupe_out_write(o, p, n, e);
        p += n;
    }
    free(buf);
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}

int tupe_rundir_begin(tupe_rundir **out, const char *dir, const tupe_run_kind *k,
                      int64_t resume_step, tupe_err *e)
{
    *out = NULL;
    char path[4200];
    int rc;
    if ((rc = tupe_rundir_check(dir, k, e)) || (rc = tupe_mkdir_p(dir, e)))
        return rc;
    if (k->done) {
        snprintf(path, sizeof path, "%s/%s", dir, k->done);
        if (remove(path) != 0 && errno != ENOENT)
            return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot remove", path);
    }
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (resume_step >= 0 && (rc = trim_metrics(path, resume_step, e)))
        return rc;
    tupe_rundir *rd = calloc(1, sizeof *rd);
    if (!rd)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!(rd->metrics = fopen(path, resume_step >= 0 ? "a" : "w"))) {
        free(rd);
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create", path);
    }
    *out = rd;
    return 0;
}

void tupe_rundir_metric(tupe_rundir *rd, const char *fmt, ...)
{
    if (!rd)
        return;
    va_list ap;
    va_start(ap, fmt);
    vfprintf(rd->metrics, fmt, ap);
    va_end(ap);
    fputc('\n', rd->metrics);
    fflush(rd->metrics);
}

void tupe_rundir_end(tupe_rundir *rd)
{
    if (!rd)
        return;
    fclose(rd->metrics);
    free(rd);
}

/* ---- checkpoints ------------------------------------------------------------------------------ */

static int64_t step_of(const char *name)
{
    if (strncmp(name, "step-", 5) != 0)
        return -1;
    char *end;
    long long v = strtoll(name + 5, &end, 10);
    return *end || v < 0 ? -1 : v;
}

/* Steps of the complete checkpoints of a run, ascending. */
static int list_checkpoints(const char *run_dir, int64_t **steps, size_t *n, tupe_err *e)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        /* none; a file in the way of the run directory is reported when it is created */
        return errno == ENOENT || errno == ENOTDIR ? 0 : tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", dir);
    size_t cap = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int64_t s = step_of(de->d_name);
        if (s < 0)
            continue; /* ".step-….tmp.…" leftovers of a killed run are not checkpoints */
        char model[4400];
        snprintf(model, sizeof model, "%s/%s/%s", dir, de->d_name, TUPE_CKPT_MODEL_FILE);
        if (!tupe_path_exists(model))
            continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            int64_t *ns = realloc(*steps, cap * sizeof *ns);
            if (!ns) {
                closedir(d);
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            }
            *steps = ns;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    for (size_t i = 1; i < *n; i++) /* insertion sort: a handful of entries */
        for (size_t j = i; j > 0 && (*steps)[j - 1] > (*steps)[j]; j--) {
            int64_t t = (*steps)[j];
            (*steps)[j] = (*steps)[j - 1];
            (*steps)[j - 1] = t;
        }
    return 0;
}

void tupe_rundir_checkpoint(char *dst, size_t cap, const char *dir, int64_t step)
{
    snprintf(dst, cap, "%s/checkpoints/step-%08lld", dir, (long long)step);
}

int tupe_rundir_latest(const char *dir, char *path, size_t cap, int64_t *step, tupe_err *e)
{
    int64_t *steps;
    size_t n;
    int rc = list_checkpoints(dir, &steps, &n, e);
    if (rc)
        return rc;
    *step = n ? steps[n - 1] : 0;
    if (n)
        tupe_rundir_checkpoint(path, cap, dir, *step);
    else if (cap)
        path[0] = 0;
    free(steps);
    return 0;
}

/* Remove the temporary checkpoint directories (".step-….tmp.…") that a run killed while
 * saving left behind: each is as large as a checkpoint. Called after a save, when this
 * process has none of its own. */
static void remove_leftovers(const char *run_dir)
{
    char dir[4096];
    snprintf(dir, sizeof dir, "%s/checkpoints", run_dir);
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (strncmp(de->d_name, ".step-", 6) != 0 || !strstr(de->d_name, ".tmp."))
            continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        tupe_remove_tree(p);
    }
    closedir(d);
}

void tupe_rundir_prune(const char *dir, int keep_last, const int64_t *keep, int n_keep)
{
    int64_t *steps;
    size_t n;
    tupe_err e;
    remove_leftovers(dir);
    if (list_checkpoints(dir, &steps, &n, &e))
        return;
    for (size_t i = 0; i + (size_t)keep_last < n; i++) {
        int kept = 0;
        for (int k = 0; k < n_keep; k++)
            kept |= keep[k] == steps[i];
        if (kept)
            continue;
        char p[4096];
        tupe_rundir_checkpoint(p, sizeof p, dir, steps[i]);
        tupe_remove_tree(p);
    }
    free(steps);
}
