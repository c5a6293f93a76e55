#include "text/tokstream.h"

#include <stdlib.h>
#include <string.h>

#include "base/byteorder.h"
#include "base/checksum.h"


void tupe_tok_header_init(tupe_tok_header *h, uint32_t vocab_size, uint64_t vocab_hash)
{
    memset(h, 0, sizeof *h);
    h->version = TUPE_TOK_VERSION;
    h->id_bytes = vocab_size <= 65536 ? 2 : 4;
    h->vocab_size = vocab_size;
    h->vocab_hash = vocab_hash;
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        h->special[i] = -1;
}

void tupe_tok_header_encode(const tupe_tok_header *h, unsigned char out[TUPE_TOK_HEADER])
{
    memset(out, 0, TUPE_TOK_HEADER);
    memcpy(out, TUPE_TOK_MAGIC, 8);
    tupe_put32le(out + 8, h->version);
    tupe_put32le(out + 12, h->id_bytes);
    tupe_put32le(out + 16, h->vocab_size);
    tupe_put32le(out + 20, h->flags);
    tupe_put64le(out + 24, h->vocab_hash);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        tupe_put32le(out + 32 + 4 * i, (uint32_t)h->special[i]);
    tupe_put32le(out + 60, tupe_hash32(out, 60));
}

int tupe_tok_header_decode(tupe_tok_header *h, const unsigned char in[TUPE_TOK_HEADER],
                           const char *path, uint64_t off, tupe_err *e)
{
    if (memcmp(in, TUPE_TOK_MAGIC, 8) != 0)
        return tupe_fail_byte(e, TUPE_EDATA, path, off,
                              "not a tupe token stream (bad magic; expected \"%s\")",
                              TUPE_TOK_MAGIC);
    h->version = tupe_get32le(in + 8);
    if (h->version != TUPE_TOK_VERSION)
        return tupe_fail_byte(e, TUPE_EDATA, path, off + 8,
                              "token stream version %u is not supported (this is version %d)",
                              h->version, TUPE_TOK_VERSION);
    if (tupe_get32le(in + 60) != tupe_hash32(in, 60))
        return tupe_fail_byte(e, TUPE_EDATA, path, off + 60, "token stream header checksum mismatch");
    h->id_bytes = tupe_get32le(in + 12);
    h->vocab_size = tupe_get32le(in + 16);
    h->flags = tupe_get32le(in + 20);
    h->vocab_hash = tupe_get64le(in + 24);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        h->special[i] = (int32_t)tupe_get32le(in + 32 + 4 * i);
    if (h->id_bytes != 2 && h->id_bytes != 4)
        return tupe_fail_byte(e, TUPE_EDATA, path, off + 12, "id width %u is not 2 or 4",
                              h->id_bytes);
    if (h->vocab_size == 0 || (h->id_bytes == 2 && h->vocab_size > 65536))
        return tupe_fail_byte(e, TUPE_EDATA, path, off + 16,
                              "vocabulary size %u does not fit %u-byte ids", h->vocab_size,
                              h->id_bytes);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        if (h->special[i] < -1 || (h->special[i] >= 0 && (uint32_t)h->special[i] >= h->vocab_size))
            return tupe_fail_byte(e, TUPE_EDATA, path, off + 32 + 4 * (uint64_t)i,
                                  "special id %d is outside the vocabulary", h->special[i]);
    return 0;
}

size_t tupe_tok_record_size(const tupe_tok_header *h, size_t n) { return 8 + n * h->id_bytes; }

void tupe_tok_record_encode(const tupe_tok_header *h, const uint32_t *ids, size_t n, void *outv)
{
    unsigned char *out = outv, *p = out + 8;
    if (h->id_bytes == 2) {
        for (size_t i = 0; i < n; i++)
            p[2 * i] = (unsigned char)ids[i], p[2 * i + 1] = (unsigned char)(ids[i] >> 8);
    } else {
        for (size_t i = 0; i < n; i++)
            tupe_put32le(p + 4 * i, ids[i]);
    }
    tupe_put32le(out, (uint32_t)n);
    tupe_put32le(out + 4, (uint32_t)tupe_hash64_seed(p, n * h->id_bytes, n));
}

