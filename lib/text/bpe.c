#include "text/bpe.h"

#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/grow.h"
#include "base/strtab.h"

typedef struct mslot {
    uint64_t key;    /* (left symbol + 1) << 32 | (right symbol + 1); 0 = empty */
    uint32_t rank;
    uint32_t result; /* symbol of left + right */
} mslot;

struct tupe_bpe {
    tupe_strtab sym;   /* symbol strings, "</w>" included where final */
    mslot *m;
    size_t nm, mcap;   /* merges, slots (power of two) */
    int32_t *id;       /* per symbol: vocabulary id of its output form, or -1 */
    size_t idcap;
    int32_t unk;       /* <unk> id, or -1 */
    const tupe_vocab *v;
};

tupe_bpe *tupe_bpe_new(void)
{
    tupe_bpe *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    tupe_strtab_init(&b->sym);
    b->unk = -1;
    return b;
}

void tupe_bpe_free(tupe_bpe *b)
{
    if (!b)
        return;
    tupe_strtab_free(&b->sym);
    free(b->m);
    free(b->id);
    free(b);
}

size_t tupe_bpe_merges(const tupe_bpe *b) { return b->nm; }

static inline size_t mhash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdULL;
    key ^= key >> 33;
    return (size_t)key;
}

static const mslot *mfind(const tupe_bpe *b, uint32_t l, uint32_t r)
{
    if (!b->mcap)
        return NULL;
    uint64_t key = (uint64_t)(l + 1) << 32 | (r + 1);
    for (size_t i = mhash(key) & (b->mcap - 1);; i = (i + 1) & (b->mcap - 1)) {
        if (b->m[i].key == key)
            return &b->m[i];
        if (!b->m[i].key)
            return NULL;
    }
}

static int mput(tupe_bpe *b, uint64_t key, uint32_t rank, uint32_t result)
{
    for (size_t i = mhash(key) & (b->mcap - 1);; i = (i + 1) & (b->mcap - 1)) {
        if (b->m[i].key == key)
            return -1;
        if (!b->m[i].key) {
            b->m[i] = (mslot){key, rank, result};
            return 0;
        }
    }
}

int tupe_bpe_add_merge(tupe_bpe *b, const void *l, size_t ln, const void *r, size_t rn)
{
    int64_t li = tupe_strtab_add(&b->sym, l, ln, NULL);
    int64_t ri = li < 0 ? li : tupe_strtab_add(&b->sym, r, rn, NULL);
    if (li < 0 || ri < 0)
        return -2;
    char stackbuf[256];
    char *cat = ln + rn <= sizeof stackbuf ? stackbuf : malloc(ln + rn);
    if (!cat)
        return -2;
    memcpy(cat, l, ln);
    memcpy(cat + ln, r, rn);
    int64_t mi = tupe_strtab_add(&b->sym, cat, ln + rn, NULL);
    if (cat != stackbuf)
        free(cat);
    if (mi < 0)
        return -2;
    if ((b->nm + 1) * 2 > b->mcap) {
        size_t cap = b->mcap ? b->mcap * 2 : 1024;
        mslot *m = calloc(cap, sizeof *m);
        if (!m)
            return -2;
        mslot *old = b->m;
        size_t oldcap = b->mcap;
        b->m = m, b->mcap = cap;
        for (size_t i = 0; i < oldcap; i++)
            if (old[i].key)
                mput(b, old[i].key, old[i].rank, old[i].result);
        free(old);
    }
    if (mput(b, (uint64_t)(li + 1) << 32 | (uint64_t)(ri + 1), (uint32_t)b->nm, (uint32_t)mi))
        return -1;
    b->nm++;
    return 0;
}

/* The dictionary form of a piece: "</w>" removed from a final piece, "@@" added otherwise. */
static int64_t lookup_piece(const tupe_vocab *v, const uint8_t *s, size_t n, int final)
{
    if (!v)
        return -1;
    char stackbuf[256];
    char *buf = n + 2 <= sizeof stackbuf ? stackbuf : malloc(n + 2);
    if (!buf)
        return -1;
    memcpy(buf, s, n);
    if (!final) {
        memcpy(buf + n, TUPE_BPE_SEP, 2);
        n += 2;
    }
    int64_t id = tupe_vocab_find(v, buf, n);
    if (buf != stackbuf)
        free(buf);
    return id;
}

