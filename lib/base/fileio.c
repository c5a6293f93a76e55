#include "base/fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/fault.h"
#include "base/outdir.h"
#include "base/tmpfiles.h"

#define IN_BUF (1u << 20)
#define OUT_BUF (1u << 20)

/* ---- reading ---------------------------------------------------------------------------- */

struct tupe_in {
    int fd, own, eof;
    char *path;
    unsigned char *buf;
    size_t pos, len, cap;
    uint64_t off;        /* offset of buf[0] in the input */
    uint64_t lineno;
    size_t max_line;     /* longest line tupe_in_getline accepts */
};

int tupe_in_fdopen(tupe_in **inp, int fd, const char *name, int own, tupe_err *e)
{
    tupe_in *in = calloc(1, sizeof *in);
    if (!in || !(in->buf = malloc(IN_BUF)) || !(in->path = strdup(name ? name : "-"))) {
        if (in)
            free(in->buf);
        free(in);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    in->fd = fd;
    in->own = own;
    in->cap = IN_BUF;
    in->max_line = (size_t)1 << 31;
    *inp = in;
    return 0;
}

/* How long a FIFO named as an input may go without a writer: a stream (a corpus) may be
 * started a little before its producer; a file read whole (a configuration) is expected to be
 * there. */
#define FIFO_WAIT_STREAM_MS 30000
#define FIFO_WAIT_WHOLE_MS 2000

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* A FIFO opened by its name, without waiting (O_NONBLOCK): wait at most wait_ms for a process
 * to open it for writing, then read it as any pipe, blocking. A writer that is there but
 * silent is waited for as long as it takes (it may be a slow producer); one that comes and
 * goes without a byte is an empty input. The first bytes read here go to buf. */
static int fifo_wait(int fd, const char *name, int wait_ms, unsigned char *buf, size_t cap,
                     size_t *got, int *eof, tupe_err *e)
{
    double t0 = now_ms();
    *got = 0;
    *eof = 0;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r > 0) {
            *got = (size_t)r;
            break;
        }
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break; /* a writer, silent so far */
        if (r < 0)
            return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", name);
        /* no writer yet */
        int left = wait_ms - (int)(now_ms() - t0);
        struct pollfd p = {fd, POLLIN, 0};
        int n = left > 0 ? poll(&p, 1, left) : 0;
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return tupe_fail(e, TUPE_ENOINPUT, "%s: a FIFO that no process writes (waited %.0f s "
                             "for one): start its writer first, or give a regular file",
                             name, wait_ms / 1e3);
        if (n > 0 && (p.revents & POLLHUP) && !(p.revents & POLLIN)) {
            *eof = 1; /* a writer came and went: nothing to read */
            break;
        }
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", name);
    return 0;
}

int tupe_open_input(const char *path, int fifo_wait_ms, void *first, size_t cap, size_t *got,
                    int *eof, tupe_err *e)
{
    *got = 0;
    *eof = 0;
    /* Never blocks in open(): a FIFO without a writer would wait there forever. */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) {
        tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", path);
        return -1;
    }
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0) {
        rc = tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", path);
    } else if (S_ISDIR(st.st_mode)) {
        rc = tupe_fail(e, TUPE_ENOINPUT, "%s: is a directory", path);
    } else if (S_ISFIFO(st.st_mode)) {
        rc = fifo_wait(fd, path, fifo_wait_ms, first, cap, got, eof, e);
    } else {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0)
            rc = tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", path);
    }
    if (rc) {
        close(fd);
        return -1;
    }
    return fd;
}

static int in_open(tupe_in **inp, const char *path, int fifo_wait_ms, tupe_err *e)
{
    if (strcmp(path, "-") == 0)
        return tupe_in_fdopen(inp, STDIN_FILENO, "-", 0, e);
    unsigned char *first = malloc(IN_BUF);
    if (!first)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t got;
    int eof;
    int fd = tupe_open_input(path, fifo_wait_ms, first, IN_BUF, &got, &eof, e);
    if (fd < 0) {
        free(first);
        return e->code;
    }
    int rc = tupe_in_fdopen(inp, fd, path, 1, e);
    if (rc) {
        free(first);
        close(fd);
        return rc;
    }
    free((*inp)->buf);
    (*inp)->buf = first; /* what the wait for a FIFO's writer read */
    (*inp)->len = got;
    (*inp)->eof = eof;
    return 0;
}

