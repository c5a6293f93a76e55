#include "data/shardbuild.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "base/outdir.h"
#include "base/philox.h"
#include "base/progress.h"
#include "data/extshuffle.h"
#include "data/framepool.h"
#include "data/megatron.h"
#include "data/pack.h"
#include "data/tokqueue.h"
#include "text/tokstream.h"

#define RESERVE ((uint64_t)8 << 20)      /* input reader, indexes, libc */
#define BATCH_IDS ((size_t)1 << 18)       /* ids per batch handed over by the input thread */
#define MIN_SORT ((uint64_t)8 << 20)

void tupe_shard_opts_init(tupe_shard_opts *o)
{
    memset(o, 0, sizeof *o);
    o->seq_len = 512;
    o->brk = TUPE_BREAK_FULL;
    o->seed = 1;
    o->shuffle = 1;
    o->shards = 16;
    o->valid_shards = 1;
    o->layout = TUPE_LAYOUT_ZSTD;
    o->level = 3;
    o->frame_bytes = (uint64_t)4 << 20;
    o->memory = (uint64_t)1 << 30;
    o->threads = 1;
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        o->special[i] = -2;
}

static int has_valid(const tupe_shard_opts *o)
{
    return o->valid_fraction > 0 || o->valid_sequences > 0;
}

static uint64_t pool_memory(const tupe_shard_opts *o)
{
    if (o->layout == TUPE_LAYOUT_MEGATRON)
        return 0;
    /* A frame holds at least one record (4-byte ids at worst: the stream is not read yet). */
    uint64_t frame = tupe_rec_bytes(o->seq_len, 4);
    if (frame < o->frame_bytes)
        frame = o->frame_bytes;
    return tupe_fpool_memory(o->threads, o->layout == TUPE_LAYOUT_ZSTD ? o->level : 0,
                             (size_t)frame);
}

/* The validation spool's buffer, and the budget for documents held as validation candidates. */
static uint64_t spool_memory(const tupe_shard_opts *o)
{
    if (!has_valid(o))
        return 0;
    uint64_t m = o->memory / 16;
    return m < ((uint64_t)4 << 20) ? (uint64_t)4 << 20 : m > ((uint64_t)64 << 20) ? (uint64_t)64 << 20 : m;
}

static uint64_t heap_memory(const tupe_shard_opts *o)
{
    return o->valid_sequences > 0 ? o->memory / 4 : 0;
}

static uint64_t fixed_memory(const tupe_shard_opts *o)
{
    return pool_memory(o) + spool_memory(o) + heap_memory(o) + RESERVE +
           tupe_tokq_memory(BATCH_IDS);
}

uint64_t tupe_shard_sort_memory(const tupe_shard_opts *o)
{
    uint64_t used = fixed_memory(o);
    return o->memory >= used + MIN_SORT ? o->memory - used : 0;
}

/* ---- state ------------------------------------------------------------------------------------ */

typedef struct vdoc {
    uint64_t key, doc;
    uint32_t n;
    uint32_t *ids;
} vdoc;

typedef struct finfo {
    uint32_t records;
    uint64_t tokens;
} finfo;

typedef struct build {
    const tupe_shard_opts *o;
    tupe_tok_header h;
    int have_header;
    const char *first_input;
    int32_t special[TUPE_SP_COUNT];
    uint32_t id_bytes, rec_bytes;
    tupe_packer pk[TUPE_SPLITS];
    int pk_init[TUPE_SPLITS];
    tupe_xshuf *xs[TUPE_SPLITS];
    tupe_hasher *inhash;
    uint64_t docs, empty, tokens, input_bytes, framed;
    /* validation candidates (valid_sequences): a max-heap on (key, doc) */
    vdoc *heap;
    size_t nheap, capheap;
    uint64_t heap_bytes, full_items, doc_seqs;
    /* writing */
    tupe_dirtx *tx;
    tupe_shardw *w;
    finfo *fifo;
    size_t fifo_cap, fifo_head, fifo_tail;
    tupe_shard_header tmpl;
    tupe_shard_meta m;
    tupe_progress prog;
} build;