int tupe_bpe_bind(tupe_bpe *b, const tupe_vocab *v)
{
    uint32_t n = b->sym.n;
    int32_t *id = realloc(b->id, (n ? n : 1) * sizeof *id);
    if (!id)
        return -2;
    b->id = id, b->idcap = n;
    b->v = v;
    b->unk = v ? v->special[TUPE_SP_UNK] : -1;
    for (uint32_t s = 0; s < n; s++) {
        const uint8_t *str = (const uint8_t *)tupe_strtab_str(&b->sym, s);
        size_t len = tupe_strtab_len(&b->sym, s);
        int final = len >= 4 && memcmp(str + len - 4, TUPE_BPE_END, 4) == 0;
        id[s] = (int32_t)lookup_piece(v, str, final ? len - 4 : len, final);
    }
    return 0;
}

int tupe_bpe_parse(tupe_bpe **out, const char *buf, size_t len, const char *path,
                   const tupe_vocab *v, tupe_err *e)
{
    if (!path)
        path = "(buffer)";
    tupe_bpe *b = tupe_bpe_new();
    if (!b)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc;
    uint64_t line = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len;
        line++;
        /* three fields separated by spaces, as fastBPE splits them */
        const char *f[3];
        size_t fl[3], nf = 0;
        for (size_t j = i; j < end;) {
            while (j < end && (buf[j] == ' ' || buf[j] == '\r'))
                j++;
            if (j == end)
                break;
            size_t k = j;
            while (k < end && buf[k] != ' ' && buf[k] != '\r')
                k++;
            if (nf < 3)
                f[nf] = buf + j, fl[nf] = k - j;
            nf++;
            j = k;
        }
        if (nf != 3) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "expected 'left right count'");
            goto fail;
        }
        int r = tupe_bpe_add_merge(b, f[0], fl[0], f[1], fl[1]);
        if (r == -1) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "duplicate merge '%.*s %.*s'",
                                (int)fl[0], f[0], (int)fl[1], f[1]);
            goto fail;
        }
        if (r) {
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
            goto fail;
        }
        i = end + 1;
    }
    if (b->nm == 0) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: no merges", tupe_path_name(path));
        goto fail;
    }
    if (tupe_bpe_bind(b, v)) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto fail;
    }
    *out = b;
    return 0;
fail:
    tupe_bpe_free(b);
    return rc;
}

int tupe_bpe_load(tupe_bpe **out, const char *path, const tupe_vocab *v, tupe_err *e)
{
    char *buf;
    size_t len;
    int rc = tupe_read_text(path, &buf, &len, (size_t)1 << 30, e);
    if (rc)
        return rc;
    rc = tupe_bpe_parse(out, buf, len, path, v, e);
    free(buf);
    return rc;
}

/* ---- segmentation ------------------------------------------------------------------------- */

#define CACHE_SLOTS (1u << 18)
#define CACHE_ARENA ((size_t)32 << 20)

typedef struct cslot {
    uint64_t hash;
    uint32_t off; /* in arena: word bytes, then n, the <unk> count, n ids, n ends (uint32 each) */
    uint32_t len; /* word bytes; 0 = empty slot */
} cslot;

struct tupe_bpe_cache {
    cslot *slot;
    size_t used;
    uint8_t *arena;
    size_t alen;
    int32_t *sym; /* scratch for one word */
    uint32_t *end;
    size_t sym_cap, end_cap;
};

tupe_bpe_cache *tupe_bpe_cache_new(void)
{
    tupe_bpe_cache *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    c->slot = calloc(CACHE_SLOTS, sizeof *c->slot);
    c->arena = malloc(CACHE_ARENA);
    if (!c->slot || !c->arena) {
        tupe_bpe_cache_free(c);
        return NULL;
    }
    return c;
}

void tupe_bpe_cache_free(tupe_bpe_cache *c)
{
    if (!c)
        return;
    free(c->slot);
    free(c->arena);
    free(c->sym);
    free(c->end);
    free(c);
}