int tupe_in_open(tupe_in **inp, const char *path, tupe_err *e)
{
    return in_open(inp, path, FIFO_WAIT_STREAM_MS, e);
}

int tupe_in_open_whole(tupe_in **inp, const char *path, tupe_err *e)
{
    return in_open(inp, path, FIFO_WAIT_WHOLE_MS, e);
}

int tupe_in_fileno(const tupe_in *in) { return in->fd; }

/* Refill: keep unread bytes at the front. Returns bytes added, 0 at EOF, -1 on error. */
static long refill(tupe_in *in, tupe_err *e)
{
    if (in->eof)
        return 0;
    if (in->pos > 0) {
        memmove(in->buf, in->buf + in->pos, in->len - in->pos);
        in->off += in->pos;
        in->len -= in->pos;
        in->pos = 0;
    }
    for (;;) {
        ssize_t r = read(in->fd, in->buf + in->len, in->cap - in->len);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            tupe_fail_errno(e, TUPE_EIO, errno, "%s: read failed at byte %llu",
                            tupe_path_name(in->path), (unsigned long long)(in->off + in->len));
            return -1;
        }
        if (r == 0)
            in->eof = 1;
        in->len += (size_t)r;
        return r;
    }
}

int tupe_in_read(tupe_in *in, void *dst, size_t n, size_t *got, tupe_err *e)
{
    unsigned char *d = dst;
    size_t done = 0;
    while (done < n) {
        if (in->pos == in->len) {
            /* Large reads bypass the buffer. */
            if (n - done >= in->cap && !in->eof) {
                in->off += in->len;
                in->pos = in->len = 0;
                ssize_t r = read(in->fd, d + done, n - done);
                if (r < 0) {
                    if (errno == EINTR)
                        continue;
                    if (got)
                        *got = done;
                    return tupe_fail_errno(e, TUPE_EIO, errno, "%s: read failed at byte %llu",
                                           tupe_path_name(in->path),
                                           (unsigned long long)(in->off));
                }
                if (r == 0) {
                    in->eof = 1;
                    break;
                }
                in->off += (size_t)r;
                done += (size_t)r;
                continue;
            }
            long r = refill(in, e);
            if (r < 0) {
                if (got)
                    *got = done;
                return e ? e->code : TUPE_EIO;
            }
            if (r == 0)
                break;
        }
        size_t k = in->len - in->pos;
        if (k > n - done)
            k = n - done;
        memcpy(d + done, in->buf + in->pos, k);
        in->pos += k;
        done += k;
    }
    if (got)
        *got = done;
    return 0;
}

int tupe_in_read_exact(tupe_in *in, void *dst, size_t n, const char *what, tupe_err *e)
{
    uint64_t at = tupe_in_offset(in);
    size_t got = 0;
    int rc = tupe_in_read(in, dst, n, &got, e);
    if (rc)
        return rc;
    if (got != n)
        return tupe_fail_byte(e, TUPE_EDATA, in->path, at,
                              "truncated: expected %zu bytes of %s, found %zu", n, what, got);
    return 0;
}

