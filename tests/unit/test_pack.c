/* The packer: every id of every document comes back in order once [CLS], separators and
 * padding are removed; sequence counts, lengths and padding follow the two break modes. */
#include "base/rng.h"
#include "data/pack.h"
#include "unit.h"

enum { CLS = 1, SEP = 2, PAD = 0 };

typedef struct sink {
    unsigned char *buf;
    size_t n, cap, rec_bytes;
} sink;

static int slot(void *ctx, void **rec, tupe_err *e)
{
    (void)e;
    sink *s = ctx;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->buf = realloc(s->buf, s->cap * s->rec_bytes);
    }
    /* Poison the slot: the packer must write every byte of it. */
    memset(s->buf + s->n * s->rec_bytes, 0xAB, s->rec_bytes);
    *rec = s->buf + s->n++ * s->rec_bytes;
    return 0;
}

/* Documents of random lengths (some empty, some longer than a sequence), ids >= 3. */
static uint32_t **make_docs(int ndocs, uint32_t *lens, uint32_t seed)
{
    tupe_rng r;
    tupe_rng_init(&r, seed, 0, 0, TUPE_RNG_USER);
    uint32_t **docs = calloc((size_t)ndocs, sizeof *docs);
    for (int d = 0; d < ndocs; d++) {
        uint32_t k = tupe_rng_below(&r, 5);
        lens[d] = k == 0 ? 0 : k == 1 ? 1 + tupe_rng_below(&r, 3) : tupe_rng_below(&r, 300);
        docs[d] = malloc((lens[d] + 1) * sizeof **docs);
        for (uint32_t i = 0; i < lens[d]; i++)
            docs[d][i] = 3 + tupe_rng_below(&r, 70000 - 3);
    }
    return docs;
}

static void check_mode(int brk, uint32_t L, uint32_t id_bytes)
{
    enum { ND = 200 };
    uint32_t lens[ND], vocab = id_bytes == 2 ? 65536 : 70000;
    uint32_t **docs = make_docs(ND, lens, L * 7 + (uint32_t)brk);
    for (int d = 0; d < ND; d++)
        for (uint32_t i = 0; i < lens[d]; i++)
            docs[d][i] %= vocab;
    sink s = {NULL, 0, 0, tupe_rec_bytes(L, id_bytes)};
    tupe_packer p;
    tupe_err e;
    CHECK_INT(tupe_packer_init(&p, L, id_bytes, brk, CLS, SEP, PAD, slot, &s, &e), 0);
    uint64_t items = 0, expect_doc_seqs = 0, ndocs = 0;
    for (int d = 0; d < ND; d++) {
        CHECK_INT(tupe_packer_doc(&p, docs[d], lens[d], &e), 0);
        if (lens[d]) {
            items += lens[d] + 1;
            expect_doc_seqs += tupe_pack_count_full(lens[d] + 1, L);
            ndocs++;
        }
    }
    CHECK_INT(tupe_packer_finish(&p, &e), 0);
    CHECK_U64(p.sequences, s.n);
    CHECK_U64(p.documents, ndocs);
    CHECK_U64(p.sequences, brk == TUPE_BREAK_FULL ? tupe_pack_count_full(items, L) : expect_doc_seqs);
    CHECK_U64(p.tokens + p.padding, p.sequences * L);
    CHECK_U64(p.tokens, items + p.sequences);
    /* Walk the records: [CLS] first, ids, pad after the length, zero tail bytes. */
    uint32_t *ids = malloc(L * sizeof *ids);
    int d = 0;
    uint32_t at = 0;
    while (d < ND && lens[d] == 0)
        d++;
    for (size_t k = 0; k < s.n; k++) {
        const unsigned char *rec = s.buf + k * s.rec_bytes;
        uint32_t len;
        tupe_rec_decode(rec, L, id_bytes, ids, &len);
        CHECK(len >= 2 && len <= L);
        CHECK_INT(ids[0], CLS);
        for (uint32_t i = len; i < L; i++)
            CHECK_INT(ids[i], PAD);
        for (size_t b = 4 + (size_t)L * id_bytes; b < s.rec_bytes; b++)
            CHECK_INT(rec[b], 0);
        if (len < L && brk == TUPE_BREAK_FULL)
            CHECK_MSG(k + 1 == s.n, "padding before the last sequence (record %zu)", k);
        int doc_in_seq = -1;
        for (uint32_t i = 1; i < len; i++) {
            if (d >= ND) {
                CHECK_MSG(0, "more ids than the input");
                break;
            }
            if (brk == TUPE_BREAK_DOC) {
                if (doc_in_seq < 0)
                    doc_in_seq = d;
                CHECK_MSG(doc_in_seq == d, "record %zu mixes documents", k);
            }
            if (at == lens[d]) {
                CHECK_MSG(ids[i] == SEP, "record %zu position %u: expected the separator", k, i);
                at = 0;
                do
                    d++;
                while (d < ND && lens[d] == 0);
            } else {
                CHECK_MSG(ids[i] == docs[d][at], "record %zu position %u: id differs", k, i);
                at++;
            }
        }
        if (brk == TUPE_BREAK_DOC && len < L)
            CHECK_MSG(at == 0, "a DOC sequence is padded before its document ends");
    }
    CHECK_MSG(d == ND, "only %d of %d documents came back", d, ND);
    for (int i = 0; i < ND; i++)
        free(docs[i]);
    free(docs);
    free(ids);
    free(s.buf);
}

