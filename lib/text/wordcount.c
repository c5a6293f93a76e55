#include "text/wordcount.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

void tupe_wordcount_init(tupe_wordcount *w)
{
    memset(w, 0, sizeof *w);
    tupe_strtab_init(&w->words);
}

void tupe_wordcount_free(tupe_wordcount *w)
{
    tupe_strtab_free(&w->words);
    free(w->count);
    memset(w, 0, sizeof *w);
}

void tupe_wordcount_clear(tupe_wordcount *w)
{
    tupe_strtab_clear(&w->words);
    w->total = 0;
}

int tupe_wordcount_add(tupe_wordcount *w, const void *s, size_t n, uint64_t k)
{
    int added;
    int64_t id = tupe_strtab_add(&w->words, s, n, &added);
    if (id < 0)
        return -2;
    if (TUPE_RESERVE(w->count, w->cap, (size_t)id + 1))
        return -2;
    if (added)
        w->count[id] = 0;
    w->count[id] += k;
    w->total += k;
    return 0;
}

int tupe_wordcount_merge(tupe_wordcount *dst, const tupe_wordcount *src)
{
    for (uint32_t i = 0; i < src->words.n; i++)
        if (tupe_wordcount_add(dst, tupe_strtab_str(&src->words, i), tupe_strtab_len(&src->words, i),
                               src->count[i]))
            return -2;
    return 0;
}

size_t tupe_wordcount_bytes(const tupe_wordcount *w)
{
    return tupe_strtab_bytes(&w->words) + w->cap * sizeof *w->count;
}

typedef struct cb {
    uint64_t count;
    size_t bytes;
} cb;

static int cmp_cb(const void *a, const void *b)
{
    const cb *x = a, *y = b;
    return (x->count > y->count) - (x->count < y->count);
}

uint64_t tupe_wordcount_prune(tupe_wordcount *w, size_t limit, uint64_t *dropped)
{
    *dropped = 0;
    uint32_t n = w->words.n;
    if (!n)
        return 0;
    /* bytes one word costs in a rebuilt table: its string and NUL, its per-id arrays, two
     * index slots, its count */
    const size_t per = 1 + 8 + 4 + 4 + 2 * 4 + 8;
    cb *v = malloc(n * sizeof *v);
    if (!v)
        return UINT64_MAX;
    size_t total = 0;
    for (uint32_t i = 0; i < n; i++) {
        v[i].count = w->count[i];
        v[i].bytes = tupe_strtab_len(&w->words, i) + per;
        total += v[i].bytes;
    }
    qsort(v, n, sizeof *v, cmp_cb);
    uint64_t k = 0;
    size_t i = 0;
    while (i < n && total > limit / 2) {
        k = v[i].count;
        while (i < n && v[i].count == k)
            total -= v[i++].bytes;
    }
    free(v);
    if (k == 0)
        return 0;
    tupe_wordcount nw;
    tupe_wordcount_init(&nw);
    for (uint32_t id = 0; id < n; id++) {
        if (w->count[id] <= k) {
            (*dropped)++;
            continue;
        }
        if (tupe_wordcount_add(&nw, tupe_strtab_str(&w->words, id), tupe_strtab_len(&w->words, id),
                               w->count[id])) {
            tupe_wordcount_free(&nw);
            return UINT64_MAX;
        }
    }
    nw.total = w->total;
    tupe_wordcount_free(w);
    *w = nw;
    return k;
}

uint32_t *tupe_wordcount_sorted(const tupe_wordcount *w) { return tupe_strtab_sorted(&w->words); }
