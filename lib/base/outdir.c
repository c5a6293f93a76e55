#include "base/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"

#define KIND_MAX 128

int tupe_outdir_kind(const char *dir, char *kind, size_t cap)
{
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_KIND_FILE);
    int fd = open(p, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    struct stat st;
    char buf[KIND_MAX + 2];
    ssize_t n = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode))
        n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 1 || buf[n - 1] != '\n')
        return -1;
    buf[n - 1] = 0;
    for (ssize_t i = 0; i < n - 1; i++)
        if ((unsigned char)buf[i] < 0x20)
            return -1;
    snprintf(kind, cap, "%s", buf);
    return 1;
}

int tupe_outdir_mark(const char *dir, const char *kind, tupe_err *e)
{
    char want[KIND_MAX + 2], have[KIND_MAX + 1];
    if (tupe_outdir_kind(dir, have, sizeof have) == 1 && strcmp(have, kind) == 0)
        return 0;
    snprintf(want, sizeof want, "%s\n", kind);
    /* Written whole under a temporary name and renamed, as every output; by hand rather than
     * through tupe_out, whose fault points the crash tests count in the outputs themselves. */
    char p[4200], tmp[4400];
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_KIND_FILE);
    if (tupe_tmp_sibling(tmp, sizeof tmp, p, "tmp"))
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: path too long", p);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create", p);
    size_t n = strlen(want);
    int ok = write(fd, want, n) == (ssize_t)n && fsync(fd) == 0;
    int err = errno;
    if (close(fd) != 0 && ok) {
        ok = 0;
        err = errno;
    }
    if (!ok || rename(tmp, p) != 0) {
        if (ok)
            err = errno;
        unlink(tmp);
        return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s: cannot write", p);
    }
    return 0;
}

/* Whether dir holds nothing but tupe's own bookkeeping (a lock file, temporaries). */
static int is_empty(const char *dir, int *err)
{
    DIR *d = opendir(dir);
    if (!d) {
        *err = errno;
        return 0;
    }
    struct dirent *de;
    int empty = 1;
    while (empty && (de = readdir(d))) {
        const char *n = de->d_name;
        if (strcmp(n, ".") != 0 && strcmp(n, "..") != 0 && strcmp(n, TUPE_LOCK_FILE) != 0)
            empty = 0;
    }
    closedir(d);
    *err = 0;
    return empty;
}

/* The kinds that other outputs may lie inside: directories that are written into, never
 * replaced or pruned as a whole. A run holds its checkpoints, its event files and whatever
 * the user adds beside them (figures, predictions, an export), but not another run: two
 * runs' metrics and checkpoints would mix. A sweep holds its fine-tuning runs. Every other
 * kind (a checkpoint, an export, shards, a vocabulary) is replaced or pruned as a whole, and
 * what lay inside it would go with it. */
static int may_hold(const char *outer, const char *inner)
{
    static const char *const written_into[] = {"figures directory", "GLUE predictions",
                                               "TensorBoard events"};
    for (size_t i = 0; i < sizeof written_into / sizeof *written_into; i++)
        if (strcmp(outer, written_into[i]) == 0)
            return 1;
    int inner_run = strcmp(inner, "pre-training run") == 0 || strcmp(inner, "fine-tuning run") == 0 ||
                    strcmp(inner, "GLUE sweep") == 0;
    if (strcmp(outer, "GLUE sweep") == 0)
        return strcmp(inner, "GLUE sweep") != 0 && strcmp(inner, "pre-training run") != 0;
    if (strcmp(outer, "pre-training run") == 0 || strcmp(outer, "fine-tuning run") == 0)
        return !inner_run;
    return 0;
}

int tupe_outdir_enclosing(const char *path, char *dir, size_t dcap, char *kind, size_t kcap)
{
    /* The directory the last component is in: the longest prefix that exists, resolved (a
     * link anywhere on the way is followed, as writing through it would be). */
    char d[PATH_MAX], r[PATH_MAX];
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    if (n >= sizeof d)
        return 0;
    memcpy(d, path, n);
    d[n] = 0;
    for (;;) {
        char *slash = strrchr(d, '/');
        if (!slash) {
            snprintf(d, sizeof d, ".");
        } else if (slash == d) {
            d[1] = 0;
        } else {
            *slash = 0;
        }
        if (realpath(d, r))
            break;
        if (strcmp(d, ".") == 0 || strcmp(d, "/") == 0)
            return 0;
    }
    for (;;) {
        if (tupe_outdir_kind(r, kind, kcap) == 1) {
            snprintf(dir, dcap, "%s", r);
            return 1;
        }
        char *slash = strrchr(r, '/');
        if (!slash || (slash == r && !r[1]))
            return 0;
        if (slash == r)
            r[1] = 0;
        else
            *slash = 0;
    }
}