int tupe_in_getline(tupe_in *in, char **line, size_t *len, tupe_err *e)
{
    size_t scan = in->pos;
    for (;;) {
        unsigned char *nl = memchr(in->buf + scan, '\n', in->len - scan);
        if (nl) {
            size_t n = (size_t)(nl - (in->buf + in->pos));
            *line = (char *)in->buf + in->pos;
            in->buf[in->pos + n] = 0; /* the '\n' becomes the terminator */
            *len = n;
            in->pos += n + 1;
            in->lineno++;
            return 1;
        }
        if (in->eof) {
            if (in->pos == in->len)
                return 0;
            /* Last line without '\n': make room for a terminator. */
            size_t n = in->len - in->pos;
            if (in->len == in->cap) {
                unsigned char *nb = realloc(in->buf, in->cap * 2);
                if (!nb) {
                    tupe_fail(e, TUPE_EFAIL, "out of memory");
                    return -1;
                }
                in->buf = nb;
                in->cap *= 2;
            }
            *line = (char *)in->buf + in->pos;
            in->buf[in->len] = 0;
            *len = n;
            in->pos = in->len;
            in->lineno++;
            return 1;
        }
        /* No newline in the buffer: compact, grow if the line fills it, read more. */
        size_t have = in->len - in->pos;
        if (in->pos == 0 && in->len == in->cap) {
            if (in->cap >= in->max_line) {
                tupe_fail_line(e, TUPE_EDATA, in->path, in->lineno + 1,
                               "line longer than %zu bytes", in->max_line);
                return -1;
            }
            unsigned char *nb = realloc(in->buf, in->cap * 2);
            if (!nb) {
                tupe_fail(e, TUPE_EFAIL, "out of memory");
                return -1;
            }
            in->buf = nb;
            in->cap *= 2;
        }
        if (refill(in, e) < 0)
            return -1;
        scan = in->pos + have;
    }
}

uint64_t tupe_in_lineno(const tupe_in *in) { return in->lineno; }
void tupe_in_max_line(tupe_in *in, size_t bytes) { in->max_line = bytes > IN_BUF ? bytes : IN_BUF; }
uint64_t tupe_in_offset(const tupe_in *in) { return in->off + in->pos; }
const char *tupe_in_path(const tupe_in *in) { return in->path; }

void tupe_in_close(tupe_in *in)
{
    if (!in)
        return;
    if (in->own)
        close(in->fd);
    free(in->buf);
    free(in->path);
    free(in);
}

int tupe_in_append(tupe_in *in, unsigned char **bufp, size_t *lenp, size_t *capp, size_t n,
                   size_t *gotp, tupe_err *e)
{
    size_t done = 0;
    *gotp = 0;
    while (done < n) {
        if (*lenp == *capp) {
            size_t cap = *capp ? *capp * 2 : 1 << 16;
            if (cap < *capp)
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            unsigned char *nb = realloc(*bufp, cap);
            if (!nb)
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            *bufp = nb;
            *capp = cap;
        }
        size_t want = *capp - *lenp < n - done ? *capp - *lenp : n - done, got;
        int rc = tupe_in_read(in, *bufp + *lenp, want, &got, e);
        if (rc)
            return rc;
        *lenp += got;
        done += got;
        *gotp = done;
        if (got < want)
            break;
    }
    return 0;
}

