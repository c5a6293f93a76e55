/* Shard directories end to end through the library: packing preserves every id in order,
 * the shuffle is a permutation that does not depend on memory or threads, validation holds
 * whole documents that training does not, the reader's epoch orders and rank partitions,
 * exact resume, and detection of every corrupted frame, header, index and truncation. */
#include <sys/stat.h>
#include <unistd.h>

#include "base/checksum.h"
#include "base/rng.h"
#include "data/megatron.h"
#include "data/pack.h"
#include "data/shard.h"
#include "data/shardbuild.h"
#include "data/shardread.h"
#include "text/tokstream.h"
#include "unit.h"

enum { PAD = 0, UNK = 1, CLS = 2, SEP = 3, MASK = 4, VOCAB = 60000 };

typedef struct corpus {
    int ndocs;
    uint32_t *lens;
    uint32_t **ids;
} corpus;

/* Documents with ids >= 5 (never a special id); every document differs from the others. */
static corpus make_corpus(int ndocs, uint32_t maxlen, uint32_t seed)
{
    corpus c = {ndocs, calloc((size_t)ndocs, sizeof(uint32_t)), calloc((size_t)ndocs, sizeof(uint32_t *))};
    tupe_rng r;
    tupe_rng_init(&r, seed, 1, 2, TUPE_RNG_USER);
    for (int d = 0; d < ndocs; d++) {
        c.lens[d] = tupe_rng_below(&r, 7) == 0 ? 0 : 2 + tupe_rng_below(&r, maxlen);
        c.ids[d] = malloc((c.lens[d] + 1) * sizeof(uint32_t));
        for (uint32_t i = 0; i < c.lens[d]; i++)
            c.ids[d][i] = 5 + tupe_rng_below(&r, VOCAB - 5);
    }
    return c;
}

static void free_corpus(corpus *c)
{
    for (int d = 0; d < c->ndocs; d++)
        free(c->ids[d]);
    free(c->ids);
    free(c->lens);
}

static void write_stream(const corpus *c, const char *path)
{
    tupe_tok_header h;
    tupe_tok_header_init(&h, VOCAB, 0x1234abcdULL);
    h.special[TUPE_SP_PAD] = PAD;
    h.special[TUPE_SP_UNK] = UNK;
    h.special[TUPE_SP_CLS] = CLS;
    h.special[TUPE_SP_SEP] = SEP;
    h.special[TUPE_SP_MASK] = MASK;
    tupe_tokw *w;
    tupe_err e;
    CHECK_INT(tupe_tokw_open(&w, path, &h, &e), 0);
    for (int d = 0; d < c->ndocs; d++)
        CHECK_INT(tupe_tokw_doc(w, c->ids[d], c->lens[d], &e), 0);
    CHECK_INT(tupe_tokw_close(w, &e), 0);
}

static tupe_shard_opts base_opts(const char *out, const char **in)
{
    tupe_shard_opts o;
    tupe_shard_opts_init(&o);
    o.output = out;
    o.inputs = in;
    o.ninputs = 1;
    o.seq_len = 64;
    o.frame_bytes = 4096;
    o.shards = 4;
    o.valid_fraction = 0.1;
    o.memory = 64u << 20;
    o.threads = 2;
    o.quiet = 1;
    o.level = 1;
    return o;
}

static void build(const tupe_shard_opts *o)
{
    tupe_err e;
    int rc = tupe_shard_build(o, NULL, NULL, &e);
    CHECK_MSG(rc == 0, "build: %s", e.msg);
}

typedef struct seqs {
    uint64_t n;
    uint32_t L;
    uint32_t *ids;   /* n * L */
    uint32_t *len;
    uint64_t *index;
} seqs;

static void free_seqs(seqs *s)
{
    free(s->ids), free(s->len), free(s->index);
}