static void full_sentences_round_trip(void)
{
    check_mode(TUPE_BREAK_FULL, 64, 2);
    check_mode(TUPE_BREAK_FULL, 2, 2);
    check_mode(TUPE_BREAK_FULL, 511, 2);
    check_mode(TUPE_BREAK_FULL, 37, 4);
}

static void doc_sentences_round_trip(void)
{
    check_mode(TUPE_BREAK_DOC, 64, 2);
    check_mode(TUPE_BREAK_DOC, 3, 2);
    check_mode(TUPE_BREAK_DOC, 129, 4);
}

static void exact_layout_of_a_small_case(void)
{
    /* seq_len 4: docs [5 6 7] [8] -> [CLS 5 6 7] [CLS SEP 8 SEP] ; and in doc mode
     * [CLS 5 6 7] [CLS SEP PAD PAD] [CLS 8 SEP PAD]. */
    uint32_t a[] = {5, 6, 7}, b[] = {8};
    for (int brk = 0; brk < 2; brk++) {
        sink s = {NULL, 0, 0, tupe_rec_bytes(4, 2)};
        tupe_packer p;
        tupe_err e;
        CHECK_INT(tupe_packer_init(&p, 4, 2, brk, CLS, SEP, PAD, slot, &s, &e), 0);
        CHECK_INT(tupe_packer_doc(&p, a, 3, &e), 0);
        CHECK_INT(tupe_packer_doc(&p, b, 0, &e), 0);
        CHECK_INT(tupe_packer_doc(&p, b, 1, &e), 0);
        CHECK_INT(tupe_packer_finish(&p, &e), 0);
        static const uint32_t full[2][5] = {{4, CLS, 5, 6, 7}, {4, CLS, SEP, 8, SEP}};
        static const uint32_t doc[3][5] = {{4, CLS, 5, 6, 7}, {2, CLS, SEP, PAD, PAD},
                                           {3, CLS, 8, SEP, PAD}};
        CHECK_INT(s.n, brk ? 3 : 2);
        for (size_t k = 0; k < s.n && k < 3; k++) {
            uint32_t ids[4], len;
            tupe_rec_decode(s.buf + k * s.rec_bytes, 4, 2, ids, &len);
            const uint32_t *want = brk ? doc[k] : full[k];
            CHECK_INT(len, want[0]);
            for (int i = 0; i < 4; i++)
                CHECK_INT(ids[i], want[1 + i]);
        }
        free(s.buf);
    }
    CHECK_INT(tupe_rec_bytes(5, 2), 16);   /* 4 + 10, rounded up to 4 */
    CHECK_INT(tupe_rec_bytes(512, 2), 1028);
    CHECK_INT(tupe_rec_bytes(3, 4), 16);
}

static void bad_parameters(void)
{
    tupe_packer p;
    tupe_err e;
    CHECK_INT(tupe_packer_init(&p, 1, 2, 0, CLS, SEP, PAD, slot, NULL, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "too short");
    CHECK_INT(tupe_packer_init(&p, 8, 3, 0, CLS, SEP, PAD, slot, NULL, &e), TUPE_EFAIL);
}

UNIT_MAIN(T(full_sentences_round_trip), T(doc_sentences_round_trip),
          T(exact_layout_of_a_small_case), T(bad_parameters))