static int read_whole(const char *path, char **bufp, size_t *lenp, size_t max_bytes, int text,
                      tupe_err *e)
{
    tupe_in *in;
    int rc = in_open(&in, path, FIFO_WAIT_WHOLE_MS, e);
    if (rc)
        return rc;
    struct stat st;
    if (fstat(in->fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size > max_bytes) {
        tupe_in_close(in);
        return tupe_fail(e, TUPE_EDATA, "%s: larger than the %zu-byte limit (%llu bytes)",
                         tupe_path_name(path), max_bytes, (unsigned long long)st.st_size);
    }
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    if (!buf) {
        tupe_in_close(in);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (;;) {
        if (len == cap) {
            if (cap >= max_bytes) {
                free(buf);
                tupe_in_close(in);
                return tupe_fail(e, TUPE_EDATA, "%s: larger than the %zu-byte limit",
                                 tupe_path_name(path), max_bytes);
            }
            cap *= 2;
            char *nb = realloc(buf, cap + 1);
            if (!nb) {
                free(buf);
                tupe_in_close(in);
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            }
            buf = nb;
        }
        size_t got;
        rc = tupe_in_read(in, buf + len, cap - len, &got, e);
        if (rc) {
            free(buf);
            tupe_in_close(in);
            return rc;
        }
        const char *nul = text ? memchr(buf + len, 0, got) : NULL;
        if (nul) {
            uint64_t at = (uint64_t)(nul - buf);
            free(buf);
            tupe_in_close(in);
            return tupe_fail_byte(e, TUPE_EDATA, path, at, "a NUL byte: not a text file");
        }
        len += got;
        if (len > max_bytes) {
            free(buf);
            tupe_in_close(in);
            return tupe_fail(e, TUPE_EDATA, "%s: larger than the %zu-byte limit",
                             tupe_path_name(path), max_bytes);
        }
        if (got == 0)
            break;
    }
    buf[len] = 0;
    tupe_in_close(in);
    *bufp = buf;
    *lenp = len;
    return 0;
}

int tupe_read_file(const char *path, char **bufp, size_t *lenp, size_t max_bytes, tupe_err *e)
{
    return read_whole(path, bufp, lenp, max_bytes, 0, e);
}

int tupe_read_text(const char *path, char **bufp, size_t *lenp, size_t max_bytes, tupe_err *e)
{
    return read_whole(path, bufp, lenp, max_bytes, 1, e);
}

/* ---- writing ---------------------------------------------------------------------------- */

struct tupe_out {
    int fd, is_stdout;
    int slot;             /* in the table of temporaries (tmpfiles.h), or -1 */
    int direct;           /* written in place: a device or FIFO (no temporary, no rename) */
    char *path, *tmp;
    unsigned char *buf;
    size_t len;
    uint64_t off;
};

static void dir_of(char *dst, size_t cap, const char *path)
{
    const char *slash = strrchr(path, '/');
    if (!slash)
        snprintf(dst, cap, ".");
    else if (slash == path)
        snprintf(dst, cap, "/");
    else
        snprintf(dst, cap, "%.*s", (int)(slash - path), path);
}

static const char *out_name(const char *path)
{
    return strcmp(path, "-") == 0 ? "(stdout)" : path;
}

int tupe_tmp_sibling(char *dst, size_t cap, const char *path, const char *tag)
{
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path + 1) : 0;
    const char *base = slash ? slash + 1 : path;
    uint32_t r = 0;
    if (getrandom(&r, sizeof r, 0) != sizeof r)
        r = (uint32_t)rand();
    int n = snprintf(dst, cap, "%.*s.%s.%s.%ld.%08x", (int)dirlen, path, base, tag,
                     (long)getpid(), r);
    return (n < 0 || (size_t)n >= cap) ? -1 : 0;
}

static int flush_out(tupe_out *o, tupe_err *e)
{
    size_t done = 0;
    while (done < o->len) {
        ssize_t w = write(o->fd, o->buf + done, o->len - done);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return tupe_fail_errno(e, TUPE_EIO, errno, "%s: write failed", out_name(o->path));
        }
        done += (size_t)w;
    }
    o->len = 0;
    tupe_fault_point("out.flush");
    return 0;
}