static int pack_slot(void *ctx, void **rec, tupe_err *e) { return tupe_xshuf_slot(ctx, rec, e); }

static int setup(build *b, const tupe_tok_header *h, const char *path, tupe_err *e)
{
    const tupe_shard_opts *o = b->o;
    b->h = *h;
    b->have_header = 1;
    b->first_input = path;
    static const char *names[TUPE_SP_COUNT] = {"pad", "unk", "cls", "sep", "mask"};
    for (int i = 0; i < TUPE_SP_COUNT; i++) {
        b->special[i] = o->special[i] >= -1 ? o->special[i] : h->special[i];
        if (b->special[i] >= 0 && (uint32_t)b->special[i] >= h->vocab_size)
            return tupe_fail(e, TUPE_EUSAGE, "%s id %d is outside the vocabulary (size %u)",
                             names[i], b->special[i], h->vocab_size);
    }
    for (int i = TUPE_SP_PAD; i <= TUPE_SP_SEP; i++) {
        if (i == TUPE_SP_UNK || b->special[i] >= 0)
            continue;
        return tupe_fail(e, TUPE_EDATA,
                         "%s: the token stream header has no %s id; give one with --%s",
                         tupe_path_name(path), names[i], names[i]);
    }
    b->id_bytes = h->vocab_size <= 65536 ? 2 : 4;
    b->rec_bytes = (uint32_t)tupe_rec_bytes(o->seq_len, b->id_bytes);
    uint64_t sortmem = tupe_shard_sort_memory(o);
    for (int s = 0; s < TUPE_SPLITS; s++) {
        if (s == TUPE_SPLIT_VALID && !has_valid(o))
            continue;
        tupe_xshuf_opts xo = {b->rec_bytes, o->seed, (uint32_t)s,
                              s == TUPE_SPLIT_TRAIN && o->shuffle,
                              (size_t)(s == TUPE_SPLIT_TRAIN ? sortmem : spool_memory(o)),
                              o->tmpdir};
        int rc = tupe_xshuf_new(&b->xs[s], &xo, e);
        if (!rc)
            rc = tupe_packer_init(&b->pk[s], o->seq_len, b->id_bytes, o->brk,
                                  (uint32_t)b->special[TUPE_SP_CLS],
                                  (uint32_t)b->special[TUPE_SP_SEP],
                                  (uint32_t)b->special[TUPE_SP_PAD], pack_slot, b->xs[s], e);
        if (rc)
            return rc;
        b->pk_init[s] = 1;
    }
    return 0;
}

/* ---- validation by count: the documents of smallest key ------------------------------------ */

static uint64_t doc_key(uint64_t seed, uint64_t doc)
{
    tupe_u32x4 r = tupe_philox_block(seed, (uint32_t)doc, (uint32_t)(doc >> 32), TUPE_RNG_SPLIT, 0);
    return (uint64_t)r.v[0] << 32 | r.v[1];
}

static int vless(const vdoc *a, const vdoc *b)
{
    return a->key != b->key ? a->key < b->key : a->doc < b->doc;
}

static uint64_t doc_seq_count(uint32_t n, uint32_t seq_len)
{
    return tupe_pack_count_full((uint64_t)n + 1, seq_len);
}

/* Sequences the candidates would pack into, optionally without one of them. */
static uint64_t cand_sequences(const build *b, const vdoc *without)
{
    uint32_t L = b->o->seq_len;
    if (b->o->brk == TUPE_BREAK_DOC)
        return b->doc_seqs - (without ? doc_seq_count(without->n, L) : 0);
    return tupe_pack_count_full(b->full_items - (without ? (uint64_t)without->n + 1 : 0), L);
}

static void heap_up(vdoc *h, size_t i)
{
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!vless(&h[p], &h[i]))
            return;
        vdoc t = h[p];
        h[p] = h[i];
        h[i] = t;
        i = p;
    }
}

static void heap_down(vdoc *h, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, m = i;
        if (l < n && vless(&h[m], &h[l]))
            m = l;
        if (l + 1 < n && vless(&h[m], &h[l + 1]))
            m = l + 1;
        if (m == i)
            return;
        vdoc t = h[m];
        h[m] = h[i];
        h[i] = t;
        i = m;
    }
}

