#include "text/merges.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

typedef struct hentry {
    uint64_t count;
    uint64_t key; /* left << 32 | right */
} hentry;

typedef struct pair_t {
    uint64_t key;   /* left << 32 | right */
    int64_t count;
    uint32_t head;  /* first occurrence node, 0: none */
    uint32_t stamp; /* the merge that last touched it */
} pair_t;

typedef struct state {
    tupe_merges *m;
    const tupe_merges_opts *o;
    /* pairs */
    uint32_t *slot; /* pair index + 1, 0 = empty */
    size_t nslots;
    pair_t *pr;
    size_t npairs, pcap;
    /* occurrence lists, in blocks of NODE_BLOCK nodes (word, next; node 0 is unused); the
     * lists of merged pairs are recycled through `nfree` */
    uint32_t **nword, **nnext;
    size_t nnodes, nblocks;
    uint32_t nfree;
    /* heap */
    hentry *h;
    size_t nh, hcap;
    /* per merge */
    uint32_t *touched;
    size_t ntouched, tcap;
    uint32_t *wstamp;
    int64_t *str_tok; /* HF: string id -> token id */
    size_t str_tok_cap;
} state;

static inline size_t khash(uint64_t key)
{
    key ^= key >> 31;
    key *= 0x7fb5d329728ea185ULL;
    key ^= key >> 27;
    key *= 0x81dadef4bc2dd44dULL;
    key ^= key >> 33;
    return (size_t)key;
}

static int rehash(state *s, size_t nslots)
{
    uint32_t *slot = calloc(nslots, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t p = 0; p < s->npairs; p++) {
        size_t i = khash(s->pr[p].key) & (nslots - 1);
        while (slot[i])
            i = (i + 1) & (nslots - 1);
        slot[i] = (uint32_t)p + 1;
    }
    free(s->slot);
    s->slot = slot, s->nslots = nslots;
    return 0;
}

/* Index of pair key, added (count 0, no occurrences) if new; -1 when out of memory. */
static int64_t pair(state *s, uint64_t key)
{
    if (s->nslots) {
        for (size_t i = khash(key) & (s->nslots - 1);; i = (i + 1) & (s->nslots - 1)) {
            uint32_t v = s->slot[i];
            if (!v)
                break;
            if (s->pr[v - 1].key == key)
                return v - 1;
        }
    }
    if (TUPE_RESERVE(s->pr, s->pcap, s->npairs + 1))
        return -1;
    if ((s->npairs + 1) * 2 > s->nslots && rehash(s, s->nslots ? s->nslots * 2 : 1 << 17))
        return -1;
    size_t p = s->npairs++;
    s->pr[p] = (pair_t){key, 0, 0, UINT32_MAX};
    size_t i = khash(key) & (s->nslots - 1);
    while (s->slot[i])
        i = (i + 1) & (s->nslots - 1);
    s->slot[i] = (uint32_t)p + 1;
    return (int64_t)p;
}

#define NODE_BITS 20
#define NODE_BLOCK ((size_t)1 << NODE_BITS)
#define NWORD(s, n) (s)->nword[(n) >> NODE_BITS][(n) & (NODE_BLOCK - 1)]
#define NNEXT(s, n) (s)->nnext[(n) >> NODE_BITS][(n) & (NODE_BLOCK - 1)]

static int add_node(state *s, size_t p, uint32_t w)
{
    uint32_t head = s->pr[p].head;
    if (head && NWORD(s, head) == w)
        return 0;
    uint32_t n = s->nfree;
    if (n) {
        s->nfree = NNEXT(s, n);
    } else {
        if (s->nnodes == 0)
            s->nnodes = 1;
        if (s->nnodes >> NODE_BITS >= s->nblocks) {
            if (s->nblocks >= ((size_t)UINT32_MAX >> NODE_BITS))
                return -1;
            uint32_t **a = realloc(s->nword, (s->nblocks + 1) * sizeof *a);
            if (!a)
                return -1;
            s->nword = a;
            uint32_t **b = realloc(s->nnext, (s->nblocks + 1) * sizeof *b);
            if (!b)
                return -1;
            s->nnext = b;
            s->nword[s->nblocks] = malloc(NODE_BLOCK * sizeof **a);
            s->nnext[s->nblocks] = malloc(NODE_BLOCK * sizeof **b);
            s->nblocks++;
            if (!s->nword[s->nblocks - 1] || !s->nnext[s->nblocks - 1])
                return -1;
        }
        n = (uint32_t)s->nnodes++;
    }
    NWORD(s, n) = w;
    NNEXT(s, n) = head;
    s->pr[p].head = n;
    return 0;
}

static int before(const hentry *x, const hentry *y)
{
    return x->count > y->count || (x->count == y->count && x->key < y->key);
}