int tupe_out_open(tupe_out **outp, const char *path, tupe_err *e)
{
    tupe_out *o = calloc(1, sizeof *o);
    if (!o || !(o->buf = malloc(OUT_BUF)) || !(o->path = strdup(path))) {
        if (o)
            free(o->buf);
        free(o);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    o->slot = -1;
    if (strcmp(path, "-") == 0) {
        o->fd = STDOUT_FILENO;
        o->is_stdout = 1;
        *outp = o;
        return 0;
    }
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        free(o->buf), free(o->path), free(o);
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: is a directory", path);
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        /* /dev/null, a FIFO, a terminal: renaming a file over one would replace the device
         * itself (root may), so it is written in place. */
        o->fd = open(path, O_WRONLY | O_CLOEXEC);
        if (o->fd < 0) {
            int err = errno;
            free(o->buf), free(o->path), free(o);
            return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s: cannot open", path);
        }
        o->direct = 1;
        *outp = o;
        return 0;
    }
    char tmp[PATH_MAX], dir[PATH_MAX];
    dir_of(dir, sizeof dir, path);
    tupe_tmp_sweep(dir);
    for (int tries = 0;; tries++) {
        if (tupe_tmp_sibling(tmp, sizeof tmp, path, "tmp")) {
            free(o->buf), free(o->path), free(o);
            return tupe_fail(e, TUPE_ECANTCREAT, "%s: path too long", path);
        }
        /* O_EXCL with mode 0666 lets the kernel apply the umask, as for any new file. */
        o->fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        if (o->fd >= 0)
            break;
        if (errno != EEXIST || tries > 100) {
            int err = errno;
            free(o->buf), free(o->path), free(o);
            return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s: cannot create", path);
        }
    }
    o->tmp = strdup(tmp);
    if (!o->tmp) {
        close(o->fd);
        unlink(tmp);
        free(o->buf), free(o->path), free(o);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    /* Held until the descriptor closes: a sweep by another process leaves it alone. */
    flock(o->fd, LOCK_EX | LOCK_NB);
    o->slot = tupe_tmp_track(tmp);
    *outp = o;
    return 0;
}

int tupe_out_write(tupe_out *o, const void *buf, size_t n, tupe_err *e)
{
    const unsigned char *s = buf;
    o->off += n;
    if (o->len + n <= OUT_BUF) {
        memcpy(o->buf + o->len, s, n);
        o->len += n;
        return 0;
    }
    int rc = flush_out(o, e);
    if (rc)
        return rc;
    if (n >= OUT_BUF) {
        size_t done = 0;
        while (done < n) {
            ssize_t w = write(o->fd, s + done, n - done);
            if (w < 0) {
                if (errno == EINTR)
                    continue;
                return tupe_fail_errno(e, TUPE_EIO, errno, "%s: write failed", out_name(o->path));
            }
            done += (size_t)w;
        }
        tupe_fault_point("out.flush");
        return 0;
    }
    memcpy(o->buf, s, n);
    o->len = n;
    return 0;
}

int tupe_out_printf(tupe_out *o, tupe_err *e, const char *fmt, ...)
{
    char small[1024];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0)
        return tupe_fail(e, TUPE_EFAIL, "formatting failed");
    if ((size_t)n < sizeof small)
        return tupe_out_write(o, small, (size_t)n, e);
    char *big = malloc((size_t)n + 1);
    if (!big)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    va_start(ap, fmt);
    vsnprintf(big, (size_t)n + 1, fmt, ap);
    va_end(ap);
    int rc = tupe_out_write(o, big, (size_t)n, e);
    free(big);
    return rc;
}

uint64_t tupe_out_offset(const tupe_out *o) { return o->off; }

static void out_free(tupe_out *o)
{
    tupe_tmp_untrack(o->slot);
    free(o->buf);
    free(o->path);
    free(o->tmp);
    free(o);
}

int tupe_fsync_dir(const char *path, tupe_err *e)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return tupe_fail_errno(e, TUPE_EIO, errno, "%s: cannot open directory", path);
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL && errno != EROFS)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: fsync failed", path);
    close(fd);
    return rc;
}

int tupe_out_commit(tupe_out *o, tupe_err *e)
{
    int rc = flush_out(o, e);
    if (o->direct && close(o->fd) != 0 && !rc)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: close failed", o->path);
    if (o->is_stdout || o->direct) {
        out_free(o);
        return rc;
    }
    if (!rc && fsync(o->fd) != 0)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: fsync failed", o->path);
    if (close(o->fd) != 0 && !rc)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: close failed", o->path);
    if (rc) {
        unlink(o->tmp);
        out_free(o);
        return rc;
    }
    tupe_fault_point("out.commit");
    if (rename(o->tmp, o->path) != 0) {
        rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot rename into place", o->path);
        unlink(o->tmp);
        out_free(o);
        return rc;
    }
    char dir[PATH_MAX];
    dir_of(dir, sizeof dir, o->path);
    rc = tupe_fsync_dir(dir, e);
    out_free(o);
    return rc;
}

