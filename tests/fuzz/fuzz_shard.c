/* A shard file (shard.h): header, frame index, frames (zstd or raw), records; then, when the
 * file can stand alone in a directory (split train, shard 0 of 1), that directory through the
 * training reader (shardread.h) and tupe-shard verify. Each input is read twice: as it is, and
 * with its header, index and frame checks recomputed, so that mutations reach what the checks
 * guard. What a reader hands out must be what the trainer may use: lengths in 1..seq_len, ids
 * inside the vocabulary; an epoch visits every sequence once, in the order tupe_shardr_order
 * gives, and random access agrees with it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/checksum.h"
#include "fuzz.h"
#include "data/pack.h"
#include "data/shard.h"
#include "data/shardread.h"

static void fix_checks(unsigned char *d, size_t n)
{
    if (n < TUPE_SHARD_HEADER)
        return;
    uint64_t frames = tupe_get64le(d + 120), io = tupe_get64le(d + 128);
    if (io <= n && frames <= (n - io) / TUPE_SHARD_FRAME_ENTRY) {
        for (uint64_t i = 0; i < frames; i++) {
            unsigned char *p = d + io + i * TUPE_SHARD_FRAME_ENTRY;
            uint64_t off = tupe_get64le(p), stored = tupe_get32le(p + 8);
            if (off <= n && stored <= n - off)
                tupe_put64le(p + 16, tupe_hash64(d + off, (size_t)stored));
        }
        tupe_put64le(d + 144, tupe_hash64(d + io, (size_t)frames * TUPE_SHARD_FRAME_ENTRY));
    }
    tupe_put64le(d + 248, tupe_hash64(d, 248));
}

static void check_ids(const uint32_t *ids, uint32_t len, const tupe_shard_meta *m)
{
    FUZZ_CHECK(len >= 1 && len <= m->seq_len);
    for (uint32_t i = 0; i < m->seq_len; i++)
        FUZZ_CHECK(ids[i] < m->vocab_size);
}

/* The file alone in a directory with the manifest its header implies. */
static void directory(const uint8_t *data, size_t size, const tupe_shard_header *h, unsigned mode)
{
    char path[4200];
    const char *dir = fuzz_dir();
    fuzz_write(dir, "train-00000.shard", data, size, path, sizeof path);
    tupe_shard_meta m;
    memset(&m, 0, sizeof m);
    m.layout = h->flags & TUPE_SHARD_ZSTD ? TUPE_LAYOUT_ZSTD : TUPE_LAYOUT_RAW;
    m.seq_len = h->seq_len, m.id_bytes = h->id_bytes, m.rec_bytes = h->rec_bytes;
    m.vocab_size = h->vocab_size, m.vocab_hash = h->vocab_hash;
    memcpy(m.special, h->special, sizeof m.special);
    m.brk = h->brk == 1, m.shuffled = (h->flags & TUPE_SHARD_SHUFFLED) != 0;
    m.seed = h->seed, m.set_id = h->set_id, m.level = 3;
    m.frame_bytes = (uint64_t)h->frame_records * h->rec_bytes, m.frame_records = h->frame_records;
    tupe_shard_file f = {"train-00000.shard", h->records, 0, h->tokens, size, 0};
    m.split[TUPE_SPLIT_TRAIN] = (tupe_split_meta){h->records, 1, h->tokens, 0, 0, size, 1, &f};
    snprintf(path, sizeof path, "%s/%s", dir, TUPE_MANIFEST);
    tupe_err e;
    FUZZ_CHECK(tupe_manifest_write(path, &m, &e) == 0);

    tupe_verify_stats st;
    int rc = tupe_shard_verify(dir, NULL, NULL, &st, &e);
    FUZZ_CHECK(rc == 0 || rc == TUPE_EDATA);

    tupe_shardr_opts o;
    tupe_shardr_opts_init(&o);
    o.world = 1 + (mode & 1);
    o.rank = (mode >> 1) & (o.world - 1);
    o.shuffle = (mode >> 2) & 1;
    o.prefetch = (mode >> 3) & 1;
    o.seed = mode >> 4;
    tupe_shardr *r;
    if (tupe_shardr_open(&r, dir, &o, &e) != 0) {
        FUZZ_ERR(&e);
        return;
    }
    const tupe_shard_meta *rm = tupe_shardr_meta(r);
    uint64_t n = tupe_shardr_size(r);
    FUZZ_CHECK(n == h->records && n > 0);
    uint32_t *ids = malloc(rm->seq_len * sizeof *ids), *ids2 = malloc(rm->seq_len * sizeof *ids);
    char *seen = calloc(n, 1);
    uint32_t len, len2;
    uint64_t index, pos = o.rank, visited = 0;
    int got;
    while ((got = tupe_shardr_next(r, ids, &len, &index, &e)) == 1) {
        check_ids(ids, len, rm);
        FUZZ_CHECK(index < n && !seen[index]);
        seen[index] = 1;
        uint64_t want;
        FUZZ_CHECK(tupe_shardr_order(r, 0, pos, &want, &e) == 0 && want == index);
        FUZZ_CHECK(tupe_shardr_get(r, index, ids2, &len2, &e) == 0);
        FUZZ_CHECK(len2 == len && memcmp(ids, ids2, rm->seq_len * sizeof *ids) == 0);
        pos += o.world;
        visited++;
    }
    if (got == 0)
        FUZZ_CHECK(visited == tupe_shardr_epoch_len(r));
    else
        FUZZ_ERR(&e);
    free(ids), free(ids2), free(seen);
    tupe_shardr_close(r);
}

static void read_file(const uint8_t *data, size_t size, unsigned mode)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tupe_shardf f;
    tupe_err e;
    if (tupe_shardf_open(&f, path, &e) != 0) {
        FUZZ_ERR(&e);
        close(fd);
        return;
    }
    tupe_fdec d;
    tupe_fdec_init(&d);
    tupe_shard_meta m;
    memset(&m, 0, sizeof m);
    m.seq_len = f.h.seq_len, m.vocab_size = f.h.vocab_size;
    uint32_t *ids = malloc(f.h.seq_len * sizeof *ids);
    int sound = 1;
    for (uint64_t i = 0; i < f.h.frames; i++) {
        const unsigned char *recs;
        if (tupe_shardf_frame(&f, i, &d, &recs, &e) != 0) {
            FUZZ_ERR(&e);
            sound = 0;
            continue;
        }
        for (uint32_t k = 0; k < f.frames[i].records; k++) {
            uint32_t len;
            tupe_rec_decode(recs + (size_t)k * f.h.rec_bytes, f.h.seq_len, f.h.id_bytes, ids, &len);
            check_ids(ids, len, &m);
        }
    }
    free(ids);
    tupe_fdec_free(&d);
    tupe_shard_header h = f.h;
    tupe_shardf_close(&f);
    close(fd);
    if (sound && h.split == TUPE_SPLIT_TRAIN && h.shards == 1 && h.first == 0 && h.records > 0)
        directory(data, size, &h, mode);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* The last byte chooses how the directory is read (ranks, order, prefetch). */
    unsigned mode = size ? data[size - 1] : 0;
    read_file(data, size, mode);
    unsigned char *d = malloc(size ? size : 1);
    memcpy(d, data, size);
    fix_checks(d, size);
    if (memcmp(d, data, size) != 0)
        read_file(d, size, mode);
    free(d);
    return 0;
}
