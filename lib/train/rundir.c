#include "train/rundir.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/stat.h>

#include "base/fileio.h"
#include "base/jsonnum.h"
#include "base/outdir.h"
#include "formats/tfevents.h"
#include "model/checkpoint.h"

const tupe_run_kind tupe_run_pretrain = {"pre-training run", NULL};
const tupe_run_kind tupe_run_finetune = {"fine-tuning run", "results.json"};

struct tupe_rundir {
    char *dir;
    const tupe_run_kind *k;
    tupe_dirlock *lock;
    FILE *metrics;
    char path[PATH_MAX];    /* of metrics.jsonl */
    tupe_tfevents *tb;      /* NULL: none, or stopped by a failed write */
    int failed;             /* a write failed: err says which and why */
    tupe_err err;
};

static int64_t step_of(const char *name);

/* Whether dir holds no .tupe-kind and a complete checkpoint under checkpoints/: a run written
 * before kinds were recorded. */
static int unmarked_run(const char *dir)
{
    char kind[128], sub[4200];
    if (tupe_outdir_kind(dir, kind, sizeof kind) != 0)
        return 0;
    snprintf(sub, sizeof sub, "%s/checkpoints", dir);
    DIR *d = opendir(sub);
    if (!d)
        return 0;
    struct dirent *de;
    int found = 0;
    while (!found && (de = readdir(d))) {
        char model[4600];
        snprintf(model, sizeof model, "%s/%s/%s", sub, de->d_name, TUPE_CKPT_MODEL_FILE);
        found = step_of(de->d_name) >= 0 && tupe_path_exists(model);
    }
    closedir(d);
    return found;
}

int tupe_rundir_check(const char *dir, const tupe_run_kind *k, int adopt, tupe_err *e)
{
    if (adopt && unmarked_run(dir))
        return 0;
    return tupe_outdir_check(dir, k->kind, TUPE_OUTDIR_REPLACE, e);
}

/* Nothing written yet: close what is open and release the lock. */
static void drop(tupe_rundir *rd)
{
    if (!rd)
        return;
    tupe_err ignored;
    if (rd->tb)
        tupe_tfevents_close(rd->tb, &ignored);
    if (rd->metrics)
        fclose(rd->metrics);
    tupe_dirlock_release(rd->lock);
    free(rd->dir);
    free(rd);
}

/* The checks that need nothing written: the run directory's kind and parents, and those of
 * the event files' directory (a file there, or a checkpoint above it, is refused before any
 * directory is made). */
static int check_spec(const tupe_rundir_spec *s, tupe_err *e)
{
    int rc = tupe_rundir_check(s->dir, s->k, s->adopt, e);
    if (!rc && !s->no_tensorboard && s->tensorboard)
        rc = tupe_outdir_check(s->tensorboard, TUPE_TFEVENTS_KIND, TUPE_OUTDIR_INTO, e);
    return rc;
}

/* Under the lock: the run directory and its event files are still no input, whatever their
 * names lead to now. */
static int check_inputs(const tupe_rundir_spec *s, tupe_err *e)
{
    if (!s->inputs)
        return 0;
    int rc = tupe_guard_output(s->inputs, s->dir, "-o", TUPE_GUARD_INTO, e);
    if (!rc && !s->no_tensorboard && s->tensorboard)
        rc = tupe_guard_output(s->inputs, s->tensorboard, "--tensorboard", TUPE_GUARD_INTO, e);
    return rc;
}

/* Create dir, take its lock, check it again under the lock (another process may have taken it
 * since, or the name may lead elsewhere now), and record its kind. */