void tupe_out_abort(tupe_out *o)
{
    if (!o)
        return;
    if (o->direct)
        close(o->fd);
    else if (!o->is_stdout) {
        close(o->fd);
        unlink(o->tmp);
    }
    out_free(o);
}

int tupe_write_file(const char *path, const void *buf, size_t n, tupe_err *e)
{
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (rc)
        return rc;
    rc = tupe_out_write(o, buf, n, e);
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}

/* ---- directories -------------------------------------------------------------------------- */

struct tupe_dirtx {
    char *path, *tmp;
    int lockfd, slot;     /* the temporary's flock and its place in tmpfiles.h's table */
    char file[PATH_MAX];
};

int tupe_mkdir_p(const char *path, tupe_err *e)
{
    char buf[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf)
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: bad directory name", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == 0) {
            char c = buf[i];
            buf[i] = 0;
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create directory",
                                       buf);
            buf[i] = c;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISDIR(st.st_mode))
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: not a directory", path);
    return 0;
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb, (void)flag, (void)ftw;
    return remove(p) != 0 && errno != ENOENT ? -1 : 0;
}

int tupe_remove_tree(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : -1;
    if (!S_ISDIR(st.st_mode))
        return unlink(path);
    return nftw(path, rm_cb, 32, FTW_DEPTH | FTW_PHYS);
}

int tupe_path_exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

int tupe_dirtx_begin(tupe_dirtx **txp, const char *path, const char *kind, tupe_err *e)
{
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/')
        n--;
    char clean[PATH_MAX];
    if (n == 0 || n >= sizeof clean)
        return tupe_fail(e, TUPE_ECANTCREAT, "%s: bad directory name", path);
    memcpy(clean, path, n);
    clean[n] = 0;
    int rc = tupe_outdir_check(clean, kind, TUPE_OUTDIR_REPLACE, e);
    if (rc)
        return rc;
    char parent[PATH_MAX];
    dir_of(parent, sizeof parent, clean);
    if ((rc = tupe_mkdir_p(parent, e)))
        return rc;
    tupe_tmp_sweep(parent);
    char tmp[PATH_MAX];
    for (int tries = 0;; tries++) {
        if (tupe_tmp_sibling(tmp, sizeof tmp, clean, "tmp"))
            return tupe_fail(e, TUPE_ECANTCREAT, "%s: path too long", clean);
        if (mkdir(tmp, 0777) == 0)
            break;
        if (errno != EEXIST || tries > 100)
            return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create", clean);
    }
    tupe_dirtx *tx = calloc(1, sizeof *tx);
    if (!tx || !(tx->path = strdup(clean)) || !(tx->tmp = strdup(tmp))) {
        if (tx)
            free(tx->path);
        free(tx);
        rmdir(tmp);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    tx->slot = tupe_tmp_track(tmp);
    tx->lockfd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (tx->lockfd >= 0)
        flock(tx->lockfd, LOCK_EX | LOCK_NB);
    if ((rc = tupe_outdir_mark(tmp, kind, e))) {
        tupe_dirtx_abort(tx);
        return rc;
    }
    *txp = tx;
    return 0;
}

const char *tupe_dirtx_tmp(const tupe_dirtx *tx) { return tx->tmp; }

const char *tupe_dirtx_file(tupe_dirtx *tx, const char *name)
{
    snprintf(tx->file, sizeof tx->file, "%s/%s", tx->tmp, name);
    return tx->file;
}

static void dirtx_free(tupe_dirtx *tx)
{
    tupe_tmp_untrack(tx->slot);
    if (tx->lockfd >= 0)
        close(tx->lockfd);
    free(tx->path);
    free(tx->tmp);
    free(tx);
}

/* fsync every regular file directly in dir (files written with tupe_out are already synced;
 * this covers files written by other means, e.g. a library that writes by itself). */
static int sync_files(const char *dir, tupe_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return tupe_fail_errno(e, TUPE_EIO, errno, "%s: cannot open directory", dir);
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.' && (!de->d_name[1] || (de->d_name[1] == '.' && !de->d_name[2])))
            continue;
        int fd = openat(dirfd(d), de->d_name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && fsync(fd) != 0)
            rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s/%s: fsync failed", dir, de->d_name);
        close(fd);
    }
    closedir(d);
    return rc;
}