static int offer_valid(build *b, uint64_t doc, const uint32_t *ids, uint32_t n, tupe_err *e)
{
    uint64_t want = b->o->valid_sequences;
    vdoc d = {doc_key(b->o->seed, doc), doc, n, NULL};
    if (b->nheap > 0 && cand_sequences(b, NULL) >= want && !vless(&d, &b->heap[0]))
        return tupe_packer_doc(&b->pk[TUPE_SPLIT_TRAIN], ids, n, e);
    b->heap_bytes += (uint64_t)n * 4 + sizeof d;
    if (b->heap_bytes > heap_memory(b->o))
        return tupe_fail(e, TUPE_EUSAGE,
                         "--valid-sequences %" PRIu64 " needs more than the %" PRIu64
                         " MiB of memory set aside for it; raise --memory or use --valid-fraction",
                         want, heap_memory(b->o) >> 20);
    if (b->nheap == b->capheap) {
        size_t nc = b->capheap ? b->capheap * 2 : 256;
        vdoc *nh = realloc(b->heap, nc * sizeof *nh);
        if (!nh)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        b->heap = nh;
        b->capheap = nc;
    }
    if (!(d.ids = malloc((size_t)n * sizeof *d.ids)))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    memcpy(d.ids, ids, (size_t)n * sizeof *d.ids);
    b->heap[b->nheap++] = d;
    heap_up(b->heap, b->nheap - 1);
    b->full_items += (uint64_t)n + 1;
    b->doc_seqs += doc_seq_count(n, b->o->seq_len);
    /* Release the largest keys while the rest still reach the count: they go to training. */
    while (b->nheap > 1 && cand_sequences(b, &b->heap[0]) >= want) {
        vdoc top = b->heap[0];
        b->heap[0] = b->heap[--b->nheap];
        heap_down(b->heap, b->nheap, 0);
        b->full_items -= (uint64_t)top.n + 1;
        b->doc_seqs -= doc_seq_count(top.n, b->o->seq_len);
        b->heap_bytes -= (uint64_t)top.n * 4 + sizeof top;
        int rc = tupe_packer_doc(&b->pk[TUPE_SPLIT_TRAIN], top.ids, top.n, e);
        free(top.ids);
        if (rc)
            return rc;
    }
    return 0;
}

static int cmp_doc(const void *x, const void *y)
{
    const vdoc *a = x, *b = y;
    return a->doc < b->doc ? -1 : a->doc > b->doc;
}

static int pack_candidates(build *b, tupe_err *e)
{
    qsort(b->heap, b->nheap, sizeof *b->heap, cmp_doc);
    int rc = 0;
    for (size_t i = 0; i < b->nheap; i++) {
        if (!rc)
            rc = tupe_packer_doc(&b->pk[TUPE_SPLIT_VALID], b->heap[i].ids, b->heap[i].n, e);
        free(b->heap[i].ids);
    }
    b->nheap = 0;
    return rc;
}

/* ---- reading ---------------------------------------------------------------------------------- */

static int route(build *b, const uint32_t *ids, size_t n, tupe_err *e)
{
    const tupe_shard_opts *o = b->o;
    uint64_t doc = b->docs++;
    uint32_t n32 = (uint32_t)n;
    /* The reading thread is the busier one: the input's hash is taken here. */
    tupe_hasher_update(b->inhash, &n32, sizeof n32);
    tupe_hasher_update(b->inhash, ids, n * sizeof *ids);
    b->tokens += n;
    if (n == 0) {
        b->empty++;
        return 0;
    }
    b->framed += n >= 2 && ids[0] == (uint32_t)b->special[TUPE_SP_CLS] &&
                 ids[n - 1] == (uint32_t)b->special[TUPE_SP_SEP];
    int split = TUPE_SPLIT_TRAIN;
    if (o->valid_fraction > 0) {
        double u = (double)(doc_key(o->seed, doc) >> 11) * (1.0 / 9007199254740992.0);
        split = u < o->valid_fraction ? TUPE_SPLIT_VALID : TUPE_SPLIT_TRAIN;
    } else if (o->valid_sequences > 0) {
        return offer_valid(b, doc, ids, n32, e);
    }
    return tupe_packer_doc(&b->pk[split], ids, n, e);
}

