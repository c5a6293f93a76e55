/* Checksums and content hashes, all XXH3-64 from libxxhash (the hash zstd's own frames use
 * the sibling of): fast enough to check every byte we read, stable across platforms.
 *
 * tupe_hash64   whole-buffer hash (vocabulary hashes, shard frames, checkpoint tensors)
 * tupe_hash32   low 32 bits of the same, for per-record checks where 4 bytes suffice
 * tupe_hasher   streaming form; same value as tupe_hash64 over the concatenated input */
#ifndef TUPE_CHECKSUM_H
#define TUPE_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint64_t tupe_hash64(const void *data, size_t n);
uint64_t tupe_hash64_seed(const void *data, size_t n, uint64_t seed);
static inline uint32_t tupe_hash32(const void *data, size_t n)
{
    return (uint32_t)tupe_hash64(data, n);
}

typedef struct tupe_hasher tupe_hasher;
tupe_hasher *tupe_hasher_new(void);   /* NULL when out of memory */
void tupe_hasher_reset(tupe_hasher *h);
void tupe_hasher_update(tupe_hasher *h, const void *data, size_t n);
uint64_t tupe_hasher_digest(const tupe_hasher *h);
void tupe_hasher_free(tupe_hasher *h);

/* "xxh3:0123456789abcdef" form used in manifests and metadata. */
void tupe_hash_hex(uint64_t h, char out[22]);
/* Parses the form above (or 16 bare hex digits). 0 on success. */
int tupe_hash_parse(const char *s, uint64_t *h);

#endif