static int take(tupe_rundir **out, const tupe_rundir_spec *s, tupe_err *e)
{
    int rc = check_spec(s, e);
    if (rc || (rc = tupe_mkdir_p(s->dir, e)))
        return rc;
    tupe_rundir *rd = calloc(1, sizeof *rd);
    if (!rd || !(rd->dir = strdup(s->dir))) {
        free(rd);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    rd->k = s->k;
    if ((rc = tupe_dirlock_take(&rd->lock, s->dir, e)) || (rc = check_spec(s, e)) ||
        (rc = check_inputs(s, e)) || (rc = tupe_outdir_mark(s->dir, s->k->kind, e))) {
        drop(rd);
        return rc;
    }
    *out = rd;
    return 0;
}

int tupe_rundir_claim(tupe_rundir **rd, const tupe_rundir_spec *s, tupe_err *e)
{
    *rd = NULL;
    return tupe_path_exists(s->dir) ? take(rd, s, e) : check_spec(s, e);
}

/* Under the lock, before anything is written: the checkpoints are those the run was started
 * from. */
static int check_unchanged(const tupe_rundir_spec *s, int64_t resume_step, tupe_err *e)
{
    char latest[PATH_MAX];
    int64_t step;
    int rc = tupe_rundir_latest(s->dir, latest, sizeof latest, &step, e);
    if (rc)
        return rc;
    if (resume_step < 0 && latest[0])
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: holds a run now (checkpoints up to step %lld), "
                         "written by another process since this one started: refusing to "
                         "write over it; --resume continues it, or choose another -o", s->dir,
                         (long long)step);
    if (resume_step >= 0 && (!latest[0] || step != resume_step))
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: its latest checkpoint is %s%lld now, not step "
                         "%lld, which this run resumed: another process wrote it since; "
                         "resume again", s->dir, latest[0] ? "step " : "none, was ",
                         (long long)(latest[0] ? step : resume_step), (long long)resume_step);
    return 0;
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

/* Event files of an earlier run: TensorBoard would draw them as part of this one. */
static int remove_events(const char *dir, tupe_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d)))
        if (strncmp(de->d_name, "events.out.tfevents.", 20) == 0 && unlinkat(dirfd(d), de->d_name, 0) != 0)
            rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s/%s: cannot remove", dir, de->d_name);
    closedir(d);
    return rc;
}

/* The event files a run wrote into a --tensorboard directory of the caller's, by name, one a
 * line, in the run directory: that directory may hold other runs' files, so a resume cuts back
 * these only. */
#define EVENTS_LIST ".tupe-events"