static size_t segment(const tupe_bpe *b, int32_t *sym, uint32_t *end, const uint8_t *w,
                      size_t len)
{
    /* characters (a byte that does not continue a UTF-8 sequence starts one); the last one
     * with "</w>" */
    size_t n = 0;
    char tmp[64];
    for (size_t i = 0; i < len;) {
        size_t j = i + 1;
        while (j < len && (w[j] & 0xC0) == 0x80)
            j++;
        int final = j == len;
        int64_t s = -1;
        if (j - i + 4 <= sizeof tmp) {
            memcpy(tmp, w + i, j - i);
            if (final)
                memcpy(tmp + (j - i), TUPE_BPE_END, 4);
            s = tupe_strtab_find(&b->sym, tmp, j - i + (final ? 4 : 0));
        }
        sym[n] = (int32_t)s;
        end[n++] = (uint32_t)j;
        i = j;
    }
    while (n > 1) {
        uint32_t best = UINT32_MAX, result = 0;
        int32_t L = -1, R = -1;
        for (size_t i = 0; i + 1 < n; i++) {
            if (sym[i] < 0 || sym[i + 1] < 0)
                continue;
            const mslot *m = mfind(b, (uint32_t)sym[i], (uint32_t)sym[i + 1]);
            if (m && m->rank < best)
                best = m->rank, result = m->result, L = sym[i], R = sym[i + 1];
        }
        if (best == UINT32_MAX)
            break;
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            if (i + 1 < n && sym[i] == L && sym[i + 1] == R) {
                sym[k] = (int32_t)result;
                end[k++] = end[i + 1];
                i++;
            } else {
                sym[k] = sym[i];
                end[k++] = end[i];
            }
        }
        n = k;
    }
    return n;
}

size_t tupe_bpe_encode(const tupe_bpe *b, tupe_bpe_cache *c, const uint8_t *w, size_t len,
                       uint32_t *ids, uint32_t *ends, size_t *unk)
{
    uint64_t h = tupe_strhash(w, len) | 1;
    size_t si;
    for (si = h & (CACHE_SLOTS - 1);; si = (si + 1) & (CACHE_SLOTS - 1)) {
        cslot *s = &c->slot[si];
        if (!s->len)
            break;
        if (s->hash == h && s->len == len && memcmp(c->arena + s->off, w, len) == 0) {
            const uint8_t *p = c->arena + s->off + ((len + 3) & ~(size_t)3);
            uint32_t n, u;
            memcpy(&n, p, 4);
            memcpy(&u, p + 4, 4);
            memcpy(ids, p + 8, n * 4);
            if (ends)
                memcpy(ends, p + 8 + n * 4, n * 4);
            /* The count of the first segmentation: a piece that is the <unk> token itself is
             * not unknown, and without a dictionary every piece is. */
            *unk += u;
            return n;
        }
    }
    int32_t stack_sym[64];
    uint32_t stack_end[64];
    int32_t *sym = stack_sym;
    uint32_t *end = stack_end;
    if (len > 64) {
        if (TUPE_RESERVE(c->sym, c->sym_cap, len) || TUPE_RESERVE(c->end, c->end_cap, len))
            return 0;
        sym = c->sym, end = c->end;
    }
    size_t n = segment(b, sym, end, w, len), unk0 = *unk;
    for (size_t i = 0; i < n; i++) {
        int64_t id = sym[i] >= 0 && b->id ? b->id[sym[i]] : -1;
        if (id < 0 && b->v) {
            size_t start = i ? end[i - 1] : 0;
            id = lookup_piece(b->v, w + start, end[i] - start, i + 1 == n);
        }
        if (id < 0) {
            id = b->unk;
            (*unk)++;
        }
        ids[i] = (uint32_t)id;
        if (ends)
            ends[i] = end[i];
    }
    {
        size_t need = ((len + 3) & ~(size_t)3) + 8 + n * 8;
        if (c->alen + need > CACHE_ARENA || (c->used + 1) * 2 > CACHE_SLOTS) {
            /* full: start over (cheap, and keeps memory bounded) */
            memset(c->slot, 0, CACHE_SLOTS * sizeof *c->slot);
            c->used = c->alen = 0;
            for (si = h & (CACHE_SLOTS - 1); c->slot[si].len; si = (si + 1) & (CACHE_SLOTS - 1))
                ;
        }
        if (need <= CACHE_ARENA && len > 0 && len < UINT32_MAX) {
            uint8_t *p = c->arena + c->alen;
            memcpy(p, w, len);
            uint8_t *q = p + ((len + 3) & ~(size_t)3);
            uint32_t n32 = (uint32_t)n, u32 = (uint32_t)(*unk - unk0);
            memcpy(q, &n32, 4);
            memcpy(q + 4, &u32, 4);
            memcpy(q + 8, ids, n * 4);
            memcpy(q + 8 + n * 4, end, n * 4);
            c->slot[si] = (cslot){h, (uint32_t)c->alen, (uint32_t)len};
            c->alen += need;
            c->used++;
        }
    }
    return n;
}