/* ---- reading ---------------------------------------------------------------------------- */

struct tupe_tokr {
    tupe_in *in;
    int own;
    tupe_tok_header h;
    uint64_t docs, tokens;         /* in the current stream */
    uint64_t all_docs, all_tokens; /* over all concatenated streams */
    unsigned char *raw;
    uint32_t *ids;
    size_t cap;
    int done;
};

static int read_header(tupe_tokr *r, tupe_tok_header *h, tupe_err *e)
{
    unsigned char buf[TUPE_TOK_HEADER];
    uint64_t at = tupe_in_offset(r->in);
    size_t got;
    int rc = tupe_in_read(r->in, buf, sizeof buf, &got, e);
    if (rc)
        return rc;
    if (got == 0 && at == 0)
        return tupe_fail(e, TUPE_EDATA, "%s: empty input (expected a token stream)",
                         tupe_path_name(tupe_in_path(r->in)));
    if (got < sizeof buf && memcmp(buf, TUPE_TOK_MAGIC, got < 8 ? got : 8) != 0)
        return tupe_fail_byte(e, TUPE_EDATA, tupe_in_path(r->in), at,
                              "not a tupe token stream (bad magic; expected \"%s\")",
                              TUPE_TOK_MAGIC);
    if (got < sizeof buf)
        return tupe_fail_byte(e, TUPE_EDATA, tupe_in_path(r->in), at,
                              "truncated token stream header (%zu of %d bytes)", got,
                              TUPE_TOK_HEADER);
    return tupe_tok_header_decode(h, buf, tupe_in_path(r->in), at, e);
}

int tupe_tokr_from(tupe_tokr **rp, tupe_in *in, tupe_err *e)
{
    tupe_tokr *r = calloc(1, sizeof *r);
    if (!r)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    r->in = in;
    int rc = read_header(r, &r->h, e);
    if (rc) {
        free(r);
        return rc;
    }
    *rp = r;
    return 0;
}

int tupe_tokr_open(tupe_tokr **rp, const char *path, tupe_err *e)
{
    tupe_in *in;
    int rc = tupe_in_open(&in, path, e);
    if (rc)
        return rc;
    rc = tupe_tokr_from(rp, in, e);
    if (rc) {
        tupe_in_close(in);
        return rc;
    }
    (*rp)->own = 1;
    return 0;
}

const tupe_tok_header *tupe_tokr_header(const tupe_tokr *r) { return &r->h; }
uint64_t tupe_tokr_docs(const tupe_tokr *r) { return r->all_docs; }
uint64_t tupe_tokr_tokens(const tupe_tokr *r) { return r->all_tokens; }
uint64_t tupe_tokr_offset(const tupe_tokr *r) { return tupe_in_offset(r->in); }

static int fail(tupe_tokr *r, uint64_t at, int code, tupe_err *e, const char *msg)
{
    tupe_fail_byte(e, code, tupe_in_path(r->in), at, "%s", msg);
    return -1;
}

