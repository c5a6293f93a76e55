/* Normalization and pre-tokenization: the fast path against the step-by-step reference on
 * random text from every script, in every option combination; the BERT rules on examples;
 * invalid UTF-8 under each policy. (Agreement with Hugging Face itself is the parity test.) */
#include "base/rng.h"
#include "text/pretok.h"
#include "text/unicode.h"
#include "unit.h"

/* The words joined by '|' (for readable checks). */
static const char *joined(const tupe_words *w)
{
    static char buf[4096];
    size_t k = 0;
    for (size_t i = 0; i < w->n && k + w->w[i].len + 2 < sizeof buf; i++) {
        if (i)
            buf[k++] = '|';
        memcpy(buf + k, w->buf + w->w[i].off, w->w[i].len);
        k += w->w[i].len;
    }
    buf[k] = 0;
    return buf;
}

static const char *words_of(const tupe_pretok_opts *o, const char *text)
{
    tupe_pretok *p = tupe_pretok_new(o);
    tupe_words w = {0};
    size_t bad;
    CHECK_INT(tupe_pretok_run(p, text, strlen(text), &w, &bad), 0);
    const char *s = joined(&w);
    tupe_words_free(&w);
    tupe_pretok_free(p);
    return s;
}

static void bert_rules(void)
{
    tupe_pretok_opts o = {TUPE_PRETOK_BERT, 1, 1, TUPE_INVALID_ERROR};
    CHECK_STR(words_of(&o, "Hello, World!"), "hello|,|world|!");
    CHECK_STR(words_of(&o, "naïve CAFÉ"), "naive|cafe");
    CHECK_STR(words_of(&o, "ΟΔΟΣ"), "οδοσ"); /* no final sigma */
    CHECK_STR(words_of(&o, "$5^`|~"), "$|5|^|`|||~");
    CHECK_STR(words_of(&o, "a\xe4\xb8\xad\xe6\x96\x87" "b"), "a|\xe4\xb8\xad|\xe6\x96\x87|b");
    CHECK_STR(words_of(&o, "soft\xc2\xadhyphen zero\xe2\x80\x8bwidth"), "softhyphen|zerowidth");
    CHECK_STR(words_of(&o, "tab\there\r\nnl"), "tab|here|nl");
    CHECK_STR(words_of(&o, "\xe2\xb9\x85"), "\xe2\xb9\x85"); /* U+2E45 is not punctuation */
    CHECK_STR(words_of(&o, "  "), "");
    tupe_pretok_opts cased = {TUPE_PRETOK_BERT, 0, 0, TUPE_INVALID_ERROR};
    CHECK_STR(words_of(&cased, "naïve CAFÉ"), "naïve|CAFÉ");
    tupe_pretok_opts ws = {TUPE_PRETOK_WHITESPACE, 1, 0, TUPE_INVALID_ERROR};
    CHECK_STR(words_of(&ws, "Hello, World!\tx\ry"), "hello,|world!|x|y");
    tupe_words w = {0};
    tupe_pretok *p = tupe_pretok_new(&o);
    size_t bad;
    CHECK_INT(tupe_pretok_run(p, "a bc d", 6, &w, &bad), 0);
    CHECK_INT(w.n, 3);
    CHECK_INT(w.w[1].nchars, 2);
    tupe_words_free(&w);
    tupe_pretok_free(p);
}

static void invalid_utf8(void)
{
    const char *text = "ok \xff bad \xe2\x82 end";
    size_t n = strlen(text), bad = 0;
    for (int kind = 0; kind < 2; kind++) {
        tupe_pretok_opts o = {kind, 1, 1, TUPE_INVALID_ERROR};
        tupe_pretok *p = tupe_pretok_new(&o);
        tupe_words w = {0};
        CHECK_INT(tupe_pretok_run(p, "x", 1, &w, &bad), 0);
        CHECK_INT(tupe_pretok_run(p, text, n, &w, &bad), -1);
        CHECK_INT(bad, 3);
        CHECK_INT(w.n, 1); /* untouched on error */
        tupe_words_free(&w);
        tupe_pretok_free(p);
    }
    tupe_pretok_opts rep = {TUPE_PRETOK_BERT, 1, 1, TUPE_INVALID_REPLACE};
    CHECK_STR(words_of(&rep, text), "ok|bad|end");
    tupe_pretok_opts wsrep = {TUPE_PRETOK_WHITESPACE, 0, 0, TUPE_INVALID_REPLACE};
    CHECK_STR(words_of(&wsrep, "a\xffz"), "a\xef\xbf\xbdz");
    tupe_pretok_opts wsskip = {TUPE_PRETOK_WHITESPACE, 0, 0, TUPE_INVALID_SKIP};
    CHECK_STR(words_of(&wsskip, "a\xff\xe2\x82z"), "az");
}

