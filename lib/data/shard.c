#include "data/shard.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "base/byteorder.h"
#include "base/checksum.h"
#include "base/fault.h"
#include "data/pack.h"

#define MAX_SEQ_LEN (1u << 20)

const char *tupe_split_name(int split) { return split == TUPE_SPLIT_VALID ? "valid" : "train"; }

const char *tupe_layout_name(int layout)
{
    return layout == TUPE_LAYOUT_RAW ? "raw" : layout == TUPE_LAYOUT_MEGATRON ? "megatron" : "zstd";
}

const char *tupe_break_name(int brk) { return brk == TUPE_BREAK_DOC ? "doc" : "full"; }

void tupe_shard_file_name(char *dst, size_t cap, int split, uint32_t shard, int layout)
{
    snprintf(dst, cap, "%s-%05u%s", tupe_split_name(split), shard,
             layout == TUPE_LAYOUT_MEGATRON ? "" : ".shard");
}

/* ---- header --------------------------------------------------------------------------------- */

/* Each special id is -1 (none) or inside the vocabulary. */
static int specials_ok(const int32_t *sp, uint32_t vocab_size)
{
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        if (sp[i] < -1 || (sp[i] >= 0 && (uint32_t)sp[i] >= vocab_size))
            return 0;
    return 1;
}

void tupe_shard_header_encode(const tupe_shard_header *h, unsigned char out[TUPE_SHARD_HEADER])
{
    memset(out, 0, TUPE_SHARD_HEADER);
    memcpy(out, TUPE_SHARD_MAGIC, 8);
    tupe_put32le(out + 8, h->version);
    tupe_put32le(out + 12, h->flags);
    tupe_put32le(out + 16, h->id_bytes);
    tupe_put32le(out + 20, h->seq_len);
    tupe_put32le(out + 24, h->rec_bytes);
    tupe_put32le(out + 28, h->vocab_size);
    tupe_put64le(out + 32, h->vocab_hash);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        tupe_put32le(out + 40 + 4 * i, (uint32_t)h->special[i]);
    tupe_put32le(out + 60, h->brk);
    tupe_put32le(out + 64, h->split);
    tupe_put32le(out + 68, h->shard);
    tupe_put32le(out + 72, h->shards);
    tupe_put32le(out + 76, h->frame_records);
    tupe_put64le(out + 80, h->seed);
    tupe_put64le(out + 88, h->set_id);
    tupe_put64le(out + 96, h->records);
    tupe_put64le(out + 104, h->first);
    tupe_put64le(out + 112, h->tokens);
    tupe_put64le(out + 120, h->frames);
    tupe_put64le(out + 128, h->index_offset);
    tupe_put64le(out + 136, h->file_bytes);
    tupe_put64le(out + 144, h->index_check);
    tupe_put64le(out + 248, tupe_hash64(out, 248));
}

