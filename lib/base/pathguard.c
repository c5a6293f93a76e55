#include "base/pathguard.h"

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fid {
    dev_t dev;
    ino_t ino;
} fid;

typedef struct ids {
    fid *v;
    size_t n, cap;
} ids;

/* What is known of one path: the file itself (followed and, for a link, the link), whether it
 * is a directory, and its ancestors (the directories that hold it, up to /). */
typedef struct pinfo {
    char *path, *what;
    ids self, anc;
    int exists, is_dir;
    fid target;            /* stat() of the path (valid when exists) */
} pinfo;

struct tupe_guard {
    pinfo *in;
    size_t n, cap;
};

static int ids_add(ids *s, const struct stat *st)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].dev == st->st_dev && s->v[i].ino == st->st_ino)
            return 0;
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 16;
        fid *v = realloc(s->v, cap * sizeof *v);
        if (!v)
            return -1;
        s->v = v;
        s->cap = cap;
    }
    s->v[s->n].dev = st->st_dev;
    s->v[s->n].ino = st->st_ino;
    s->n++;
    return 0;
}

static int ids_has(const ids *s, fid f)
{
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].dev == f.dev && s->v[i].ino == f.ino)
            return 1;
    return 0;
}

static int ids_meet(const ids *a, const ids *b)
{
    for (size_t i = 0; i < a->n; i++)
        if (ids_has(b, a->v[i]))
            return 1;
    return 0;
}

/* A resolved directory and every directory above it. */
static int add_chain(ids *s, const char *resolved)
{
    char p[PATH_MAX];
    if (snprintf(p, sizeof p, "%s", resolved) >= (int)sizeof p)
        return 0;
    for (;;) {
        struct stat st;
        if (stat(p[0] ? p : "/", &st) == 0 && ids_add(s, &st))
            return -1;
        char *slash = strrchr(p, '/');
        if (!slash || !p[0] || (slash == p && !p[1]))
            return 0;
        if (slash == p)
            p[1] = 0;
        else
            *slash = 0;
    }
}

/* The directory a path's last component is in, resolved: the longest prefix of its directory
 * part that exists, through realpath (a directory that does not exist yet will be made under
 * it). */