/* Everything a reader yields for one epoch. */
static seqs read_all(const char *dir, tupe_shardr_opts ro, uint64_t epoch)
{
    seqs s = {0, 0, NULL, NULL, NULL};
    tupe_shardr *r;
    tupe_err e;
    int rc = tupe_shardr_open(&r, dir, &ro, &e);
    CHECK_MSG(rc == 0, "open: %s", e.msg);
    if (rc)
        return s;
    s.L = tupe_shardr_meta(r)->seq_len;
    uint64_t cap = tupe_shardr_epoch_len(r);
    s.ids = malloc((cap + 1) * s.L * sizeof *s.ids);
    s.len = malloc((cap + 1) * sizeof *s.len);
    s.index = malloc((cap + 1) * sizeof *s.index);
    CHECK_INT(tupe_shardr_seek(r, epoch, 0, &e), 0);
    int got;
    while ((got = tupe_shardr_next(r, s.ids + s.n * s.L, &s.len[s.n], &s.index[s.n], &e)) == 1)
        if (++s.n > cap)
            break;
    CHECK_MSG(got == 0, "next: %s", e.msg);
    CHECK_U64(s.n, cap);
    tupe_shardr_close(r);
    return s;
}

/* Concatenate sequences, drop [CLS] and padding, cut at separators: the documents. */
static int docs_of(const seqs *s, uint32_t ***docs, uint32_t **lens)
{
    int cap = 1024, n = 0;
    *docs = malloc((size_t)cap * sizeof **docs);
    *lens = malloc((size_t)cap * sizeof **lens);
    uint32_t *cur = malloc(sizeof *cur * 1);
    uint32_t curn = 0, curcap = 1;
    for (uint64_t k = 0; k < s->n; k++) {
        const uint32_t *q = s->ids + k * s->L;
        CHECK(q[0] == CLS);
        for (uint32_t i = 1; i < s->len[k]; i++) {
            if (q[i] == SEP) {
                if (n == cap) {
                    cap *= 2;
                    *docs = realloc(*docs, (size_t)cap * sizeof **docs);
                    *lens = realloc(*lens, (size_t)cap * sizeof **lens);
                }
                (*docs)[n] = cur;
                (*lens)[n++] = curn;
                cur = malloc(sizeof *cur * 1);
                curn = 0;
                curcap = 1;
                continue;
            }
            if (curn == curcap)
                cur = realloc(cur, (curcap *= 2) * sizeof *cur);
            cur[curn++] = q[i];
        }
        for (uint32_t i = s->len[k]; i < s->L; i++)
            CHECK(q[i] == PAD);
    }
    CHECK_INT(curn, 0);
    free(cur);
    return n;
}

static int same_doc(const uint32_t *a, uint32_t na, const uint32_t *b, uint32_t nb)
{
    return na == nb && memcmp(a, b, na * sizeof *a) == 0;
}

static void packing_and_split_preserve_every_id(void)
{
    corpus c = make_corpus(1500, 150, 7);
    const char *in = unit_path("in.tok");
    write_stream(&c, in);
    const char *inputs[] = {in};
    for (int brk = 0; brk < 2; brk++) {
        const char *dir = unit_path(brk ? "doc" : "full");
        tupe_shard_opts o = base_opts(dir, inputs);
        o.shuffle = 0;
        o.brk = brk;
        build(&o);
        tupe_shardr_opts ro;
        tupe_shardr_opts_init(&ro);
        ro.shuffle = 0;
        seqs tr = read_all(dir, ro, 0);
        ro.split = TUPE_SPLIT_VALID;
        seqs va = read_all(dir, ro, 0);
        uint32_t **td, **vd, *tl, *vl;
        int nt = docs_of(&tr, &td, &tl), nv = docs_of(&va, &vd, &vl);
        /* Each non-empty input document is, in input order, the next training or the next
         * validation document: both are in input order, together they are the input, and
         * no document is in both. */
        int it = 0, iv = 0, bad = 0;
        for (int d = 0; d < c.ndocs && !bad; d++) {
            if (c.lens[d] == 0)
                continue;
            if (it < nt && same_doc(c.ids[d], c.lens[d], td[it], tl[it]))
                it++;
            else if (iv < nv && same_doc(c.ids[d], c.lens[d], vd[iv], vl[iv]))
                iv++;
            else {
                bad = 1;
                CHECK_MSG(0, "document %d is missing or out of order (break %d)", d, brk);
            }
        }
        CHECK_INT(it, nt);
        CHECK_INT(iv, nv);
        CHECK(nv > 60 && nv < 250);   /* about 10% of ~1290 documents */
        tupe_shard_meta m;
        tupe_err e;
        CHECK_INT(tupe_manifest_read(dir, &m, &e), 0);
        CHECK_U64(m.split[0].documents, (uint64_t)nt);
        CHECK_U64(m.split[1].documents, (uint64_t)nv);
        CHECK_U64(m.split[0].sequences, tr.n);
        CHECK_U64(m.in_documents, (uint64_t)c.ndocs);
        CHECK_INT(m.split[0].nfiles, 4);
        CHECK_INT(m.split[1].nfiles, 1);
        /* Equal file sizes to within one record. */
        for (uint32_t i = 0; i < 4; i++) {
            uint64_t want = m.split[0].sequences / 4 + (i < m.split[0].sequences % 4);
            CHECK_U64(m.split[0].files[i].sequences, want);
        }
        tupe_shard_meta_free(&m);
        for (int i = 0; i < nt; i++)
            free(td[i]);
        for (int i = 0; i < nv; i++)
            free(vd[i]);
        free(td), free(tl), free(vd), free(vl);
        free_seqs(&tr);
        free_seqs(&va);
    }
    free_corpus(&c);
}

