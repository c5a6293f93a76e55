#include "train/rdzvfile.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define HEADER "tupe-rendezvous 2\n"

static const char *kind_of(mode_t m)
{
    return S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) || S_ISBLK(m) ? "a device" : S_ISDIR(m) ? "a directory"
           : S_ISLNK(m) ? "a symbolic link" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

/* Up to cap-1 bytes of an open file, NUL-terminated; its length or -1. */
static ssize_t read_some(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    while (n + 1 < cap) {
        ssize_t k = read(fd, buf + n, cap - 1 - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            return -1;
        if (k == 0)
            break;
        n += (size_t)k;
    }
    buf[n] = 0;
    return (ssize_t)n;
}

int tupe_rdzvfile_get(const char *text, const char *key, char *val, size_t cap)
{
    size_t kl = strlen(key);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
        if (strncmp(p, key, kl) == 0 && p[kl] == ' ') {
            const char *v = p + kl + 1, *end = strchr(v, '\n');
            size_t n = end ? (size_t)(end - v) : strlen(v);
            if (n >= cap)
                return -1;
            memcpy(val, v, n);
            val[n] = 0;
            return 0;
        }
    return -1;
}

/* Whether an existing rendezvous file is one that a rank 0 of this machine left when it died:
 * then it may go. */
static int left_by_the_dead(const char *text)
{
    char host[256], me[256], pid[32];
    if (tupe_rdzvfile_get(text, "host", host, sizeof host) || tupe_rdzvfile_get(text, "pid", pid, sizeof pid))
        return 0;
    if (gethostname(me, sizeof me) != 0)
        return 0;
    me[sizeof me - 1] = 0;
    char *end;
    long p = strtol(pid, &end, 10);
    if (strcmp(host, me) != 0 || *end || p <= 0)
        return 0;
    return kill((pid_t)p, 0) != 0 && errno == ESRCH;
}

int tupe_rdzvfile_make(tupe_rdzvfile *f, const char *path, const char *what, const char *body,
                       tupe_err *e)
{
    memset(f, 0, sizeof *f);
    struct stat st;
    if (lstat(path, &st) == 0) {
        if (!S_ISREG(st.st_mode))
            return tupe_fail(e, TUPE_ECANTCREAT, "%s %s is %s: rank 0 creates that file and removes "
                             "it at the end; name a path that does not exist", what, path,
                             kind_of(st.st_mode));
        char text[TUPE_RDZVFILE_MAX];
        int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
        struct stat fs;
        ssize_t n = fd < 0 ? -1 : read_some(fd, text, sizeof text);
        int same = fd >= 0 && fstat(fd, &fs) == 0 && fs.st_dev == st.st_dev && fs.st_ino == st.st_ino;
        if (fd >= 0)
            close(fd);
        if (n < 0 || strncmp(text, HEADER, strlen(HEADER)) != 0)
            return tupe_fail(e, TUPE_ECANTCREAT, "%s %s exists and is no rendezvous file: rank 0 "
                             "would overwrite it and remove it at the end; name a path of its own",
                             what, path);
        if (!same || !left_by_the_dead(text)) {
            char host[256] = "?", pid[32] = "?";
            tupe_rdzvfile_get(text, "host", host, sizeof host);
            tupe_rdzvfile_get(text, "pid", pid, sizeof pid);
            return tupe_fail(e, TUPE_ECANTCREAT, "%s %s is another job's (its rank 0 is process %s "
                             "on %s): give each job its own file, or remove it if that job is gone",
                             what, path, pid, host);
        }
        if (unlink(path) != 0 && errno != ENOENT)
            return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s %s: cannot remove the file a "
                                   "job left", what, path);
    } else if (errno != ENOENT)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s %s", what, path);
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s %s: cannot create it%s", what, path,
                               errno == EEXIST ? " (another job made it just now?)" : "");
    char me[256], text[TUPE_RDZVFILE_MAX];
    if (gethostname(me, sizeof me) != 0)
        snprintf(me, sizeof me, "localhost");
    me[sizeof me - 1] = 0;
    int len = snprintf(text, sizeof text, HEADER "host %s\npid %ld\n%send\n", me, (long)getpid(), body);
    struct stat fs;
    int rc = 0;
    if (len < 0 || (size_t)len >= sizeof text)
        rc = tupe_fail(e, TUPE_EFAIL, "%s %s: too much to write", what, path);
    else if (fchmod(fd, 0600) != 0 || write(fd, text, (size_t)len) != len || fstat(fd, &fs) != 0)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s %s: write failed", what, path);
    if (close(fd) != 0 && !rc)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s %s: write failed", what, path);
    if (rc) {
        unlink(path);
        return rc;
    }
    snprintf(f->path, sizeof f->path, "%s", path);
    f->dev = fs.st_dev;
    f->ino = fs.st_ino;
    f->made = 1;
    return 0;
}

void tupe_rdzvfile_remove(tupe_rdzvfile *f)
{
    struct stat st;
    if (f->made && lstat(f->path, &st) == 0 && st.st_dev == f->dev && st.st_ino == f->ino)
        unlink(f->path);
    f->made = 0;
}

int tupe_rdzvfile_read(const char *path, const char *what, char *buf, size_t cap, tupe_err *e)
{
    buf[0] = 0;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return tupe_fail_errno(e, errno == ENOENT ? TUPE_ENOINPUT : TUPE_EFAIL, errno, "%s %s", what, path);
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0)
        rc = tupe_fail_errno(e, TUPE_EFAIL, errno, "%s %s", what, path);
    else if (!S_ISREG(st.st_mode))
        rc = tupe_fail(e, TUPE_EFAIL, "%s %s is %s, not one rank 0 wrote", what, path, kind_of(st.st_mode));
    else if (st.st_uid != geteuid() || (st.st_mode & 077))
        rc = tupe_fail(e, TUPE_EFAIL, "%s %s is not private to this user (owner %u, mode %03o): "
                       "not one rank 0 wrote", what, path, (unsigned)st.st_uid,
                       (unsigned)(st.st_mode & 0777));
    else if (read_some(fd, buf, cap) < 0)
        rc = tupe_fail_errno(e, TUPE_EFAIL, errno, "%s %s", what, path);
    else if (strncmp(buf, HEADER, strlen(HEADER)) != 0 && strlen(buf) >= strlen(HEADER))
        rc = tupe_fail(e, TUPE_EFAIL, "%s %s is no rendezvous file", what, path);
    else if (!strstr(buf, "\nend\n"))
        rc = tupe_fail(e, TUPE_EDATA, "%s %s is still being written", what, path);
    close(fd);
    if (rc)
        buf[0] = 0;
    return rc;
}

int tupe_rdzvfile_private_dir(char *dir, size_t cap, tupe_err *e)
{
    const char *x = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (x && x[0] == '/' && lstat(x, &st) == 0 && S_ISDIR(st.st_mode) && st.st_uid == geteuid() &&
        !(st.st_mode & 077)) {
        snprintf(dir, cap, "%s", x);
        return 0;
    }
    snprintf(dir, cap, "/tmp/tupe-%u", (unsigned)geteuid());
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s (the private directory of this "
                               "user's ranks)", dir);
    if (lstat(dir, &st) != 0)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s", dir);
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077))
        return tupe_fail(e, TUPE_ECANTCREAT, "%s is not a directory private to this user (owner "
                         "%u, mode %03o): ranks on one machine keep their secret there; remove it, "
                         "or set XDG_RUNTIME_DIR or TUPE_JOB_SECRET", dir, (unsigned)st.st_uid,
                         (unsigned)(st.st_mode & 0777));
    return 0;
}