int tupe_shard_header_decode(tupe_shard_header *h, const unsigned char in[TUPE_SHARD_HEADER],
                             const char *path, tupe_err *e)
{
    if (memcmp(in, TUPE_SHARD_MAGIC, 8) != 0)
        return tupe_fail_byte(e, TUPE_EDATA, path, 0,
                              "not a tupe shard (bad magic; expected \"%s\")", TUPE_SHARD_MAGIC);
    h->version = tupe_get32le(in + 8);
    if (h->version != TUPE_SHARD_VERSION)
        return tupe_fail_byte(e, TUPE_EDATA, path, 8,
                              "shard version %u is not supported (this is version %d)",
                              h->version, TUPE_SHARD_VERSION);
    if (tupe_get64le(in + 248) != tupe_hash64(in, 248))
        return tupe_fail_byte(e, TUPE_EDATA, path, 248, "header checksum mismatch (shard corrupt)");
    h->flags = tupe_get32le(in + 12);
    h->id_bytes = tupe_get32le(in + 16);
    h->seq_len = tupe_get32le(in + 20);
    h->rec_bytes = tupe_get32le(in + 24);
    h->vocab_size = tupe_get32le(in + 28);
    h->vocab_hash = tupe_get64le(in + 32);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        h->special[i] = (int32_t)tupe_get32le(in + 40 + 4 * i);
    h->brk = tupe_get32le(in + 60);
    h->split = tupe_get32le(in + 64);
    h->shard = tupe_get32le(in + 68);
    h->shards = tupe_get32le(in + 72);
    h->frame_records = tupe_get32le(in + 76);
    h->seed = tupe_get64le(in + 80);
    h->set_id = tupe_get64le(in + 88);
    h->records = tupe_get64le(in + 96);
    h->first = tupe_get64le(in + 104);
    h->tokens = tupe_get64le(in + 112);
    h->frames = tupe_get64le(in + 120);
    h->index_offset = tupe_get64le(in + 128);
    h->file_bytes = tupe_get64le(in + 136);
    h->index_check = tupe_get64le(in + 144);
    const char *bad = NULL;
    if (h->id_bytes != 2 && h->id_bytes != 4)
        bad = "id width is not 2 or 4";
    else if (h->vocab_size == 0 || (h->id_bytes == 2 && h->vocab_size > 65536))
        bad = "vocabulary size out of range for the id width";
    else if (!specials_ok(h->special, h->vocab_size))
        bad = "a special id is outside the vocabulary";
    else if (h->seq_len < 2 || h->seq_len > MAX_SEQ_LEN)
        bad = "sequence length out of range";
    else if (h->rec_bytes != tupe_rec_bytes(h->seq_len, h->id_bytes))
        bad = "record size does not match the sequence length";
    else if (h->frame_records == 0 || (uint64_t)h->frame_records * h->rec_bytes > (1u << 30))
        bad = "records per frame out of range";
    else if (h->split >= TUPE_SPLITS || h->shards == 0 || h->shard >= h->shards)
        bad = "split or shard number out of range";
    else if (h->frames != (h->records + h->frame_records - 1) / h->frame_records)
        bad = "frame count does not match the record count";
    else if (h->index_offset < TUPE_SHARD_HEADER ||
             h->file_bytes != h->index_offset + TUPE_SHARD_FRAME_ENTRY * h->frames)
        bad = "index offset or file size inconsistent";
    if (bad)
        return tupe_fail_byte(e, TUPE_EDATA, path, 0, "bad header: %s (shard corrupt)", bad);
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------------- */

struct tupe_shardw {
    int fd;
    char *path;
    tupe_shard_header h;
    uint64_t off;
    tupe_frame_entry *idx;
    size_t nidx, capidx;
};

static int write_at(int fd, const void *buf, size_t n, uint64_t off, const char *path, tupe_err *e)
{
    const unsigned char *p = buf;
    while (n > 0) {
        ssize_t w = pwrite(fd, p, n, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return tupe_fail_errno(e, TUPE_EIO, errno, "%s: write failed", path);
        }
        p += w;
        n -= (size_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

int tupe_shardw_open(tupe_shardw **wp, const char *path, const tupe_shard_header *h, tupe_err *e)
{
    tupe_shardw *w = calloc(1, sizeof *w);
    if (!w || !(w->path = strdup(path))) {
        free(w);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    w->h = *h;
    w->h.version = TUPE_SHARD_VERSION;
    w->h.records = w->h.tokens = w->h.frames = 0;
    w->fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (w->fd < 0) {
        int err = errno;
        free(w->path);
        free(w);
        return tupe_fail_errno(e, TUPE_ECANTCREAT, err, "%s: cannot create", path);
    }
    /* The header is written last: until then the file starts with zeros, not a magic. */
    static const unsigned char zero[TUPE_SHARD_HEADER];
    int rc = write_at(w->fd, zero, sizeof zero, 0, path, e);
    if (rc) {
        tupe_shardw_abort(w);
        return rc;
    }
    w->off = TUPE_SHARD_HEADER;
    *wp = w;
    return 0;
}

int tupe_shardw_frame(tupe_shardw *w, const void *stored, size_t n, uint64_t check,
                      uint32_t records, uint64_t tokens, tupe_err *e)
{
    if (n > UINT32_MAX)
        return tupe_fail(e, TUPE_EFAIL, "%s: frame of %zu bytes is too large", w->path, n);
    if (w->nidx == w->capidx) {
        size_t nc = w->capidx ? w->capidx * 2 : 64;
        tupe_frame_entry *ni = realloc(w->idx, nc * sizeof *ni);
        if (!ni)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        w->idx = ni;
        w->capidx = nc;
    }
    int rc = write_at(w->fd, stored, n, w->off, w->path, e);
    if (rc)
        return rc;
#ifdef SYNC_FILE_RANGE_WRITE
    /* Start writing back now, so that the fsync of the final commit has little left to wait for
     * (a hint: failure changes nothing). */
    sync_file_range(w->fd, (off_t)w->off, (off_t)n, SYNC_FILE_RANGE_WRITE);
#endif
    w->idx[w->nidx++] = (tupe_frame_entry){w->off, (uint32_t)n, records, check};
    w->off += n;
    w->h.records += records;
    w->h.tokens += tokens;
    tupe_fault_point("shard.frame");
    return 0;
}

int tupe_shardw_close(tupe_shardw *w, uint64_t *bytes, tupe_err *e)
{
    size_t ib = w->nidx * TUPE_SHARD_FRAME_ENTRY;
    unsigned char *buf = malloc(ib ? ib : 1);
    if (!buf) {
        tupe_shardw_abort(w);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (size_t i = 0; i < w->nidx; i++) {
        unsigned char *p = buf + i * TUPE_SHARD_FRAME_ENTRY;
        tupe_put64le(p, w->idx[i].offset);
        tupe_put32le(p + 8, w->idx[i].stored);
        tupe_put32le(p + 12, w->idx[i].records);
        tupe_put64le(p + 16, w->idx[i].check);
    }
    w->h.frames = w->nidx;
    w->h.index_offset = w->off;
    w->h.file_bytes = w->off + ib;
    w->h.index_check = tupe_hash64(buf, ib);
    int rc = write_at(w->fd, buf, ib, w->off, w->path, e);
    free(buf);
    unsigned char hb[TUPE_SHARD_HEADER];
    tupe_shard_header_encode(&w->h, hb);
    if (!rc)
        rc = write_at(w->fd, hb, sizeof hb, 0, w->path, e);
    if (rc) {
        tupe_shardw_abort(w);
        return rc;
    }
    if (close(w->fd) != 0) {
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: close failed", w->path);
        w->fd = -1;
        tupe_shardw_abort(w);
        return rc;
    }
    if (bytes)
        *bytes = w->h.file_bytes;
    free(w->idx);
    free(w->path);
    free(w);
    tupe_fault_point("shard.close");
    return 0;
}

void tupe_shardw_abort(tupe_shardw *w)
{
    if (!w)
        return;
    if (w->fd >= 0)
        close(w->fd);
    unlink(w->path);
    free(w->idx);
    free(w->path);
    free(w);
}

/* ---- reading ---------------------------------------------------------------------------------- */

static int read_at(int fd, void *buf, size_t n, uint64_t off, const char *path, tupe_err *e)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return tupe_fail_errno(e, TUPE_EIO, errno, "%s: read failed at byte %" PRIu64, path,
                                   off);
        if (r == 0)
            return tupe_fail_byte(e, TUPE_EDATA, path, off, "truncated (unexpected end of file)");
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

int tupe_shardf_open(tupe_shardf *f, const char *path, tupe_err *e)
{
    memset(f, 0, sizeof *f);
    f->fd = open(path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", path);
    f->path = strdup(path);
    struct stat st;
    int rc = 0;
    if (!f->path)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    else if (fstat(f->fd, &st) != 0)
        rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: cannot stat", path);
    if (rc)
        goto fail;
    f->size = (uint64_t)st.st_size;
    if (f->size < TUPE_SHARD_HEADER) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: truncated: %" PRIu64 " bytes, shorter than the header",
                       path, f->size);
        goto fail;
    }
    unsigned char hb[TUPE_SHARD_HEADER];
    if ((rc = read_at(f->fd, hb, sizeof hb, 0, path, e)) ||
        (rc = tupe_shard_header_decode(&f->h, hb, path, e)))
        goto fail;
    if (f->size != f->h.file_bytes) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: %s: %" PRIu64 " bytes where the header says %" PRIu64,
                       path, f->size < f->h.file_bytes ? "truncated" : "trailing bytes", f->size,
                       f->h.file_bytes);
        goto fail;
    }
    size_t ib = (size_t)f->h.frames * TUPE_SHARD_FRAME_ENTRY;
    unsigned char *buf = malloc(ib ? ib : 1);
    f->frames = calloc(f->h.frames ? f->h.frames : 1, sizeof *f->frames);
    if (!buf || !f->frames) {
        free(buf);
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto fail;
    }
    rc = read_at(f->fd, buf, ib, f->h.index_offset, path, e);
    if (!rc && tupe_hash64(buf, ib) != f->h.index_check)
        rc = tupe_fail_byte(e, TUPE_EDATA, path, f->h.index_offset,
                            "frame index checksum mismatch (shard corrupt)");
    uint64_t expect = TUPE_SHARD_HEADER, recs = 0;
    int comp = (f->h.flags & TUPE_SHARD_ZSTD) != 0;
    for (uint64_t i = 0; !rc && i < f->h.frames; i++) {
        const unsigned char *p = buf + i * TUPE_SHARD_FRAME_ENTRY;
        tupe_frame_entry *fe = &f->frames[i];
        fe->offset = tupe_get64le(p);
        fe->stored = tupe_get32le(p + 8);
        fe->records = tupe_get32le(p + 12);
        fe->check = tupe_get64le(p + 16);
        uint32_t want = i + 1 < f->h.frames ? f->h.frame_records
                                            : (uint32_t)(f->h.records - i * f->h.frame_records);
        if (fe->offset != expect || fe->records != want ||
            (!comp && fe->stored != (uint64_t)fe->records * f->h.rec_bytes) ||
            fe->offset + fe->stored > f->h.index_offset)
            rc = tupe_fail_byte(e, TUPE_EDATA, path, f->h.index_offset + i * TUPE_SHARD_FRAME_ENTRY,
                                "frame index entry %" PRIu64 " is inconsistent (shard corrupt)", i);
        expect = fe->offset + fe->stored;
        recs += fe->records;
    }
    free(buf);
    if (!rc && (recs != f->h.records || expect != f->h.index_offset))
        rc = tupe_fail_byte(e, TUPE_EDATA, path, f->h.index_offset,
                            "frame index does not cover the records (shard corrupt)");
    if (rc)
        goto fail;
    if (!comp && f->size > 0) {
        void *m = mmap(NULL, f->size, PROT_READ, MAP_SHARED, f->fd, 0);
        if (m == MAP_FAILED) {
            rc = tupe_fail_errno(e, TUPE_EIO, errno, "%s: cannot map", path);
            goto fail;
        }
        f->map = m;
    }
    return 0;
fail:
    tupe_shardf_close(f);
    return rc;
}

void tupe_shardf_close(tupe_shardf *f)
{
    if (f->map)
        munmap((void *)f->map, f->size);
    if (f->fd >= 0)
        close(f->fd);
    free(f->frames);
    free(f->path);
    memset(f, 0, sizeof *f);
    f->fd = -1;
}

void tupe_fdec_init(tupe_fdec *d) { memset(d, 0, sizeof *d); }

void tupe_fdec_free(tupe_fdec *d)
{
    ZSTD_freeDCtx(d->dctx);
    free(d->zbuf);
    free(d->out);
    memset(d, 0, sizeof *d);
}

static int grow(unsigned char **b, size_t *cap, size_t need)
{
    if (*cap >= need)
        return 0;
    unsigned char *nb = realloc(*b, need);
    if (!nb)
        return -1;
    *b = nb;
    *cap = need;
    return 0;
}

int tupe_shardf_frame(tupe_shardf *f, uint64_t i, tupe_fdec *d, const unsigned char **recs,
                      tupe_err *e)
{
    if (i >= f->h.frames)
        return tupe_fail(e, TUPE_EFAIL, "%s: frame %" PRIu64 " out of range", f->path, i);
    const tupe_frame_entry *fe = &f->frames[i];
    size_t raw = (size_t)fe->records * f->h.rec_bytes;
    const unsigned char *stored;
    if (f->map) {
        stored = f->map + fe->offset;
    } else {
        if (grow(&d->zbuf, &d->zcap, fe->stored ? fe->stored : 1))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        int rc = read_at(f->fd, d->zbuf, fe->stored, fe->offset, f->path, e);
        if (rc)
            return rc;
        stored = d->zbuf;
    }
    if (tupe_hash64(stored, fe->stored) != fe->check)
        return tupe_fail_byte(e, TUPE_EDATA, f->path, fe->offset,
                              "frame %" PRIu64 ": checksum mismatch (shard corrupt)", i);
    const unsigned char *out = stored;
    if (f->h.flags & TUPE_SHARD_ZSTD) {
        if (!d->dctx && !(d->dctx = ZSTD_createDCtx()))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        if (grow(&d->out, &d->ocap, raw ? raw : 1))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        size_t r = ZSTD_decompressDCtx(d->dctx, d->out, raw, stored, fe->stored);
        if (ZSTD_isError(r) || r != raw)
            return tupe_fail_byte(e, TUPE_EDATA, f->path, fe->offset,
                                  "frame %" PRIu64 ": %s (shard corrupt)", i,
                                  ZSTD_isError(r) ? ZSTD_getErrorName(r)
                                                  : "decompresses to the wrong size");
        out = d->out;
    }
    /* Every id, padding included, goes into an embedding lookup: one outside the vocabulary
     * must stop here, whatever the checksums say. */
    uint32_t L = f->h.seq_len, V = f->h.vocab_size;
    for (uint32_t k = 0; k < fe->records; k++) {
        const unsigned char *rec = out + (size_t)k * f->h.rec_bytes, *q = rec + 4;
        uint32_t len = tupe_rec_length(rec), at = L, id = 0;
        if (len == 0 || len > L)
            return tupe_fail_byte(e, TUPE_EDATA, f->path, fe->offset,
                                  "frame %" PRIu64 ": record %u has length %u (seq_len %u; shard "
                                  "corrupt)", i, k, len, L);
        if (f->h.id_bytes == 2) {
            for (uint32_t t = 0; t < L && at == L; t++)
                if ((id = (uint32_t)q[2 * t] | (uint32_t)q[2 * t + 1] << 8) >= V)
                    at = t;
        } else {
            for (uint32_t t = 0; t < L && at == L; t++)
                if ((id = tupe_get32le(q + 4 * (size_t)t)) >= V)
                    at = t;
        }
        if (at < L)
            return tupe_fail_byte(e, TUPE_EDATA, f->path, fe->offset,
                                  "frame %" PRIu64 ": record %u, position %u: id %u is outside "
                                  "the vocabulary (size %u; shard corrupt)", i, k, at, id, V);
    }
    *recs = out;
    return 0;
}

/* ---- manifest ------------------------------------------------------------------------------ */

static json_t *hash_json(uint64_t h)
{
    char s[22];
    tupe_hash_hex(h, s);
    return json_string(s);
}

static json_t *split_json(const tupe_split_meta *s)
{
    json_t *files = json_array();
    for (uint32_t i = 0; i < s->nfiles; i++) {
        const tupe_shard_file *f = &s->files[i];
        json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I}", "file", f->name, "sequences",
                              (json_int_t)f->sequences, "first", (json_int_t)f->first, "tokens",
                              (json_int_t)f->tokens, "bytes", (json_int_t)f->bytes);
        if (o && f->check)
            json_object_set_new(o, "check", hash_json(f->check));
        json_array_append_new(files, o);
    }
    return json_pack("{s:I, s:I, s:I, s:I, s:I, s:I, s:o}", "sequences", (json_int_t)s->sequences,
                     "documents", (json_int_t)s->documents, "tokens", (json_int_t)s->tokens,
                     "padding", (json_int_t)s->padding, "raw_bytes", (json_int_t)s->raw_bytes,
                     "stored_bytes", (json_int_t)s->stored_bytes, "files", files);
}

int tupe_manifest_write(const char *path, const tupe_shard_meta *m, tupe_err *e)
{
    static const char *spn[TUPE_SP_COUNT] = {"pad", "unk", "cls", "sep", "mask"};
    json_t *sp = json_object();
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        json_object_set_new(sp, spn[i], json_integer(m->special[i]));
    json_t *root = json_pack(
        "{s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:o, s:o, s:s, s:b, s:I, s:o}", "format",
        TUPE_MANIFEST_FORMAT, "version", TUPE_SHARD_VERSION, "layout", tupe_layout_name(m->layout),
        "seq_len", (json_int_t)m->seq_len, "id_bytes", (json_int_t)m->id_bytes, "record_bytes",
        (json_int_t)m->rec_bytes, "vocab_size", (json_int_t)m->vocab_size, "vocab_hash",
        hash_json(m->vocab_hash), "special", sp, "break", tupe_break_name(m->brk), "shuffled",
        m->shuffled, "seed", (json_int_t)m->seed, "set_id", hash_json(m->set_id));
    if (!root)
        return tupe_fail(e, TUPE_EFAIL, "out of memory (manifest)");
    if (m->layout == TUPE_LAYOUT_ZSTD)
        json_object_set_new(root, "zstd_level", json_integer(m->level));
    if (m->layout == TUPE_LAYOUT_MEGATRON) {
        json_object_set_new(root, "megatron_dtype", json_integer(m->megatron_dtype));
    } else {
        json_object_set_new(root, "frame_bytes", json_integer((json_int_t)m->frame_bytes));
        json_object_set_new(root, "frame_records", json_integer(m->frame_records));
    }
    json_object_set_new(root, "input",
                        json_pack("{s:I, s:I, s:I, s:o}", "documents", (json_int_t)m->in_documents,
                                  "empty_documents", (json_int_t)m->in_empty, "tokens",
                                  (json_int_t)m->in_tokens, "hash", hash_json(m->in_hash)));
    json_t *splits = json_object();
    for (int s = 0; s < TUPE_SPLITS; s++)
        json_object_set_new(splits, tupe_split_name(s), split_json(&m->split[s]));
    json_object_set_new(root, "splits", splits);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_decref(root);
    if (!text)
        return tupe_fail(e, TUPE_EFAIL, "out of memory (manifest)");
    size_t n = strlen(text);
    char *withnl = realloc(text, n + 2);
    if (!withnl) {
        free(text);
        return tupe_fail(e, TUPE_EFAIL, "out of memory (manifest)");
    }
    withnl[n] = '\n';
    withnl[n + 1] = 0;
    tupe_fault_point("shard.manifest");
    int rc = tupe_write_file(path, withnl, n + 1, e);
    free(withnl);
    return rc;
}

/* Field readers: each returns 0 or fails naming the manifest and the key. */
typedef struct mctx {
    const char *path;
    tupe_err *e;
    int rc;
} mctx;

static json_t *field(mctx *c, json_t *obj, const char *key, int type)
{
    if (c->rc)
        return NULL;
    json_t *v = json_object_get(obj, key);
    if (!v || (int)json_typeof(v) != type) {
        c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: key \"%s\" is missing or has the wrong type",
                          c->path, key);
        return NULL;
    }
    return v;
}