static int cmp_rec(const void *a, const void *b) { return memcmp(a, b, 64 * sizeof(uint32_t)); }

static void shuffle_is_a_permutation(void)
{
    corpus c = make_corpus(800, 150, 8);
    const char *in = unit_path("in.tok");
    write_stream(&c, in);
    const char *inputs[] = {in};
    const char *d1 = unit_path("plain"), *d2 = unit_path("shuf");
    tupe_shard_opts o = base_opts(d1, inputs);
    o.shuffle = 0;
    build(&o);
    o = base_opts(d2, inputs);
    build(&o);
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    ro.shuffle = 0;
    seqs a = read_all(d1, ro, 0), b = read_all(d2, ro, 0);
    CHECK_U64(a.n, b.n);
    int differs = memcmp(a.ids, b.ids, a.n * 64 * sizeof *a.ids) != 0;
    CHECK_MSG(differs, "shuffled shards are in input order");
    /* Same records as multisets (the true length is implied by the padding). */
    qsort(a.ids, a.n, 64 * sizeof *a.ids, cmp_rec);
    qsort(b.ids, b.n, 64 * sizeof *b.ids, cmp_rec);
    CHECK(memcmp(a.ids, b.ids, a.n * 64 * sizeof *a.ids) == 0);
    /* Validation is never shuffled. */
    ro.split = TUPE_SPLIT_VALID;
    seqs va = read_all(d1, ro, 0), vb = read_all(d2, ro, 0);
    CHECK_U64(va.n, vb.n);
    CHECK(memcmp(va.ids, vb.ids, va.n * 64 * sizeof *va.ids) == 0);
    free_seqs(&a), free_seqs(&b), free_seqs(&va), free_seqs(&vb);
    free_corpus(&c);
}

static int same_file(const char *a, const char *b)
{
    size_t na, nb;
    char *x = unit_slurp(a, &na), *y = unit_slurp(b, &nb);
    int same = na == nb && memcmp(x, y, na) == 0;
    free(x), free(y);
    return same;
}

static void output_independent_of_memory_and_threads(void)
{
    /* About 20 MB of records: the small budget spills several runs. */
    corpus c = make_corpus(40000, 500, 9);
    const char *in = unit_path("in.tok");
    write_stream(&c, in);
    free_corpus(&c);
    const char *inputs[] = {in};
    const char *da = unit_path("a"), *db = unit_path("b");
    tupe_shard_opts o = base_opts(da, inputs);
    o.frame_bytes = 64 << 10;
    o.threads = 1;
    o.memory = 0;
    while (tupe_shard_sort_memory(&o) < (6u << 20))
        o.memory += 1u << 20;
    tupe_shard_report rep;
    tupe_shard_meta m;
    tupe_err e;
    CHECK_INT(tupe_shard_build(&o, &m, &rep, &e), 0);
    CHECK_MSG(rep.runs >= 3, "only %llu runs spilled", (unsigned long long)rep.runs);
    o = base_opts(db, inputs);
    o.frame_bytes = 64 << 10;
    o.threads = 3;
    o.memory = 512u << 20;
    tupe_shard_report rep2;
    CHECK_INT(tupe_shard_build(&o, NULL, &rep2, &e), 0);
    CHECK_U64(rep2.runs, 0);
    char pa[4096], pb[4096];
    for (int s = 0; s < TUPE_SPLITS; s++)
        for (uint32_t i = 0; i < m.split[s].nfiles; i++) {
            snprintf(pa, sizeof pa, "%s/%s", da, m.split[s].files[i].name);
            snprintf(pb, sizeof pb, "%s/%s", db, m.split[s].files[i].name);
            CHECK_MSG(same_file(pa, pb), "%s differs", m.split[s].files[i].name);
        }
    snprintf(pa, sizeof pa, "%s/%s", da, TUPE_MANIFEST);
    snprintf(pb, sizeof pb, "%s/%s", db, TUPE_MANIFEST);
    CHECK(same_file(pa, pb));
    tupe_shard_meta_free(&m);
}