static uint64_t input_total(const tupe_shard_opts *o)
{
    uint64_t t = 0;
    for (int i = 0; i < o->ninputs; i++) {
        struct stat st;
        if (strcmp(o->inputs[i], "-") == 0 || stat(o->inputs[i], &st) != 0 || !S_ISREG(st.st_mode))
            return 0;
        t += (uint64_t)st.st_size;
    }
    return t;
}

static int read_inputs(build *b, tupe_err *e)
{
    const tupe_shard_opts *o = b->o;
    static const char *const stdin_only[] = {"-"};
    const char *const *paths = o->ninputs > 0 ? o->inputs : stdin_only;
    int npaths = o->ninputs > 0 ? o->ninputs : 1;
    tupe_tokq *q;
    int rc = tupe_tokq_open(&q, paths, npaths, BATCH_IDS, e);
    if (rc)
        return rc;
    tupe_progress_start(&b->prog, "reading", input_total(o), "B", o->quiet);
    const tupe_tokbatch *tb;
    int got = 0, last = -1;
    while (!rc && (got = tupe_tokq_next(q, &tb, e)) == 1) {
        if (tb->input != last) {
            const tupe_tok_header *h = tb->header;
            const char *path = paths[tb->input];
            if (!b->have_header) {
                rc = setup(b, h, path, e);
            } else if (h->vocab_size != b->h.vocab_size || h->vocab_hash != b->h.vocab_hash) {
                rc = tupe_fail(e, TUPE_EDATA,
                               "%s: vocabulary (size %u, hash %016" PRIx64 ") differs from that "
                               "of %s (size %u, hash %016" PRIx64 ")", tupe_path_name(path),
                               h->vocab_size, h->vocab_hash, tupe_path_name(b->first_input),
                               b->h.vocab_size, b->h.vocab_hash);
            }
            last = tb->input;
        }
        const uint32_t *ids = tb->ids;
        for (size_t d = 0; d < tb->ndocs && !rc; d++) {
            rc = route(b, ids, tb->lens[d], e);
            ids += tb->lens[d];
        }
        b->input_bytes = tb->offset;
        tupe_progress_set(&b->prog, b->input_bytes);
    }
    if (!rc && got < 0)
        rc = e->code;
    tupe_tokq_close(q);
    if (rc)
        return rc;
    tupe_progress_finish(&b->prog);
    if (b->docs == b->empty)
        return tupe_fail(e, TUPE_EDATA, "%s: no documents with ids in the input",
                         tupe_path_name(b->first_input));
    if (o->valid_sequences > 0 && (rc = pack_candidates(b, e)))
        return rc;
    for (int s = 0; s < TUPE_SPLITS && !rc; s++)
        if (b->pk_init[s] && !(rc = tupe_packer_finish(&b->pk[s], e)))
            rc = tupe_xshuf_finish(b->xs[s], e);
    if (rc)
        return rc;
    if (b->pk[TUPE_SPLIT_TRAIN].sequences == 0)
        return tupe_fail(e, TUPE_EDATA, "no training sequences are left (the validation split "
                         "took the whole input)");
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------------- */

static int frame_sink(void *ctx, const void *stored, size_t n, uint64_t check, size_t raw,
                      uint64_t tag, tupe_err *e)
{
    build *b = ctx;
    (void)raw, (void)tag;
    finfo fi = b->fifo[b->fifo_head++ % b->fifo_cap];
    tupe_progress_add(&b->prog, fi.records);
    return tupe_shardw_frame(b->w, stored, n, check, fi.records, fi.tokens, e);
}

static uint64_t file_count(uint64_t total, uint32_t files, uint32_t i)
{
    return total / files + (i < total % files ? 1 : 0);
}

static int write_native(build *b, tupe_fpool *pool, int split, tupe_err *e)
{
    tupe_split_meta *sm = &b->m.split[split];
    uint32_t fr = b->m.frame_records;
    uint64_t first = 0;
    b->tmpl.split = (uint32_t)split;
    b->tmpl.shards = sm->nfiles;
    b->tmpl.flags = (b->o->layout == TUPE_LAYOUT_ZSTD ? TUPE_SHARD_ZSTD : 0) |
                    (split == TUPE_SPLIT_TRAIN && b->o->shuffle ? TUPE_SHARD_SHUFFLED : 0);
    for (uint32_t i = 0; i < sm->nfiles; i++) {
        tupe_shard_file *f = &sm->files[i];
        tupe_shard_file_name(f->name, sizeof f->name, split, i, b->m.layout);
        f->sequences = file_count(sm->sequences, sm->nfiles, i);
        f->first = first;
        b->tmpl.shard = i;
        b->tmpl.first = first;
        int rc = tupe_shardw_open(&b->w, tupe_dirtx_file(b->tx, f->name), &b->tmpl, e);
        if (rc)
            return rc;
        for (uint64_t left = f->sequences; left > 0 && !rc;) {
            uint32_t k = left < fr ? (uint32_t)left : fr;
            unsigned char *buf;
            if ((rc = tupe_fpool_buffer(pool, &buf, e)))
                break;
            finfo fi = {k, 0};
            for (uint32_t j = 0; j < k; j++) {
                const void *rec;
                int got = tupe_xshuf_next(b->xs[split], &rec, e);
                if (got != 1) {
                    rc = got < 0 ? e->code : tupe_fail(e, TUPE_EFAIL, "shuffle ended early");
                    break;
                }
                memcpy(buf + (size_t)j * b->rec_bytes, rec, b->rec_bytes);
                fi.tokens += tupe_rec_length(rec);
            }
            if (rc)
                break;
            f->tokens += fi.tokens;
            b->fifo[b->fifo_tail++ % b->fifo_cap] = fi;
            rc = tupe_fpool_submit(pool, (size_t)k * b->rec_bytes, 0, e);
            left -= k;
        }
        if (!rc)
            rc = tupe_fpool_flush(pool, e);
        if (rc)
            return rc;
        rc = tupe_shardw_close(b->w, &f->bytes, e);
        b->w = NULL;
        if (rc)
            return rc;
        first += f->sequences;
        sm->stored_bytes += f->bytes;
    }
    return 0;
}

static int write_megatron(build *b, int split, tupe_err *e)
{
    tupe_split_meta *sm = &b->m.split[split];
    uint32_t *ids = malloc((size_t)b->o->seq_len * sizeof *ids);
    if (!ids)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    uint64_t first = 0;
    int rc = 0;
    for (uint32_t i = 0; i < sm->nfiles && !rc; i++) {
        tupe_shard_file *f = &sm->files[i];
        tupe_shard_file_name(f->name, sizeof f->name, split, i, TUPE_LAYOUT_MEGATRON);
        f->sequences = file_count(sm->sequences, sm->nfiles, i);
        f->first = first;
        tupe_megaw *w;
        if ((rc = tupe_megaw_open(&w, tupe_dirtx_file(b->tx, f->name), b->m.megatron_dtype, e)))
            break;
        for (uint64_t j = 0; j < f->sequences && !rc; j++) {
            const void *rec;
            int got = tupe_xshuf_next(b->xs[split], &rec, e);
            if (got != 1) {
                rc = got < 0 ? e->code : tupe_fail(e, TUPE_EFAIL, "shuffle ended early");
                break;
            }
            uint32_t len;
            tupe_rec_decode(rec, b->o->seq_len, b->id_bytes, ids, &len);
            f->tokens += len;
            rc = tupe_megaw_seq(w, ids, len, e);
            tupe_progress_add(&b->prog, 1);
        }
        if (rc) {
            tupe_megaw_abort(w);
            break;
        }
        rc = tupe_megaw_close(w, &f->bytes, &f->check, e);
        first += f->sequences;
        sm->stored_bytes += f->bytes;
    }
    free(ids);
    return rc;
}

static int check_opts(const tupe_shard_opts *o, tupe_err *e)
{
    if (!o->output || !*o->output)
        return tupe_fail(e, TUPE_EUSAGE, "no output directory");
    if (o->seq_len < 2 || o->seq_len > (1u << 20))
        return tupe_fail(e, TUPE_EUSAGE, "sequence length %u is out of range (2 to 1048576)",
                         o->seq_len);
    if (o->shards == 0 || o->valid_shards == 0)
        return tupe_fail(e, TUPE_EUSAGE, "shard counts must be at least 1");
    if (o->valid_fraction < 0 || o->valid_fraction >= 1)
        return tupe_fail(e, TUPE_EUSAGE, "validation fraction must be in [0, 1)");
    if (o->valid_fraction > 0 && o->valid_sequences > 0)
        return tupe_fail(e, TUPE_EUSAGE, "a validation fraction and a count exclude each other");
    if (o->threads < 1)
        return tupe_fail(e, TUPE_EUSAGE, "at least one thread");
    if (o->tmpdir && access(o->tmpdir, W_OK | X_OK) != 0)
        return tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot write spill files there",
                               o->tmpdir);
    if (tupe_shard_sort_memory(o) == 0)
        return tupe_fail(e, TUPE_EUSAGE,
                         "--memory %" PRIu64 " MiB is too small: the compression buffers of %d "
                         "thread(s) and the other buffers need %" PRIu64 " MiB; use at least %"
                         PRIu64 "M", o->memory >> 20, o->threads,
                         fixed_memory(o) >> 20, (fixed_memory(o) + MIN_SORT + ((uint64_t)1 << 20) - 1) >> 20);
    return 0;
}