static uint64_t get_u64(mctx *c, json_t *obj, const char *key, uint64_t max)
{
    json_t *v = field(c, obj, key, JSON_INTEGER);
    if (!v)
        return 0;
    json_int_t x = json_integer_value(v);
    if (x < 0 || (uint64_t)x > max) {
        c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: \"%s\" is out of range (%lld)", c->path, key,
                          (long long)x);
        return 0;
    }
    return (uint64_t)x;
}

static uint64_t get_hash(mctx *c, json_t *obj, const char *key)
{
    json_t *v = field(c, obj, key, JSON_STRING);
    uint64_t h = 0;
    if (v && tupe_hash_parse(json_string_value(v), &h) != 0)
        c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: \"%s\" is not a hash (\"xxh3:...\")", c->path,
                          key);
    return h;
}

static int get_choice(mctx *c, json_t *obj, const char *key, const char *a, const char *b,
                      const char *d)
{
    json_t *v = field(c, obj, key, JSON_STRING);
    if (!v)
        return 0;
    const char *s = json_string_value(v);
    if (strcmp(s, a) == 0)
        return 0;
    if (strcmp(s, b) == 0)
        return 1;
    if (d && strcmp(s, d) == 0)
        return 2;
    c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: \"%s\" has an unknown value \"%s\"", c->path, key, s);
    return 0;
}