/* ---- the reader ---------------------------------------------------------------------------- */

static const char *shared_dir(void)
{
    static char dir[4096];
    if (!dir[0]) {
        corpus c = make_corpus(900, 200, 10);
        snprintf(dir, sizeof dir, "%s", unit_path("reader"));
        const char *in = unit_path("reader.tok");
        write_stream(&c, in);
        free_corpus(&c);
        const char *inputs[] = {in};
        tupe_shard_opts o = base_opts(dir, inputs);
        o.shards = 5;
        build(&o);
    }
    return dir;
}

static void epochs_are_permutations(void)
{
    const char *dir = shared_dir();
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    tupe_shardr *r;
    tupe_err e;
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), 0);
    uint64_t n = tupe_shardr_size(r);
    CHECK(n > 500);
    uint64_t *o0 = malloc(n * sizeof *o0), *o1 = malloc(n * sizeof *o1);
    char *seen = calloc(n, 1);
    for (uint64_t p = 0; p < n; p++) {
        CHECK_INT(tupe_shardr_order(r, 0, p, &o0[p], &e), 0);
        CHECK_INT(tupe_shardr_order(r, 1, p, &o1[p], &e), 0);
        CHECK(o0[p] < n && !seen[o0[p]]);
        seen[o0[p] < n ? o0[p] : 0] = 1;
    }
    CHECK(memcmp(o0, o1, n * sizeof *o0) != 0);
    /* next() follows order(), and get() returns the same sequence as next(). */
    seqs s = read_all(dir, ro, 1);
    uint32_t ids[64], len;
    for (uint64_t p = 0; p < s.n; p++) {
        CHECK_U64(s.index[p], o1[p]);
        CHECK_INT(tupe_shardr_get(r, s.index[p], ids, &len, &e), 0);
        CHECK_INT(len, s.len[p]);
        CHECK(memcmp(ids, s.ids + p * 64, sizeof ids) == 0);
    }
    CHECK_INT(tupe_shardr_get(r, n, ids, &len, &e), TUPE_EUSAGE);
    free_seqs(&s);
    free(o0), free(o1), free(seen);
    tupe_shardr_close(r);
}

static void ranks_partition_every_epoch(void)
{
    const char *dir = shared_dir();
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    seqs all = read_all(dir, ro, 2);
    uint32_t worlds[] = {2, 3, 7, 16};
    for (int w = 0; w < 4; w++) {
        char *seen = calloc(all.n, 1);
        uint64_t total = 0;
        for (uint32_t k = 0; k < worlds[w]; k++) {
            tupe_shardr_opts rk = ro;
            rk.rank = k;
            rk.world = worlds[w];
            rk.prefetch = k % 2 ? 3 : 0;
            seqs s = read_all(dir, rk, 2);
            for (uint64_t j = 0; j < s.n; j++) {
                /* rank k's j-th sequence is position j * W + k of the epoch */
                uint64_t p = j * worlds[w] + k;
                CHECK_MSG(p < all.n && s.index[j] == all.index[p], "world %u rank %u item %llu",
                          worlds[w], k, (unsigned long long)j);
                if (s.index[j] < all.n) {
                    CHECK_MSG(!seen[s.index[j]], "sequence %llu read twice",
                              (unsigned long long)s.index[j]);
                    seen[s.index[j]] = 1;
                }
            }
            total += s.n;
            free_seqs(&s);
        }
        CHECK_U64(total, all.n);
        free(seen);
    }
    free_seqs(&all);
}

