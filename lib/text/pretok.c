#include "text/pretok.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "text/unicode.h"

enum { A_WORD = 0, A_WS = 1, A_PUNCT = 2, A_DELETE = 3 };

struct tupe_pretok {
    tupe_pretok_opts o;
    int map;           /* TUPE_UNI_MAP_* applied to every character, or -1 for none */
    uint8_t acls[128]; /* ASCII fast path: class of each byte ... */
    uint8_t aout[128]; /* ... and what it becomes */
};

tupe_pretok *tupe_pretok_new(const tupe_pretok_opts *o)
{
    tupe_pretok *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->o = *o;
    if (o->kind == TUPE_PRETOK_BERT && o->strip_accents)
        p->map = o->lowercase ? TUPE_UNI_MAP_LOWER_STRIP : TUPE_UNI_MAP_STRIP;
    else
        p->map = o->lowercase ? TUPE_UNI_MAP_LOWER : -1;
    for (uint32_t c = 0; c < 128; c++) {
        const tupe_uni_entry *e = tupe_uni_get(c);
        uint8_t tmp[TUPE_UNI_MAX_OUT];
        size_t n = 0;
        const uint8_t *m = p->map >= 0 ? tupe_uni_mapped(c, e, p->map, tmp, &n) : NULL;
        p->aout[c] = m && n == 1 ? m[0] : (uint8_t)c;
        if (o->kind == TUPE_PRETOK_WHITESPACE)
            p->acls[c] = c == ' ' || c == '\t' || c == '\r' || c == '\n' ? A_WS : A_WORD;
        else if (e->flags & TUPE_UNI_DELETE)
            p->acls[c] = A_DELETE;
        else if (e->flags & TUPE_UNI_WS)
            p->acls[c] = A_WS;
        else if (e->flags & TUPE_UNI_PUNCT)
            p->acls[c] = A_PUNCT;
        else
            p->acls[c] = A_WORD;
    }
    return p;
}

void tupe_pretok_free(tupe_pretok *p) { free(p); }


void tupe_words_clear(tupe_words *w) { w->len = w->n = 0; }

void tupe_words_free(tupe_words *w)
{
    free(w->buf);
    free(w->w);
    memset(w, 0, sizeof *w);
}

static int reserve_bytes(tupe_words *w, size_t extra)
{
    return TUPE_RESERVE(w->buf, w->cap, w->len + extra) ? -2 : 0;
}

static int reserve_words(tupe_words *w, size_t extra)
{
    return TUPE_RESERVE(w->w, w->wcap, w->n + extra) ? -2 : 0;
}

/* Put the words back as they were (after running out of memory). */
static int undo(tupe_words *out, size_t len0, size_t n0)
{
    out->len = len0, out->n = n0;
    return -2;
}

/* ---- the fast path ------------------------------------------------------------------------ */

/* End the current word (if any): [ws, out->len) becomes a word. */
#define FLUSH()                                                                                  \
    do {                                                                                         \
        if (out->len > ws) {                                                                     \
            if (out->n == out->wcap && reserve_words(out, 1))                                    \
                goto oom;                                                                        \
            out->w[out->n++] = (tupe_word){(uint32_t)ws, (uint32_t)(out->len - ws), wch};        \
        }                                                                                        \
        ws = out->len, wch = 0;                                                                  \
    } while (0)

static int run_whitespace(const tupe_pretok *p, const uint8_t *s, size_t len, tupe_words *out,
                          size_t *bad_at)
{
    size_t len0 = out->len, n0 = out->n;
    if (reserve_bytes(out, len + 64))
        return -2;
    const uint8_t *q = s, *end = s + len;
    size_t ws = out->len;
    uint32_t wch = 0;
    while (q < end) {
        uint8_t c = *q;
        if (c < 0x80) {
            q++;
            if (p->acls[c] == A_WS) {
                FLUSH();
            } else {
                out->buf[out->len++] = p->aout[c];
                wch++;
            }
            continue;
        }
        uint32_t cp = 0;
        int n = tupe_utf8_decode(q, end, &cp);
        if (reserve_bytes(out, (size_t)(end - q) + TUPE_UNI_MAX_OUT))
            goto oom;
        if (n < 0) {
            if (p->o.invalid == TUPE_INVALID_ERROR) {
                *bad_at = (size_t)(q - s);
                out->len = len0, out->n = n0;
                return -1;
            }
            q += -n;
            if (p->o.invalid == TUPE_INVALID_REPLACE) {
                memcpy(out->buf + out->len, "\xEF\xBF\xBD", 3);
                out->len += 3;
                wch++;
            }
            continue;
        }
        uint8_t tmp[TUPE_UNI_MAX_OUT];
        size_t mlen = 0;
        const uint8_t *m = p->map >= 0 ? tupe_uni_mapped(cp, tupe_uni_get(cp), p->map, tmp, &mlen)
                                       : NULL;
        if (!m)
            m = q, mlen = (size_t)n;
        memcpy(out->buf + out->len, m, mlen);
        out->len += mlen;
        wch += (uint32_t)tupe_utf8_count((const char *)m, mlen);
        q += n;
    }
    FLUSH();
    return 0;
oom:
    return undo(out, len0, n0);
}

