#include "base/tmpfiles.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "base/fileio.h"

/* ---- the table --------------------------------------------------------------------------- */

#define SLOTS 64

/* A sequence lock per slot: `seq` is odd while the slot is being changed, so that a signal
 * handler running on another thread never reads half a path. */
typedef struct slot {
    atomic_uint seq;
    atomic_int used;
    char path[PATH_MAX];
} slot;

static slot table[SLOTS];

int tupe_tmp_track(const char *path)
{
    size_t n = strlen(path);
    if (n >= PATH_MAX)
        return -1;
    for (int i = 0; i < SLOTS; i++) {
        int expect = 0;
        if (!atomic_compare_exchange_strong(&table[i].used, &expect, 1))
            continue;
        atomic_fetch_add(&table[i].seq, 1);
        memcpy(table[i].path, path, n + 1);
        atomic_fetch_add(&table[i].seq, 1);
        return i;
    }
    return -1;
}

void tupe_tmp_untrack(int i)
{
    if (i < 0 || i >= SLOTS)
        return;
    atomic_fetch_add(&table[i].seq, 1);
    table[i].path[0] = 0;
    atomic_fetch_add(&table[i].seq, 1);
    atomic_store(&table[i].used, 0);
}

/* ---- removal with system calls only (from a signal handler) ----------------------------------- */

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int dot_or_dotdot(const char *n)
{
    return n[0] == '.' && (!n[1] || (n[1] == '.' && !n[2]));
}

/* Empty the directory open as fd (depth-limited: temporaries are shallow), then close it. */
static void empty_dir(int fd, int depth)
{
    char buf[2048] __attribute__((aligned(8)));
    for (int pass = 0; pass < 64; pass++) {
        int removed = 0, seen = 0;
        long n;
        lseek(fd, 0, SEEK_SET);
        while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
            for (long off = 0; off < n;) {
                struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
                off += d->d_reclen;
                if (dot_or_dotdot(d->d_name))
                    continue;
                seen++;
                if (unlinkat(fd, d->d_name, 0) == 0) {
                    removed++;
                    continue;
                }
                if ((errno == EISDIR || errno == EPERM) && depth < 8) {
                    int sub = openat(fd, d->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                    if (sub >= 0) {
                        empty_dir(sub, depth + 1);
                        if (unlinkat(fd, d->d_name, AT_REMOVEDIR) == 0)
                            removed++;
                    }
                }
            }
        }
        if (!seen || !removed)
            break;
    }
    close(fd);
}

static void remove_path(const char *p)
{
    if (unlink(p) == 0 || errno == ENOENT)
        return;
    int fd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return;
    empty_dir(fd, 0);
    rmdir(p);
}

/* Whether the last component of p has the form of one of this process's temporaries: the
 * last guard against removing anything else. */
static int is_own_tmp(const char *p, long me)
{
    const char *b = strrchr(p, '/');
    b = b ? b + 1 : p;
    long pid;
    int old;
    size_t bl;
    return tupe_tmp_parse(b, &pid, &old, &bl) && !old && pid == me;
}

void tupe_tmp_remove_all(void)
{
    long me = (long)getpid();
    char p[PATH_MAX];
    for (int i = 0; i < SLOTS; i++) {
        unsigned s1 = atomic_load(&table[i].seq);
        if ((s1 & 1) || !atomic_load(&table[i].used))
            continue;
        size_t k = 0;
        while (k + 1 < sizeof p && table[i].path[k]) {
            p[k] = table[i].path[k];
            k++;
        }
        p[k] = 0;
        if (atomic_load(&table[i].seq) != s1 || !k || !is_own_tmp(p, me))
            continue;
        remove_path(p);
    }
}

/* ---- names ------------------------------------------------------------------------------- */

int tupe_tmp_parse(const char *name, long *pid, int *old, size_t *base_len)
{
    size_t n = strlen(name);
    /* ".X" + ".tmp." + at least one digit + "." + 8 hex */
    if (n < 2 + 5 + 1 + 1 + 8 || name[0] != '.')
        return 0;
    const char *hex = name + n - 8;
    for (int i = 0; i < 8; i++) {
        char c = hex[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
            return 0;
    }
    if (hex[-1] != '.')
        return 0;
    const char *d = hex - 1; /* the '.' before the hex digits */
    const char *q = d;
    while (q > name && q[-1] >= '0' && q[-1] <= '9')
        q--;
    if (q == d || d - q > 10 || q - name < 6)
        return 0;
    int is_old;
    if (memcmp(q - 5, ".tmp.", 5) == 0)
        is_old = 0;
    else if (memcmp(q - 5, ".old.", 5) == 0)
        is_old = 1;
    else
        return 0;
    size_t bl = (size_t)(q - 5 - (name + 1));
    if (bl == 0)
        return 0;
    long v = 0;
    for (const char *r = q; r < d; r++)
        v = v * 10 + (*r - '0');
    if (pid)
        *pid = v;
    if (old)
        *old = is_old;
    if (base_len)
        *base_len = bl;
    return 1;
}

/* ---- the sweep --------------------------------------------------------------------------- */

static pthread_mutex_t swept_mu = PTHREAD_MUTEX_INITIALIZER;
static struct { dev_t dev; ino_t ino; } swept[64];
static int nswept;

/* 1 the first time this directory is seen (and remembered), else 0. */
static int first_visit(const struct stat *st)
{
    pthread_mutex_lock(&swept_mu);
    int first = 1;
    for (int i = 0; i < nswept && first; i++)
        if (swept[i].dev == st->st_dev && swept[i].ino == st->st_ino)
            first = 0;
    if (first && nswept < (int)(sizeof swept / sizeof swept[0])) {
        swept[nswept].dev = st->st_dev;
        swept[nswept].ino = st->st_ino;
        nswept++;
    }
    pthread_mutex_unlock(&swept_mu);
    return first;
}

static int process_gone(long pid)
{
    if (pid <= 0 || pid == (long)getpid())
        return 0;
    return kill((pid_t)pid, 0) != 0 && errno == ESRCH;
}

/* Whether nobody holds the temporary's lock (it is taken, and kept until close). */
static int lock_free(int dfd, const char *name, int *fdp)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return 0;
    }
    *fdp = fd;
    return 1;
}

int tupe_tmp_sweep(const char *dir)
{
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode) || !first_visit(&st))
        return 0;
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int removed = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        long pid;
        int old;
        size_t bl;
        if (!tupe_tmp_parse(de->d_name, &pid, &old, &bl) || !process_gone(pid))
            continue;
        if (old) {
            char final[NAME_MAX + 1];
            snprintf(final, sizeof final, "%.*s", (int)bl, de->d_name + 1);
            struct stat fs;
            if (fstatat(dirfd(d), final, &fs, AT_SYMLINK_NOFOLLOW) != 0)
                continue; /* the only copy left of NAME */
        }
        int fd;
        if (!lock_free(dirfd(d), de->d_name, &fd))
            continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) < (int)sizeof p &&
            tupe_remove_tree(p) == 0)
            removed++;
        close(fd);
    }
    closedir(d);
    return removed;
}