static void resume_continues_exactly(void)
{
    const char *dir = shared_dir();
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    ro.world = 4;
    ro.rank = 1;
    seqs all = read_all(dir, ro, 3);
    tupe_shardr *r;
    tupe_err e;
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), 0);
    uint32_t ids[64], len;
    uint64_t idx, ep, consumed;
    /* Read part of epoch 0, then "restart" at epoch 3 after 40 steps of a global batch of 8. */
    for (int i = 0; i < 17; i++)
        CHECK_INT(tupe_shardr_next(r, ids, &len, &idx, &e), 1);
    CHECK_INT(tupe_shardr_seek(r, 3, 40 * 8, &e), 0);
    tupe_shardr_tell(r, &ep, &consumed);
    CHECK_U64(ep, 3);
    CHECK_U64(consumed, 320);
    for (uint64_t j = 80; j < all.n; j++) {
        if (tupe_shardr_next(r, ids, &len, &idx, &e) != 1) {
            CHECK_MSG(0, "ended early at %llu", (unsigned long long)j);
            break;
        }
        CHECK_U64(idx, all.index[j]);
        CHECK(memcmp(ids, all.ids + j * 64, sizeof ids) == 0);
    }
    CHECK_INT(tupe_shardr_next(r, ids, &len, &idx, &e), 0);
    tupe_shardr_tell(r, &ep, &consumed);
    CHECK(consumed >= tupe_shardr_size(r));
    tupe_shardr_close(r);
    free_seqs(&all);
}

static void global_batches_do_not_depend_on_ranks(void)
{
    const char *dir = shared_dir();
    enum { B = 12 };
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    tupe_shardr *one, *r[3];
    tupe_err e;
    CHECK_INT(tupe_shardr_open(&one, dir, &ro, &e), 0);
    for (uint32_t k = 0; k < 3; k++) {
        tupe_shardr_opts rk = ro;
        rk.rank = k;
        rk.world = 3;
        CHECK_INT(tupe_shardr_open(&r[k], dir, &rk, &e), 0);
    }
    uint64_t n = tupe_shardr_size(one), steps = n / B;
    CHECK(steps > 10);
    /* Two epochs and a bit: the same sequences in every global batch, in rank order. */
    for (uint64_t s = 0; s < 2 * steps + 5; s++) {
        uint64_t a[B], b[B];
        uint32_t ids[B * 64], lens[B];
        CHECK_INT(tupe_shardr_batch(one, B, ids, lens, a, &e), 0);
        for (uint32_t k = 0; k < 3; k++)
            CHECK_INT(tupe_shardr_batch(r[k], B, NULL, NULL, b + k * (B / 3), &e), 0);
        for (int j = 0; j < B; j++) {
            /* one-rank position p is rank p % 3's (p / 3)-th of the batch */
            uint64_t want = a[j], got = b[(j % 3) * (B / 3) + j / 3];
            if (want != got) {
                CHECK_MSG(0, "step %llu item %d: %llu vs %llu", (unsigned long long)s, j,
                          (unsigned long long)want, (unsigned long long)got);
                s = UINT64_MAX - 1;
                break;
            }
        }
        uint64_t ep, consumed;
        tupe_shardr_tell(one, &ep, &consumed);
        CHECK_U64(ep, s / steps);
        CHECK_U64(consumed, ((s % steps) + 1) * B);
    }
    uint64_t ep, consumed;
    tupe_shardr_tell(r[2], &ep, &consumed);
    CHECK_U64(ep, 2);
    CHECK_INT(tupe_shardr_batch(one, 5, NULL, NULL, NULL, &e), 0);
    CHECK_INT(tupe_shardr_batch(r[0], 5, NULL, NULL, NULL, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "not a multiple of the world size 3");
    tupe_shardr_close(one);
    for (int k = 0; k < 3; k++)
        tupe_shardr_close(r[k]);
}

/* ---- damage ------------------------------------------------------------------------------ */

static void flip(const char *path, uint64_t off)
{
    size_t n;
    char *b = unit_slurp(path, &n);
    b[off] ^= 0x20;
    unit_write(path, b, n);
    free(b);
}

typedef struct problems {
    int n;
    char last[1024];
} problems;

static void note_problem(void *ctx, const tupe_err *p)
{
    problems *q = ctx;
    q->n++;
    snprintf(q->last, sizeof q->last, "%s", p->msg);
}

static void every_flipped_frame_is_caught(void)
{
    const char *dir = shared_dir();
    char path[8192];
    snprintf(path, sizeof path, "%s/train-00002.shard", dir);
    tupe_shardf f;
    tupe_err e;
    CHECK_INT(tupe_shardf_open(&f, path, &e), 0);
    uint64_t frames = f.h.frames, first = f.h.first;
    tupe_frame_entry *fe = malloc(frames * sizeof *fe);
    memcpy(fe, f.frames, frames * sizeof *fe);
    uint32_t fr = f.h.frame_records;
    tupe_shardf_close(&f);
    CHECK(frames >= 3);
    size_t n;
    char *orig = unit_slurp(path, &n);
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    for (uint64_t j = 0; j < frames; j++) {
        /* A byte at the start, the middle and the end of the frame. */
        uint64_t offs[3] = {fe[j].offset, fe[j].offset + fe[j].stored / 2,
                            fe[j].offset + fe[j].stored - 1};
        for (int k = 0; k < 3; k++) {
            unit_write(path, orig, n);
            flip(path, offs[k]);
            problems p = {0, ""};
            tupe_verify_stats st;
            CHECK_INT(tupe_shard_verify(dir, note_problem, &p, &st, &e), TUPE_EDATA);
            CHECK_INT(p.n, 1);
            char want[64];
            snprintf(want, sizeof want, "frame %llu: checksum mismatch", (unsigned long long)j);
            CHECK_HAS(p.last, "train-00002.shard: byte ");
            CHECK_HAS(p.last, want);
            tupe_shardr *r;
            CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), 0);
            uint32_t ids[64], len;
            CHECK_INT(tupe_shardr_get(r, first + j * fr, ids, &len, &e), TUPE_EDATA);
            CHECK_HAS(e.msg, want);
            /* The sequential reader (with prefetch) stops with the same error. */
            int got;
            uint64_t idx;
            while ((got = tupe_shardr_next(r, ids, &len, &idx, &e)) == 1)
                ;
            CHECK_INT(got, -1);
            CHECK_HAS(e.msg, want);
            tupe_shardr_close(r);
        }
    }
    /* Header and index. */
    uint64_t bad_at[2] = {100, fe[frames - 1].offset + fe[frames - 1].stored + 5};
    const char *what[2] = {"header checksum mismatch", "frame index checksum mismatch"};
    for (int k = 0; k < 2; k++) {
        unit_write(path, orig, n);
        flip(path, bad_at[k]);
        tupe_shardr *r;
        CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), TUPE_EDATA);
        CHECK_HAS(e.msg, what[k]);
        problems p = {0, ""};
        tupe_verify_stats st;
        CHECK_INT(tupe_shard_verify(dir, note_problem, &p, &st, &e), TUPE_EDATA);
        CHECK_HAS(p.last, what[k]);
    }
    /* Truncation, anywhere. */
    uint64_t cuts[3] = {n - 1, fe[1].offset + 3, 100};
    for (int k = 0; k < 3; k++) {
        unit_write(path, orig, (size_t)cuts[k]);
        tupe_shardr *r;
        CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), TUPE_EDATA);
        CHECK_HAS(e.msg, "truncated");
        problems p = {0, ""};
        tupe_verify_stats st;
        CHECK_INT(tupe_shard_verify(dir, note_problem, &p, &st, &e), TUPE_EDATA);
        CHECK_HAS(p.last, "truncated");
    }
    unit_write(path, orig, n);
    tupe_verify_stats st;
    CHECK_INT(tupe_shard_verify(dir, NULL, NULL, &st, &e), 0);
    CHECK_U64(st.files, 6);
    free(orig);
    free(fe);
}