int tupe_pretok_run(const tupe_pretok *p, const char *text, size_t len, tupe_words *out,
                    size_t *bad_at)
{
    const uint8_t *s = (const uint8_t *)text;
    if (p->o.kind == TUPE_PRETOK_WHITESPACE)
        return run_whitespace(p, s, len, out, bad_at);
    size_t len0 = out->len, n0 = out->n;
    if (reserve_bytes(out, len + 64))
        return -2;
    const uint8_t *q = s, *end = s + len;
    size_t ws = out->len;
    uint32_t wch = 0;
    const int strip = p->o.strip_accents;
    while (q < end) {
        uint8_t c = *q;
        if (c < 0x80) {
            uint8_t k = p->acls[c];
            q++;
            if (k == A_WORD) {
                out->buf[out->len++] = p->aout[c];
                wch++;
            } else if (k != A_DELETE) {
                FLUSH();
                if (k == A_PUNCT) {
                    out->buf[out->len++] = c;
                    wch = 1;
                    FLUSH();
                }
            }
            continue;
        }
        uint32_t cp = 0;
        int n = tupe_utf8_decode(q, end, &cp);
        if (n < 0) {
            if (p->o.invalid == TUPE_INVALID_ERROR) {
                *bad_at = (size_t)(q - s);
                out->len = len0, out->n = n0;
                return -1;
            }
            q += -n; /* skipped, or replaced by U+FFFD, which cleaning removes */
            continue;
        }
        const tupe_uni_entry *e = tupe_uni_get(cp);
        uint8_t f = e->flags;
        if (f & TUPE_UNI_DELETE) {
            q += n;
            continue;
        }
        if (f & TUPE_UNI_WS) {
            FLUSH();
            q += n;
            continue;
        }
        if ((f & TUPE_UNI_KEEPCCC) && strip) {
            out->len = len0, out->n = n0;
            return tupe_pretok_run_reference(p, text, len, out, bad_at);
        }
        if (reserve_bytes(out, (size_t)(end - q) + TUPE_UNI_MAX_OUT))
            goto oom;
        uint8_t tmp[TUPE_UNI_MAX_OUT];
        size_t mlen = 0;
        const uint8_t *m = p->map >= 0 ? tupe_uni_mapped(cp, e, p->map, tmp, &mlen) : NULL;
        if (!m) {
            if (f & (TUPE_UNI_PUNCT | TUPE_UNI_ISOLATE))
                FLUSH();
            memcpy(out->buf + out->len, q, (size_t)n);
            out->len += (size_t)n;
            wch++;
            if (f & (TUPE_UNI_PUNCT | TUPE_UNI_ISOLATE))
                FLUSH();
        } else {
            if (f & TUPE_UNI_ISOLATE)
                FLUSH();
            /* What the character became is classified character by character (NFD can
             * produce punctuation, e.g. U+1FEF gives a backtick). */
            for (size_t i = 0; i < mlen;) {
                uint32_t oc = 0;
                int on = tupe_utf8_decode(m + i, m + mlen, &oc);
                uint8_t of = tupe_uni_get(oc)->flags;
                if (of & TUPE_UNI_WS) {
                    FLUSH();
                } else {
                    if (of & TUPE_UNI_PUNCT)
                        FLUSH();
                    memcpy(out->buf + out->len, m + i, (size_t)on);
                    out->len += (size_t)on;
                    wch++;
                    if (of & TUPE_UNI_PUNCT)
                        FLUSH();
                }
                i += (size_t)on;
            }
            if (f & TUPE_UNI_ISOLATE)
                FLUSH();
        }
        q += n;
    }
    FLUSH();
    return 0;
oom:
    return undo(out, len0, n0);
}

/* ---- the reference path ------------------------------------------------------------------- */

#define FLUSH_REF()                                                                              \
    do {                                                                                         \
        if (out->len > ws) {                                                                     \
            if (reserve_words(out, 1))                                                           \
                goto done;                                                                       \
            out->w[out->n++] = (tupe_word){(uint32_t)ws, (uint32_t)(out->len - ws), wch};        \
        }                                                                                        \
        ws = out->len, wch = 0;                                                                  \
    } while (0)

/* Push the characters of a mapping's output (or cp itself when m is NULL). */
static int cp_push_mapped(tupe_u32vec *a, uint32_t cp, const uint8_t *m, size_t mlen)
{
    if (!m)
        return tupe_u32vec_push(a, cp);
    for (size_t i = 0; i < mlen;) {
        uint32_t oc = 0;
        int on = tupe_utf8_decode(m + i, m + mlen, &oc);
        if (tupe_u32vec_push(a, oc))
            return -1;
        i += (size_t)on;
    }
    return 0;
}