static void read_split(mctx *c, json_t *obj, tupe_split_meta *s, int layout)
{
    s->sequences = get_u64(c, obj, "sequences", INT64_MAX);
    s->documents = get_u64(c, obj, "documents", INT64_MAX);
    s->tokens = get_u64(c, obj, "tokens", INT64_MAX);
    s->padding = get_u64(c, obj, "padding", INT64_MAX);
    s->raw_bytes = get_u64(c, obj, "raw_bytes", INT64_MAX);
    s->stored_bytes = get_u64(c, obj, "stored_bytes", INT64_MAX);
    json_t *files = field(c, obj, "files", JSON_ARRAY);
    if (!files)
        return;
    size_t n = json_array_size(files);
    if (n > 1000000) {
        c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: too many files", c->path);
        return;
    }
    s->files = calloc(n ? n : 1, sizeof *s->files);
    if (!s->files) {
        c->rc = tupe_fail(c->e, TUPE_EFAIL, "out of memory");
        return;
    }
    s->nfiles = (uint32_t)n;
    uint64_t first = 0;
    for (size_t i = 0; i < n && !c->rc; i++) {
        json_t *o = json_array_get(files, i);
        tupe_shard_file *f = &s->files[i];
        if (!json_is_object(o)) {
            c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: a \"files\" entry is not an object", c->path);
            return;
        }
        json_t *name = field(c, o, "file", JSON_STRING);
        if (!name)
            return;
        snprintf(f->name, sizeof f->name, "%s", json_string_value(name));
        if (strchr(f->name, '/') || f->name[0] == '.' || strlen(json_string_value(name)) >= sizeof f->name) {
            c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: bad file name \"%s\"", c->path,
                              json_string_value(name));
            return;
        }
        f->sequences = get_u64(c, o, "sequences", INT64_MAX);
        f->first = get_u64(c, o, "first", INT64_MAX);
        f->tokens = get_u64(c, o, "tokens", INT64_MAX);
        f->bytes = get_u64(c, o, "bytes", INT64_MAX);
        if (layout == TUPE_LAYOUT_MEGATRON)
            f->check = get_hash(c, o, "check");
        if (!c->rc && f->first != first)
            c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: file %s does not start where the previous "
                              "one ends", c->path, f->name);
        first += f->sequences;
    }
    if (!c->rc && first != s->sequences)
        c->rc = tupe_fail(c->e, TUPE_EDATA, "%s: the files hold %" PRIu64 " sequences, not %"
                          PRIu64, c->path, first, s->sequences);
}