/* An output of `kind` at path may not lie inside a directory of a kind that cannot hold it
 * (may_hold), at any depth: each marked directory above it is asked in turn. */
static int check_enclosing(const char *path, const char *kind, tupe_err *e)
{
    char dir[PATH_MAX], outer[KIND_MAX + 1], cur[PATH_MAX];
    snprintf(cur, sizeof cur, "%s", path);
    while (tupe_outdir_enclosing(cur, dir, sizeof dir, outer, sizeof outer)) {
        if (!may_hold(outer, kind))
            return tupe_fail(e, TUPE_ECANTCREAT, "%s: lies inside %s, a %s: refusing to put a %s "
                             "there (%s); choose an output outside it", path, dir, outer, kind,
                             may_hold(outer, "figures directory")
                                 ? "one run inside another would mix them"
                                 : "it would go when that directory is replaced or pruned");
        if (strcmp(dir, "/") == 0)
            break;
        snprintf(cur, sizeof cur, "%s", dir);
    }
    return 0;
}

int tupe_outdir_check(const char *path, const char *kind, int mode, tupe_err *e)
{
    struct stat st;
    int rc = check_enclosing(path, kind, e);
    if (rc)
        return rc;
    if (stat(path, &st) != 0)
        return 0;
    if (!S_ISDIR(st.st_mode))
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: exists and is not a directory; refusing to "
                         "replace it with a %s", path, kind);
    char have[KIND_MAX + 1];
    int k = tupe_outdir_kind(path, have, sizeof have);
    if (k == 1 && strcmp(have, kind) == 0)
        return 0;
    if (k == 1)
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: is a %s (its %s says so), not a %s: refusing "
                         "to %s it; choose another output", path, have, TUPE_KIND_FILE, kind,
                         mode == TUPE_OUTDIR_INTO ? "write into" : "replace");
    if (k < 0)
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: its %s is unreadable or damaged: refusing to "
                         "%s it; choose another output", path, TUPE_KIND_FILE,
                         mode == TUPE_OUTDIR_INTO ? "write into" : "replace");
    if (mode == TUPE_OUTDIR_INTO)
        return 0;
    int err;
    if (is_empty(path, &err))
        return 0;
    if (err)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s", path);
    return tupe_fail(e, TUPE_ECANTCREAT, "%s: exists and is not a %s (it has no %s naming its "
                     "kind: not written by tupe, or by a tupe older than these files): refusing "
                     "to replace it; remove it yourself or choose another output", path, kind,
                     TUPE_KIND_FILE);
}

int tupe_outdir_into(const char *dir, const char *kind, tupe_err *e)
{
    int rc = tupe_outdir_check(dir, kind, TUPE_OUTDIR_INTO, e), err;
    if (rc || (rc = tupe_mkdir_p(dir, e)))
        return rc;
    return is_empty(dir, &err) ? tupe_outdir_mark(dir, kind, e) : 0;
}

void tupe_outdir_discard(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct dirent *de;
    int only_ours = 1;
    while (only_ours && (de = readdir(d))) {
        const char *n = de->d_name;
        only_ours = strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, TUPE_KIND_FILE) == 0 ||
                    strcmp(n, TUPE_LOCK_FILE) == 0;
    }
    closedir(d);
    if (!only_ours)
        return;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_KIND_FILE);
    unlink(p);
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_LOCK_FILE);
    unlink(p);
    rmdir(dir);
}

struct tupe_dirlock {
    int fd;
};

/* The PID recorded in a lock file, or 0. */
static long holder(int fd)
{
    char buf[32];
    ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = 0;
    return strtol(buf, NULL, 10);
}

int tupe_dirlock_take(tupe_dirlock **lp, const char *dir, tupe_err *e)
{
    *lp = NULL;
    char p[4200];
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_LOCK_FILE);
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0666);
    if (fd < 0)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create the lock", p);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        int err = errno;
        long pid = err == EWOULDBLOCK ? holder(fd) : 0;
        close(fd);
        if (err != EWOULDBLOCK)
            return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s: cannot lock", p);
        if (pid > 0)
            return tupe_fail(e, TUPE_ECANTCREAT, "%s: in use: process %ld is writing it (wait "
                             "for it to end, or choose another output)", dir, pid);
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: in use: another process is writing it (wait "
                         "for it to end, or choose another output)", dir);
    }
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)n, 0) != n) {
        int err = errno;
        close(fd);
        return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s: cannot write", p);
    }
    tupe_dirlock *l = malloc(sizeof *l);
    if (!l) {
        close(fd);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    l->fd = fd;
    *lp = l;
    return 0;
}

void tupe_dirlock_release(tupe_dirlock *l)
{
    if (!l)
        return;
    close(l->fd);
    free(l);
}
