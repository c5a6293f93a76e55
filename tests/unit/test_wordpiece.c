/* WordPiece: the rules on a small vocabulary, and the double-array trie against a plain
 * greedy longest-match implementation (vocabulary lookups of every prefix) on the BERT
 * vocabulary with many random words. Also vocab.txt loading and its errors. */
#include "base/checksum.h"
#include "base/rng.h"
#include "text/unicode.h"
#include "unit.h"
#include "text/vocab.h"
#include "text/wordpiece.h"

static tupe_vocab *small_vocab(void)
{
    static const char *toks[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", "un", "##aff",
                                 "##able", "a",   "aff",   "##a",   "able",  "##b",   "##ff",
                                 "#",     "##",   "###"};
    tupe_vocab *v = tupe_vocab_new(TUPE_VOCAB_WORDPIECE);
    for (size_t i = 0; i < sizeof toks / sizeof *toks; i++)
        CHECK(tupe_vocab_add(v, toks[i], strlen(toks[i]), 0) == (int64_t)i);
    tupe_err e;
    CHECK_INT(tupe_vocab_finish(v, &e), 0);
    return v;
}

static const char *seg(const tupe_wordpiece *wp, const tupe_vocab *v, const char *w, size_t max)
{
    static char buf[512];
    uint32_t ids[64];
    int unk;
    size_t n = tupe_wordpiece_encode(wp, (const uint8_t *)w, strlen(w), tupe_utf8_count(w, strlen(w)),
                                     max, ids, &unk);
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        k += (size_t)snprintf(buf + k, sizeof buf - k, "%s%s", i ? " " : "", tupe_vocab_token(v, ids[i]));
    return buf;
}

static void rules(void)
{
    tupe_vocab *v = small_vocab();
    tupe_wordpiece *wp;
    tupe_err e;
    CHECK_INT(tupe_wordpiece_new(&wp, v, "##", &e), 0);
    CHECK_STR(seg(wp, v, "unaffable", 100), "un ##aff ##able");
    CHECK_STR(seg(wp, v, "affable", 100), "aff ##able");
    CHECK_STR(seg(wp, v, "aaa", 100), "a ##a ##a");
    CHECK_STR(seg(wp, v, "unx", 100), "[UNK]");     /* a piece that matches nothing: whole word */
    CHECK_STR(seg(wp, v, "affable", 6), "[UNK]");   /* too long */
    CHECK_STR(seg(wp, v, "#", 100), "#");
    CHECK_STR(seg(wp, v, "##", 100), "##");         /* the longest match is the whole word */
    tupe_wordpiece_free(wp);
    tupe_vocab_free(v);
}

/* Greedy longest-match-first with vocabulary lookups, as Google's and HF's code do it. */
static size_t naive(const tupe_vocab *v, const char *w, size_t len, uint32_t *out)
{
    size_t start = 0, k = 0;
    char buf[256];
    while (start < len) {
        int64_t found = -1;
        size_t end = len;
        for (; end > start; end--) {
            if (end < len && ((unsigned char)w[end] & 0xC0) == 0x80)
                continue;
            size_t n = 0;
            if (start)
                buf[n++] = '#', buf[n++] = '#';
            memcpy(buf + n, w + start, end - start);
            n += end - start;
            if ((found = tupe_vocab_find(v, buf, n)) >= 0)
                break;
        }
        if (found < 0) {
            out[0] = (uint32_t)v->special[TUPE_SP_UNK];
            return 1;
        }
        out[k++] = (uint32_t)found;
        start = end;
    }
    return k;
}