/* ---- what a directory's writer wrote (.tupe-files) ---- */

static int bookkeeping(const char *n)
{
    return strcmp(n, ".") == 0 || strcmp(n, "..") == 0 || strcmp(n, TUPE_KIND_FILE) == 0 ||
           strcmp(n, TUPE_FILES_FILE) == 0 || strcmp(n, TUPE_LOCK_FILE) == 0;
}

/* The names in dir, one a line, but tupe's bookkeeping; NULL when dir cannot be read. */
static char *list_names(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return NULL;
    size_t len = 0, cap = 256;
    char *s = malloc(cap);
    struct dirent *de;
    while (s && (de = readdir(d))) {
        if (bookkeeping(de->d_name) || strchr(de->d_name, '\n'))
            continue;
        size_t n = strlen(de->d_name);
        if (len + n + 2 > cap) {
            char *ns = realloc(s, cap = 2 * (len + n + 2));
            if (!ns) {
                free(s);
                s = NULL;
                break;
            }
            s = ns;
        }
        memcpy(s + len, de->d_name, n);
        s[len + n] = '\n';
        len += n + 1;
    }
    closedir(d);
    if (s)
        s[len] = 0;
    return s;
}

/* Whether `name` is a line of list. */
static int listed(const char *list, const char *name)
{
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *nl = strchr(p, '\n');
        size_t l = nl ? (size_t)(nl - p) : strlen(p);
        if (l == n && memcmp(p, name, n) == 0)
            return 1;
        p += l + (nl ? 1 : 0);
    }
    return 0;
}

/* What the directory being replaced holds that its writer did not write (its .tupe-files
 * does not list it): the user's, to be carried into the new one. A directory without the
 * list (written by an older tupe) counts as all its writer's. NULL: nothing; *clash set to a
 * name the new directory writes too. */
static char *users_entries(const char *old, const char *fresh, char *clash, size_t cap)
{
    char mf[PATH_MAX], *mine, *have, *keep = NULL;
    size_t ml;
    tupe_err ignored;
    clash[0] = 0;
    snprintf(mf, sizeof mf, "%s/%s", old, TUPE_FILES_FILE);
    if (!tupe_path_exists(mf) || tupe_read_text(mf, &mine, &ml, 16u << 20, &ignored))
        return NULL;
    if (!(have = list_names(old))) {
        free(mine);
        return NULL;
    }
    size_t kl = 0;
    for (char *p = have; *p;) {
        char *nl = strchr(p, '\n');
        *nl = 0;
        char np[PATH_MAX];
        snprintf(np, sizeof np, "%s/%s", fresh, p);
        if (!listed(mine, p)) {
            if (tupe_path_exists(np) && !clash[0])
                snprintf(clash, cap, "%s", p);
            char *nk = realloc(keep, kl + strlen(p) + 2);
            if (nk) {
                keep = nk;
                kl += (size_t)sprintf(keep + kl, "%s\n", p);
            }
        }
        p = nl + 1;
    }
    free(mine);
    free(have);
    return keep;
}

/* Move the entries listed in keep from directory `from` to directory `to`. */
static int carry(const char *from, const char *to, const char *keep, tupe_err *e)
{
    for (const char *p = keep; p && *p;) {
        const char *nl = strchr(p, '\n');
        char a[PATH_MAX], b[PATH_MAX];
        snprintf(a, sizeof a, "%s/%.*s", from, (int)(nl - p), p);
        snprintf(b, sizeof b, "%s/%.*s", to, (int)(nl - p), p);
        if (rename(a, b) != 0)
            return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot keep it in the new %s "
                                   "(the old directory is left at %s)", b, to, from);
        p = nl + 1;
    }
    return 0;
}

