/* The Megatron-LM indexed dataset (megatron/core/datasets/indexed_dataset.py): PREFIX.bin holds
 * the ids of every sequence back to back, PREFIX.idx describes them. Little-endian:
 *
 *   .idx   0  9  magic "MMIDIDX\0\0"
 *          9  8  version (1)
 *         17  1  dtype code: 8 uint16 (vocabulary below 65,500, as Megatron's optimal_dtype
 *                picks), 4 int32 otherwise
 *         18  8  sequence count S
 *         26  8  document count D (the length of the document index: S + 1 here)
 *         34     int32[S] sequence lengths, int64[S] byte offsets into .bin,
 *                int64[D] document index (0, 1, ..., S: every sequence is its own document)
 *
 * tupe-shard writes one packed sequence per Megatron sequence, without its padding. */
#ifndef TUPE_MEGATRON_H
#define TUPE_MEGATRON_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define TUPE_MEGATRON_MAGIC "MMIDIDX\0\0"
#define TUPE_MEGATRON_UINT16 8
#define TUPE_MEGATRON_INT32 4

/* The dtype code Megatron would choose for a vocabulary. */
int tupe_megatron_dtype(uint32_t vocab_size);

typedef struct tupe_megaw tupe_megaw;

/* Writes PREFIX.bin and PREFIX.idx, each atomically (visible only after close). */
int tupe_megaw_open(tupe_megaw **w, const char *prefix, int dtype, tupe_err *e);
int tupe_megaw_seq(tupe_megaw *w, const uint32_t *ids, uint32_t n, tupe_err *e);
/* bytes: .bin + .idx; check: XXH3-64 of the .bin bytes followed by the .idx bytes. Frees w. */
int tupe_megaw_close(tupe_megaw *w, uint64_t *bytes, uint64_t *check, tupe_err *e);
void tupe_megaw_abort(tupe_megaw *w);

typedef struct tupe_megar {
    char *bin_path, *idx_path;
    int fd;
    int dtype;
    uint64_t sequences, documents, bin_bytes;
    int32_t *lengths;
    int64_t *pointers, *docs;
} tupe_megar;

/* Reads and validates the whole .idx (lengths, offsets inside .bin, document index). */
int tupe_megar_open(tupe_megar *r, const char *prefix, tupe_err *e);
/* Sequence i into ids (cap entries at least its length); *n its length. */
int tupe_megar_seq(tupe_megar *r, uint64_t i, uint32_t *ids, uint32_t cap, uint32_t *n,
                   tupe_err *e);
/* XXH3-64 of the .bin bytes followed by the .idx bytes (what the manifest records). */
int tupe_megatron_check(const char *prefix, uint64_t *check, uint64_t *bytes, tupe_err *e);
void tupe_megar_close(tupe_megar *r);

#endif
