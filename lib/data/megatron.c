#include "data/megatron.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/checksum.h"
#include "base/fileio.h"

#define IDX_HEADER 34

int tupe_megatron_dtype(uint32_t vocab_size)
{
    return vocab_size < 65500 ? TUPE_MEGATRON_UINT16 : TUPE_MEGATRON_INT32;
}

static int dtype_size(int dtype) { return dtype == TUPE_MEGATRON_UINT16 ? 2 : 4; }

struct tupe_megaw {
    char *prefix;
    int dtype;
    tupe_out *bin;
    tupe_hasher *h;
    unsigned char *buf;
    size_t cap;
    int32_t *lengths;
    uint64_t n, lcap;
};

static void path_of(char *dst, size_t cap, const char *prefix, const char *ext)
{
    snprintf(dst, cap, "%s%s", prefix, ext);
}

int tupe_megaw_open(tupe_megaw **wp, const char *prefix, int dtype, tupe_err *e)
{
    tupe_megaw *w = calloc(1, sizeof *w);
    if (!w || !(w->prefix = strdup(prefix)) || !(w->h = tupe_hasher_new())) {
        if (w)
            free(w->prefix);
        free(w);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    w->dtype = dtype;
    char p[PATH_MAX];
    path_of(p, sizeof p, prefix, ".bin");
    int rc = tupe_out_open(&w->bin, p, e);
    if (rc) {
        tupe_hasher_free(w->h);
        free(w->prefix);
        free(w);
        return rc;
    }
    *wp = w;
    return 0;
}

int tupe_megaw_seq(tupe_megaw *w, const uint32_t *ids, uint32_t n, tupe_err *e)
{
    size_t ds = (size_t)dtype_size(w->dtype), need = ds * n;
    if (need > w->cap) {
        unsigned char *nb = realloc(w->buf, need);
        if (!nb)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        w->buf = nb;
        w->cap = need;
    }
    if (w->n == w->lcap) {
        uint64_t nc = w->lcap ? w->lcap * 2 : 1024;
        int32_t *nl = realloc(w->lengths, nc * sizeof *nl);
        if (!nl)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        w->lengths = nl;
        w->lcap = nc;
    }
    for (uint32_t i = 0; i < n; i++) {
        if (ds == 2) {
            if (ids[i] > 0xFFFF)
                return tupe_fail(e, TUPE_EFAIL, "id %u does not fit Megatron's uint16", ids[i]);
            w->buf[2 * i] = (unsigned char)ids[i];
            w->buf[2 * i + 1] = (unsigned char)(ids[i] >> 8);
        } else {
            tupe_put32le(w->buf + 4 * (size_t)i, ids[i]);
        }
    }
    w->lengths[w->n++] = (int32_t)n;
    tupe_hasher_update(w->h, w->buf, need);
    return tupe_out_write(w->bin, w->buf, need, e);
}

static void megaw_free(tupe_megaw *w)
{
    tupe_hasher_free(w->h);
    free(w->buf);
    free(w->lengths);
    free(w->prefix);
    free(w);
}

int tupe_megaw_close(tupe_megaw *w, uint64_t *bytes, uint64_t *check, tupe_err *e)
{
    uint64_t bin_bytes = tupe_out_offset(w->bin);
    int rc = tupe_out_commit(w->bin, e);
    w->bin = NULL;
    tupe_out *idx = NULL;
    char p[PATH_MAX];
    path_of(p, sizeof p, w->prefix, ".idx");
    if (!rc)
        rc = tupe_out_open(&idx, p, e);
    unsigned char hb[IDX_HEADER], v[8];
    memcpy(hb, TUPE_MEGATRON_MAGIC, 9);
    tupe_put64le(hb + 9, 1);
    hb[17] = (unsigned char)w->dtype;
    tupe_put64le(hb + 18, w->n);
    tupe_put64le(hb + 26, w->n + 1);
#define EMIT(buf, len)                                                                     \
    do {                                                                                   \
        if (!rc) {                                                                         \
            tupe_hasher_update(w->h, (buf), (len));                                        \
            rc = tupe_out_write(idx, (buf), (len), e);                                     \
        }                                                                                  \
    } while (0)
    EMIT(hb, sizeof hb);
    for (uint64_t i = 0; i < w->n; i++) {
        tupe_put32le(v, (uint32_t)w->lengths[i]);
        EMIT(v, 4);
    }
    uint64_t off = 0;
    for (uint64_t i = 0; i < w->n; i++) {
        tupe_put64le(v, off);
        EMIT(v, 8);
        off += (uint64_t)w->lengths[i] * (uint64_t)dtype_size(w->dtype);
    }
    for (uint64_t i = 0; i <= w->n; i++) {
        tupe_put64le(v, i);
        EMIT(v, 8);
    }
#undef EMIT
    uint64_t idx_bytes = idx ? tupe_out_offset(idx) : 0;
    if (idx) {
        if (rc)
            tupe_out_abort(idx);
        else
            rc = tupe_out_commit(idx, e);
    }
    if (!rc) {
        if (bytes)
            *bytes = bin_bytes + idx_bytes;
        if (check)
            *check = tupe_hasher_digest(w->h);
    }
    megaw_free(w);
    return rc;
}

void tupe_megaw_abort(tupe_megaw *w)
{
    if (!w)
        return;
    tupe_out_abort(w->bin);
    megaw_free(w);
}

/* ---- reading ---------------------------------------------------------------------------------- */

int tupe_megar_open(tupe_megar *r, const char *prefix, tupe_err *e)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
    char p[PATH_MAX];
    path_of(p, sizeof p, prefix, ".idx");
    r->idx_path = strdup(p);
    path_of(p, sizeof p, prefix, ".bin");
    r->bin_path = strdup(p);
    if (!r->idx_path || !r->bin_path) {
        tupe_megar_close(r);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    char *buf;
    size_t len;
    int rc = tupe_read_file(r->idx_path, &buf, &len, (size_t)1 << 40, e);
    if (rc) {
        tupe_megar_close(r);
        return rc;
    }
    const unsigned char *b = (const unsigned char *)buf;
    const char *ip = r->idx_path;
    if (len < IDX_HEADER || memcmp(b, TUPE_MEGATRON_MAGIC, 9) != 0)
        rc = tupe_fail_byte(e, TUPE_EDATA, ip, 0, "not a Megatron index (bad magic)");
    else if (tupe_get64le(b + 9) != 1)
        rc = tupe_fail_byte(e, TUPE_EDATA, ip, 9, "index version %" PRIu64 " is not 1",
                            tupe_get64le(b + 9));
    else if (b[17] != TUPE_MEGATRON_UINT16 && b[17] != TUPE_MEGATRON_INT32)
        rc = tupe_fail_byte(e, TUPE_EDATA, ip, 17, "dtype code %u is not 8 (uint16) or 4 (int32)",
                            b[17]);
    if (!rc) {
        r->dtype = b[17];
        r->sequences = tupe_get64le(b + 18);
        r->documents = tupe_get64le(b + 26);
        uint64_t need = IDX_HEADER + r->sequences * 12 + r->documents * 8;
        if (r->sequences > len || r->documents > len || need != len)
            rc = tupe_fail_byte(e, TUPE_EDATA, ip, 18,
                                "index of %zu bytes does not hold %" PRIu64 " sequences and %"
                                PRIu64 " documents", len, r->sequences, r->documents);
    }
    if (!rc) {
        r->lengths = malloc((r->sequences ? r->sequences : 1) * sizeof *r->lengths);
        r->pointers = malloc((r->sequences ? r->sequences : 1) * sizeof *r->pointers);
        r->docs = malloc((r->documents ? r->documents : 1) * sizeof *r->docs);
        if (!r->lengths || !r->pointers || !r->docs)
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (uint64_t i = 0; !rc && i < r->sequences; i++) {
        r->lengths[i] = (int32_t)tupe_get32le(b + IDX_HEADER + 4 * i);
        r->pointers[i] = (int64_t)tupe_get64le(b + IDX_HEADER + 4 * r->sequences + 8 * i);
    }
    for (uint64_t i = 0; !rc && i < r->documents; i++)
        r->docs[i] = (int64_t)tupe_get64le(b + IDX_HEADER + 12 * r->sequences + 8 * i);
    free(buf);
    struct stat st;
    if (!rc) {
        r->fd = open(r->bin_path, O_RDONLY | O_CLOEXEC);
        if (r->fd < 0)
            rc = tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", r->bin_path);
        else if (fstat(r->fd, &st) != 0)
            rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: cannot stat", r->bin_path);
        else
            r->bin_bytes = (uint64_t)st.st_size;
    }
    /* Sequences tile .bin in order, and the document index runs from 0 to S. */
    uint64_t off = 0, ds = (uint64_t)dtype_size(r->dtype);
    for (uint64_t i = 0; !rc && i < r->sequences; i++) {
        if (r->lengths[i] < 0 || (uint64_t)r->pointers[i] != off)
            rc = tupe_fail_byte(e, TUPE_EDATA, ip, IDX_HEADER + 4 * i,
                                "sequence %" PRIu64 ": length or offset inconsistent", i);
        off += (uint64_t)r->lengths[i] * ds;
    }
    if (!rc && off != r->bin_bytes)
        rc = tupe_fail(e, TUPE_EDATA, "%s: %" PRIu64 " bytes, but the index describes %" PRIu64
                       "%s", r->bin_path, r->bin_bytes, off,
                       r->bin_bytes < off ? " (truncated)" : "");
    if (!rc && (r->documents == 0 || r->docs[0] != 0 ||
                (uint64_t)r->docs[r->documents - 1] != r->sequences))
        rc = tupe_fail_byte(e, TUPE_EDATA, ip, IDX_HEADER + 12 * r->sequences,
                            "document index does not run from 0 to the sequence count");
    for (uint64_t i = 1; !rc && i < r->documents; i++)
        if (r->docs[i] < r->docs[i - 1])
            rc = tupe_fail_byte(e, TUPE_EDATA, ip, IDX_HEADER + 12 * r->sequences + 8 * i,
                                "document index decreases");
    if (rc)
        tupe_megar_close(r);
    return rc;
}

int tupe_megar_seq(tupe_megar *r, uint64_t i, uint32_t *ids, uint32_t cap, uint32_t *n,
                   tupe_err *e)
{
    if (i >= r->sequences)
        return tupe_fail(e, TUPE_EFAIL, "%s: sequence %" PRIu64 " out of range", r->idx_path, i);
    uint32_t len = (uint32_t)r->lengths[i];
    if (len > cap)
        return tupe_fail(e, TUPE_EDATA, "%s: sequence %" PRIu64 " has %u ids, more than %u",
                         r->idx_path, i, len, cap);
    size_t ds = (size_t)dtype_size(r->dtype), bytes = ds * len;
    unsigned char *b = malloc(bytes ? bytes : 1);
    if (!b)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t done = 0;
    while (done < bytes) {
        ssize_t got = pread(r->fd, b + done, bytes - done, (off_t)r->pointers[i] + (off_t)done);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            free(b);
            return got < 0 ? tupe_fail_errno(e, TUPE_EIO, errno, "%s: read failed", r->bin_path)
                           : tupe_fail(e, TUPE_EDATA, "%s: truncated", r->bin_path);
        }
        done += (size_t)got;
    }
    for (uint32_t k = 0; k < len; k++)
        ids[k] = ds == 2 ? (uint32_t)b[2 * k] | (uint32_t)b[2 * k + 1] << 8 : tupe_get32le(b + 4 * k);
    free(b);
    *n = len;
    return 0;
}

static int hash_file(tupe_hasher *h, const char *path, uint64_t *bytes, tupe_err *e)
{
    tupe_in *in;
    int rc = tupe_in_open(&in, path, e);
    if (rc)
        return rc;
    unsigned char buf[1 << 16];
    for (;;) {
        size_t got;
        if ((rc = tupe_in_read(in, buf, sizeof buf, &got, e)) || got == 0)
            break;
        tupe_hasher_update(h, buf, got);
        *bytes += got;
    }
    tupe_in_close(in);
    return rc;
}

int tupe_megatron_check(const char *prefix, uint64_t *check, uint64_t *bytes, tupe_err *e)
{
    tupe_hasher *h = tupe_hasher_new();
    if (!h)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    char p[PATH_MAX];
    uint64_t n = 0;
    path_of(p, sizeof p, prefix, ".bin");
    int rc = hash_file(h, p, &n, e);
    path_of(p, sizeof p, prefix, ".idx");
    if (!rc)
        rc = hash_file(h, p, &n, e);
    if (!rc) {
        *check = tupe_hasher_digest(h);
        *bytes = n;
    }
    tupe_hasher_free(h);
    return rc;
}

void tupe_megar_close(tupe_megar *r)
{
    if (r->fd >= 0)
        close(r->fd);
    free(r->lengths);
    free(r->pointers);
    free(r->docs);
    free(r->bin_path);
    free(r->idx_path);
    memset(r, 0, sizeof *r);
    r->fd = -1;
}
