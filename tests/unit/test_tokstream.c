/* The token stream: round trips, concatenation, and detection of every truncation and of
 * every single-byte corruption of a small stream. */
#include "base/checksum.h"
#include "text/tokstream.h"
#include "unit.h"

static uint32_t doc_len(int d) { return (uint32_t)(d * 37 % 101); } /* includes empty docs */

static void write_stream(const char *path, uint32_t vocab, int ndocs)
{
    tupe_tok_header h;
    tupe_tok_header_init(&h, vocab, 0xabcdef0123456789ULL);
    h.special[TUPE_SP_PAD] = 0;
    h.special[TUPE_SP_CLS] = 2;
    h.special[TUPE_SP_SEP] = 3;
    tupe_tokw *w;
    tupe_err e;
    CHECK_INT(tupe_tokw_open(&w, path, &h, &e), 0);
    uint32_t ids[128];
    for (int d = 0; d < ndocs; d++) {
        for (uint32_t i = 0; i < doc_len(d); i++)
            ids[i] = (uint32_t)(d * 1000003u + i * 7919u) % vocab;
        CHECK_INT(tupe_tokw_doc(w, ids, doc_len(d), &e), 0);
    }
    CHECK_INT(tupe_tokw_close(w, &e), 0);
}

static int read_all(const char *path, uint32_t vocab, int ndocs, tupe_err *e)
{
    tupe_tokr *r;
    int rc = tupe_tokr_open(&r, path, e);
    if (rc)
        return rc;
    const uint32_t *ids;
    size_t n;
    int d = 0, got;
    while ((got = tupe_tokr_next(r, &ids, &n, e)) == 1) {
        if (ndocs >= 0) {
            int dd = d % ndocs;
            CHECK_INT(n, doc_len(dd));
            for (size_t i = 0; i < n; i++)
                if (ids[i] != (uint32_t)(dd * 1000003u + i * 7919u) % vocab) {
                    CHECK_MSG(0, "doc %d id %zu differs", d, i);
                    break;
                }
        }
        d++;
    }
    tupe_tokr_close(r);
    if (got < 0)
        return e->code;
    return 0;
}

static void round_trip_16_and_32_bit(void)
{
    tupe_err e;
    const char *p16 = unit_path("a.tok"), *p32 = unit_path("b.tok");
    write_stream(p16, 30522, 50);
    write_stream(p32, 100000, 50);
    CHECK_INT(read_all(p16, 30522, 50, &e), 0);
    CHECK_INT(read_all(p32, 100000, 50, &e), 0);
    tupe_tokr *r;
    CHECK_INT(tupe_tokr_open(&r, p16, &e), 0);
    const tupe_tok_header *h = tupe_tokr_header(r);
    CHECK_INT(h->id_bytes, 2);
    CHECK_INT(h->vocab_size, 30522);
    CHECK_U64(h->vocab_hash, 0xabcdef0123456789ULL);
    CHECK_INT(h->special[TUPE_SP_CLS], 2);
    CHECK_INT(h->special[TUPE_SP_MASK], -1);
    const uint32_t *ids;
    size_t n;
    uint64_t tokens = 0;
    while (tupe_tokr_next(r, &ids, &n, &e) == 1)
        tokens += n;
    CHECK_U64(tupe_tokr_docs(r), 50);
    CHECK_U64(tupe_tokr_tokens(r), tokens);
    tupe_tokr_close(r);
}