static void sift_down(hentry *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, b = i;
        if (l < n && before(&h[l], &h[b]))
            b = l;
        if (r < n && before(&h[r], &h[b]))
            b = r;
        if (b == i)
            return;
        hentry t = h[i];
        h[i] = h[b], h[b] = t;
        i = b;
    }
}

static int push(state *s, uint64_t count, uint64_t key)
{
    if (TUPE_RESERVE(s->h, s->hcap, s->nh + 1))
        return -1;
    size_t i = s->nh++;
    s->h[i] = (hentry){count, key};
    while (i > 0 && before(&s->h[i], &s->h[(i - 1) / 2])) {
        hentry t = s->h[i];
        s->h[i] = s->h[(i - 1) / 2], s->h[(i - 1) / 2] = t;
        i = (i - 1) / 2;
    }
    return 0;
}

static hentry pop(state *s)
{
    hentry top = s->h[0];
    s->h[0] = s->h[--s->nh];
    sift_down(s->h, s->nh, 0);
    return top;
}

static int touch(state *s, size_t p, uint32_t stamp)
{
    if (s->pr[p].stamp == stamp)
        return 0;
    s->pr[p].stamp = stamp;
    if (TUPE_RESERVE(s->touched, s->tcap, s->ntouched + 1))
        return -1;
    s->touched[s->ntouched++] = (uint32_t)p;
    return 0;
}

/* A change of `delta` occurrences of pair (x, y) in word w. */
static int change(state *s, uint32_t x, uint32_t y, int delta, uint32_t w, uint32_t stamp)
{
    int64_t p = pair(s, (uint64_t)x << 32 | y);
    if (p < 0)
        return -1;
    s->pr[p].count += delta * (int64_t)s->m->wcount[w];
    if (delta > 0 && (add_node(s, (size_t)p, w) || touch(s, (size_t)p, stamp)))
        return -1;
    return 0;
}

/* Replace (a, b) by r in word w, left to right, as Hugging Face's Word::merge does; in one
 * pass (reading at j, writing at k <= j), so that a long word with many occurrences costs its
 * length, not length times occurrences. */
static int merge_word(state *s, uint32_t w, uint32_t a, uint32_t b, uint32_t r, uint32_t stamp)
{
    uint32_t *sy = s->m->sym + s->m->wstart[w];
    uint32_t len = s->m->wlen[w], k = 0;
    for (uint32_t j = 0; j < len;) {
        if (sy[j] != a || j + 1 >= len || sy[j + 1] != b) {
            sy[k++] = sy[j++];
            continue;
        }
        if (k > 0 && (change(s, sy[k - 1], a, -1, w, stamp) || change(s, sy[k - 1], r, 1, w, stamp)))
            return -1;
        sy[k++] = r;
        j += 2;
        if (j < len && (change(s, b, sy[j], -1, w, stamp) || change(s, r, sy[j], 1, w, stamp)))
            return -1;
    }
    s->m->wlen[w] = k;
    return 0;
}

int64_t tupe_merges_add_token(tupe_merges *m, uint32_t str_id)
{
    if (TUPE_RESERVE(m->tok_str, m->tok_cap, m->ntok + 1))
        return -1;
    m->tok_str[m->ntok] = str_id;
    return (int64_t)m->ntok++;
}

void tupe_merges_free(tupe_merges *m)
{
    free(m->tok_str);
    free(m->sym);
    free(m->wstart);
    free(m->wlen);
    free(m->wcount);
    free(m->merges);
    memset(m, 0, sizeof *m);
}

static int map_string(state *s, uint32_t sid, int64_t tok)
{
    size_t old = s->str_tok_cap;
    if (TUPE_RESERVE(s->str_tok, s->str_tok_cap, (size_t)sid + 1))
        return -1;
    for (size_t i = old; i < s->str_tok_cap; i++)
        s->str_tok[i] = -1;
    if (s->str_tok[sid] < 0)
        s->str_tok[sid] = tok;
    return 0;
}

static void state_free(state *s)
{
    free(s->slot);
    free(s->pr);
    for (size_t i = 0; i < s->nblocks; i++) {
        free(s->nword[i]);
        free(s->nnext[i]);
    }
    free(s->nword);
    free(s->nnext);
    free(s->h);
    free(s->touched);
    free(s->wstamp);
    free(s->str_tok);
}

