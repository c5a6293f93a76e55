#include "text/input.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"

#define PEEK 1024
#define ARBUF (1 << 17)

enum { K_TEXT, K_COMPRESSED, K_ARCHIVE };

struct tupe_source {
    int fd, own;
    char *path;
    int kind;
    uint8_t peek[PEEK];
    size_t npeek, peekpos; /* bytes peeked, bytes of them handed on */
    uint64_t consumed;
    int started, done;     /* members: the first was returned; no more */
    char *name;            /* current member's display name */
    struct archive *f;     /* decompression (raw format), or NULL */
    struct archive *a;     /* the tar or zip container, or NULL */
    uint8_t dpeek[PEEK];   /* the first decompressed bytes (f) */
    size_t ndpeek, dpeekpos;
    uint8_t *abuf;
    int read_errno;
};

/* Read up to n bytes, retrying on EINTR; -1 with errno on failure. */
static ssize_t read_full(int fd, void *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (char *)buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        if (r == 0)
            break;
        got += (size_t)r;
    }
    return (ssize_t)got;
}

/* Hand out peeked bytes not handed out yet: how many (0 when none are left). */
static size_t take_peeked(const uint8_t *peek, size_t npeek, size_t *pos, void *buf, size_t cap)
{
    size_t n = npeek - *pos;
    if (n > cap)
        n = cap;
    memcpy(buf, peek + *pos, n);
    *pos += n;
    return n;
}

/* The bytes after the peeked ones: handed out first, then the descriptor. */
static ssize_t raw_read(tupe_source *s, void *buf, size_t cap)
{
    if (s->peekpos < s->npeek)
        return (ssize_t)take_peeked(s->peek, s->npeek, &s->peekpos, buf, cap);
    for (;;) {
        ssize_t r = read(s->fd, buf, cap);
        if (r < 0 && errno == EINTR)
            continue;
        if (r > 0)
            s->consumed += (uint64_t)r;
        return r;
    }
}

/* Decompressed bytes: the peeked ones first, then the decompressor's. */
static la_ssize_t dec_read(tupe_source *s, void *buf, size_t cap)
{
    if (s->dpeekpos < s->ndpeek)
        return (la_ssize_t)take_peeked(s->dpeek, s->ndpeek, &s->dpeekpos, buf, cap);
    return archive_read_data(s->f, buf, cap);
}

/* libarchive's read callbacks: the file's bytes for the decompressor (or for a container that
 * is not compressed), the decompressed bytes for a compressed container. */
static la_ssize_t file_cb(struct archive *a, void *data, const void **buf)
{
    tupe_source *s = data;
    ssize_t r = raw_read(s, s->abuf, ARBUF);
    if (r < 0) {
        s->read_errno = errno;
        archive_set_error(a, errno, "read failed: %s", strerror(errno));
        return -1;
    }
    *buf = s->abuf;
    return r;
}

static la_ssize_t dec_cb(struct archive *a, void *data, const void **buf)
{
    tupe_source *s = data;
    la_ssize_t r = dec_read(s, s->abuf, ARBUF);
    if (r < 0) {
        archive_set_error(a, archive_errno(s->f), "%s", archive_error_string(s->f));
        return -1;
    }
    *buf = s->abuf;
    return r;
}

/* Compression formats, by their magic numbers. */
static int is_compressed(const uint8_t *p, size_t n)
{
    static const uint8_t zstd[4] = {0x28, 0xB5, 0x2F, 0xFD}, gz[2] = {0x1F, 0x8B},
                         xz[6] = {0xFD, '7', 'z', 'X', 'Z', 0}, lz4[4] = {0x04, 0x22, 0x4D, 0x18};
    if (n >= 4 && memcmp(p, zstd, 4) == 0)
        return 1;
    if (n >= 2 && memcmp(p, gz, 2) == 0)
        return 1;
    if (n >= 6 && memcmp(p, xz, 6) == 0)
        return 1;
    if (n >= 4 && memcmp(p, lz4, 4) == 0)
        return 1;
    /* bzip2: "BZh1".."BZh9" and a block or end-of-stream magic, so that text starting with
     * "BZh" stays text */
    return n >= 10 && p[0] == 'B' && p[1] == 'Z' && p[2] == 'h' && p[3] >= '1' && p[3] <= '9' &&
           (memcmp(p + 4, "1AY&SY", 6) == 0 || memcmp(p + 4, "\x17rE8P\x90", 6) == 0);
}

/* Containers, by their signatures only: zip's local-file or end-of-directory record, tar's
 * "ustar" magic (POSIX, GNU and pax all write it). libarchive would also take text that
 * begins with 512 NUL bytes for an empty tar archive (an old-style tar has no magic), so it
 * is asked to read tar or zip only when the signature is there. */
static int is_container(const uint8_t *p, size_t n)
{
    if (n >= 4 && p[0] == 'P' && p[1] == 'K' &&
        ((p[2] == 3 && p[3] == 4) || (p[2] == 5 && p[3] == 6)))
        return 1;
    return n >= 262 && memcmp(p + 257, "ustar", 5) == 0;
}

static int archive_fail(tupe_source *s, struct archive *a, tupe_err *e)
{
    return tupe_fail(e, s->read_errno ? TUPE_EIO : TUPE_EDATA, "%s: %s", tupe_path_name(s->path),
                     archive_error_string(a));
}

static int open_container(tupe_source *s, la_ssize_t (*cb)(struct archive *, void *, const void **),
                          tupe_err *e)
{
    if (!(s->a = archive_read_new()))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    archive_read_support_format_tar(s->a);
    archive_read_support_format_zip(s->a);
    if (archive_read_open(s->a, s, NULL, cb, NULL) != ARCHIVE_OK)
        return archive_fail(s, s->a, e);
    s->kind = K_ARCHIVE;
    return 0;
}

