/* BPE: fastBPE's application rule (the lowest-ranked pair, every occurrence left to right,
 * repeat), the fairseq dictionary layout, the word cache, and malformed codes and dicts. */
#include "text/bpe.h"
#include "unit.h"
#include "text/vocab.h"

static const char *codes = "l l 9\nh e 8\nhe ll 7\nhell o</w> 6\n";
static const char *dict = "hello 50\nhell@@ 20\nll@@ 10\no 5\nl 4\nh@@ 1\n";

static void load(tupe_vocab **v, tupe_bpe **b)
{
    tupe_err e;
    const char *dir = unit_tmpdir();
    char p[4096];
    snprintf(p, sizeof p, "%s/dict.txt", dir);
    unit_write(p, dict, strlen(dict));
    snprintf(p, sizeof p, "%s/codes", dir);
    unit_write(p, codes, strlen(codes));
    CHECK_INT(tupe_vocab_load(v, dir, &e), 0);
    CHECK_INT(tupe_bpe_load(b, p, *v, &e), 0);
}

static const char *seg(const tupe_bpe *b, tupe_bpe_cache *c, const tupe_vocab *v, const char *w)
{
    static char buf[512];
    uint32_t ids[64], ends[64];
    size_t unk = 0, n = tupe_bpe_encode(b, c, (const uint8_t *)w, strlen(w), ids, ends, &unk);
    size_t k = 0, start = 0;
    for (size_t i = 0; i < n; i++) {
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%.*s=%s", i ? " " : "",
                              (int)(ends[i] - start), w + start, tupe_vocab_token(v, ids[i]));
        start = ends[i];
    }
    buf[k] = 0;
    return buf;
}

static void fastbpe_rule(void)
{
    tupe_vocab *v;
    tupe_bpe *b;
    load(&v, &b);
    tupe_bpe_cache *c = tupe_bpe_cache_new();
    CHECK_INT(tupe_bpe_merges(b), 4);
    CHECK_STR(seg(b, c, v, "hello"), "hello=hello");
    /* (l, l) first, everywhere, left to right: h e ll ll o -> hell ll o */
    CHECK_STR(seg(b, c, v, "hellllo"), "hell=hell@@ ll=ll@@ o=o");
    CHECK_STR(seg(b, c, v, "lll"), "ll=ll@@ l=l");
    CHECK_STR(seg(b, c, v, "hx"), "h=h@@ x=<unk>");
    /* the same words again come from the cache */
    CHECK_STR(seg(b, c, v, "hellllo"), "hell=hell@@ ll=ll@@ o=o");
    CHECK_STR(seg(b, c, v, "hx"), "h=h@@ x=<unk>");
    size_t unk = 0;
    uint32_t ids[8];
    tupe_bpe_encode(b, c, (const uint8_t *)"hx", 2, ids, NULL, &unk);
    CHECK_INT(unk, 1);
    /* a long word takes the slow path of the scratch buffers */
    char w[200];
    for (int i = 0; i < 199; i++)
        w[i] = i % 2 ? 'l' : 'h';
    w[199] = 0;
    uint32_t many[200];
    CHECK_INT(tupe_bpe_encode(b, c, (const uint8_t *)w, 199, many, NULL, &unk), 199);
    tupe_bpe_cache_free(c);
    tupe_bpe_free(b);
    tupe_vocab_free(v);
}

static void fairseq_dict(void)
{
    tupe_vocab *v;
    tupe_bpe *b;
    load(&v, &b);
    CHECK_INT(tupe_vocab_size(v), 4 + 6 + 1);
    CHECK_STR(tupe_vocab_token(v, 0), "<s>");
    CHECK_STR(tupe_vocab_token(v, 1), "<pad>");
    CHECK_STR(tupe_vocab_token(v, 2), "</s>");
    CHECK_STR(tupe_vocab_token(v, 3), "<unk>");
    CHECK_STR(tupe_vocab_token(v, 4), "hello");
    CHECK_STR(tupe_vocab_token(v, 10), "<mask>");
    CHECK_INT(v->special[TUPE_SP_PAD], 1);
    CHECK_INT(v->special[TUPE_SP_UNK], 3);
    CHECK_INT(v->special[TUPE_SP_CLS], 0);
    CHECK_INT(v->special[TUPE_SP_SEP], 2);
    CHECK_INT(v->special[TUPE_SP_MASK], 10);
    CHECK_U64(v->count[4], 50);
    tupe_err e;
    const char *p = unit_path("dict.txt");
    CHECK_INT(tupe_vocab_save(v, p, &e), 0);
    size_t n;
    char *s = unit_slurp(p, &n);
    CHECK(n == strlen(dict) && memcmp(s, dict, n) == 0);
    free(s);
    tupe_bpe_free(b);
    tupe_vocab_free(v);
}

static void malformed(void)
{
    tupe_err e;
    tupe_vocab *v;
    tupe_bpe *b;
    const char *p = unit_path("dict.txt"), *q = unit_path("codes");
    unit_write(p, "a 1\nb x\n", 8);
    CHECK_INT(tupe_vocab_load_dict(&v, p, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "dict.txt:2: bad count 'x'");
    unit_write(p, "a 1\na 2\n", 8);
    CHECK_INT(tupe_vocab_load_dict(&v, p, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "dict.txt:2: duplicate token 'a' (first on line 1)");
    unit_write(p, "nocount\n", 8);
    CHECK_INT(tupe_vocab_load_dict(&v, p, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "expected 'symbol count'");
    unit_write(p, "a 1\n", 4);
    CHECK_INT(tupe_vocab_load_dict(&v, p, &e), 0);
    unit_write(q, "a b 1\nc\n", 8);
    CHECK_INT(tupe_bpe_load(&b, q, v, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "codes:2: expected 'left right count'");
    unit_write(q, "a b 1\na b 2\n", 12);
    CHECK_INT(tupe_bpe_load(&b, q, v, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "codes:2: duplicate merge 'a b'");
    CHECK_INT(tupe_bpe_load(&b, unit_path("nothing"), v, &e), TUPE_ENOINPUT);
    tupe_vocab_free(v);
}

UNIT_MAIN(T(fastbpe_rule), T(fairseq_dict), T(malformed))