int tupe_merges_learn(tupe_merges *m, const tupe_merges_opts *o, tupe_progress *prog, tupe_err *e)
{
    state s;
    memset(&s, 0, sizeof s);
    s.m = m, s.o = o;
    size_t mcap = 0;
    char *buf = NULL;
    size_t bufcap = 0;
    const int hf = o->flavor == TUPE_MERGES_HF;
    const size_t plen = o->strip_prefix ? strlen(o->strip_prefix) : 0;
    uint64_t minf = o->min_frequency > 1 ? o->min_frequency : 1;
    if (!(s.wstamp = malloc((m->nwords ? m->nwords : 1) * sizeof *s.wstamp)))
        goto oom;
    memset(s.wstamp, 0xFF, (m->nwords ? m->nwords : 1) * sizeof *s.wstamp);
    for (size_t t = 0; t < m->ntok; t++)
        if (hf && map_string(&s, m->tok_str[t], (int64_t)t))
            goto oom;
    /* initial pair counts and occurrences */
    for (size_t w = 0; w < m->nwords; w++) {
        const uint32_t *sy = m->sym + m->wstart[w];
        for (uint32_t i = 0; i + 1 < m->wlen[w]; i++) {
            int64_t p = pair(&s, (uint64_t)sy[i] << 32 | sy[i + 1]);
            if (p < 0 || add_node(&s, (size_t)p, (uint32_t)w))
                goto oom;
            s.pr[p].count += (int64_t)m->wcount[w];
        }
    }
    for (size_t p = 0; p < s.npairs; p++)
        if (s.pr[p].count > 0 && push(&s, (uint64_t)s.pr[p].count, s.pr[p].key))
            goto oom;
    for (;;) {
        if (o->max_tokens && m->ntok >= o->max_tokens)
            break;
        if (o->max_merges && m->nmerges >= o->max_merges)
            break;
        if (!s.nh)
            break;
        hentry top = pop(&s);
        int64_t p = pair(&s, top.key);
        if (p < 0)
            goto oom;
        if ((int64_t)top.count != s.pr[p].count) {
            /* stale: back in with the current count (counts only grow through new entries) */
            if (s.pr[p].count > 0 && push(&s, (uint64_t)s.pr[p].count, top.key))
                goto oom;
            continue;
        }
        if (top.count < minf)
            break;
        uint32_t a = (uint32_t)(top.key >> 32), b = (uint32_t)top.key;
        const char *sa = tupe_strtab_str(m->strings, m->tok_str[a]);
        const char *sb = tupe_strtab_str(m->strings, m->tok_str[b]);
        size_t la = tupe_strtab_len(m->strings, m->tok_str[a]);
        size_t lb = tupe_strtab_len(m->strings, m->tok_str[b]);
        if (plen && lb >= plen && memcmp(sb, o->strip_prefix, plen) == 0)
            sb += plen, lb -= plen;
        if (TUPE_RESERVE(buf, bufcap, la + lb))
            goto oom;
        memcpy(buf, sa, la);
        memcpy(buf + la, sb, lb);
        int64_t sid = tupe_strtab_add(m->strings, buf, la + lb, NULL);
        if (sid < 0)
            goto oom;
        int64_t r = hf && (size_t)sid < s.str_tok_cap ? s.str_tok[sid] : -1;
        if (r < 0) {
            if ((r = tupe_merges_add_token(m, (uint32_t)sid)) < 0 ||
                (hf && map_string(&s, (uint32_t)sid, r)))
                goto oom;
        }
        if (TUPE_RESERVE(m->merges, mcap, m->nmerges + 1))
            goto oom;
        uint32_t stamp = (uint32_t)m->nmerges;
        m->merges[m->nmerges++] = (tupe_merge){a, b, (uint32_t)r, top.count};
        s.ntouched = 0;
        uint32_t last = 0;
        for (uint32_t n = s.pr[p].head; n; n = NNEXT(&s, n)) {
            uint32_t w = NWORD(&s, n);
            last = n;
            if (s.wstamp[w] == stamp)
                continue;
            s.wstamp[w] = stamp;
            if (merge_word(&s, w, a, b, (uint32_t)r, stamp))
                goto oom;
        }
        /* the pair is gone from every word: its list is recycled (Hugging Face, too, drops
         * the positions of a merged pair) */
        if (last) {
            NNEXT(&s, last) = s.nfree;
            s.nfree = s.pr[p].head;
            s.pr[p].head = 0;
        }
        if (!hf)
            s.pr[p].count = 0;
        for (size_t i = 0; i < s.ntouched; i++) {
            uint32_t q = s.touched[i];
            if (s.pr[q].count > 0 && push(&s, (uint64_t)s.pr[q].count, s.pr[q].key))
                goto oom;
        }
        if (prog)
            tupe_progress_set(prog, m->nmerges);
    }
    free(buf);
    state_free(&s);
    return 0;
oom:
    free(buf);
    state_free(&s);
    return tupe_fail(e, TUPE_EFAIL, "out of memory");
}
