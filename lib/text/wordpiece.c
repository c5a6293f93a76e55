#include "text/wordpiece.h"

#include <stdlib.h>
#include <string.h>

typedef struct slot {
    int32_t base;  /* children of this state are at base + byte */
    int32_t check; /* the parent state, or -1 for a free slot (and the root) */
    int32_t val;   /* token id ending here, or -1 */
} slot;

struct tupe_wordpiece {
    slot *s;
    size_t n;     /* slots allocated */
    size_t used;  /* highest slot in use + 1 */
    int32_t cont; /* state after the continuation prefix, or -1 */
    uint32_t unk;
};

typedef struct build {
    tupe_wordpiece *wp;
    const tupe_vocab *v;
    uint32_t *ids;  /* token ids sorted by bytes */
    uint32_t *next; /* next[i] == i for a free slot; else leads to a later free slot */
} build;

static int grow(build *b, size_t need)
{
    tupe_wordpiece *wp = b->wp;
    if (need <= wp->n)
        return 0;
    size_t n = wp->n ? wp->n : 4096;
    while (n < need)
        n *= 2;
    slot *s = realloc(wp->s, n * sizeof *s);
    if (!s)
        return -1;
    wp->s = s;
    uint32_t *nx = realloc(b->next, n * sizeof *nx);
    if (!nx)
        return -1;
    b->next = nx;
    for (size_t i = wp->n; i < n; i++) {
        s[i] = (slot){0, -1, -1};
        nx[i] = (uint32_t)i;
    }
    wp->n = n;
    return 0;
}

/* The first free slot at or after i (path halving keeps the chains short). */
static size_t free_from(build *b, size_t i)
{
    for (;;) {
        if (i >= b->wp->n && grow(b, i + 1))
            return SIZE_MAX;
        uint32_t j = b->next[i];
        if (j == i)
            return i;
        if (j < b->wp->n)
            b->next[i] = b->next[j];
        i = j;
    }
}

static const uint8_t *tok(const build *b, uint32_t i, size_t *len)
{
    uint32_t id = b->ids[i];
    *len = tupe_vocab_token_len(b->v, id);
    return (const uint8_t *)tupe_vocab_token(b->v, id);
}

/* Place the children of state st: the tokens ids[lo..hi) share their first `depth` bytes. */
static int place(build *b, size_t lo, size_t hi, size_t depth, int32_t st)
{
    tupe_wordpiece *wp = b->wp;
    size_t len;
    const uint8_t *t = tok(b, (uint32_t)lo, &len);
    if (len == depth) { /* sorted: the token equal to the prefix comes first */
        wp->s[st].val = (int32_t)b->ids[lo];
        lo++;
    }
    if (lo == hi)
        return 0;
    /* distinct next bytes */
    uint8_t bytes[256];
    size_t starts[257], nb = 0;
    for (size_t i = lo; i < hi; i++) {
        t = tok(b, (uint32_t)i, &len);
        if (nb == 0 || t[depth] != bytes[nb - 1]) {
            bytes[nb] = t[depth];
            starts[nb++] = i;
        }
    }
    starts[nb] = hi;
    /* the first base where every child slot is free */
    size_t p = free_from(b, (size_t)bytes[0] + 1);
    int32_t base;
    for (;;) {
        if (p == SIZE_MAX || grow(b, p + 257))
            return -1;
        base = (int32_t)(p - bytes[0]);
        size_t k = 1;
        while (k < nb && wp->s[(size_t)base + bytes[k]].check == -1)
            k++;
        if (k == nb)
            break;
        p = free_from(b, p + 1);
    }
    wp->s[st].base = base;
    for (size_t k = 0; k < nb; k++) {
        size_t c = (size_t)base + bytes[k];
        wp->s[c].check = st;
        b->next[c] = (uint32_t)c + 1;
        if (c + 1 > wp->used)
            wp->used = c + 1;
    }
    for (size_t k = 0; k < nb; k++)
        if (place(b, starts[k], starts[k + 1], depth + 1, base + bytes[k]))
            return -1;
    return 0;
}

int tupe_wordpiece_new(tupe_wordpiece **out, const tupe_vocab *v, const char *prefix, tupe_err *e)
{
    if (v->special[TUPE_SP_UNK] < 0)
        return tupe_fail(e, TUPE_EDATA, "%s: the vocabulary has no [UNK] token",
                         tupe_path_name(v->path));
    tupe_wordpiece *wp = calloc(1, sizeof *wp);
    build b = {wp, v, NULL, NULL};
    uint32_t n = tupe_vocab_size(v);
    if (!wp || !(b.ids = tupe_strtab_sorted(&v->tok)) || grow(&b, 4096))
        goto oom;
    b.next[0] = 1; /* the root */
    wp->used = 1;
    if (place(&b, 0, n, 0, 0))
        goto oom;
    free(b.ids);
    free(b.next);
    b.ids = b.next = NULL;
    wp->unk = (uint32_t)v->special[TUPE_SP_UNK];
    int32_t st = 0;
    for (const char *p = prefix; *p && st >= 0; p++) {
        size_t t = (size_t)wp->s[st].base + (uint8_t)*p;
        st = t < wp->n && wp->s[t].check == st && t != 0 ? (int32_t)t : -1;
    }
    wp->cont = st;
    *out = wp;
    return 0;
oom:
    free(b.ids);
    free(b.next);
    tupe_wordpiece_free(wp);
    return tupe_fail(e, TUPE_EFAIL, "out of memory");
}

void tupe_wordpiece_free(tupe_wordpiece *wp)
{
    if (!wp)
        return;
    free(wp->s);
    free(wp);
}


size_t tupe_wordpiece_encode(const tupe_wordpiece *wp, const uint8_t *w, size_t len,
                             size_t nchars, size_t max_chars, uint32_t *out, int *unk)
{
    const slot *s = wp->s;
    const size_t n = wp->n;
    size_t pos = 0, k = 0;
    *unk = 0;
    if (nchars > max_chars)
        goto unknown;
    while (pos < len) {
        int32_t st = pos ? wp->cont : 0;
        if (st < 0)
            goto unknown;
        int32_t best = -1;
        size_t end = 0;
        for (size_t i = pos; i < len; i++) {
            size_t t = (size_t)s[st].base + w[i];
            if (t >= n || s[t].check != st)
                break;
            st = (int32_t)t;
            if (s[st].val >= 0)
                best = s[st].val, end = i + 1;
        }
        if (best < 0)
            goto unknown;
        out[k++] = (uint32_t)best;
        pos = end;
    }
    return k;
unknown:
    *unk = 1;
    out[0] = wp->unk;
    return 1;
}
