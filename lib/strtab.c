#include "strtab.h"

#include <stdlib.h>
#include <string.h>

#include "checksum.h"

uint64_t tupe_strhash(const void *s, size_t n) { return tupe_hash64(s, n); }

void tupe_strtab_init(tupe_strtab *t) { memset(t, 0, sizeof *t); }

void tupe_strtab_free(tupe_strtab *t)
{
    free(t->arena);
    free(t->off);
    free(t->len);
    free(t->hash);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

void tupe_strtab_clear(tupe_strtab *t)
{
    t->n = 0;
    t->alen = 0;
    if (t->slots)
        memset(t->slots, 0, t->nslots * sizeof *t->slots);
}

size_t tupe_strtab_bytes(const tupe_strtab *t)
{
    return t->acap + (size_t)t->cap * (sizeof *t->off + sizeof *t->len + sizeof *t->hash) +
           t->nslots * sizeof *t->slots;
}

int64_t tupe_strtab_find(const tupe_strtab *t, const void *s, size_t n)
{
    if (!t->nslots)
        return -1;
    uint64_t h = tupe_strhash(s, n);
    size_t mask = t->nslots - 1;
    for (size_t i = (size_t)(h >> 32) & mask;; i = (i + 1) & mask) {
        uint32_t v = t->slots[i];
        if (!v)
            return -1;
        v--;
        if (t->hash[v] == (uint32_t)h && t->len[v] == n && memcmp(t->arena + t->off[v], s, n) == 0)
            return v;
    }
}

static int rehash(tupe_strtab *t, size_t nslots)
{
    uint32_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return -1;
    size_t mask = nslots - 1;
    for (uint32_t id = 0; id < t->n; id++) {
        /* the slot comes from the hash's high half; only the low half is kept per id */
        uint64_t h = tupe_strhash(t->arena + t->off[id], t->len[id]);
        size_t i = (size_t)(h >> 32) & mask;
        while (slots[i])
            i = (i + 1) & mask;
        slots[i] = id + 1;
    }
    free(t->slots);
    t->slots = slots, t->nslots = nslots;
    return 0;
}

int64_t tupe_strtab_add(tupe_strtab *t, const void *s, size_t n, int *added)
{
    if (added)
        *added = 0;
    int64_t id = tupe_strtab_find(t, s, n);
    if (id >= 0)
        return id;
    if (t->n == UINT32_MAX - 1 || n > UINT32_MAX - 1)
        return -2;
    if (t->n == t->cap) {
        uint32_t cap = t->cap ? t->cap * 2 : 1024;
        uint64_t *off = realloc(t->off, cap * sizeof *off);
        if (!off)
            return -2;
        t->off = off;
        uint32_t *len = realloc(t->len, cap * sizeof *len);
        if (!len)
            return -2;
        t->len = len;
        uint32_t *hash = realloc(t->hash, cap * sizeof *hash);
        if (!hash)
            return -2;
        t->hash = hash;
        t->cap = cap;
    }
    if ((size_t)(t->n + 1) * 2 > t->nslots && rehash(t, t->nslots ? t->nslots * 2 : 2048))
        return -2;
    if (t->acap - t->alen < n + 1) {
        size_t cap = t->acap ? t->acap : 65536;
        while (cap - t->alen < n + 1)
            cap *= 2;
        char *a = realloc(t->arena, cap);
        if (!a)
            return -2;
        t->arena = a, t->acap = cap;
    }
    memcpy(t->arena + t->alen, s, n);
    t->arena[t->alen + n] = 0;
    uint64_t h = tupe_strhash(s, n);
    id = t->n++;
    t->off[id] = t->alen;
    t->len[id] = (uint32_t)n;
    t->hash[id] = (uint32_t)h;
    t->alen += n + 1;
    size_t mask = t->nslots - 1;
    size_t i = (size_t)(h >> 32) & mask;
    while (t->slots[i])
        i = (i + 1) & mask;
    t->slots[i] = (uint32_t)id + 1;
    if (added)
        *added = 1;
    return id;
}

typedef struct keyed {
    const uint8_t *p;
    uint32_t len, id;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->len < y->len ? x->len : y->len);
    return c ? c : (x->len > y->len) - (x->len < y->len);
}

uint32_t *tupe_strtab_sorted(const tupe_strtab *t)
{
    uint32_t n = t->n;
    keyed *k = malloc((n ? n : 1) * sizeof *k);
    uint32_t *ids = malloc((n ? n : 1) * sizeof *ids);
    if (!k || !ids) {
        free(k);
        free(ids);
        return NULL;
    }
    for (uint32_t i = 0; i < n; i++)
        k[i] = (keyed){(const uint8_t *)tupe_strtab_str(t, i), t->len[i], i};
    qsort(k, n, sizeof *k, cmp_keyed);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = k[i].id;
    free(k);
    return ids;
}