int tupe_tokr_next(tupe_tokr *r, const uint32_t **ids, size_t *n, tupe_err *e)
{
    const char *path = tupe_in_path(r->in);
    for (;;) {
        if (r->done)
            return 0;
        unsigned char hdr[8];
        uint64_t at = tupe_in_offset(r->in);
        size_t got;
        if (tupe_in_read(r->in, hdr, 8, &got, e))
            return -1;
        if (got < 8) {
            tupe_fail_byte(e, TUPE_EDATA, path, at,
                           "token stream ends without its end marker after %llu documents "
                           "(truncated)", (unsigned long long)r->docs);
            return -1;
        }
        uint32_t cnt = tupe_get32le(hdr), chk = tupe_get32le(hdr + 4);
        if (cnt == TUPE_TOK_END) {
            unsigned char tail[16];
            if (tupe_in_read(r->in, tail, 16, &got, e))
                return -1;
            if (got < 16) {
                tupe_fail_byte(e, TUPE_EDATA, path, at, "truncated end marker");
                return -1;
            }
            if (chk != tupe_hash32(tail, 16))
                return fail(r, at, TUPE_EDATA, e, "end marker checksum mismatch (stream corrupt)");
            uint64_t d = tupe_get64le(tail), t = tupe_get64le(tail + 8);
            if (d != r->docs || t != r->tokens) {
                tupe_fail_byte(e, TUPE_EDATA, path, at,
                               "end marker counts %llu documents and %llu ids, but %llu and %llu "
                               "were read (stream corrupt)", (unsigned long long)d,
                               (unsigned long long)t, (unsigned long long)r->docs,
                               (unsigned long long)r->tokens);
                return -1;
            }
            /* Another stream may follow (concatenation); it must use the same vocabulary. */
            unsigned char peek;
            uint64_t next_at = tupe_in_offset(r->in);
            if (tupe_in_read(r->in, &peek, 1, &got, e))
                return -1;
            if (got == 0) {
                r->done = 1;
                return 0;
            }
            unsigned char hb[TUPE_TOK_HEADER];
            hb[0] = peek;
            size_t got2;
            if (tupe_in_read(r->in, hb + 1, TUPE_TOK_HEADER - 1, &got2, e))
                return -1;
            if (got2 < TUPE_TOK_HEADER - 1) {
                tupe_fail_byte(e, TUPE_EDATA, path, next_at,
                               "unexpected data after the end marker (%zu bytes)", got2 + 1);
                return -1;
            }
            tupe_tok_header h2;
            if (tupe_tok_header_decode(&h2, hb, path, next_at, e)) {
                tupe_err_wrap(e, "after the end of a stream");
                return -1;
            }
            if (h2.vocab_hash != r->h.vocab_hash || h2.vocab_size != r->h.vocab_size) {
                tupe_fail_byte(e, TUPE_EDATA, path, next_at,
                               "concatenated stream uses a different vocabulary (size %u, hash "
                               "%016llx; first stream: size %u, hash %016llx)", h2.vocab_size,
                               (unsigned long long)h2.vocab_hash, r->h.vocab_size,
                               (unsigned long long)r->h.vocab_hash);
                return -1;
            }
            r->h.id_bytes = h2.id_bytes;
            r->docs = r->tokens = 0;
            continue;
        }
        if (cnt > TUPE_TOK_MAX_DOC) {
            tupe_fail_byte(e, TUPE_EDATA, path, at,
                           "document %llu claims %u ids, more than the limit of %u (stream corrupt)",
                           (unsigned long long)r->all_docs, cnt, TUPE_TOK_MAX_DOC);
            return -1;
        }
        size_t bytes = (size_t)cnt * r->h.id_bytes;
        if (cnt > r->cap) {
            size_t nc = r->cap ? r->cap : 1024;
            while (nc < cnt)
                nc *= 2;
            unsigned char *nr = realloc(r->raw, nc * 4);
            uint32_t *ni = nr ? realloc(r->ids, nc * sizeof *ni) : NULL;
            if (!nr || !ni) {
                if (nr)
                    r->raw = nr;
                tupe_fail(e, TUPE_EFAIL, "out of memory");
                return -1;
            }
            r->raw = nr;
            r->ids = ni;
            r->cap = nc;
        }
        if (tupe_in_read(r->in, r->raw, bytes, &got, e))
            return -1;
        if (got < bytes) {
            tupe_fail_byte(e, TUPE_EDATA, path, at,
                           "truncated: stream ends inside document %llu (%zu of %zu bytes)",
                           (unsigned long long)r->all_docs, got, bytes);
            return -1;
        }
        if ((uint32_t)tupe_hash64_seed(r->raw, bytes, cnt) != chk) {
            tupe_fail_byte(e, TUPE_EDATA, path, at,
                           "document %llu: checksum mismatch (stream corrupt)",
                           (unsigned long long)r->all_docs);
            return -1;
        }
        uint32_t v = r->h.vocab_size;
        if (r->h.id_bytes == 2) {
            for (size_t i = 0; i < cnt; i++)
                r->ids[i] = (uint32_t)r->raw[2 * i] | (uint32_t)r->raw[2 * i + 1] << 8;
        } else {
            for (size_t i = 0; i < cnt; i++)
                r->ids[i] = tupe_get32le(r->raw + 4 * i);
        }
        for (size_t i = 0; i < cnt; i++)
            if (r->ids[i] >= v) {
                tupe_fail_byte(e, TUPE_EDATA, path, at + 8 + i * r->h.id_bytes,
                               "document %llu: id %u is outside the vocabulary (size %u)",
                               (unsigned long long)r->all_docs, r->ids[i], v);
                return -1;
            }
        r->docs++;
        r->all_docs++;
        r->tokens += cnt;
        r->all_tokens += cnt;
        *ids = r->ids;
        *n = cnt;
        return 1;
    }
}