static int add_parent_chain(ids *s, const char *path)
{
    char d[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(d, sizeof d, ".");
    else if (slash == path)
        snprintf(d, sizeof d, "/");
    else if (snprintf(d, sizeof d, "%.*s", (int)(slash - path), path) >= (int)sizeof d)
        return 0;
    for (;;) {
        char r[PATH_MAX];
        if (realpath(d, r))
            return add_chain(s, r);
        char *cut = strrchr(d, '/');
        if (!cut)
            return realpath(".", r) ? add_chain(s, r) : 0;
        if (cut == d)
            return add_chain(s, "/");
        *cut = 0;
    }
}

/* Fill in what is known of path; std_fd >= 0 for "-" (standard input or output). */
static int describe(pinfo *p, const char *path, int std_fd)
{
    struct stat st, lst;
    char buf[PATH_MAX];
    if (std_fd >= 0) {
        /* Standard input or output counts only as a regular file: a pipe or terminal holds
         * nothing that can be overwritten. /proc names the file, for its ancestors. */
        if (fstat(std_fd, &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
        p->exists = 1;
        p->target.dev = st.st_dev;
        p->target.ino = st.st_ino;
        if (ids_add(&p->self, &st))
            return -1;
        char link[64];
        snprintf(link, sizeof link, "/proc/self/fd/%d", std_fd);
        ssize_t n = readlink(link, buf, sizeof buf - 1);
        if (n > 0 && buf[0] == '/') {
            buf[n] = 0;
            return add_parent_chain(&p->anc, buf);
        }
        return 0;
    }
    if (lstat(path, &lst) == 0 && ids_add(&p->self, &lst))
        return -1;
    if (stat(path, &st) == 0) {
        p->exists = 1;
        p->is_dir = S_ISDIR(st.st_mode);
        p->target.dev = st.st_dev;
        p->target.ino = st.st_ino;
        if (ids_add(&p->self, &st))
            return -1;
        /* Through a link: where the file really is, too. */
        if (realpath(path, buf) && add_parent_chain(&p->anc, buf))
            return -1;
    }
    return add_parent_chain(&p->anc, path);
}

static void pinfo_free(pinfo *p)
{
    free(p->path);
    free(p->what);
    free(p->self.v);
    free(p->anc.v);
}

tupe_guard *tupe_guard_new(void) { return calloc(1, sizeof(tupe_guard)); }

void tupe_guard_free(tupe_guard *g)
{
    if (!g)
        return;
    for (size_t i = 0; i < g->n; i++)
        pinfo_free(&g->in[i]);
    free(g->in);
    free(g);
}

int tupe_guard_input(tupe_guard *g, const char *path, const char *what, tupe_err *e)
{
    if (!path || !*path)
        return tupe_fail(e, TUPE_EUSAGE, "%s%san empty path is no file", what ? what : "",
                         what ? ": " : "");
    if (g->n == g->cap) {
        size_t cap = g->cap ? 2 * g->cap : 8;
        pinfo *v = realloc(g->in, cap * sizeof *v);
        if (!v)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        g->in = v;
        g->cap = cap;
    }
    pinfo *p = &g->in[g->n];
    memset(p, 0, sizeof *p);
    p->path = strdup(path);
    p->what = what ? strdup(what) : NULL;
    int std = strcmp(path, "-") == 0 ? STDIN_FILENO : -1;
    if (!p->path || (what && !p->what) || describe(p, path, std)) {
        pinfo_free(p);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    if (!p->exists) {
        pinfo_free(p); /* reported by whoever opens it */
        return 0;
    }
    g->n++;
    return 0;
}

/* "the input FILE x.txt", "the input x.txt" */
static void input_name(char *dst, size_t cap, const pinfo *in)
{
    const char *name = strcmp(in->path, "-") == 0 ? "(stdin)" : in->path;
    if (in->what)
        snprintf(dst, cap, "the input %s %s", in->what, name);
    else
        snprintf(dst, cap, "the input %s", name);
}

int tupe_guard_output(const tupe_guard *g, const char *path, const char *what, int mode,
                      tupe_err *e)
{
    if (!path || !*path)
        return tupe_fail(e, TUPE_EUSAGE, "%s%san empty path is no file", what ? what : "",
                         what ? ": " : "");
    if (!g || !g->n)
        return 0;
    pinfo o;
    memset(&o, 0, sizeof o);
    int is_std = strcmp(path, "-") == 0;
    if (describe(&o, path, is_std ? STDOUT_FILENO : -1)) {
        pinfo_free(&o);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    const char *oname = is_std ? "(stdout)" : path;
    int rc = 0;
    char iname[PATH_MAX + 64];
    for (size_t i = 0; i < g->n && !rc; i++) {
        const pinfo *in = &g->in[i];
        input_name(iname, sizeof iname, in);
        int same_name = strcmp(in->path, path) == 0;
        if (ids_meet(&o.self, &in->self))
            rc = tupe_fail(e, TUPE_ECANTCREAT, "%s: is %s%s: refusing to write over an input; "
                           "choose another output", oname, iname,
                           same_name ? "" : " (the same file)");
        else if (mode != TUPE_GUARD_SAME && in->is_dir && ids_has(&o.anc, in->target))
            rc = tupe_fail(e, TUPE_ECANTCREAT, "%s: lies inside %s: refusing to write into an "
                           "input directory; choose an output outside it", oname, iname);
        else if (mode == TUPE_GUARD_REPLACE && o.exists && o.is_dir &&
                 ids_has(&in->anc, o.target))
            rc = tupe_fail(e, TUPE_ECANTCREAT, "%s: contains %s: replacing the directory would "
                           "delete an input; choose another output", oname, iname);
    }
    pinfo_free(&o);
    return rc;
}

int tupe_guard_check(const char *const *inputs, int ninputs, const char *output, int mode,
                     tupe_err *e)
{
    tupe_guard *g = tupe_guard_new();
    if (!g)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc = 0;
    for (int i = 0; i < ninputs && !rc; i++)
        rc = tupe_guard_input(g, inputs[i], NULL, e);
    if (!rc)
        rc = tupe_guard_output(g, output, NULL, mode, e);
    tupe_guard_free(g);
    return rc;
}