static int same_words(const tupe_words *a, const tupe_words *b)
{
    if (a->n != b->n)
        return 0;
    for (size_t i = 0; i < a->n; i++)
        if (a->w[i].len != b->w[i].len || a->w[i].nchars != b->w[i].nchars ||
            memcmp(a->buf + a->w[i].off, b->buf + b->w[i].off, a->w[i].len) != 0)
            return 0;
    return 1;
}

static void fast_equals_reference(void)
{
    static const uint32_t ranges[][2] = {
        {0x20, 0x7E},     {0xA0, 0x24F},    {0x300, 0x36F},   {0x370, 0x52F},
        {0x590, 0x10FF},  {0x1100, 0x11FF}, {0x1AB0, 0x1DFF}, {0x1E00, 0x1FFF},
        {0x2000, 0x2E7F}, {0x3000, 0x33FF}, {0x4E00, 0x4E80}, {0xAC00, 0xD7A3},
        {0xE000, 0xE010}, {0xF900, 0xFFFD}, {0x1D160, 0x1D1AA}, {0x1E000, 0x1E02A},
        {0x1E900, 0x1E95F}, {0x11400, 0x1147F}, {0x2B800, 0x2B930}, {0x1F300, 0x1F6FF}};
    const size_t nr = sizeof ranges / sizeof ranges[0];
    tupe_rng rng;
    tupe_rng_init(&rng, 2026, 0, 0, 0);
    char text[512];
    int mismatches = 0;
    for (int mode = 0; mode < 5; mode++) {
        tupe_pretok_opts o = {mode == 4 ? TUPE_PRETOK_WHITESPACE : TUPE_PRETOK_BERT, mode & 1,
                              (mode >> 1) & 1, TUPE_INVALID_REPLACE};
        tupe_pretok *p = tupe_pretok_new(&o);
        tupe_words a = {0}, b = {0};
        for (int iter = 0; iter < 3000; iter++) {
            size_t k = 0;
            int nch = 1 + (int)(tupe_rng_u32(&rng) % 60);
            for (int c = 0; c < nch && k + 8 < sizeof text; c++) {
                uint32_t r = tupe_rng_u32(&rng);
                uint32_t cp;
                if (r % 4 == 0) {
                    cp = " aZ.-\t"[r / 4 % 6];
                } else {
                    const uint32_t *g = ranges[r / 4 % nr];
                    cp = g[0] + tupe_rng_u32(&rng) % (g[1] - g[0] + 1);
                }
                if (cp >= 0xD800 && cp < 0xE000)
                    cp = 'x';
                if (r % 97 == 0) { /* now and then a byte that is not UTF-8 */
                    text[k++] = (char)0xFF;
                    continue;
                }
                k += (size_t)tupe_utf8_encode(cp, (uint8_t *)text + k);
            }
            size_t bad;
            tupe_words_clear(&a);
            tupe_words_clear(&b);
            CHECK_INT(tupe_pretok_run(p, text, k, &a, &bad), 0);
            CHECK_INT(tupe_pretok_run_reference(p, text, k, &b, &bad), 0);
            if (!same_words(&a, &b) && mismatches++ < 3)
                CHECK_MSG(0, "mode %d: fast \"%s\" differs from the reference", mode, joined(&a));
        }
        tupe_words_free(&a);
        tupe_words_free(&b);
        tupe_pretok_free(p);
    }
    CHECK_INT(mismatches, 0);
}

static void canonical_reordering(void)
{
    /* U+1D16D (class 226) before U+1D165 (216): NFD swaps them; both survive accent
     * stripping, so the order is visible (Hugging Face gives the swapped order). */
    tupe_pretok_opts o = {TUPE_PRETOK_BERT, 1, 1, TUPE_INVALID_ERROR};
    CHECK_STR(words_of(&o, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5"), "x\xf0\x9d\x85\xa5\xf0\x9d\x85\xad");
    tupe_pretok_opts keep = {TUPE_PRETOK_BERT, 1, 0, TUPE_INVALID_ERROR};
    CHECK_STR(words_of(&keep, "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5"), "x\xf0\x9d\x85\xad\xf0\x9d\x85\xa5");
}

UNIT_MAIN(T(bert_rules), T(invalid_utf8), T(fast_equals_reference), T(canonical_reordering))