static void trie_equals_naive(void)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/bert-base-uncased-vocab.txt", unit_src());
    tupe_vocab *v;
    tupe_err e;
    if (tupe_vocab_load(&v, path, &e) != 0) {
        unit_fail(__FILE__, __LINE__, "%s", e.msg);
        return;
    }
    CHECK_INT(tupe_vocab_size(v), 30522);
    CHECK_INT(v->special[TUPE_SP_UNK], 100);
    CHECK_INT(v->special[TUPE_SP_CLS], 101);
    tupe_wordpiece *wp;
    CHECK_INT(tupe_wordpiece_new(&wp, v, "##", &e), 0);
    tupe_rng rng;
    tupe_rng_init(&rng, 7, 0, 0, 0);
    const char *alpha = "abcdefghijklmnopqrstuvwxyzaeiouaeioue\xc3\xa9\xe4\xb8\xad";
    size_t na = strlen(alpha);
    int bad = 0;
    for (int it = 0; it < 20000; it++) {
        char w[64];
        size_t n = 0;
        if (it % 3 == 0) { /* real tokens glued together */
            for (int k = 0; k < 3; k++) {
                uint32_t id = 999 + tupe_rng_below(&rng, 29000);
                const char *t = tupe_vocab_token(v, id);
                if (t[0] == '#')
                    t += 2;
                size_t l = strlen(t);
                if (n + l < 60)
                    memcpy(w + n, t, l), n += l;
            }
        } else {
            size_t len = 1 + tupe_rng_below(&rng, 14);
            for (size_t k = 0; k < len; k++) {
                char c = alpha[tupe_rng_below(&rng, (uint32_t)na)];
                if ((unsigned char)c >= 0x80) { /* keep whole characters */
                    c = 'q';
                }
                w[n++] = c;
            }
        }
        w[n] = 0;
        uint32_t a[64], b[64];
        int unk;
        size_t ka = tupe_wordpiece_encode(wp, (const uint8_t *)w, n, n, 100, a, &unk);
        size_t kb = naive(v, w, n, b);
        if ((ka != kb || memcmp(a, b, ka * 4) != 0) && bad++ < 3)
            CHECK_MSG(0, "'%s': trie and naive differ", w);
    }
    CHECK_INT(bad, 0);
    tupe_wordpiece_free(wp);
    tupe_vocab_free(v);
}

static void vocab_files(void)
{
    tupe_err e;
    tupe_vocab *v;
    const char *p = unit_path("v.txt");
    unit_write(p, "[PAD]\r\n[UNK] \nhello\n##lo\n", 25);
    CHECK_INT(tupe_vocab_load(&v, p, &e), 0);
    CHECK_INT(tupe_vocab_size(v), 4);
    CHECK_INT(tupe_vocab_find(v, "[UNK]", 5), 1);
    CHECK_INT(v->special[TUPE_SP_PAD], 0);
    CHECK_INT(v->special[TUPE_SP_CLS], -1);
    /* the hash is that of the tokens, one per line: the file's bytes without CR and spaces */
    CHECK_U64(v->hash, tupe_hash64("[PAD]\n[UNK]\nhello\n##lo\n", 23));
    const char *q = unit_path("w.txt");
    CHECK_INT(tupe_vocab_save(v, q, &e), 0);
    size_t n;
    char *s = unit_slurp(q, &n);
    CHECK(n == 23 && memcmp(s, "[PAD]\n[UNK]\nhello\n##lo\n", 23) == 0);
    free(s);
    tupe_vocab_free(v);
    unit_write(p, "a\nb\na\n", 6);
    CHECK_INT(tupe_vocab_load(&v, p, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "v.txt:3: duplicate token 'a' (first on line 1)");
    unit_write(p, "a\n\nb\n", 5);
    CHECK_INT(tupe_vocab_load(&v, p, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "v.txt:2: empty token");
    unit_write(p, "a\n\xff\n", 4);
    CHECK_INT(tupe_vocab_load(&v, p, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "byte 2: invalid UTF-8");
    unit_write(p, "", 0);
    CHECK_INT(tupe_vocab_load(&v, p, &e), TUPE_EDATA);
    CHECK_INT(tupe_vocab_load(&v, unit_path("none.txt"), &e), TUPE_ENOINPUT);
    /* a vocabulary without [UNK] cannot segment */
    unit_write(p, "a\nb\n", 4);
    CHECK_INT(tupe_vocab_load(&v, p, &e), 0);
    tupe_wordpiece *wp;
    CHECK_INT(tupe_wordpiece_new(&wp, v, "##", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "no [UNK]");
    tupe_vocab_free(v);
}

UNIT_MAIN(T(rules), T(trie_equals_naive), T(vocab_files))