/* A compressed file: decompress its start, then decide by what it holds. */
static int open_compressed(tupe_source *s, tupe_err *e)
{
    if (!(s->f = archive_read_new()))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    archive_read_support_filter_all(s->f);
    archive_read_support_format_raw(s->f);
    struct archive_entry *ent;
    if (archive_read_open(s->f, s, NULL, file_cb, NULL) != ARCHIVE_OK ||
        archive_read_next_header(s->f, &ent) < ARCHIVE_WARN)
        return archive_fail(s, s->f, e);
    while (s->ndpeek < PEEK) {
        la_ssize_t r = archive_read_data(s->f, s->dpeek + s->ndpeek, PEEK - s->ndpeek);
        if (r < 0)
            return archive_fail(s, s->f, e);
        if (r == 0)
            break;
        s->ndpeek += (size_t)r;
    }
    if (is_container(s->dpeek, s->ndpeek))
        return open_container(s, dec_cb, e);
    s->kind = K_COMPRESSED;
    return 0;
}

int tupe_source_open(tupe_source **out, const char *path, tupe_err *e)
{
    tupe_source *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    size_t first = 0;
    int eof = 0;
    if (strcmp(path, "-") == 0) {
        s->fd = 0;
    } else {
        /* A FIFO waits a while for its writer, never forever (base/fileio.h). */
        s->fd = tupe_open_input(path, 30000, s->peek, PEEK, &first, &eof, e);
        if (s->fd < 0) {
            tupe_source_close(s);
            return e->code;
        }
        s->own = 1;
    }
    struct stat st;
    if (fstat(s->fd, &st) == 0 && S_ISDIR(st.st_mode)) {
        tupe_source_close(s);
        return tupe_fail(e, TUPE_ENOINPUT, "%s: is a directory", path);
    }
    ssize_t r = eof ? 0 : read_full(s->fd, s->peek + first, PEEK - first);
    if (r >= 0)
        r += (ssize_t)first;
    if (r < 0) {
        int err = errno;
        tupe_source_close(s);
        return tupe_fail_errno(e, TUPE_EIO, err, "%s: read failed", tupe_path_name(path));
    }
    s->npeek = (size_t)r;
    s->consumed = (uint64_t)r;
    int rc = 0;
    s->kind = K_TEXT;
    if (is_compressed(s->peek, s->npeek) || is_container(s->peek, s->npeek)) {
        if (!(s->abuf = malloc(ARBUF)))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        else if (is_compressed(s->peek, s->npeek))
            rc = open_compressed(s, e);
        else
            rc = open_container(s, file_cb, e);
    }
    if (rc) {
        tupe_source_close(s);
        return rc;
    }
    *out = s;
    return 0;
}

int tupe_source_next(tupe_source *s, const char **name, tupe_err *e)
{
    if (s->done)
        return 0;
    free(s->name);
    s->name = NULL;
    if (s->kind != K_ARCHIVE) {
        if (s->started) {
            s->done = 1;
            return 0;
        }
        s->started = 1;
        s->name = strdup(tupe_path_name(s->path));
    } else {
        for (;;) {
            struct archive_entry *ent;
            int r = archive_read_next_header(s->a, &ent);
            if (r == ARCHIVE_EOF) {
                s->done = 1;
                return 0;
            }
            if (r < ARCHIVE_WARN) {
                archive_fail(s, s->a, e);
                return -1;
            }
            s->started = 1;
            if (archive_entry_filetype(ent) != AE_IFREG)
                continue;
            const char *m = archive_entry_pathname(ent);
            size_t n = strlen(s->path) + strlen(m ? m : "?") + 2;
            if ((s->name = malloc(n)))
                snprintf(s->name, n, "%s:%s", tupe_path_name(s->path), m ? m : "?");
            break;
        }
    }
    if (!s->name) {
        tupe_fail(e, TUPE_EFAIL, "out of memory");
        return -1;
    }
    *name = s->name;
    return 1;
}

int tupe_source_read(tupe_source *s, void *buf, size_t cap, size_t *got, tupe_err *e)
{
    *got = 0;
    if (s->kind == K_TEXT) {
        while (*got < cap) {
            ssize_t r = raw_read(s, (char *)buf + *got, cap - *got);
            if (r < 0)
                return tupe_fail_errno(e, TUPE_EIO, errno, "%s: read failed", s->name);
            if (r == 0)
                break;
            *got += (size_t)r;
        }
        return 0;
    }
    la_ssize_t r = s->kind == K_COMPRESSED ? dec_read(s, buf, cap) : archive_read_data(s->a, buf, cap);
    if (r < 0)
        return tupe_fail(e, s->read_errno ? TUPE_EIO : TUPE_EDATA, "%s: %s", s->name,
                         archive_error_string(s->kind == K_COMPRESSED ? s->f : s->a));
    *got = (size_t)r;
    return 0;
}

uint64_t tupe_source_consumed(const tupe_source *s) { return s->consumed; }

const char *tupe_source_kind(const tupe_source *s)
{
    return s->kind == K_TEXT ? "text" : s->kind == K_COMPRESSED ? "compressed" : "archive";
}

void tupe_source_close(tupe_source *s)
{
    if (!s)
        return;
    if (s->a)
        archive_read_free(s->a);
    if (s->f)
        archive_read_free(s->f);
    if (s->own)
        close(s->fd);
    free(s->abuf);
    free(s->name);
    free(s->path);
    free(s);
}
