#include "data/shardread.h"

#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checksum.h"
#include "base/rng.h"
#include "data/megatron.h"
#include "data/pack.h"

void tupe_shardr_opts_init(tupe_shardr_opts *o)
{
    memset(o, 0, sizeof *o);
    o->split = TUPE_SPLIT_TRAIN;
    o->world = 1;
    o->shuffle = 1;
    o->seed = 1;
    o->prefetch = 2;
}

typedef struct fref {
    uint32_t file;
    uint32_t frame;
    uint32_t count;
    uint64_t first;     /* split index of its first record */
} fref;

typedef struct slot {
    tupe_fdec dec;
    const unsigned char *recs;
    uint32_t *perm;
    uint64_t item;      /* plan position of the frame */
    int bad;
    tupe_err err;
} slot;

struct tupe_shardr {
    tupe_shardr_opts o;
    char *dir;
    tupe_shard_meta m;
    tupe_shardf *files;
    uint32_t nfiles;
    uint64_t n;
    fref *frames;
    uint64_t nframes;
    /* the plan of the current epoch */
    uint64_t epoch;
    int have_plan;
    uint64_t *order, *cum;
    /* the cursor */
    uint64_t pos;
    int failed;
    tupe_err fail_err;
    /* decoded frames: prefetch ring (or one slot when decoding in place) */
    slot *slots;
    int nslots;
    int held;           /* slot the caller is reading from, or -1 */
    pthread_t tid;
    int thread_on, stop, paused;
    pthread_mutex_t mu;
    pthread_cond_t cv_work, cv_ready;
    uint64_t gen, fill_item;
    int head, nready, busy;
    /* random access */
    tupe_fdec rdec;
    uint64_t rframe;
    const unsigned char *rrecs;
    uint32_t *ids_tmp;
};

/* ---- plans ------------------------------------------------------------------------------------ */

static void plan_order(const tupe_shardr *r, uint64_t epoch, uint64_t *order, uint64_t *cum)
{
    for (uint64_t i = 0; i < r->nframes; i++)
        order[i] = i;
    if (r->o.shuffle) {
        tupe_rng g;
        tupe_rng_init(&g, r->o.seed, (uint32_t)epoch, 0, TUPE_RNG_SHUFFLE);
        tupe_rng_shuffle_u64(&g, order, r->nframes);
    }
    cum[0] = 0;
    for (uint64_t i = 0; i < r->nframes; i++)
        cum[i + 1] = cum[i] + r->frames[order[i]].count;
}

static void frame_perm(const tupe_shardr *r, uint64_t epoch, uint64_t frame, uint32_t *perm)
{
    uint32_t c = r->frames[frame].count;
    for (uint32_t i = 0; i < c; i++)
        perm[i] = i;
    if (r->o.shuffle) {
        tupe_rng g;
        tupe_rng_init(&g, r->o.seed, (uint32_t)epoch, (uint32_t)(frame + 1), TUPE_RNG_SHUFFLE);
        tupe_rng_shuffle_u32(&g, perm, c);
    }
}

/* Plan position holding epoch position p (cum is increasing; binary search). */
static uint64_t item_of(const tupe_shardr *r, uint64_t p)
{
    uint64_t lo = 0, hi = r->nframes;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->cum[mid] <= p)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

/* First plan position at or after i that holds a position of this rank. */
static uint64_t next_item_for_rank(const tupe_shardr *r, uint64_t i)
{
    uint32_t w = r->o.world, k = r->o.rank;
    for (; i < r->nframes; i++) {
        uint64_t a = r->cum[i], rem = a % w;
        uint64_t first = a + (k >= rem ? k - rem : w - rem + k);
        if (first < r->cum[i + 1])
            return i;
    }
    return i;
}

/* ---- decoding ------------------------------------------------------------------------------- */

static int decode_item(tupe_shardr *r, slot *s, uint64_t epoch, uint64_t item)
{
    uint64_t f = r->order[item];
    const fref *fr = &r->frames[f];
    tupe_err_clear(&s->err);
    s->bad = 0;
    s->item = item;
    int rc = tupe_shardf_frame(&r->files[fr->file], fr->frame, &s->dec, &s->recs, &s->err);
    if (rc) {
        s->bad = 1;
        return rc;
    }
    frame_perm(r, epoch, f, s->perm);
    return 0;
}