static uint64_t set_id(const build *b)
{
    const tupe_shard_opts *o = b->o;
    char s[512];
    int n = snprintf(s, sizeof s,
                     "in=%016" PRIx64 " seed=%" PRIu64 " L=%u brk=%d shuf=%d vf=%.17g vs=%" PRIu64
                     " S=%u VS=%u layout=%d level=%d frame=%" PRIu64 " sp=%d,%d,%d,%d,%d",
                     b->m.in_hash, o->seed, o->seq_len, o->brk, o->shuffle, o->valid_fraction,
                     o->valid_sequences, o->shards, o->valid_shards, o->layout, o->level,
                     o->frame_bytes, b->special[0], b->special[1], b->special[2], b->special[3],
                     b->special[4]);
    return tupe_hash64(s, (size_t)n);
}

static void build_free(build *b)
{
    for (int s = 0; s < TUPE_SPLITS; s++) {
        tupe_xshuf_free(b->xs[s]);
    }
    for (size_t i = 0; i < b->nheap; i++)
        free(b->heap[i].ids);
    free(b->heap);
    free(b->fifo);
    tupe_hasher_free(b->inhash);
    tupe_shardw_abort(b->w);
    tupe_dirtx_abort(b->tx);
}

static int write_output(build *b, tupe_err *e)
{
    const tupe_shard_opts *o = b->o;
    tupe_shard_meta *m = &b->m;
    m->layout = o->layout;
    m->seq_len = o->seq_len;
    m->id_bytes = b->id_bytes;
    m->rec_bytes = b->rec_bytes;
    m->vocab_size = b->h.vocab_size;
    m->vocab_hash = b->h.vocab_hash;
    memcpy(m->special, b->special, sizeof m->special);
    m->brk = o->brk;
    m->shuffled = o->shuffle;
    m->seed = o->seed;
    m->level = o->layout == TUPE_LAYOUT_ZSTD ? o->level : 0;
    m->frame_bytes = o->frame_bytes;
    m->frame_records = (uint32_t)(o->frame_bytes / b->rec_bytes);
    if (m->frame_records == 0)
        m->frame_records = 1;
    m->megatron_dtype = tupe_megatron_dtype(b->h.vocab_size);
    m->in_documents = b->docs;
    m->in_empty = b->empty;
    m->in_tokens = b->tokens;
    m->in_hash = tupe_hasher_digest(b->inhash);
    m->set_id = set_id(b);
    uint64_t total = 0;
    for (int s = 0; s < TUPE_SPLITS; s++) {
        tupe_split_meta *sm = &m->split[s];
        if (!b->pk_init[s])
            continue;
        const tupe_packer *p = &b->pk[s];
        sm->sequences = p->sequences;
        sm->documents = p->documents;
        sm->tokens = p->tokens;
        sm->padding = p->padding;
        sm->raw_bytes = o->layout == TUPE_LAYOUT_MEGATRON
                            ? p->tokens * (m->megatron_dtype == 8 ? 2 : 4)
                            : p->sequences * b->rec_bytes;
        sm->nfiles = p->sequences == 0 ? 0 : s == TUPE_SPLIT_TRAIN ? o->shards : o->valid_shards;
        sm->files = calloc(sm->nfiles ? sm->nfiles : 1, sizeof *sm->files);
        if (!sm->files)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        total += p->sequences;
    }
    memset(&b->tmpl, 0, sizeof b->tmpl);
    b->tmpl.id_bytes = b->id_bytes;
    b->tmpl.seq_len = o->seq_len;
    b->tmpl.rec_bytes = b->rec_bytes;
    b->tmpl.vocab_size = m->vocab_size;
    b->tmpl.vocab_hash = m->vocab_hash;
    memcpy(b->tmpl.special, b->special, sizeof b->special);
    b->tmpl.brk = (uint32_t)o->brk;
    b->tmpl.frame_records = m->frame_records;
    b->tmpl.seed = o->seed;
    b->tmpl.set_id = m->set_id;

    int rc = tupe_dirtx_begin(&b->tx, o->output, TUPE_SHARD_KIND, e);
    if (rc)
        return rc;
    tupe_progress_start(&b->prog, "writing", total, "seq", o->quiet);
    tupe_fpool *pool = NULL;
    if (o->layout != TUPE_LAYOUT_MEGATRON) {
        b->fifo_cap = (size_t)o->threads + 8;
        b->fifo = calloc(b->fifo_cap, sizeof *b->fifo);
        if (!b->fifo)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        rc = tupe_fpool_new(&pool, o->threads, o->layout == TUPE_LAYOUT_ZSTD ? o->level : 0,
                            (size_t)m->frame_records * b->rec_bytes, frame_sink, b, e);
    }
    for (int s = 0; s < TUPE_SPLITS && !rc; s++) {
        if (m->split[s].nfiles == 0)
            continue;
        rc = o->layout == TUPE_LAYOUT_MEGATRON ? write_megatron(b, s, e)
                                               : write_native(b, pool, s, e);
        /* The splits' buffers go before the next split's are needed. */
        tupe_xshuf_free(b->xs[s]);
        b->xs[s] = NULL;
    }
    tupe_fpool_free(pool);
    if (rc)
        return rc;
    tupe_progress_finish(&b->prog);
    rc = tupe_manifest_write(tupe_dirtx_file(b->tx, TUPE_MANIFEST), m, e);
    if (rc)
        return rc;
    rc = tupe_dirtx_commit(b->tx, e);
    b->tx = NULL;
    return rc;
}