static void mismatches_are_refused(void)
{
    const char *dir = shared_dir();
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    tupe_shardr *r;
    tupe_err e;
    ro.seq_len = 128;
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "sequences of 64 ids, but 128 were expected");
    ro.seq_len = 64;
    ro.vocab_size = VOCAB;
    ro.vocab_hash = 0x999;
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "another vocabulary (size 60000, hash xxh3:00000000");
    ro.vocab_hash = 0x1234abcdULL;
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), 0);
    tupe_shardr_close(r);
    ro.rank = 3;
    ro.world = 3;
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), TUPE_EUSAGE);
    ro.rank = 0;
    CHECK_INT(tupe_shardr_open(&r, unit_tmpdir(), &ro, &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "not a shard directory (no manifest.json");
    /* A shard file from another set, put in place of one of ours. */
    corpus c = make_corpus(300, 200, 11);
    const char *in = unit_path("other.tok"), *other = unit_path("other");
    write_stream(&c, in);
    free_corpus(&c);
    const char *inputs[] = {in};
    tupe_shard_opts o = base_opts(other, inputs);
    build(&o);
    char a[8192], b[8192];
    snprintf(a, sizeof a, "%s/train-00000.shard", other);
    snprintf(b, sizeof b, "%s/train-00000.shard", dir);
    size_t n1, n2;
    char *mine = unit_slurp(b, &n1), *theirs = unit_slurp(a, &n2);
    unit_write(b, theirs, n2);
    CHECK_INT(tupe_shardr_open(&r, dir, &ro, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "belongs to another shard set");
    unit_write(b, mine, n1);
    free(mine), free(theirs);
}

static void uncompressed_and_megatron_layouts(void)
{
    corpus c = make_corpus(400, 200, 12);
    const char *in = unit_path("in.tok");
    write_stream(&c, in);
    free_corpus(&c);
    const char *inputs[] = {in};
    const char *dz = unit_path("z"), *dr = unit_path("r"), *dm = unit_path("m");
    tupe_shard_opts o = base_opts(dz, inputs);
    build(&o);
    o.output = dr;
    o.layout = TUPE_LAYOUT_RAW;
    build(&o);
    o.output = dm;
    o.layout = TUPE_LAYOUT_MEGATRON;
    build(&o);
    tupe_shardr_opts ro;
    tupe_shardr_opts_init(&ro);
    ro.shuffle = 0;
    seqs z = read_all(dz, ro, 0), r = read_all(dr, ro, 0);
    CHECK_U64(z.n, r.n);
    CHECK(memcmp(z.ids, r.ids, z.n * 64 * sizeof *z.ids) == 0);
    /* Uncompressed: record k of a file sits at 4096 + k * record_bytes. */
    char p[4096];
    snprintf(p, sizeof p, "%s/train-00001.shard", dr);
    size_t n;
    unsigned char *raw = (unsigned char *)unit_slurp(p, &n);
    tupe_shard_meta m;
    tupe_err e;
    CHECK_INT(tupe_manifest_read(dr, &m, &e), 0);
    uint64_t first = m.split[0].files[1].first;
    for (uint64_t k = 0; k < m.split[0].files[1].sequences; k++) {
        uint32_t ids[64], len;
        tupe_rec_decode(raw + 4096 + k * m.rec_bytes, 64, 2, ids, &len);
        CHECK_INT(len, z.len[first + k]);
        CHECK(memcmp(ids, z.ids + (first + k) * 64, sizeof ids) == 0);
    }
    free(raw);
    tupe_shard_meta_free(&m);
    /* Megatron: the same sequences, without their padding, one .bin/.idx pair per shard. */
    CHECK_INT(tupe_manifest_read(dm, &m, &e), 0);
    CHECK_INT(m.layout, TUPE_LAYOUT_MEGATRON);
    CHECK_INT(m.megatron_dtype, 8);
    uint64_t g = 0;
    for (uint32_t i = 0; i < m.split[0].nfiles; i++) {
        snprintf(p, sizeof p, "%s/%s", dm, m.split[0].files[i].name);
        tupe_megar mr;
        CHECK_INT(tupe_megar_open(&mr, p, &e), 0);
        CHECK_U64(mr.documents, mr.sequences + 1);
        for (uint64_t q = 0; q < mr.sequences; q++, g++) {
            uint32_t ids[64], len;
            CHECK_INT(tupe_megar_seq(&mr, q, ids, 64, &len, &e), 0);
            CHECK_INT(len, z.len[g]);
            CHECK(memcmp(ids, z.ids + g * 64, len * sizeof *ids) == 0);
        }
        tupe_megar_close(&mr);
    }
    CHECK_U64(g, z.n);
    tupe_verify_stats st;
    CHECK_INT(tupe_shard_verify(dm, NULL, NULL, &st, &e), 0);
    snprintf(p, sizeof p, "%s/%s.bin", dm, m.split[0].files[2].name);
    flip(p, 10);
    problems pr = {0, ""};
    CHECK_INT(tupe_shard_verify(dm, note_problem, &pr, &st, &e), TUPE_EDATA);
    CHECK_HAS(pr.last, "train-00002.bin/.idx: checksum mismatch");
    tupe_shardr *rd;
    CHECK_INT(tupe_shardr_open(&rd, dm, &ro, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "is a Megatron export");
    tupe_shard_meta_free(&m);
    free_seqs(&z), free_seqs(&r);
}

static void validation_by_count(void)
{
    corpus c = make_corpus(1200, 300, 13);
    const char *in = unit_path("in.tok");
    write_stream(&c, in);
    const char *inputs[] = {in};
    for (int brk = 0; brk < 2; brk++) {
        const char *dir = unit_path(brk ? "vd" : "vf");
        tupe_shard_opts o = base_opts(dir, inputs);
        o.valid_fraction = 0;
        o.valid_sequences = 100;
        o.brk = brk;
        o.shuffle = 0;
        build(&o);
        tupe_shardr_opts ro;
        tupe_shardr_opts_init(&ro);
        ro.shuffle = 0;
        ro.split = TUPE_SPLIT_VALID;
        seqs va = read_all(dir, ro, 0);
        ro.split = TUPE_SPLIT_TRAIN;
        seqs tr = read_all(dir, ro, 0);
        CHECK(va.n >= 100 && va.n < 100 + 300 / 63 + 2);
        uint32_t **td, **vd, *tl, *vl;
        int nt = docs_of(&tr, &td, &tl), nv = docs_of(&va, &vd, &vl);
        /* Every input document is in exactly one split. */
        int nonempty = 0, found = 0;
        for (int d = 0; d < c.ndocs; d++) {
            if (!c.lens[d])
                continue;
            nonempty++;
            int in_t = 0, in_v = 0;
            for (int i = 0; i < nt; i++)
                in_t += same_doc(c.ids[d], c.lens[d], td[i], tl[i]);
            for (int i = 0; i < nv; i++)
                in_v += same_doc(c.ids[d], c.lens[d], vd[i], vl[i]);
            found += in_t + in_v == 1;
        }
        CHECK_INT(found, nonempty);
        CHECK_INT(nt + nv, nonempty);
        for (int i = 0; i < nt; i++)
            free(td[i]);
        for (int i = 0; i < nv; i++)
            free(vd[i]);
        free(td), free(tl), free(vd), free(vl);
        free_seqs(&va), free_seqs(&tr);
    }
    free_corpus(&c);
}

static void bad_inputs_and_outputs(void)
{
    const char *in = unit_path("in.tok");
    corpus c = make_corpus(50, 20, 14);
    write_stream(&c, in);
    free_corpus(&c);
    const char *inputs[] = {in};
    tupe_err e;
    /* An existing directory that is not a shard directory is never replaced. */
    const char *dir = unit_path("keep");
    mkdir(dir, 0777);
    unit_write(unit_path("keep/precious.txt"), "x", 1);
    tupe_shard_opts o = base_opts(dir, inputs);
    CHECK_INT(tupe_shard_build(&o, NULL, NULL, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "refusing to replace it");
    CHECK(tupe_path_exists(unit_path("keep/precious.txt")));
    /* A budget below the fixed buffers. */
    o = base_opts(unit_path("x"), inputs);
    o.memory = 8u << 20;
    CHECK_INT(tupe_shard_build(&o, NULL, NULL, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "is too small");
    /* Special ids missing from the stream and not given. */
    const char *in2 = unit_path("nospecial.tok");
    tupe_tok_header h;
    tupe_tok_header_init(&h, 100, 0);
    tupe_tokw *w;
    uint32_t ids[] = {7, 8, 9};
    CHECK_INT(tupe_tokw_open(&w, in2, &h, &e), 0);
    CHECK_INT(tupe_tokw_doc(w, ids, 3, &e), 0);
    CHECK_INT(tupe_tokw_close(w, &e), 0);
    const char *inputs2[] = {in2};
    o = base_opts(unit_path("y"), inputs2);
    CHECK_INT(tupe_shard_build(&o, NULL, NULL, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "has no pad id; give one with --pad");
    o.special[TUPE_SP_PAD] = 0;
    o.special[TUPE_SP_CLS] = 1;
    o.special[TUPE_SP_SEP] = 2;
    o.valid_fraction = 0;
    CHECK_INT(tupe_shard_build(&o, NULL, NULL, &e), 0);
    CHECK(!tupe_path_exists(unit_path("x")));
}

UNIT_MAIN(T(packing_and_split_preserve_every_id), T(shuffle_is_a_permutation),
          T(output_independent_of_memory_and_threads), T(epochs_are_permutations),
          T(ranks_partition_every_epoch), T(resume_continues_exactly),
          T(global_batches_do_not_depend_on_ranks),
          T(every_flipped_frame_is_caught), T(mismatches_are_refused),
          T(uncompressed_and_megatron_layouts), T(validation_by_count),
          T(bad_inputs_and_outputs))