static void *prefetcher(void *arg)
{
    tupe_shardr *r = arg;
    pthread_setname_np(pthread_self(), "tupe-prefetch");
    pthread_mutex_lock(&r->mu);
    for (;;) {
        if (r->stop)
            break;
        uint64_t it = r->have_plan && !r->paused ? next_item_for_rank(r, r->fill_item) : r->nframes;
        if (r->nready + r->busy >= r->nslots || it >= r->nframes) {
            pthread_cond_wait(&r->cv_work, &r->mu);
            continue;
        }
        int si = (r->head + r->nready) % r->nslots;
        uint64_t g = r->gen, epoch = r->epoch;
        r->fill_item = it + 1;
        r->busy = 1;
        pthread_mutex_unlock(&r->mu);
        decode_item(r, &r->slots[si], epoch, it);
        pthread_mutex_lock(&r->mu);
        r->busy = 0;
        if (g == r->gen)
            r->nready++;
        pthread_cond_broadcast(&r->cv_ready);
    }
    pthread_mutex_unlock(&r->mu);
    return NULL;
}

/* ---- open ----------------------------------------------------------------------------------- */

static int check_expectations(const tupe_shardr *r, tupe_err *e)
{
    const tupe_shard_meta *m = &r->m;
    const tupe_shardr_opts *o = &r->o;
    if (o->seq_len && o->seq_len != m->seq_len)
        return tupe_fail(e, TUPE_EDATA,
                         "%s: the shards hold sequences of %u ids, but %u were expected "
                         "(re-shard with --seq-len %u)", r->dir, m->seq_len, o->seq_len, o->seq_len);
    if (o->vocab_size && (o->vocab_size != m->vocab_size || o->vocab_hash != m->vocab_hash)) {
        char a[22], b[22];
        tupe_hash_hex(m->vocab_hash, a);
        tupe_hash_hex(o->vocab_hash, b);
        return tupe_fail(e, TUPE_EDATA,
                         "%s: the shards were made with another vocabulary (size %u, hash %s) "
                         "than the expected one (size %u, hash %s)", r->dir, m->vocab_size, a,
                         o->vocab_size, b);
    }
    return 0;
}