int tupe_manifest_read(const char *dir, tupe_shard_meta *m, tupe_err *e)
{
    memset(m, 0, sizeof *m);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, TUPE_MANIFEST);
    struct stat st;
    if (stat(dir, &st) != 0)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", dir);
    if (!S_ISDIR(st.st_mode))
        return tupe_fail(e, TUPE_ENOINPUT, "%s: not a shard directory (not a directory)", dir);
    if (stat(path, &st) != 0)
        return tupe_fail(e, TUPE_ENOINPUT, "%s: not a shard directory (no %s; an interrupted "
                         "tupe-shard leaves none)", dir, TUPE_MANIFEST);
    char *text;
    size_t len;
    int rc = tupe_read_text(path, &text, &len, (size_t)1 << 30, e);
    if (rc)
        return rc;
    rc = tupe_manifest_parse(text, len, path, m, e);
    free(text);
    return rc;
}

int tupe_manifest_parse(const char *text, size_t len, const char *path, tupe_shard_meta *m,
                        tupe_err *e)
{
    memset(m, 0, sizeof *m);
    if (!path)
        path = "(buffer)";
    json_error_t je;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tupe_fail_linecol(e, TUPE_EDATA, path, (uint64_t)(je.line > 0 ? je.line : 1),
                                 (uint64_t)(je.column > 0 ? je.column : 1), "%s", je.text);
    mctx c = {path, e, 0};
    json_t *fmt = field(&c, root, "format", JSON_STRING);
    if (fmt && strcmp(json_string_value(fmt), TUPE_MANIFEST_FORMAT) != 0)
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: format is \"%s\", not \"%s\"", path,
                         json_string_value(fmt), TUPE_MANIFEST_FORMAT);
    uint64_t ver = get_u64(&c, root, "version", 1000);
    if (!c.rc && ver != TUPE_SHARD_VERSION)
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: version %" PRIu64 " is not supported (this is %d)",
                         path, ver, TUPE_SHARD_VERSION);
    m->layout = get_choice(&c, root, "layout", "zstd", "raw", "megatron");
    m->seq_len = (uint32_t)get_u64(&c, root, "seq_len", MAX_SEQ_LEN);
    m->id_bytes = (uint32_t)get_u64(&c, root, "id_bytes", 4);
    m->rec_bytes = (uint32_t)get_u64(&c, root, "record_bytes", UINT32_MAX);
    m->vocab_size = (uint32_t)get_u64(&c, root, "vocab_size", UINT32_MAX);
    m->vocab_hash = get_hash(&c, root, "vocab_hash");
    json_t *sp = field(&c, root, "special", JSON_OBJECT);
    static const char *spn[TUPE_SP_COUNT] = {"pad", "unk", "cls", "sep", "mask"};
    int special_range = 1;
    for (int i = 0; i < TUPE_SP_COUNT && sp; i++) {
        json_t *v = field(&c, sp, spn[i], JSON_INTEGER);
        json_int_t x = v ? json_integer_value(v) : -1;
        special_range &= x >= -1 && x <= INT32_MAX;
        m->special[i] = special_range ? (int32_t)x : -1;
    }
    m->brk = get_choice(&c, root, "break", "full", "doc", NULL);
    json_t *sh = json_object_get(root, "shuffled");
    m->shuffled = json_is_true(sh);
    m->seed = get_u64(&c, root, "seed", INT64_MAX);
    m->set_id = get_hash(&c, root, "set_id");
    if (m->layout == TUPE_LAYOUT_ZSTD)
        m->level = (int)get_u64(&c, root, "zstd_level", 22);
    if (m->layout == TUPE_LAYOUT_MEGATRON) {
        m->megatron_dtype = (int)get_u64(&c, root, "megatron_dtype", 8);
    } else {
        m->frame_bytes = get_u64(&c, root, "frame_bytes", INT64_MAX);
        m->frame_records = (uint32_t)get_u64(&c, root, "frame_records", UINT32_MAX);
    }
    json_t *in = field(&c, root, "input", JSON_OBJECT);
    if (in) {
        m->in_documents = get_u64(&c, in, "documents", INT64_MAX);
        m->in_empty = get_u64(&c, in, "empty_documents", INT64_MAX);
        m->in_tokens = get_u64(&c, in, "tokens", INT64_MAX);
        m->in_hash = get_hash(&c, in, "hash");
    }
    json_t *splits = field(&c, root, "splits", JSON_OBJECT);
    for (int s = 0; s < TUPE_SPLITS && splits && !c.rc; s++) {
        json_t *o = field(&c, splits, tupe_split_name(s), JSON_OBJECT);
        if (o)
            read_split(&c, o, &m->split[s], m->layout);
    }
    json_decref(root);
    if (!c.rc && (m->id_bytes != 2 && m->id_bytes != 4))
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: id_bytes is not 2 or 4", path);
    if (!c.rc && m->seq_len < 2)
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: seq_len below 2", path);
    if (!c.rc && m->rec_bytes != tupe_rec_bytes(m->seq_len, m->id_bytes))
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: record_bytes does not match seq_len", path);
    if (!c.rc && (m->vocab_size == 0 || (m->id_bytes == 2 && m->vocab_size > 65536)))
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: vocab_size %u is out of range for %u-byte ids", path,
                         m->vocab_size, m->id_bytes);
    if (!c.rc && (!special_range || !specials_ok(m->special, m->vocab_size)))
        c.rc = tupe_fail(e, TUPE_EDATA, "%s: a special id is outside the vocabulary", path);
    if (c.rc)
        tupe_shard_meta_free(m);
    return c.rc;
}