static void concatenated_streams(void)
{
    tupe_err e;
    const char *a = unit_path("a.tok"), *cat = unit_path("cat.tok");
    write_stream(a, 30522, 10);
    size_t n;
    char *s = unit_slurp(a, &n);
    char *two = malloc(2 * n);
    memcpy(two, s, n);
    memcpy(two + n, s, n);
    unit_write(cat, two, 2 * n);
    tupe_tokr *r;
    CHECK_INT(tupe_tokr_open(&r, cat, &e), 0);
    const uint32_t *ids;
    size_t k;
    while (tupe_tokr_next(r, &ids, &k, &e) == 1)
        ;
    CHECK_U64(tupe_tokr_docs(r), 20);
    tupe_tokr_close(r);
    /* A second stream with another vocabulary is refused. */
    const char *b = unit_path("b.tok");
    write_stream(b, 1000, 3);
    size_t m;
    char *t = unit_slurp(b, &m);
    char *mix = malloc(n + m);
    memcpy(mix, s, n);
    memcpy(mix + n, t, m);
    unit_write(cat, mix, n + m);
    CHECK_INT(read_all(cat, 30522, -1, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "different vocabulary");
    free(s), free(t), free(two), free(mix);
}

static void every_truncation_is_caught(void)
{
    tupe_err e;
    const char *p = unit_path("t.tok"), *q = unit_path("cut.tok");
    write_stream(p, 30522, 6);
    size_t n;
    char *s = unit_slurp(p, &n);
    for (size_t cut = 0; cut < n; cut++) {
        unit_write(q, s, cut);
        int rc = read_all(q, 30522, -1, &e);
        CHECK_MSG(rc == TUPE_EDATA, "truncation at %zu of %zu not caught (rc %d)", cut, n, rc);
        if (cut > 0 && rc == TUPE_EDATA)
            CHECK_MSG(strstr(e.msg, "byte ") != NULL, "no byte offset in \"%s\"", e.msg);
    }
    free(s);
}

static void every_byte_flip_is_caught(void)
{
    tupe_err e;
    const char *p = unit_path("t.tok"), *q = unit_path("flip.tok");
    write_stream(p, 30522, 6);
    size_t n;
    char *s = unit_slurp(p, &n);
    int missed = 0;
    for (size_t i = 0; i < n; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            s[i] ^= (char)(1 << bit);
            unit_write(q, s, n);
            int rc = read_all(q, 30522, -1, &e);
            if (rc != TUPE_EDATA) {
                if (missed++ < 5)
                    CHECK_MSG(0, "flip of bit %d at byte %zu not caught", bit, i);
            }
            s[i] ^= (char)(1 << bit);
        }
    }
    CHECK_INT(missed, 0);
    free(s);
}

static void errors_name_place(void)
{
    tupe_err e;
    const char *p = unit_path("bad.tok");
    unit_write(p, "not a token stream at all, just some text bytes here................", 64);
    CHECK_INT(read_all(p, 1, -1, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "bad.tok: byte 0: not a tupe token stream");
    unit_write(p, "", 0);
    CHECK_INT(read_all(p, 1, -1, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "empty input");
    /* A well-formed record with an id outside the vocabulary (crafted, valid checksum). */
    tupe_tok_header h;
    tupe_tok_header_init(&h, 100, 1);
    unsigned char buf[256];
    tupe_tok_header_encode(&h, buf);
    uint32_t ids[3] = {5, 99, 7};
    tupe_tok_record_encode(&h, ids, 3, buf + 64);
    buf[64 + 8 + 2] = 200; /* second id -> 200 */
    uint32_t chk = (uint32_t)tupe_hash64_seed(buf + 72, 6, 3);
    memcpy(buf + 68, &chk, 4);
    unit_write(p, buf, 64 + 14);
    CHECK_INT(read_all(p, 100, -1, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "bad.tok: byte 74: document 0: id 200 is outside the vocabulary (size 100)");
    /* The writer refuses ids outside the vocabulary. */
    tupe_tokw *w;
    CHECK_INT(tupe_tokw_open(&w, unit_path("w.tok"), &h, &e), 0);
    ids[1] = 100;
    CHECK(tupe_tokw_doc(w, ids, 3, &e) != 0);
    tupe_tokw_abort(w);
    CHECK(!tupe_path_exists(unit_path("w.tok")));
}

UNIT_MAIN(T(round_trip_16_and_32_bit), T(concatenated_streams), T(every_truncation_is_caught),
          T(every_byte_flip_is_caught), T(errors_name_place))
