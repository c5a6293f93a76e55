#include "train/metricslog.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "formats/tfevents.h"

struct tupe_mlog {
    FILE *f;
    char path[PATH_MAX];
    tupe_tfevents *tb;
    char events[PATH_MAX];
    int failed;         /* a write failed: err holds why */
    tupe_err err;
};

/* Event files of an earlier run: TensorBoard would draw them as part of this one. */
static int remove_events(const char *dir, tupe_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        char p[PATH_MAX];
        if (strncmp(de->d_name, "events.out.tfevents.", 20) != 0)
            continue;
        snprintf(p, sizeof p, "%s/%s", dir, de->d_name);
        if (unlink(p) != 0)
            rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s", p);
    }
    closedir(d);
    return rc;
}

int tupe_mlog_open(tupe_mlog **out, const char *jsonl, int append, const char *tbdir, int tb_fresh,
                   tupe_err *e)
{
    if (tbdir && tb_fresh) {
        int rc = remove_events(tbdir, e);
        if (rc)
            return rc;
    }
    tupe_mlog *m = calloc(1, sizeof *m);
    if (!m)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    snprintf(m->path, sizeof m->path, "%s", jsonl);
    if (!(m->f = fopen(jsonl, append ? "a" : "w"))) {
        int rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create", jsonl);
        free(m);
        return rc;
    }
    if (tbdir) {
        int rc = tupe_tfevents_open_dir(&m->tb, tbdir, e);
        if (rc) {
            fclose(m->f);
            free(m);
            return rc;
        }
        snprintf(m->events, sizeof m->events, "%s", tupe_tfevents_path(m->tb));
    }
    *out = m;
    return 0;
}

void tupe_mlog_line(tupe_mlog *m, const char *json)
{
    if (!m)
        return;
    if ((fprintf(m->f, "%s\n", json) < 0 || fflush(m->f) != 0) && !m->failed) {
        tupe_fail_errno(&m->err, TUPE_EIO, errno, "%s", m->path);
        m->failed = 1;
    }
    tupe_err te;
    if (m->tb && tupe_tfevents_json(m->tb, json, tupe_tfevents_now(), &te)) {
        tupe_err ignored;
        tupe_tfevents_close(m->tb, &ignored);
        m->tb = NULL;
        if (!m->failed)
            m->err = te;
        m->failed = 1;
    }
}

const char *tupe_mlog_events(const tupe_mlog *m) { return m && m->events[0] ? m->events : NULL; }

int tupe_mlog_close(tupe_mlog *m, tupe_err *e)
{
    if (!m)
        return 0;
    int rc = 0;
    if (m->failed) {
        *e = m->err;
        rc = e->code;
    }
    tupe_err ce;
    if (tupe_tfevents_close(m->tb, &ce) && !rc) {
        *e = ce;
        rc = e->code;
    }
    if (fclose(m->f) != 0 && !rc)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s", m->path);
    free(m);
    return rc;
}
