#include "train/rtdprobe.h"

#include <stdlib.h>
#include <string.h>

#include "base/byteorder.h"
#include "base/checksum.h"
#include "base/fileio.h"

#define HEADER 64
#define END_MARK 0xFFFFFFFFu
#define END_SIZE 16
#define MAX_LEN (1u << 24)
#define MAX_FILE (1ull << 40)
static const char MAGIC[8] = {'T', 'U', 'P', 'E', 'P', 'R', 'O', 'B'};

struct tupe_rtdprobe_writer {
    tupe_out *out;
    tupe_rtdprobe_info info;
    uint64_t count;
    unsigned char *buf;
    size_t cap;
};

static void put_f64(unsigned char *p, double v)
{
    uint64_t u;
    memcpy(&u, &v, sizeof u);
    tupe_put64le(p, u);
}

static double get_f64(const unsigned char *p)
{
    uint64_t u = tupe_get64le(p);
    double v;
    memcpy(&v, &u, sizeof v);
    return v;
}

int tupe_rtdprobe_create(tupe_rtdprobe_writer **out, const char *path, const tupe_rtdprobe_info *info,
                      tupe_err *e)
{
    *out = NULL;
    tupe_rtdprobe_writer *w = calloc(1, sizeof *w);
    if (!w)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    w->info = *info;
    unsigned char h[HEADER] = {0};
    memcpy(h, MAGIC, sizeof MAGIC);
    tupe_put32le(h + 8, 1);
    tupe_put32le(h + 12, info->vocab_size);
    tupe_put64le(h + 16, info->vocab_hash);
    tupe_put64le(h + 24, info->noise_seed);
    tupe_put32le(h + 32, info->noise_step);
    tupe_put32le(h + 36, (uint32_t)info->mask_id);
    put_f64(h + 40, info->mask_prob);
    tupe_put32le(h + 60, tupe_hash32(h, 60));
    int rc = tupe_out_open(&w->out, path, e);
    if (rc || (rc = tupe_out_write(w->out, h, sizeof h, e))) {
        tupe_rtdprobe_abort(w);
        return rc;
    }
    *out = w;
    return 0;
}

int tupe_rtdprobe_add(tupe_rtdprobe_writer *w, uint64_t key, uint32_t len, const int32_t *ids,
                   const int32_t *labels, uint32_t m, const int32_t *pos, const int32_t *orig,
                   const int32_t *gen_ids, tupe_err *e)
{
    if (len < 1 || len > MAX_LEN || m > len)
        return tupe_fail(e, TUPE_EFAIL, "a probe sequence of %u tokens with %u masked", len, m);
    size_t n = 16 + 5 * (size_t)len + 9 * (size_t)m + 4;
    if (n > w->cap) {
        unsigned char *b = realloc(w->buf, n);
        if (!b)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        w->buf = b;
        w->cap = n;
    }
    unsigned char *p = w->buf;
    tupe_put32le(p, len);
    tupe_put32le(p + 4, m);
    tupe_put64le(p + 8, key);
    p += 16;
    for (uint32_t t = 0; t < len; t++, p += 4)
        tupe_put32le(p, (uint32_t)ids[t]);
    for (uint32_t t = 0; t < len; t++)
        *p++ = labels[t] != 0;
    for (uint32_t k = 0; k < m; k++, p += 9) {
        tupe_put32le(p, (uint32_t)pos[k]);
        tupe_put32le(p + 4, (uint32_t)orig[k]);
        p[8] = gen_ids[pos[k]] == w->info.mask_id;
    }
    tupe_put32le(p, tupe_hash32(w->buf, n - 4));
    w->count++;
    return tupe_out_write(w->out, w->buf, n, e);
}

int tupe_rtdprobe_commit(tupe_rtdprobe_writer *w, tupe_err *e)
{
    unsigned char t[END_SIZE];
    tupe_put32le(t, END_MARK);
    tupe_put64le(t + 4, w->count);
    tupe_put32le(t + 12, tupe_hash32(t, 12));
    int rc = tupe_out_write(w->out, t, sizeof t, e);
    if (rc)
        tupe_out_abort(w->out);
    else
        rc = tupe_out_commit(w->out, e);
    w->out = NULL;
    tupe_rtdprobe_abort(w);
    return rc;
}

void tupe_rtdprobe_abort(tupe_rtdprobe_writer *w)
{
    if (!w)
        return;
    tupe_out_abort(w->out);
    free(w->buf);
    free(w);
}

/* ---- reading ------------------------------------------------------------------------------- */

void tupe_rtdprobe_free(tupe_rtdprobe *p)
{
    if (!p)
        return;
    free(p->key), free(p->len), free(p->nmask), free(p->tok), free(p->msk);
    free(p->ids), free(p->label), free(p->mpos), free(p->morig), free(p->mkind);
    free(p);
}