void tupe_shard_meta_free(tupe_shard_meta *m)
{
    for (int s = 0; s < TUPE_SPLITS; s++) {
        free(m->split[s].files);
        m->split[s].files = NULL;
        m->split[s].nfiles = 0;
    }
}

int tupe_shard_header_matches(const tupe_shard_header *h, const tupe_shard_meta *m, int split,
                              uint32_t shard, const char *path, tupe_err *e)
{
    const tupe_shard_file *f = &m->split[split].files[shard];
    const char *what = NULL;
    if (h->set_id != m->set_id)
        what = "it belongs to another shard set (set id differs from the manifest)";
    else if (h->seq_len != m->seq_len || h->id_bytes != m->id_bytes)
        what = "its sequence length or id width differs from the manifest";
    else if (h->vocab_size != m->vocab_size || h->vocab_hash != m->vocab_hash)
        what = "its vocabulary differs from the manifest";
    else if (memcmp(h->special, m->special, sizeof h->special) != 0)
        what = "its special ids differ from the manifest";
    else if (h->split != (uint32_t)split || h->shard != shard ||
             h->shards != m->split[split].nfiles)
        what = "its split or shard number differs from the manifest";
    else if (h->records != f->sequences || h->first != f->first)
        what = "its record count differs from the manifest";
    else if (((h->flags & TUPE_SHARD_ZSTD) != 0) != (m->layout == TUPE_LAYOUT_ZSTD))
        what = "its layout differs from the manifest";
    else if (h->frame_records != m->frame_records)
        what = "its frame size differs from the manifest";
    if (what)
        return tupe_fail(e, TUPE_EDATA, "%s: does not match %s: %s", path, TUPE_MANIFEST, what);
    return 0;
}
