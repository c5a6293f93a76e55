#include "base/strtab.h"

#include <stdlib.h>
#include <string.h>

#include "base/checksum.h"
#include "base/grow.h"

uint64_t tupe_strhash(const void *s, size_t n) { return tupe_hash64(s, n); }

void tupe_strtab_init(tupe_strtab *t) { memset(t, 0, sizeof *t); }

void tupe_strtab_free(tupe_strtab *t)
{
    free(t->arena);
    free(t->ent);
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
    return t->acap + t->cap * sizeof *t->ent + t->nslots * sizeof *t->slots;
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
        const tupe_strtab_entry *x = &t->ent[v];
        if (x->hash == (uint32_t)h && x->len == n && memcmp(t->arena + x->off, s, n) == 0)
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
        uint64_t h = tupe_strhash(t->arena + t->ent[id].off, t->ent[id].len);
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
    if (TUPE_RESERVE(t->ent, t->cap, (size_t)t->n + 1))
        return -2;
    if ((size_t)(t->n + 1) * 2 > t->nslots && rehash(t, t->nslots ? t->nslots * 2 : 2048))
        return -2;
    if (TUPE_RESERVE(t->arena, t->acap, t->alen + n + 1))
        return -2;
    memcpy(t->arena + t->alen, s, n);
    t->arena[t->alen + n] = 0;
    uint64_t h = tupe_strhash(s, n);
    id = t->n++;
    t->ent[id] = (tupe_strtab_entry){t->alen, (uint32_t)n, (uint32_t)h};
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
        k[i] = (keyed){(const uint8_t *)tupe_strtab_str(t, i), t->ent[i].len, i};
    qsort(k, n, sizeof *k, cmp_keyed);
    for (uint32_t i = 0; i < n; i++)
        ids[i] = k[i].id;
    free(k);
    return ids;
}
