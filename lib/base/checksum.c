#include "base/checksum.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

uint64_t tupe_hash64(const void *data, size_t n) { return XXH3_64bits(data, n); }

uint64_t tupe_hash64_seed(const void *data, size_t n, uint64_t seed)
{
    return XXH3_64bits_withSeed(data, n, seed);
}

struct tupe_hasher {
    XXH3_state_t *st;
};

tupe_hasher *tupe_hasher_new(void)
{
    tupe_hasher *h = malloc(sizeof *h);
    if (!h)
        return NULL;
    h->st = XXH3_createState();
    if (!h->st) {
        free(h);
        return NULL;
    }
    XXH3_64bits_reset(h->st);
    return h;
}

void tupe_hasher_reset(tupe_hasher *h) { XXH3_64bits_reset(h->st); }

void tupe_hasher_update(tupe_hasher *h, const void *data, size_t n)
{
    XXH3_64bits_update(h->st, data, n);
}

uint64_t tupe_hasher_digest(const tupe_hasher *h) { return XXH3_64bits_digest(h->st); }

void tupe_hasher_free(tupe_hasher *h)
{
    if (!h)
        return;
    XXH3_freeState(h->st);
    free(h);
}

void tupe_hash_hex(uint64_t h, char out[22])
{
    snprintf(out, 22, "xxh3:%016llx", (unsigned long long)h);
}

int tupe_hash_parse(const char *s, uint64_t *h)
{
    if (strncmp(s, "xxh3:", 5) == 0)
        s += 5;
    if (strlen(s) != 16)
        return -1;
    uint64_t v = 0;
    for (int i = 0; i < 16; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
              : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0)
            return -1;
        v = v << 4 | (uint64_t)d;
    }
    *h = v;
    return 0;
}