int tupe_pretok_run_reference(const tupe_pretok *p, const char *text, size_t len,
                              tupe_words *out, size_t *bad_at)
{
    const uint8_t *s = (const uint8_t *)text;
    size_t len0 = out->len, n0 = out->n;
    tupe_u32vec a = {0}, b = {0};
    int rc = -2;
    /* Decode; clean; isolate CJK. */
    for (size_t i = 0; i < len;) {
        uint32_t cp = 0;
        int n = tupe_utf8_decode(s + i, s + len, &cp);
        if (n < 0) {
            if (p->o.invalid == TUPE_INVALID_ERROR) {
                *bad_at = i;
                rc = -1;
                goto done;
            }
            i += (size_t)-n;
            if (p->o.invalid == TUPE_INVALID_REPLACE && p->o.kind == TUPE_PRETOK_WHITESPACE &&
                tupe_u32vec_push(&a, 0xFFFD))
                goto done;
            continue;
        }
        i += (size_t)n;
        const tupe_uni_entry *e = tupe_uni_get(cp);
        if (p->o.kind == TUPE_PRETOK_WHITESPACE) {
            int sep = cp == ' ' || cp == '\t' || cp == '\r' || cp == '\n';
            if (tupe_u32vec_push(&a, sep ? ' ' : cp))
                goto done;
        } else if (e->flags & TUPE_UNI_DELETE) {
            continue;
        } else if (e->flags & TUPE_UNI_WS) {
            if (tupe_u32vec_push(&a, ' '))
                goto done;
        } else if (e->flags & TUPE_UNI_ISOLATE) {
            if (tupe_u32vec_push(&a, ' ') || tupe_u32vec_push(&a, cp) || tupe_u32vec_push(&a, ' '))
                goto done;
        } else if (tupe_u32vec_push(&a, cp)) {
            goto done;
        }
    }
    uint8_t tmp[TUPE_UNI_MAX_OUT];
    size_t mlen = 0;
    /* Strip accents: full decomposition, canonical ordering, then drop nonspacing marks. */
    if (p->o.kind == TUPE_PRETOK_BERT && p->o.strip_accents) {
        for (size_t i = 0; i < a.n; i++) {
            const tupe_uni_entry *e = tupe_uni_get(a.v[i]);
            const uint8_t *m = tupe_uni_mapped(a.v[i], e, TUPE_UNI_MAP_NFD, tmp, &mlen);
            if (cp_push_mapped(&b, a.v[i], m, mlen))
                goto done;
        }
        for (size_t i = 1; i < b.n; i++) {
            int k = tupe_uni_ccc(b.v[i]);
            if (!k)
                continue;
            /* stable insertion into the run of non-zero classes before it */
            uint32_t c = b.v[i];
            size_t j = i;
            while (j > 0) {
                int kj = tupe_uni_ccc(b.v[j - 1]);
                if (kj == 0 || kj <= k)
                    break;
                b.v[j] = b.v[j - 1];
                j--;
            }
            b.v[j] = c;
        }
        a.n = 0;
        for (size_t i = 0; i < b.n; i++)
            if (!(tupe_uni_get(b.v[i])->flags & TUPE_UNI_MN) && tupe_u32vec_push(&a, b.v[i]))
                goto done;
    }
    /* Lowercase. */
    if (p->o.lowercase) {
        b.n = 0;
        for (size_t i = 0; i < a.n; i++) {
            const tupe_uni_entry *e = tupe_uni_get(a.v[i]);
            const uint8_t *m = tupe_uni_mapped(a.v[i], e, TUPE_UNI_MAP_LOWER, tmp, &mlen);
            if (cp_push_mapped(&b, a.v[i], m, mlen))
                goto done;
        }
        tupe_u32vec t = a;
        a = b, b = t;
    }
    /* Split. */
    size_t ws = out->len;
    uint32_t wch = 0;
    for (size_t i = 0; i < a.n; i++) {
        uint32_t c = a.v[i];
        uint8_t f = p->o.kind == TUPE_PRETOK_BERT ? tupe_uni_get(c)->flags
                    : c == ' '                   ? TUPE_UNI_WS
                                                 : 0;
        if (f & (TUPE_UNI_WS | TUPE_UNI_PUNCT))
            FLUSH_REF();
        if (f & TUPE_UNI_WS)
            continue;
        if (reserve_bytes(out, 4))
            goto done;
        out->len += (size_t)tupe_utf8_encode(c, out->buf + out->len);
        wch++;
        if (f & TUPE_UNI_PUNCT)
            FLUSH_REF();
    }
    FLUSH_REF();
    rc = 0;
done:
    if (rc) {
        out->len = len0;
        out->n = n0;
    }
    free(a.v);
    free(b.v);
    return rc;
}