/* The semantic checks of one record at b (n tokens, m masked; its check already verified):
 * 0, or the offending field's offset within the record and what is wrong. */
static size_t check_record(const unsigned char *b, uint32_t n, uint32_t m, uint32_t V,
                           unsigned char *seen, const char **why)
{
    const unsigned char *ids = b + 16, *lab = ids + 4 * (size_t)n, *mk = lab + n;
    for (uint32_t t = 0; t < n; t++) {
        if (tupe_get32le(ids + 4 * t) >= V)
            return *why = "a corrupted id outside the vocabulary", (size_t)(ids + 4 * t - b);
        if (lab[t] > 1)
            return *why = "a label that is neither 0 (real) nor 1 (replaced)", (size_t)(lab + t - b);
    }
    memset(seen, 0, n);
    for (uint32_t k = 0; k < m; k++) {
        const unsigned char *q = mk + 9 * (size_t)k;
        uint32_t pos = tupe_get32le(q), orig = tupe_get32le(q + 4);
        if (pos >= n)
            return *why = "a masked position outside the sequence", (size_t)(q - b);
        if (seen[pos])
            return *why = "a masked position given twice", (size_t)(q - b);
        seen[pos] = 1;
        if (orig >= V)
            return *why = "an original token outside the vocabulary", (size_t)(q + 4 - b);
        if (q[8] > 1)
            return *why = "a mask kind that is neither 0 (kept) nor 1 ([MASK])", (size_t)(q + 8 - b);
        if (lab[pos] != (tupe_get32le(ids + 4 * pos) != orig))
            return *why = "a label that is not 'the token differs from the original'",
                   (size_t)(lab + pos - b);
    }
    for (uint32_t t = 0; t < n; t++)
        if (lab[t] && !seen[t])
            return *why = "a position labelled replaced that was not masked", (size_t)(lab + t - b);
    return 0;
}

/* One pass over the records: counts them (p's arrays NULL) or fills p. */
static int scan(const unsigned char *buf, size_t size, const char *path, tupe_rtdprobe *p,
                unsigned char *seen, size_t *ntok, size_t *nmsk, tupe_err *e)
{
    size_t off = HEADER, nt = 0, nm = 0;
    uint64_t i = 0;
    uint32_t V = p->info.vocab_size;
    for (;;) {
        if (size - off < 4)
            return tupe_fail_byte(e, TUPE_EDATA, path, off, "truncated: no end marker after %llu "
                                  "sequences", (unsigned long long)i);
        uint32_t n = tupe_get32le(buf + off);
        if (n == END_MARK) {
            if (size - off < END_SIZE)
                return tupe_fail_byte(e, TUPE_EDATA, path, off, "truncated end marker");
            if (tupe_get32le(buf + off + 12) != tupe_hash32(buf + off, 12))
                return tupe_fail_byte(e, TUPE_EDATA, path, off + 12, "end marker check mismatch");
            if (tupe_get64le(buf + off + 4) != i)
                return tupe_fail_byte(e, TUPE_EDATA, path, off + 4, "the end marker counts %llu "
                                      "sequences, the file holds %llu",
                                      (unsigned long long)tupe_get64le(buf + off + 4),
                                      (unsigned long long)i);
            if (size - off != END_SIZE)
                return tupe_fail_byte(e, TUPE_EDATA, path, off + END_SIZE, "bytes after the end "
                                      "marker");
            break;
        }
        if (size - off < 16)
            return tupe_fail_byte(e, TUPE_EDATA, path, off, "truncated sequence header");
        uint32_t m = tupe_get32le(buf + off + 4);
        if (n < 1 || n > MAX_LEN)
            return tupe_fail_byte(e, TUPE_EDATA, path, off, "a sequence of %u tokens (1 to %u)", n,
                                  MAX_LEN);
        if (m > n)
            return tupe_fail_byte(e, TUPE_EDATA, path, off + 4, "%u masked positions in a "
                                  "sequence of %u tokens", m, n);
        size_t rec = 16 + 5 * (size_t)n + 9 * (size_t)m + 4;
        if (size - off < rec)
            return tupe_fail_byte(e, TUPE_EDATA, path, off, "truncated sequence (%zu bytes, %zu "
                                  "left)", rec, size - off);
        const unsigned char *b = buf + off;
        if (tupe_get32le(b + rec - 4) != tupe_hash32(b, rec - 4))
            return tupe_fail_byte(e, TUPE_EDATA, path, off + rec - 4, "sequence %llu: check "
                                  "mismatch (corrupt)", (unsigned long long)i);
        const char *why = NULL;
        size_t at = check_record(b, n, m, V, seen, &why);
        if (why)
            return tupe_fail_byte(e, TUPE_EDATA, path, off + at, "sequence %llu: %s",
                                  (unsigned long long)i, why);
        if (p->key) {
            p->key[i] = tupe_get64le(b + 8);
            p->len[i] = n, p->nmask[i] = m, p->tok[i] = nt, p->msk[i] = nm;
            for (uint32_t t = 0; t < n; t++) {
                p->ids[nt + t] = (int32_t)tupe_get32le(b + 16 + 4 * (size_t)t);
                p->label[nt + t] = b[16 + 4 * (size_t)n + t];
            }
            const unsigned char *mk = b + 16 + 5 * (size_t)n;
            for (uint32_t k = 0; k < m; k++) {
                p->mpos[nm + k] = (int32_t)tupe_get32le(mk + 9 * (size_t)k);
                p->morig[nm + k] = (int32_t)tupe_get32le(mk + 9 * (size_t)k + 4);
                p->mkind[nm + k] = mk[9 * (size_t)k + 8];
            }
        }
        p->max_len = n > p->max_len ? n : p->max_len;
        nt += n, nm += m, off += rec, i++;
    }
    p->count = i;
    *ntok = nt, *nmsk = nm;
    return 0;
}

