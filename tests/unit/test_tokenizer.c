/* The tokenizer facade: special-token literals, document framing into records and text,
 * statistics, and decoding (## and @@ joining). */
#include "tokenizer.h"
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
    tupe_chunk ch = {text, strlen(text), 0, "mem", 100, 0, 1};
    tupe_tok_header h;
    tupe_tok_header_init(&h, tupe_vocab_size(v), v->hash);
    tupe_buf out = {0};
    tupe_encode_opts eo = {TUPE_DOCS_BLANK, 0, 1, 1, TUPE_ENC_TEXT};
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &ch, &out, &e), 0);
    /* the document of one control character has no tokens: left out */
    CHECK(out.len == strlen("2 5 6 3 6 3 3\n2 7 3 3\n") &&
          memcmp(out.p, "2 5 6 3 6 3 3\n2 7 3 3\n", out.len) == 0);
    CHECK_INT(c->st.docs, 2);
    out.len = 0;
    eo = (tupe_encode_opts){TUPE_DOCS_LINE, 0, 0, 0, TUPE_ENC_TOKENS};
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &ch, &out, &e), 0);
    CHECK(out.len == strlen("hello world\nworld\n\n\n\nun\n") &&
          memcmp(out.p, "hello world\nworld\n\n\n\nun\n", out.len) == 0);
    out.len = 0;
    eo.format = TUPE_ENC_BINARY;
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &ch, &out, &e), 0);
    CHECK_INT(out.len, 6 * 8 + 2 * 4); /* six records: headers of 8 bytes, 4 ids of 2 bytes */
    char bad[] = "ok\nbad \xff\n";
    tupe_chunk bc = {bad, strlen(bad), 0, "mem", 100, 0, 1};
    CHECK_INT(tupe_encode_chunk(t, c, &eo, &h, &bc, &out, &e), TUPE_EDATA);
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
    CHECK_STR(decoded(v, ids, 7, 0), "[CLS] unaffable hello , [SEP]");
    CHECK_STR(decoded(v, ids, 7, 1), "unaffable hello ,");
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

UNIT_MAIN(T(specials), T(chunk_records), T(decoding))