/* Cut the listed event files found in tbdir after `step`. */
static int trim_listed(const char *dir, const char *tbdir, int64_t step, tupe_err *e)
{
    char list[PATH_MAX];
    snprintf(list, sizeof list, "%s/" EVENTS_LIST, dir);
    if (!tupe_path_exists(list))
        return 0;
    char *buf;
    size_t len;
    int rc = tupe_read_text(list, &buf, &len, (size_t)1 << 20, e);
    if (rc)
        return rc;
    for (char *name = buf, *nl; !rc && name && *name; name = nl ? nl + 1 : NULL) {
        if ((nl = strchr(name, '\n')))
            *nl = 0;
        char p[PATH_MAX];
        struct stat st;
        /* A name of ours (no path), still a plain file in the directory named now. */
        if (strncmp(name, "events.out.tfevents.", 20) != 0 || strchr(name, '/') ||
            (size_t)snprintf(p, sizeof p, "%s/%s", tbdir, name) >= sizeof p ||
            lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        rc = tupe_tfevents_trim_file(p, step, e);
    }
    free(buf);
    return rc;
}

/* Add the event file `path` to the list (a new run: start it). */
static int list_events(const char *dir, const char *path, int fresh, tupe_err *e)
{
    char list[PATH_MAX], *old = NULL;
    size_t len = 0;
    snprintf(list, sizeof list, "%s/" EVENTS_LIST, dir);
    int rc = !fresh && tupe_path_exists(list) ? tupe_read_text(list, &old, &len, (size_t)1 << 20, e) : 0;
    if (rc)
        return rc;
    const char *name = strrchr(path, '/') ? strrchr(path, '/') + 1 : path;
    size_t n = strlen(name);
    char *buf = malloc(len + n + 2);
    if (!buf) {
        free(old);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    if (len)
        memcpy(buf, old, len);
    if (len && buf[len - 1] != '\n')
        buf[len++] = '\n';
    memcpy(buf + len, name, n);
    buf[len + n] = '\n';
    rc = tupe_write_file(list, buf, len + n + 1, e);
    free(buf);
    free(old);
    return rc;
}

int tupe_rundir_begin(tupe_rundir **rdp, const tupe_rundir_spec *s, int64_t resume_step,
                      tupe_err *e)
{
    char path[PATH_MAX], tb[PATH_MAX];
    int rc;
    if (!*rdp && (rc = take(rdp, s, e)))
        return rc;
    tupe_rundir *rd = *rdp;
    /* Claimed earlier: the lock has been held since, but the kind, the parents and the
     * inputs are asked again here too, next to the contents, so that one place says what a
     * run holds when it starts. */
    if ((rc = check_spec(s, e)) || (rc = check_inputs(s, e)) ||
        (rc = check_unchanged(s, resume_step, e)))
        return rc;
    const char *dir = s->dir;
    if (s->k->done) {
        snprintf(path, sizeof path, "%s/%s", dir, s->k->done);
        if (remove(path) != 0 && errno != ENOENT)
            return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot remove", path);
    }
    snprintf(tb, sizeof tb, "%s/tensorboard", dir);
    if (!s->no_tensorboard && !s->tensorboard && resume_step < 0 && (rc = remove_events(tb, e)))
        return rc;
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    if (resume_step >= 0 && (rc = trim_metrics(path, resume_step, e)))
        return rc;
    /* The event files, cut back as metrics.jsonl is (a killed run logged past its
     * checkpoint): all of tensorboard/, and in a directory of the caller's, which may hold
     * other runs' files, those this run listed. The new file also starts with the START
     * marker on which TensorBoard discards the replayed steps of earlier files. */
    if (resume_step >= 0 &&
        ((rc = tupe_tfevents_trim_dir(tb, resume_step, e)) ||
         (!s->no_tensorboard && s->tensorboard &&
          (rc = trim_listed(dir, s->tensorboard, resume_step, e)))))
        return rc;
    snprintf(path, sizeof path, "%s/" EVENTS_LIST, dir);
    if (resume_step < 0 && remove(path) != 0 && errno != ENOENT)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot remove", path);
    snprintf(path, sizeof path, "%s/metrics.jsonl", dir);
    snprintf(rd->path, sizeof rd->path, "%s", path);
    if (!(rd->metrics = fopen(path, resume_step >= 0 ? "a" : "w")))
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create", path);
    if (!s->no_tensorboard &&
        ((rc = tupe_tfevents_open_dir(&rd->tb, s->tensorboard ? s->tensorboard : tb, e)) ||
         (s->tensorboard &&
          (rc = list_events(dir, tupe_tfevents_path(rd->tb), resume_step < 0, e))) ||
         (resume_step >= 0 &&
          (rc = tupe_tfevents_restart(rd->tb, resume_step + 1, tupe_tfevents_now(), e))))) {
        fclose(rd->metrics);
        rd->metrics = NULL;
        return rc;
    }
    return 0;
}

void tupe_rundir_metric(tupe_rundir *rd, const char *fmt, ...)
{
    if (!rd || !rd->metrics)
        return;
    char small[1024], *line = small;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n >= (int)sizeof small && (line = malloc((size_t)n + 1))) {
        va_start(ap, fmt);
        vsnprintf(line, (size_t)n + 1, fmt, ap);
        va_end(ap);
    }
    /* A diverged loss (with --skip-nonfinite) is logged as null: metrics.jsonl stays JSON. */
    char *clean = line && n >= 0 ? tupe_jsonnum_finite(line) : NULL;
    if (line != small)
        free(line);
    line = clean;
    if (!line) {
        if (!rd->failed)
            tupe_fail(&rd->err, TUPE_EFAIL, "%s: out of memory", rd->path);
        rd->failed = 1;
        return;
    }
    if ((fprintf(rd->metrics, "%s\n", line) < 0 || fflush(rd->metrics) != 0) && !rd->failed) {
        tupe_fail_errno(&rd->err, TUPE_EIO, errno, "%s", rd->path);
        rd->failed = 1;
    }
    tupe_err te;
    if (rd->tb && tupe_tfevents_json(rd->tb, line, tupe_tfevents_now(), &te)) {
        tupe_err ignored;
        tupe_tfevents_close(rd->tb, &ignored);
        rd->tb = NULL;
        if (!rd->failed)
            rd->err = te;
        rd->failed = 1;
    }
    free(line);
}

int tupe_rundir_end(tupe_rundir *rd, tupe_err *e)
{
    if (!rd)
        return 0;
    int rc = 0;
    if (rd->failed) {
        *e = rd->err;
        rc = e->code;
    }
    tupe_err ce;
    if (tupe_tfevents_close(rd->tb, &ce) && !rc) {
        *e = ce;
        rc = e->code;
    }
    if (rd->metrics && fclose(rd->metrics) != 0 && !rc)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s", rd->path);
    tupe_dirlock_release(rd->lock);
    free(rd->dir);
    free(rd);
    return rc;
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
