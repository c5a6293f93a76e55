/* The tokenizer facade: special-token literals, document framing into records and text,
 * statistics, and decoding (## and @@ joining). */
#include <stdio.h>

#include "text/tokenizer.h"
#include "unit.h"

static tupe_vocab *wp_vocab(void)
{
    static const char *toks[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "hello", "world",
                                 "un",    "##aff", "##able", "[", "]", ",", "sep"};
    tupe_vocab *v = tupe_vocab_new(TUPE_VOCAB_WORDPIECE);
    for (size_t i = 0; i < sizeof toks / sizeof *toks; i++)
        tupe_vocab_add(v, toks[i], strlen(toks[i]), 0);
    tupe_err e;
    CHECK_INT(tupe_vocab_finish(v, &e), 0);
    return v;
}

static const char *ids_of(const tupe_tokenizer *t, tupe_tokctx *c, const char *text)
{
    static char buf[512];
    c->n = 0;
    size_t bad;
    CHECK_INT(tupe_tokenizer_encode(t, c, text, strlen(text), &bad), 0);
    size_t k = 0;
    buf[0] = 0;
    for (size_t i = 0; i < c->n; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%u", i ? " " : "", c->ids[i]);
    return buf;
}

static tupe_tokenizer *make(const tupe_vocab *v, int match_special)
{
    tupe_tokenizer_opts o = {1, -1, TUPE_INVALID_ERROR, 100, match_special};
    tupe_tokenizer *t = NULL;
    tupe_err e;
    CHECK_INT(tupe_tokenizer_new(&t, v, NULL, &o, &e), 0);
    return t;
}

static void specials(void)
{
    tupe_vocab *v = wp_vocab();
    tupe_tokenizer *t = make(v, 0);
    tupe_tokctx *c = tupe_tokctx_new(t);
    CHECK_STR(ids_of(t, c, "Hello, [SEP] unaffable xyz"), "5 12 10 13 11 7 8 9 1");
    CHECK_INT(c->st.words, 7);
    CHECK_INT(c->st.unk_tokens, 1);
    tupe_tokctx_free(c);
    tupe_tokenizer_free(t);
    t = make(v, 1);
    c = tupe_tokctx_new(t);
    CHECK_STR(ids_of(t, c, "Hello,[SEP]world [[CLS]] [MASK"), "5 12 3 6 10 2 11 10 1");
    CHECK_STR(ids_of(t, c, "[PAD][UNK]"), "0 1");
    tupe_tokctx_free(c);
    tupe_tokenizer_free(t);
    tupe_vocab_free(v);
}

static void chunk_records(void)
{
    tupe_vocab *v = wp_vocab();
    tupe_tokenizer *t = make(v, 0);
    tupe_err e;
    tupe_tokctx *c = tupe_tokctx_new(t);
    char text[] = "hello world\nworld\n\n\x01\n\nun\n";
    tupe_chunk ch = {.data = text, .len = strlen(text), .name = "mem", .offset = 100};
    tupe_tok_header h;
    tupe_tok_header_init(&h, tupe_vocab_size(v), v->hash);
    tupe_buf out = {0};
    tupe_encode_opts eo = {TUPE_DOCS_BLANK, 0, 1, 1, TUPE_ENC_TEXT, 0};
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &ch, &out, NULL, &e), 0);
    /* the document of one control character has no tokens: left out */
    CHECK(out.len == strlen("2 5 6 3 6 3 3\n2 7 3 3\n") &&
          memcmp(out.p, "2 5 6 3 6 3 3\n2 7 3 3\n", out.len) == 0);
    CHECK_INT(c->st.docs, 2);
    out.len = 0;
    eo = (tupe_encode_opts){TUPE_DOCS_LINE, 0, 0, 0, TUPE_ENC_TOKENS, 0};
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &ch, &out, NULL, &e), 0);
    CHECK(out.len == strlen("hello world\nworld\n\n\n\nun\n") &&
          memcmp(out.p, "hello world\nworld\n\n\n\nun\n", out.len) == 0);
    out.len = 0;
    eo.format = TUPE_ENC_BINARY;
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &ch, &out, NULL, &e), 0);
    CHECK_INT(out.len, 6 * 8 + 2 * 4); /* six records: headers of 8 bytes, 4 ids of 2 bytes */
    char bad[] = "ok\nbad \xff\n";
    tupe_chunk bc = {.data = bad, .len = strlen(bad), .name = "mem", .offset = 100};
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &bc, &out, NULL, &e), TUPE_EDATA);
    CHECK_STR(e.msg, "mem: byte 107: invalid UTF-8 (see --invalid)");
    tupe_buf_free(&out);
    tupe_tokctx_free(c);
    tupe_tokenizer_free(t);
    tupe_vocab_free(v);
}