void tupe_tokr_close(tupe_tokr *r)
{
    if (!r)
        return;
    if (r->own)
        tupe_in_close(r->in);
    free(r->raw);
    free(r->ids);
    free(r);
}

/* ---- writing ---------------------------------------------------------------------------- */

struct tupe_tokw {
    tupe_out *out;
    tupe_tok_header h;
    uint64_t docs, tokens;
    unsigned char *buf;
    size_t cap;
};

int tupe_tokw_open(tupe_tokw **wp, const char *path, const tupe_tok_header *h, tupe_err *e)
{
    if (h->id_bytes != 2 && h->id_bytes != 4)
        return tupe_fail(e, TUPE_EFAIL, "token stream: id width %u is not 2 or 4", h->id_bytes);
    tupe_tokw *w = calloc(1, sizeof *w);
    if (!w)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    w->h = *h;
    w->h.version = TUPE_TOK_VERSION;
    int rc = tupe_out_open(&w->out, path, e);
    if (rc) {
        free(w);
        return rc;
    }
    unsigned char hb[TUPE_TOK_HEADER];
    tupe_tok_header_encode(&w->h, hb);
    rc = tupe_out_write(w->out, hb, sizeof hb, e);
    if (rc) {
        tupe_out_abort(w->out);
        free(w);
        return rc;
    }
    *wp = w;
    return 0;
}

int tupe_tokw_doc(tupe_tokw *w, const uint32_t *ids, size_t n, tupe_err *e)
{
    if (n > TUPE_TOK_MAX_DOC)
        return tupe_fail(e, TUPE_EDATA, "document of %zu ids is longer than the limit of %u",
                         n, TUPE_TOK_MAX_DOC);
    for (size_t i = 0; i < n; i++)
        if (ids[i] >= w->h.vocab_size)
            return tupe_fail(e, TUPE_EFAIL, "id %u is outside the vocabulary (size %u)", ids[i],
                             w->h.vocab_size);
    size_t need = tupe_tok_record_size(&w->h, n);
    if (need > w->cap) {
        unsigned char *nb = realloc(w->buf, need);
        if (!nb)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        w->buf = nb;
        w->cap = need;
    }
    tupe_tok_record_encode(&w->h, ids, n, w->buf);
    w->docs++;
    w->tokens += n;
    return tupe_out_write(w->out, w->buf, need, e);
}

int tupe_tokw_raw(tupe_tokw *w, const void *buf, size_t bytes, uint64_t docs, uint64_t tokens,
                  tupe_err *e)
{
    w->docs += docs;
    w->tokens += tokens;
    return tupe_out_write(w->out, buf, bytes, e);
}

int tupe_tokw_close(tupe_tokw *w, tupe_err *e)
{
    unsigned char end[24];
    tupe_put32le(end, TUPE_TOK_END);
    tupe_put64le(end + 8, w->docs);
    tupe_put64le(end + 16, w->tokens);
    tupe_put32le(end + 4, tupe_hash32(end + 8, 16));
    int rc = tupe_out_write(w->out, end, sizeof end, e);
    if (rc)
        tupe_out_abort(w->out);
    else
        rc = tupe_out_commit(w->out, e);
    free(w->buf);
    free(w);
    return rc;
}

void tupe_tokw_abort(tupe_tokw *w)
{
    if (!w)
        return;
    tupe_out_abort(w->out);
    free(w->buf);
    free(w);
}