int tupe_shard_build(const tupe_shard_opts *o, tupe_shard_meta *meta, tupe_shard_report *rep,
                     tupe_err *e)
{
    double t0 = tupe_now();
    int rc = check_opts(o, e);
    if (!rc)
        rc = tupe_outdir_check(o->output, TUPE_SHARD_KIND, TUPE_OUTDIR_REPLACE, e);
    if (rc)
        return rc;
    build b;
    memset(&b, 0, sizeof b);
    b.o = o;
    b.first_input = o->ninputs > 0 ? o->inputs[0] : "-";
    if (!(b.inhash = tupe_hasher_new()))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    rc = read_inputs(&b, e);
    if (!rc && rep) {
        tupe_xshuf_stats st;
        tupe_xshuf_stats_get(b.xs[TUPE_SPLIT_TRAIN], &st);
        rep->runs = st.runs;
        rep->spilled = st.spilled;
        rep->passes = st.passes;
        rep->input_bytes = b.input_bytes;
        rep->framed = b.framed;
    }
    if (!rc)
        rc = write_output(&b, e);
    if (rep)
        rep->seconds = tupe_now() - t0;
    build_free(&b);
    if (!rc && meta)
        *meta = b.m;
    else
        tupe_shard_meta_free(&b.m);
    return rc;
}