static const char *decoded(const tupe_vocab *v, const uint32_t *ids, size_t n, int skip)
{
    static char buf[256];
    tupe_buf b = {0};
    CHECK_INT(tupe_decode_ids(v, ids, n, skip, &b), 0);
    snprintf(buf, sizeof buf, "%.*s", (int)b.len, (const char *)b.p);
    tupe_buf_free(&b);
    return buf;
}

static void decoding(void)
{
    tupe_vocab *v = wp_vocab();
    uint32_t ids[] = {2, 7, 8, 9, 5, 12, 3};
    CHECK_STR(decoded(v, ids, 7, 0), "[CLS] unaffable hello, [SEP]");
    CHECK_STR(decoded(v, ids, 7, 1), "unaffable hello,");
    tupe_vocab_free(v);
    tupe_vocab *b = tupe_vocab_new(TUPE_VOCAB_BPE);
    const char *toks[] = {"tok@@", "en", "s", "a@@", "b@@", "c"};
    for (int i = 0; i < 6; i++)
        tupe_vocab_add(b, toks[i], strlen(toks[i]), 1);
    tupe_err e;
    CHECK_INT(tupe_vocab_finish(b, &e), 0);
    uint32_t bids[] = {0, 4, 5, 6, 7, 8, 9, 2};
    CHECK_STR(decoded(b, bids, 8, 0), "<s> token s abc </s>");
    CHECK_STR(decoded(b, bids, 8, 1), "token s abc");
    tupe_vocab_free(b);
}

/* Everything written for a corpus, with a given chunk size and thread count. */
static tupe_buf whole;

static int collect(void *arg, const uint8_t *buf, size_t len, uint64_t docs, uint64_t ids,
                   tupe_err *e)
{
    if (!len)
        return 0;
    if (tupe_buf_reserve(&whole, len))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    memcpy(whole.p + whole.len, buf, len);
    whole.len += len;
    return 0;
}

static void long_documents_across_chunks(void)
{
    /* documents of 1 to 4000 lines; chunks of 200 bytes cut most of them in pieces */
    const char *p = unit_path("long.txt");
    FILE *f = fopen(p, "w");
    for (int d = 0; d < 40; d++) {
        int lines = d % 5 == 0 ? 4000 : d % 3 ? 1 : 30;
        for (int l = 0; l < lines; l++)
            fprintf(f, "hello world, un%s %d\n", l % 7 ? "affable" : "", l);
        if (d == 7)
            fprintf(f, "\x01\n"); /* a line without tokens ends a piece now and then */
        fprintf(f, "\n%s", d == 11 ? "\x01\n\n" : "");
    }
    fclose(f);
    tupe_vocab *v = wp_vocab();
    tupe_tokenizer *t = make(v, 0);
    tupe_buf want = {0};
    for (int fmt = 0; fmt < 2; fmt++) {
        for (int run = 0; run < 4; run++) {
            tupe_corpus *c;
            tupe_err e;
            const char *paths[] = {p};
            CHECK_INT(tupe_corpus_open(&c, paths, 1, TUPE_DOCS_BLANK, &e), 0);
            tupe_tok_header h;
            tupe_tok_header_init(&h, tupe_vocab_size(v), v->hash);
            tupe_encode_opts eo = {TUPE_DOCS_BLANK, 0, 1, fmt, fmt ? TUPE_ENC_TEXT : TUPE_ENC_BINARY,
                                   run == 0 ? (size_t)1 << 24 : 200};
            tupe_tokstats st = {0};
            whole.len = 0;
            CHECK_INT(tupe_encode_corpus(t, c, &eo, &h, run == 0 ? 1 : run, collect, NULL, &st, &e), 0);
            CHECK_INT(st.docs, 40);
            if (run == 0) {
                want.len = 0;
                CHECK_INT(tupe_buf_reserve(&want, whole.len), 0);
                CHECK(whole.len > 0);
                memcpy(want.p, whole.p, whole.len);
                want.len = whole.len;
            } else {
                CHECK_MSG(whole.len == want.len && memcmp(whole.p, want.p, want.len) == 0,
                          "format %d, %d threads, small chunks: output differs", fmt, run);
            }
            tupe_corpus_close(c);
        }
    }
    tupe_buf_free(&want);
    tupe_buf_free(&whole);
    tupe_tokenizer_free(t);
    tupe_vocab_free(v);
}

UNIT_MAIN(T(specials), T(chunk_records), T(decoding), T(long_documents_across_chunks))