int tupe_shardr_open(tupe_shardr **rp, const char *dir, const tupe_shardr_opts *o, tupe_err *e)
{
    if (o->world == 0 || o->rank >= o->world)
        return tupe_fail(e, TUPE_EUSAGE, "rank %u is not below the world size %u", o->rank,
                         o->world);
    if (o->split != TUPE_SPLIT_TRAIN && o->split != TUPE_SPLIT_VALID)
        return tupe_fail(e, TUPE_EUSAGE, "unknown split %d", o->split);
    tupe_shardr *r = calloc(1, sizeof *r);
    if (!r || !(r->dir = strdup(dir))) {
        free(r);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    r->o = *o;
    r->held = -1;
    r->rframe = UINT64_MAX;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cv_work, NULL);
    pthread_cond_init(&r->cv_ready, NULL);
    int rc = tupe_manifest_read(dir, &r->m, e);
    if (rc) {
        free(r->dir);
        free(r);
        return rc;
    }
    const tupe_split_meta *sm = &r->m.split[o->split];
    if (r->m.layout == TUPE_LAYOUT_MEGATRON)
        rc = tupe_fail(e, TUPE_EDATA, "%s: is a Megatron export (.bin/.idx), not tupe shards",
                       dir);
    else if (sm->sequences == 0)
        rc = tupe_fail(e, TUPE_EDATA, "%s: the %s split is empty%s", dir,
                       tupe_split_name(o->split),
                       o->split == TUPE_SPLIT_VALID ? " (write one with --valid-fraction)" : "");
    if (!rc)
        rc = check_expectations(r, e);
    if (rc) {
        tupe_shardr_close(r);
        return rc;
    }
    r->n = sm->sequences;
    r->files = calloc(sm->nfiles, sizeof *r->files);
    if (!r->files) {
        tupe_shardr_close(r);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (uint32_t i = 0; i < sm->nfiles && !rc; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s/%s", dir, sm->files[i].name);
        rc = tupe_shardf_open(&r->files[i], path, e);
        if (!rc) {
            r->nfiles++;
            rc = tupe_shard_header_matches(&r->files[i].h, &r->m, o->split, i, path, e);
            r->nframes += r->files[i].h.frames;
        }
    }
    if (!rc) {
        r->frames = calloc(r->nframes ? r->nframes : 1, sizeof *r->frames);
        r->order = calloc(r->nframes ? r->nframes : 1, sizeof *r->order);
        r->cum = calloc(r->nframes + 1, sizeof *r->cum);
        r->ids_tmp = malloc((size_t)r->m.seq_len * sizeof *r->ids_tmp);
        r->nslots = o->prefetch > 0 ? o->prefetch + 1 : 1;
        r->slots = calloc((size_t)r->nslots, sizeof *r->slots);
        if (!r->frames || !r->order || !r->cum || !r->slots || !r->ids_tmp)
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (int i = 0; !rc && i < r->nslots; i++)
        if (!(r->slots[i].perm = malloc((size_t)r->m.frame_records * sizeof(uint32_t))))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    uint64_t k = 0;
    for (uint32_t i = 0; !rc && i < r->nfiles; i++)
        for (uint64_t j = 0; j < r->files[i].h.frames; j++, k++)
            r->frames[k] = (fref){i, (uint32_t)j, r->files[i].frames[j].records,
                                  r->files[i].h.first + j * r->m.frame_records};
    if (!rc && o->prefetch > 0) {
        if (pthread_create(&r->tid, NULL, prefetcher, r) != 0)
            rc = tupe_fail(e, TUPE_EFAIL, "cannot start the prefetch thread");
        else
            r->thread_on = 1;
    }
    if (rc) {
        tupe_shardr_close(r);
        return rc;
    }
    *rp = r;
    return 0;
}

const tupe_shard_meta *tupe_shardr_meta(const tupe_shardr *r) { return &r->m; }
uint64_t tupe_shardr_size(const tupe_shardr *r) { return r->n; }

uint64_t tupe_shardr_epoch_len(const tupe_shardr *r)
{
    return r->n > r->o.rank ? (r->n - r->o.rank - 1) / r->o.world + 1 : 0;
}

/* ---- random access ---------------------------------------------------------------------------- */

static uint64_t frame_of_index(const tupe_shardr *r, uint64_t index)
{
    uint64_t lo = 0, hi = r->nframes;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (r->frames[mid].first <= index)
            lo = mid;
        else
            hi = mid;
    }
    return lo;
}

static void emit(const tupe_shardr *r, const unsigned char *rec, uint32_t *ids, uint32_t *length)
{
    tupe_rec_decode(rec, r->m.seq_len, r->m.id_bytes, ids ? ids : r->ids_tmp, length);
}

int tupe_shardr_get(tupe_shardr *r, uint64_t index, uint32_t *ids, uint32_t *length,
                    tupe_err *e)
{
    if (index >= r->n)
        return tupe_fail(e, TUPE_EUSAGE, "%s: sequence %" PRIu64 " is out of range (%" PRIu64
                         " in the %s split)", r->dir, index, r->n, tupe_split_name(r->o.split));
    uint64_t f = frame_of_index(r, index);
    if (f != r->rframe) {
        r->rframe = UINT64_MAX;
        const fref *fr = &r->frames[f];
        int rc = tupe_shardf_frame(&r->files[fr->file], fr->frame, &r->rdec, &r->rrecs, e);
        if (rc)
            return rc;
        r->rframe = f;
    }
    emit(r, r->rrecs + (index - r->frames[f].first) * r->m.rec_bytes, ids, length);
    return 0;
}

int tupe_shardr_order(tupe_shardr *r, uint64_t epoch, uint64_t pos, uint64_t *index, tupe_err *e)
{
    if (pos >= r->n)
        return tupe_fail(e, TUPE_EUSAGE, "position %" PRIu64 " is past the epoch (%" PRIu64 ")",
                         pos, r->n);
    uint64_t *order = malloc(r->nframes * sizeof *order);
    uint64_t *cum = malloc((r->nframes + 1) * sizeof *cum);
    uint32_t *perm = malloc((size_t)r->m.frame_records * sizeof *perm);
    if (!order || !cum || !perm) {
        free(order), free(cum), free(perm);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    plan_order(r, epoch, order, cum);
    uint64_t lo = 0, hi = r->nframes;
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        if (cum[mid] <= pos)
            lo = mid;
        else
            hi = mid;
    }
    frame_perm(r, epoch, order[lo], perm);
    *index = r->frames[order[lo]].first + perm[pos - cum[lo]];
    free(order), free(cum), free(perm);
    return 0;
}

/* ---- sequential reading ------------------------------------------------------------------------ */

int tupe_shardr_seek(tupe_shardr *r, uint64_t epoch, uint64_t consumed, tupe_err *e)
{
    if (epoch > UINT32_MAX)
        return tupe_fail(e, TUPE_EUSAGE, "epoch %" PRIu64 " is out of range", epoch);
    pthread_mutex_lock(&r->mu);
    /* Hold the prefetcher, drop what it decoded for the old position, then restart it. */
    r->paused = 1;
    r->gen++;
    while (r->busy)
        pthread_cond_wait(&r->cv_ready, &r->mu);
    if (!r->have_plan || r->epoch != epoch) {
        plan_order(r, epoch, r->order, r->cum);
        r->epoch = epoch;
        r->have_plan = 1;
    }
    uint32_t w = r->o.world, k = r->o.rank;
    uint64_t rem = consumed % w;
    r->pos = consumed + (k >= rem ? k - rem : w - rem + k);
    r->fill_item = r->pos < r->n ? item_of(r, r->pos) : r->nframes;
    r->nready = 0;
    r->head = 0;
    r->held = -1;
    r->failed = 0;
    r->paused = 0;
    pthread_cond_broadcast(&r->cv_work);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

void tupe_shardr_tell(const tupe_shardr *r, uint64_t *epoch, uint64_t *consumed)
{
    *epoch = r->epoch;
    *consumed = r->pos >= r->o.rank ? r->pos - r->o.rank : 0;
}

/* The slot holding plan position `item`, decoded (by the prefetcher or here). */
static int get_slot(tupe_shardr *r, uint64_t item, slot **out, tupe_err *e)
{
    if (r->held >= 0 && r->slots[r->held].item == item) {
        *out = &r->slots[r->held];
        return 0;
    }
    if (!r->thread_on) {
        slot *s = &r->slots[0];
        r->held = -1;
        if (decode_item(r, s, r->epoch, item)) {
            *e = s->err;
            return e->code;
        }
        r->held = 0;
        *out = s;
        return 0;
    }
    pthread_mutex_lock(&r->mu);
    if (r->held >= 0) {
        r->head = (r->head + 1) % r->nslots;
        r->nready--;
        r->held = -1;
        pthread_cond_broadcast(&r->cv_work);
    }
    while (r->nready == 0)
        pthread_cond_wait(&r->cv_ready, &r->mu);
    slot *s = &r->slots[r->head];
    r->held = r->head;
    pthread_mutex_unlock(&r->mu);
    if (s->bad) {
        *e = s->err;
        return e->code;
    }
    if (s->item != item)
        return tupe_fail(e, TUPE_EFAIL, "%s: prefetch out of step (frame %" PRIu64 ", wanted %"
                         PRIu64 ")", r->dir, s->item, item);
    *out = s;
    return 0;
}

int tupe_shardr_next(tupe_shardr *r, uint32_t *ids, uint32_t *length, uint64_t *index,
                     tupe_err *e)
{
    if (!r->have_plan && tupe_shardr_seek(r, 0, 0, e))
        return -1;
    if (r->failed) {
        *e = r->fail_err;
        return -1;
    }
    if (r->pos >= r->n)
        return 0;
    uint64_t item = item_of(r, r->pos);
    slot *s = NULL;
    int rc = get_slot(r, item, &s, e);
    if (rc) {
        r->failed = 1;
        r->fail_err = *e;
        return -1;
    }
    uint64_t f = r->order[item];
    uint32_t k = s->perm[r->pos - r->cum[item]];
    emit(r, s->recs + (size_t)k * r->m.rec_bytes, ids, length);
    if (index)
        *index = r->frames[f].first + k;
    r->pos += r->o.world;
    return 1;
}

int tupe_shardr_batch(tupe_shardr *r, uint32_t batch, uint32_t *ids, uint32_t *lengths,
                      uint64_t *indexes, tupe_err *e)
{
    uint32_t w = r->o.world;
    if (batch == 0 || batch % w != 0)
        return tupe_fail(e, TUPE_EUSAGE, "global batch %u is not a multiple of the world size %u",
                         batch, w);
    if (batch > r->n)
        return tupe_fail(e, TUPE_EUSAGE, "%s: global batch %u is larger than the %s split (%"
                         PRIu64 " sequences)", r->dir, batch, tupe_split_name(r->o.split), r->n);
    if (!r->have_plan && tupe_shardr_seek(r, 0, 0, e))
        return e->code;
    uint64_t epoch, consumed;
    tupe_shardr_tell(r, &epoch, &consumed);
    if (consumed + batch > r->n && tupe_shardr_seek(r, epoch + 1, 0, e))
        return e->code;
    uint32_t L = r->m.seq_len, len;
    uint64_t idx;
    for (uint32_t j = 0; j < batch / w; j++) {
        int got = tupe_shardr_next(r, ids ? ids + (size_t)j * L : NULL, &len, &idx, e);
        if (got != 1)
            return got < 0 ? e->code : tupe_fail(e, TUPE_EFAIL, "%s: epoch ended inside a batch", r->dir);
        if (lengths)
            lengths[j] = len;
        if (indexes)
            indexes[j] = idx;
    }
    return 0;
}

void tupe_shardr_close(tupe_shardr *r)
{
    if (!r)
        return;
    if (r->thread_on) {
        pthread_mutex_lock(&r->mu);
        r->stop = 1;
        pthread_cond_broadcast(&r->cv_work);
        pthread_mutex_unlock(&r->mu);
        pthread_join(r->tid, NULL);
    }
    for (uint32_t i = 0; i < r->nfiles; i++)
        tupe_shardf_close(&r->files[i]);
    for (int i = 0; r->slots && i < r->nslots; i++) {
        tupe_fdec_free(&r->slots[i].dec);
        free(r->slots[i].perm);
    }
    tupe_fdec_free(&r->rdec);
    free(r->slots);
    free(r->files);
    free(r->frames);
    free(r->order);
    free(r->cum);
    free(r->ids_tmp);
    tupe_shard_meta_free(&r->m);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cv_work);
    pthread_cond_destroy(&r->cv_ready);
    free(r->dir);
    free(r);
}

/* ---- verification -------------------------------------------------------------------------- */

static void problem(tupe_verify_cb cb, void *ctx, tupe_verify_stats *st, const tupe_err *p)
{
    st->problems++;
    if (cb)
        cb(ctx, p);
}

static void verify_records(const tupe_shard_meta *m, const tupe_shardf *f, uint64_t fi,
                           const unsigned char *recs, uint32_t count, uint32_t *ids,
                           tupe_verify_cb cb, void *ctx, tupe_verify_stats *st)
{
    int32_t pad = m->special[TUPE_SP_PAD];
    for (uint32_t k = 0; k < count; k++) {
        uint32_t len;
        tupe_rec_decode(recs + (size_t)k * m->rec_bytes, m->seq_len, m->id_bytes, ids, &len);
        const char *what = NULL;
        uint32_t at = 0;
        for (uint32_t i = 0; i < m->seq_len && !what; i++) {
            if (i < len && ids[i] >= m->vocab_size)
                what = "id outside the vocabulary", at = i;
            else if (i >= len && (int64_t)ids[i] != pad)
                what = "padding that is not the pad id", at = i;
        }
        if (what) {
            tupe_err p;
            tupe_fail_byte(&p, TUPE_EDATA, f->path, f->frames[fi].offset,
                           "frame %" PRIu64 ": record %u, position %u: %s", fi, k, at, what);
            problem(cb, ctx, st, &p);
            return;
        }
    }
}

static int verify_native(const char *dir, const tupe_shard_meta *m, tupe_verify_cb cb, void *ctx,
                         tupe_verify_stats *st, tupe_err *e)
{
    uint32_t *ids = malloc((size_t)m->seq_len * sizeof *ids);
    if (!ids)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_fdec d;
    tupe_fdec_init(&d);
    for (int s = 0; s < TUPE_SPLITS; s++)
        for (uint32_t i = 0; i < m->split[s].nfiles; i++) {
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s/%s", dir, m->split[s].files[i].name);
            tupe_shardf f;
            tupe_err p;
            st->files++;
            if (tupe_shardf_open(&f, path, &p)) {
                problem(cb, ctx, st, &p);
                continue;
            }
            if (tupe_shard_header_matches(&f.h, m, s, i, path, &p)) {
                problem(cb, ctx, st, &p);
                tupe_shardf_close(&f);
                continue;
            }
            for (uint64_t j = 0; j < f.h.frames; j++) {
                const unsigned char *recs;
                st->frames++;
                if (tupe_shardf_frame(&f, j, &d, &recs, &p)) {
                    problem(cb, ctx, st, &p);
                    continue;
                }
                st->sequences += f.frames[j].records;
                verify_records(m, &f, j, recs, f.frames[j].records, ids, cb, ctx, st);
            }
            tupe_shardf_close(&f);
        }
    tupe_fdec_free(&d);
    free(ids);
    return 0;
}

static int verify_megatron(const char *dir, const tupe_shard_meta *m, tupe_verify_cb cb,
                           void *ctx, tupe_verify_stats *st, tupe_err *e)
{
    uint32_t *ids = malloc((size_t)m->seq_len * sizeof *ids);
    if (!ids)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (int s = 0; s < TUPE_SPLITS; s++)
        for (uint32_t i = 0; i < m->split[s].nfiles; i++) {
            const tupe_shard_file *sf = &m->split[s].files[i];
            char prefix[PATH_MAX];
            snprintf(prefix, sizeof prefix, "%s/%s", dir, sf->name);
            tupe_err p;
            uint64_t check, bytes;
            st->files++;
            if (tupe_megatron_check(prefix, &check, &bytes, &p)) {
                problem(cb, ctx, st, &p);
                continue;
            }
            if (check != sf->check || bytes != sf->bytes) {
                tupe_fail(&p, TUPE_EDATA, "%s.bin/.idx: %s", prefix,
                          bytes != sf->bytes ? "size differs from the manifest (truncated?)"
                                             : "checksum mismatch (corrupt)");
                problem(cb, ctx, st, &p);
                continue;
            }
            tupe_megar mr;
            if (tupe_megar_open(&mr, prefix, &p)) {
                problem(cb, ctx, st, &p);
                continue;
            }
            if (mr.sequences != sf->sequences) {
                tupe_fail(&p, TUPE_EDATA, "%s.idx: %" PRIu64 " sequences, the manifest says %"
                          PRIu64, prefix, mr.sequences, sf->sequences);
                problem(cb, ctx, st, &p);
            }
            for (uint64_t q = 0; q < mr.sequences; q++) {
                uint32_t n;
                if (tupe_megar_seq(&mr, q, ids, m->seq_len, &n, &p)) {
                    problem(cb, ctx, st, &p);
                    break;
                }
                st->sequences++;
            }
            tupe_megar_close(&mr);
        }
    free(ids);
    return 0;
}

int tupe_shard_verify(const char *dir, tupe_verify_cb cb, void *ctx, tupe_verify_stats *st,
                      tupe_err *e)
{
    memset(st, 0, sizeof *st);
    tupe_shard_meta m;
    int rc = tupe_manifest_read(dir, &m, e);
    if (rc)
        return rc;
    rc = m.layout == TUPE_LAYOUT_MEGATRON ? verify_megatron(dir, &m, cb, ctx, st, e)
                                          : verify_native(dir, &m, cb, ctx, st, e);
    tupe_shard_meta_free(&m);
    if (rc)
        return rc;
    if (st->problems)
        return tupe_fail(e, TUPE_EDATA, "%s: %" PRIu64 " problem%s found", dir, st->problems,
                         st->problems == 1 ? "" : "s");
    return 0;
}
