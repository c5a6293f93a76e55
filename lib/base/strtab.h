/* A string table: byte strings numbered 0, 1, 2... in the order they were added, with a hash
 * index to find a string's number. Vocabularies, BPE symbols and word counts are built on it.
 *
 * Strings are stored NUL-terminated in one growing arena (they may contain NUL bytes; the
 * length is what counts). Memory: the bytes, plus 20 bytes per string, plus the index. */
#ifndef TUPE_STRTAB_H
#define TUPE_STRTAB_H

#include <stddef.h>
#include <stdint.h>

typedef struct tupe_strtab_entry {
    uint64_t off;  /* in the arena */
    uint32_t len;
    uint32_t hash; /* low bits of the hash, for quick rejects */
} tupe_strtab_entry;

typedef struct tupe_strtab {
    char *arena;
    size_t alen, acap;
    tupe_strtab_entry *ent; /* per id */
    size_t cap;
    uint32_t n;
    uint32_t *slots;  /* id + 1, 0 = empty; open addressing, linear probing */
    size_t nslots;    /* power of two */
} tupe_strtab;

void tupe_strtab_init(tupe_strtab *t);
void tupe_strtab_free(tupe_strtab *t);
/* Forget every string but keep the memory. */
void tupe_strtab_clear(tupe_strtab *t);
/* Id of the string, or -1. */
int64_t tupe_strtab_find(const tupe_strtab *t, const void *s, size_t n);
/* Id of the string, adding it if new (*added set to 1 then, when added is not NULL);
 * -2 when out of memory. */
int64_t tupe_strtab_add(tupe_strtab *t, const void *s, size_t n, int *added);
static inline const char *tupe_strtab_str(const tupe_strtab *t, uint32_t id)
{
    return t->arena + t->ent[id].off;
}
static inline uint32_t tupe_strtab_len(const tupe_strtab *t, uint32_t id) { return t->ent[id].len; }
/* Ids sorted by their bytes (unsigned, a prefix first); caller frees. NULL when out of memory. */
uint32_t *tupe_strtab_sorted(const tupe_strtab *t);
/* Bytes of memory the table holds. */
size_t tupe_strtab_bytes(const tupe_strtab *t);

/* The hash the table uses (exposed so that callers can reuse it for their own indexes). */
uint64_t tupe_strhash(const void *s, size_t n);

#endif
