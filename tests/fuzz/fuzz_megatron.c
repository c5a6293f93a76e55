/* Megatron-LM exports (megatron.h): PREFIX.idx and PREFIX.bin, as tupe-shard verify reads
 * them. Input: bytes 0-3 the .idx length (little-endian), the .idx, then the .bin. An index
 * accepted must describe the .bin exactly: every sequence readable, in order, tiling it. */
#include <stdio.h>
#include <stdlib.h>

#include "base/byteorder.h"
#include "fuzz.h"
#include "data/megatron.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 4)
        return 0;
    size_t ilen = tupe_get32le(data), rest = size - 4;
    if (ilen > rest)
        ilen = rest;
    char prefix[4200], path[4300];
    snprintf(prefix, sizeof prefix, "%s/m", fuzz_dir());
    fuzz_write(fuzz_dir(), "m.idx", data + 4, ilen, path, sizeof path);
    fuzz_write(fuzz_dir(), "m.bin", data + 4 + ilen, rest - ilen, path, sizeof path);
    tupe_megar r;
    tupe_err e;
    if (tupe_megar_open(&r, prefix, &e) != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    uint64_t bytes = 0, ds = r.dtype == TUPE_MEGATRON_UINT16 ? 2 : 4;
    uint32_t cap = 1 << 14, *ids = malloc(cap * sizeof *ids);
    for (uint64_t i = 0; i < r.sequences; i++) {
        uint32_t n;
        FUZZ_CHECK(r.lengths[i] >= 0 && (uint64_t)r.pointers[i] == bytes);
        bytes += (uint64_t)r.lengths[i] * ds;
        if ((uint32_t)r.lengths[i] <= cap)
            FUZZ_CHECK(tupe_megar_seq(&r, i, ids, cap, &n, &e) == 0 && n == (uint32_t)r.lengths[i]);
        else
            FUZZ_CHECK(tupe_megar_seq(&r, i, ids, cap, &n, &e) == TUPE_EDATA);
    }
    FUZZ_CHECK(bytes == r.bin_bytes);
    free(ids);
    tupe_megar_close(&r);
    return 0;
}
