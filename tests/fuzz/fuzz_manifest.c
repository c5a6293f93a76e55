/* The shard manifest (shard.h, manifest.json). Whatever it accepts must be self-consistent
 * (id width, record size, special ids inside the vocabulary, files that tile each split, file
 * names that stay inside the directory), and what tupe_manifest_write makes of it must read
 * back the same. */
#include <stdio.h>
#include <string.h>

#include "fuzz.h"
#include "data/pack.h"
#include "data/shard.h"

static void check_meta(const tupe_shard_meta *m)
{
    FUZZ_CHECK(m->id_bytes == 2 || m->id_bytes == 4);
    FUZZ_CHECK(m->seq_len >= 2 && m->rec_bytes == tupe_rec_bytes(m->seq_len, m->id_bytes));
    FUZZ_CHECK(m->vocab_size > 0 && (m->id_bytes == 4 || m->vocab_size <= 65536));
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        FUZZ_CHECK(m->special[i] >= -1 && (m->special[i] < 0 || (uint32_t)m->special[i] < m->vocab_size));
    for (int s = 0; s < TUPE_SPLITS; s++) {
        const tupe_split_meta *sp = &m->split[s];
        uint64_t first = 0;
        for (uint32_t i = 0; i < sp->nfiles; i++) {
            const tupe_shard_file *f = &sp->files[i];
            FUZZ_CHECK(memchr(f->name, 0, sizeof f->name) != NULL);
            FUZZ_CHECK(!strchr(f->name, '/') && f->name[0] != '.');
            FUZZ_CHECK(f->first == first);
            first += f->sequences;
        }
        FUZZ_CHECK(first == sp->sequences);
    }
}

static int same(const tupe_shard_meta *a, const tupe_shard_meta *b)
{
    if (a->layout != b->layout || a->seq_len != b->seq_len || a->id_bytes != b->id_bytes ||
        a->rec_bytes != b->rec_bytes || a->vocab_size != b->vocab_size ||
        a->vocab_hash != b->vocab_hash || memcmp(a->special, b->special, sizeof a->special) ||
        a->brk != b->brk || a->shuffled != b->shuffled || a->seed != b->seed ||
        a->set_id != b->set_id || a->level != b->level || a->frame_bytes != b->frame_bytes ||
        a->frame_records != b->frame_records || a->megatron_dtype != b->megatron_dtype ||
        a->in_documents != b->in_documents || a->in_empty != b->in_empty ||
        a->in_tokens != b->in_tokens || a->in_hash != b->in_hash)
        return 0;
    for (int s = 0; s < TUPE_SPLITS; s++) {
        const tupe_split_meta *x = &a->split[s], *y = &b->split[s];
        if (x->sequences != y->sequences || x->documents != y->documents ||
            x->tokens != y->tokens || x->padding != y->padding || x->raw_bytes != y->raw_bytes ||
            x->stored_bytes != y->stored_bytes || x->nfiles != y->nfiles)
            return 0;
        for (uint32_t i = 0; i < x->nfiles; i++)
            if (memcmp(&x->files[i], &y->files[i], sizeof x->files[i]) != 0)
                return 0;
    }
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_shard_meta m;
    tupe_err e;
    if (tupe_manifest_parse((const char *)data, size, "manifest.json", &m, &e) != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    check_meta(&m);
    /* The writer records a Megatron file's check only when it is not 0 (a real XXH3 of
     * files is never 0 in practice): such manifests do not go round. */
    int round = 1;
    for (int s = 0; s < TUPE_SPLITS; s++)
        for (uint32_t i = 0; i < m.split[s].nfiles; i++)
            round &= m.layout != TUPE_LAYOUT_MEGATRON || m.split[s].files[i].check != 0;
    if (round) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", fuzz_dir(), TUPE_MANIFEST);
        FUZZ_CHECK(tupe_manifest_write(path, &m, &e) == 0);
        tupe_shard_meta m2;
        FUZZ_CHECK(tupe_manifest_read(fuzz_dir(), &m2, &e) == 0);
        FUZZ_CHECK(same(&m, &m2));
        tupe_shard_meta_free(&m2);
    }
    tupe_shard_meta_free(&m);
    return 0;
}
