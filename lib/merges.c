#include "merges.h"

#include <stdlib.h>
#include <string.h>

typedef struct hentry {
    uint64_t count;
    uint64_t key; /* left << 32 | right */
} hentry;

typedef struct state {
    tupe_merges *m;
    const tupe_merges_opts *o;
    /* pairs */
    uint32_t *slot; /* pair index + 1, 0 = empty */
    size_t nslots;
    uint64_t *pkey;
    int64_t *pcount;
    uint32_t *phead, *pstamp;
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

static int grow_pairs(state *s)
{
    size_t cap = s->pcap ? s->pcap * 2 : 1 << 16;
    uint64_t *k = realloc(s->pkey, cap * sizeof *k);
    if (!k)
        return -1;
    s->pkey = k;
    int64_t *c = realloc(s->pcount, cap * sizeof *c);
    if (!c)
        return -1;
    s->pcount = c;
    uint32_t *hd = realloc(s->phead, cap * sizeof *hd);
    if (!hd)
        return -1;
    s->phead = hd;
    uint32_t *st = realloc(s->pstamp, cap * sizeof *st);
    if (!st)
        return -1;
    s->pstamp = st;
    s->pcap = cap;
    return 0;
}

static int rehash(state *s, size_t nslots)
{
    uint32_t *slot = calloc(nslots, sizeof *slot);
    if (!slot)
        return -1;
    for (size_t p = 0; p < s->npairs; p++) {
        size_t i = khash(s->pkey[p]) & (nslots - 1);
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
            if (s->pkey[v - 1] == key)
                return v - 1;
        }
    }
    if (s->npairs == s->pcap && grow_pairs(s))
        return -1;
    if ((s->npairs + 1) * 2 > s->nslots && rehash(s, s->nslots ? s->nslots * 2 : 1 << 17))
        return -1;
    size_t p = s->npairs++;
    s->pkey[p] = key;
    s->pcount[p] = 0;
    s->phead[p] = 0;
    s->pstamp[p] = UINT32_MAX;
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
    uint32_t head = s->phead[p];
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
    s->phead[p] = n;
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
    if (s->nh == s->hcap) {
        size_t cap = s->hcap ? s->hcap * 2 : 1 << 16;
        hentry *h = realloc(s->h, cap * sizeof *h);
        if (!h)
            return -1;
        s->h = h, s->hcap = cap;
    }
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
    if (s->pstamp[p] == stamp)
        return 0;
    s->pstamp[p] = stamp;
    if (s->ntouched == s->tcap) {
        size_t cap = s->tcap ? s->tcap * 2 : 1024;
        uint32_t *t = realloc(s->touched, cap * sizeof *t);
        if (!t)
            return -1;
        s->touched = t, s->tcap = cap;
    }
    s->touched[s->ntouched++] = (uint32_t)p;
    return 0;
}

/* A change of `delta` occurrences of pair (x, y) in word w. */
static int change(state *s, uint32_t x, uint32_t y, int delta, uint32_t w, uint32_t stamp)
{
    int64_t p = pair(s, (uint64_t)x << 32 | y);
    if (p < 0)
        return -1;
    s->pcount[p] += delta * (int64_t)s->m->wcount[w];
    if (delta > 0 && (add_node(s, (size_t)p, w) || touch(s, (size_t)p, stamp)))
        return -1;
    return 0;
}

/* Replace (a, b) by r in word w, left to right, as Hugging Face's Word::merge does. */
static int merge_word(state *s, uint32_t w, uint32_t a, uint32_t b, uint32_t r, uint32_t stamp)
{
    uint32_t *sy = s->m->sym + s->m->wstart[w];
    uint32_t len = s->m->wlen[w];
    for (uint32_t i = 0; i < len; i++) {
        if (sy[i] != a || i + 1 >= len || sy[i + 1] != b)
            continue;
        if (i > 0 && (change(s, sy[i - 1], a, -1, w, stamp) || change(s, sy[i - 1], r, 1, w, stamp)))
            return -1;
        sy[i] = r;
        memmove(sy + i + 1, sy + i + 2, (size_t)(len - i - 2) * sizeof *sy);
        len--;
        if (i + 1 < len && (change(s, b, sy[i + 1], -1, w, stamp) || change(s, r, sy[i + 1], 1, w, stamp)))
            return -1;
    }
    s->m->wlen[w] = len;
    return 0;
}

int64_t tupe_merges_add_token(tupe_merges *m, uint32_t str_id)
{
    if (m->ntok == m->tok_cap) {
        size_t cap = m->tok_cap ? m->tok_cap * 2 : 1024;
        uint32_t *t = realloc(m->tok_str, cap * sizeof *t);
        if (!t)
            return -1;
        m->tok_str = t, m->tok_cap = cap;
    }
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
    if (sid >= s->str_tok_cap) {
        size_t cap = s->str_tok_cap ? s->str_tok_cap : 1024;
        while (cap <= sid)
            cap *= 2;
        int64_t *t = realloc(s->str_tok, cap * sizeof *t);
        if (!t)
            return -1;
        for (size_t i = s->str_tok_cap; i < cap; i++)
            t[i] = -1;
        s->str_tok = t, s->str_tok_cap = cap;
    }
    if (s->str_tok[sid] < 0)
        s->str_tok[sid] = tok;
    return 0;
}

static void state_free(state *s)
{
    free(s->slot);
    free(s->pkey);
    free(s->pcount);
    free(s->phead);
    free(s->pstamp);
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
            s.pcount[p] += (int64_t)m->wcount[w];
        }
    }
    for (size_t p = 0; p < s.npairs; p++)
        if (s.pcount[p] > 0 && push(&s, (uint64_t)s.pcount[p], s.pkey[p]))
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
        if ((int64_t)top.count != s.pcount[p]) {
            /* stale: back in with the current count (counts only grow through new entries) */
            if (s.pcount[p] > 0 && push(&s, (uint64_t)s.pcount[p], top.key))
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
        if (la + lb > bufcap) {
            bufcap = (la + lb) * 2;
            char *nb = realloc(buf, bufcap);
            if (!nb)
                goto oom;
            buf = nb;
        }
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
        if (m->nmerges == mcap) {
            mcap = mcap ? mcap * 2 : 1024;
            tupe_merge *nm = realloc(m->merges, mcap * sizeof *nm);
            if (!nm)
                goto oom;
            m->merges = nm;
        }
        uint32_t stamp = (uint32_t)m->nmerges;
        m->merges[m->nmerges++] = (tupe_merge){a, b, (uint32_t)r, top.count};
        s.ntouched = 0;
        uint32_t last = 0;
        for (uint32_t n = s.phead[p]; n; n = NNEXT(&s, n)) {
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
            s.nfree = s.phead[p];
            s.phead[p] = 0;
        }
        if (!hf)
            s.pcount[p] = 0;
        for (size_t i = 0; i < s.ntouched; i++) {
            uint32_t q = s.touched[i];
            if (s.pcount[q] > 0 && push(&s, (uint64_t)s.pcount[q], s.pkey[q]))
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