static int parse(const unsigned char *buf, size_t size, const char *path, tupe_rtdprobe *p, tupe_err *e)
{
    if (size < HEADER || memcmp(buf, MAGIC, sizeof MAGIC) != 0)
        return tupe_fail_byte(e, TUPE_EDATA, path, 0, "not a probe of replaced-token detection "
                              "(no TUPEPROB header)");
    if (tupe_get32le(buf + 60) != tupe_hash32(buf, 60))
        return tupe_fail_byte(e, TUPE_EDATA, path, 60, "header check mismatch (corrupt)");
    if (tupe_get32le(buf + 8) != 1)
        return tupe_fail_byte(e, TUPE_EDATA, path, 8, "probe version %u (this tupe reads 1)",
                              tupe_get32le(buf + 8));
    p->info.vocab_size = tupe_get32le(buf + 12);
    p->info.vocab_hash = tupe_get64le(buf + 16);
    p->info.noise_seed = tupe_get64le(buf + 24);
    p->info.noise_step = tupe_get32le(buf + 32);
    p->info.mask_id = (int32_t)tupe_get32le(buf + 36);
    p->info.mask_prob = get_f64(buf + 40);
    if (p->info.vocab_size < 1)
        return tupe_fail_byte(e, TUPE_EDATA, path, 12, "a vocabulary of 0 tokens");
    unsigned char *seen = malloc(MAX_LEN);
    if (!seen)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t nt, nm;
    int rc = scan(buf, size, path, p, seen, &nt, &nm, e);
    if (!rc) {
        size_t c = p->count ? (size_t)p->count : 1;
        p->key = malloc(c * sizeof *p->key);
        p->len = malloc(c * sizeof *p->len);
        p->nmask = malloc(c * sizeof *p->nmask);
        p->tok = malloc(c * sizeof *p->tok);
        p->msk = malloc(c * sizeof *p->msk);
        p->ids = malloc((nt ? nt : 1) * sizeof *p->ids);
        p->label = malloc((nt ? nt : 1) * sizeof *p->label);
        p->mpos = malloc((nm ? nm : 1) * sizeof *p->mpos);
        p->morig = malloc((nm ? nm : 1) * sizeof *p->morig);
        p->mkind = malloc((nm ? nm : 1) * sizeof *p->mkind);
        if (!p->key || !p->len || !p->nmask || !p->tok || !p->msk || !p->ids || !p->label ||
            !p->mpos || !p->morig || !p->mkind)
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        else
            rc = scan(buf, size, path, p, seen, &nt, &nm, e);
    }
    free(seen);
    return rc;
}

int tupe_rtdprobe_read(tupe_rtdprobe **out, const char *path, tupe_err *e)
{
    *out = NULL;
    char *buf;
    size_t size;
    int rc = tupe_read_file(path, &buf, &size, MAX_FILE, e);
    if (rc)
        return rc;
    tupe_rtdprobe *p = calloc(1, sizeof *p);
    if (!p)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    else if ((rc = parse((const unsigned char *)buf, size, path, p, e)))
        tupe_rtdprobe_free(p);
    else
        *out = p;
    free(buf);
    return rc;
}

void tupe_rtdprobe_inputs(const tupe_rtdprobe *p, uint64_t i, int32_t *gen, int32_t *orig)
{
    const int32_t *ids = p->ids + p->tok[i];
    for (uint32_t t = 0; t < p->len[i]; t++) {
        if (gen)
            gen[t] = ids[t];
        if (orig)
            orig[t] = ids[t];
    }
    for (uint32_t k = 0; k < p->nmask[i]; k++) {
        size_t j = p->msk[i] + k;
        int32_t t = p->mpos[j];
        if (gen)
            gen[t] = p->mkind[j] ? p->info.mask_id : p->morig[j];
        if (orig)
            orig[t] = p->morig[j];
    }
}