int tupe_dirtx_commit(tupe_dirtx *tx, tupe_err *e)
{
    /* What this writer wrote, for the next one that replaces the directory: what else is
     * there then is the user's (a README beside an export) and is kept. */
    char *names = list_names(tx->tmp);
    int rc = names ? 0 : tupe_fail_errno(e, TUPE_EIO, errno, "%s: cannot list", tx->tmp);
    if (!rc) {
        /* Inside the temporary directory, which is not in place yet: written directly (and
         * synced with the others below), not through tupe_out, whose fault points the crash
         * tests count in the outputs themselves. */
        char mf[PATH_MAX];
        snprintf(mf, sizeof mf, "%s/%s", tx->tmp, TUPE_FILES_FILE);
        int fd = open(mf, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
        size_t n = strlen(names);
        int ok = fd >= 0 && write(fd, names, n) == (ssize_t)n;
        int err = errno;
        if (fd >= 0 && close(fd) != 0 && ok) {
            ok = 0;
            err = errno;
        }
        if (!ok)
            rc = tupe_fail_errno(e, TUPE_EIO, err, "%s: cannot write", mf);
    }
    free(names);
    if (rc) {
        tupe_dirtx_abort(tx);
        return rc;
    }
    char clash[NAME_MAX + 1];
    char *keep = users_entries(tx->path, tx->tmp, clash, sizeof clash);
    if (clash[0]) {
        rc = tupe_fail(e, TUPE_ECANTCREAT, "%s/%s: not written by tupe (its %s does not list "
                       "it: yours?), and the new directory has one too: refusing to delete it; "
                       "move it away and run again", tx->path, clash, TUPE_FILES_FILE);
        free(keep);
        tupe_dirtx_abort(tx);
        return rc;
    }
    rc = sync_files(tx->tmp, e);
    if (!rc)
        rc = tupe_fsync_dir(tx->tmp, e);
    if (rc) {
        free(keep);
        tupe_dirtx_abort(tx);
        return rc;
    }
    tupe_fault_point("dirtx.commit");
    char parent[PATH_MAX];
    dir_of(parent, sizeof parent, tx->path);
    if (rename(tx->tmp, tx->path) == 0) {
        /* Nothing (or an empty directory) was there. */
    } else if (errno == EEXIST || errno == ENOTEMPTY) {
        /* Swap the two names in one step, then remove the old tree (now at tmp). */
        if (renameat2(AT_FDCWD, tx->tmp, AT_FDCWD, tx->path, RENAME_EXCHANGE) == 0) {
            tupe_fault_point("dirtx.exchanged");
            if ((rc = carry(tx->tmp, tx->path, keep, e))) {
                tupe_tmp_untrack(tx->slot); /* the old directory holds the user's files */
                tx->slot = -1;
                free(keep);
                dirtx_free(tx);
                return rc;
            }
            tupe_remove_tree(tx->tmp);
        } else if (errno == EINVAL || errno == ENOSYS) {
            /* File system without RENAME_EXCHANGE: two renames, a short window with no path. */
            char old[PATH_MAX];
            tupe_tmp_sibling(old, sizeof old, tx->path, "old");
            if (rename(tx->path, old) != 0 || rename(tx->tmp, tx->path) != 0) {
                rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot move into place",
                                     tx->path);
                if (!tupe_path_exists(tx->path))
                    rename(old, tx->path);
                free(keep);
                tupe_dirtx_abort(tx);
                return rc;
            }
            if ((rc = carry(old, tx->path, keep, e))) {
                free(keep);
                dirtx_free(tx);
                return rc;
            }
            tupe_remove_tree(old);
        } else {
            rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot move into place",
                                 tx->path);
            free(keep);
            tupe_dirtx_abort(tx);
            return rc;
        }
    } else {
        rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot move into place", tx->path);
        free(keep);
        tupe_dirtx_abort(tx);
        return rc;
    }
    free(keep);
    rc = tupe_fsync_dir(parent, e);
    dirtx_free(tx);
    return rc;
}

void tupe_dirtx_abort(tupe_dirtx *tx)
{
    if (!tx)
        return;
    tupe_remove_tree(tx->tmp);
    dirtx_free(tx);
}
