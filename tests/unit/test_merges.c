/* The merge loop: Hugging Face's own BPE trainer test case (tokenizers' trainer.rs,
 * test_train: the vocabulary and merges it asserts), Sennrich's low/lower/newest/widest in the
 * fastBPE flavour, and the word-count pruning rule. */
#include "text/merges.h"
#include "unit.h"
#include "text/wordcount.h"

typedef struct problem {
    tupe_strtab strings;
    tupe_merges m;
    size_t nsym, nw;
} problem;

static void add_tokens(problem *p, const char *const *toks, size_t n)
{
    tupe_strtab_init(&p->strings);
    memset(&p->m, 0, sizeof p->m);
    p->m.strings = &p->strings;
    for (size_t i = 0; i < n; i++) {
        int64_t sid = tupe_strtab_add(&p->strings, toks[i], strlen(toks[i]), NULL);
        CHECK(sid >= 0 && tupe_merges_add_token(&p->m, (uint32_t)sid) == (int64_t)i);
    }
    p->m.sym = calloc(256, sizeof *p->m.sym);
    p->m.wstart = calloc(32, sizeof *p->m.wstart);
    p->m.wlen = calloc(32, sizeof *p->m.wlen);
    p->m.wcount = calloc(32, sizeof *p->m.wcount);
    p->nsym = p->nw = 0;
}

/* A word given as the tokens of its characters ("low" with final = "w</w>"). */
static void add_word(problem *p, const char *const *syms, size_t n, uint64_t count)
{
    p->m.wstart[p->nw] = p->nsym;
    p->m.wlen[p->nw] = (uint32_t)n;
    p->m.wcount[p->nw] = count;
    for (size_t i = 0; i < n; i++) {
        int64_t id = tupe_strtab_find(&p->strings, syms[i], strlen(syms[i]));
        CHECK(id >= 0);
        p->m.sym[p->nsym++] = (uint32_t)id;
    }
    p->m.nwords = ++p->nw;
}

static void add_chars(problem *p, const char *w, uint64_t count, int end)
{
    const char *syms[32];
    char buf[32][8];
    size_t n = strlen(w);
    for (size_t i = 0; i < n; i++) {
        snprintf(buf[i], sizeof buf[i], "%c%s", w[i], end && i + 1 == n ? "</w>" : "");
        syms[i] = buf[i];
    }
    add_word(p, syms, n, count);
}

static const char *tok(const problem *p, uint32_t id)
{
    return tupe_strtab_str(&p->strings, p->m.tok_str[id]);
}

static void hf_trainer_test_case(void)
{
    static const char *const alphabet[] = {"-", "2", "B", "E", "G", "P", "R", "T", "a", "b", "d",
                                           "e", "g", "i", "l", "n", "o", "r", "s", "t", "u", "v"};
    problem p;
    add_tokens(&p, alphabet, 22);
    static const struct { const char *w; uint64_t n; } words[] = {
        {"roses", 1}, {"are", 2}, {"red", 1}, {"voilets", 1}, {"blue", 1}, {"BERT", 1},
        {"is", 2}, {"big", 1}, {"and", 1}, {"so", 1}, {"GPT-2", 1}};
    for (size_t i = 0; i < sizeof words / sizeof *words; i++)
        add_chars(&p, words[i].w, words[i].n, 0);
    tupe_merges_opts o = {TUPE_MERGES_HF, 30000, 0, 2, NULL};
    tupe_err e;
    CHECK_INT(tupe_merges_learn(&p.m, &o, NULL, &e), 0);
    CHECK_INT(p.m.nmerges, 3);
    CHECK_INT(p.m.ntok, 25);
    CHECK_STR(tok(&p, 22), "re");
    CHECK_STR(tok(&p, 23), "are");
    CHECK_STR(tok(&p, 24), "is");
    CHECK(p.m.merges[0].left == 17 && p.m.merges[0].right == 11 && p.m.merges[0].result == 22);
    CHECK(p.m.merges[1].left == 8 && p.m.merges[1].right == 22 && p.m.merges[1].result == 23);
    CHECK(p.m.merges[2].left == 13 && p.m.merges[2].right == 18 && p.m.merges[2].result == 24);
    tupe_merges_free(&p.m);
    tupe_strtab_free(&p.strings);
}

static void fastbpe_flavour(void)
{
    static const char *const init[] = {"d", "e", "i", "l", "n", "o", "r</w>", "s", "t</w>", "w",
                                       "w</w>"};
    problem p;
    add_tokens(&p, init, 11);
    add_chars(&p, "low", 5, 1);
    add_chars(&p, "lower", 2, 1);
    add_chars(&p, "newest", 6, 1);
    add_chars(&p, "widest", 3, 1);
    tupe_merges_opts o = {TUPE_MERGES_FASTBPE, 0, 4, 1, NULL};
    tupe_err e;
    CHECK_INT(tupe_merges_learn(&p.m, &o, NULL, &e), 0);
    CHECK_INT(p.m.nmerges, 4);
    CHECK_STR(tok(&p, p.m.merges[0].result), "es");
    CHECK_INT(p.m.merges[0].count, 9);
    CHECK_STR(tok(&p, p.m.merges[1].result), "est</w>");
    CHECK_STR(tok(&p, p.m.merges[2].result), "lo");
    CHECK_INT(p.m.merges[2].count, 7);
    CHECK_STR(tok(&p, p.m.merges[3].result), "ew");
    CHECK_INT(p.m.merges[3].count, 6);
    /* words now: lo w</w> | lo w e r</w> | n ew est</w> | w i d est</w> */
    CHECK_INT(p.m.wlen[2], 3);
    tupe_merges_free(&p.m);
    tupe_strtab_free(&p.strings);
}

static void overlapping_pairs(void)
{
    /* "aaaa": (a, a) three times; merging gives aa aa, the counts follow HF's Word::merge */
    static const char *const init[] = {"a"};
    problem p;
    add_tokens(&p, init, 1);
    add_chars(&p, "aaaa", 1, 0);
    tupe_merges_opts o = {TUPE_MERGES_HF, 100, 0, 1, NULL};
    tupe_err e;
    CHECK_INT(tupe_merges_learn(&p.m, &o, NULL, &e), 0);
    CHECK_INT(p.m.nmerges, 2);
    CHECK_STR(tok(&p, 1), "aa");
    CHECK_STR(tok(&p, 2), "aaaa");
    CHECK_INT(p.m.wlen[0], 1);
    tupe_merges_free(&p.m);
    tupe_strtab_free(&p.strings);
}

static void pruning_rule(void)
{
    tupe_wordcount w;
    tupe_wordcount_init(&w);
    char buf[32];
    /* 1000 words seen once, 100 seen twice, 10 seen 50 times */
    for (int i = 0; i < 1110; i++) {
        int n = snprintf(buf, sizeof buf, "word%d", i);
        uint64_t k = i < 1000 ? 1 : i < 1100 ? 2 : 50;
        CHECK_INT(tupe_wordcount_add(&w, buf, (size_t)n, k), 0);
    }
    tupe_wordcount copy;
    tupe_wordcount_init(&copy);
    CHECK_INT(tupe_wordcount_merge(&copy, &w), 0);
    CHECK_INT(tupe_wordcount_size(&copy), 1110);
    CHECK_U64(copy.total, w.total);
    uint64_t dropped;
    /* a budget that only the 110 frequent words fit in (at half of it) */
    uint64_t k = tupe_wordcount_prune(&w, 2 * 200 * 40, &dropped);
    CHECK_INT(k, 1);
    CHECK_INT(dropped, 1000);
    CHECK_INT(tupe_wordcount_size(&w), 110);
    k = tupe_wordcount_prune(&w, 2 * 12 * 40, &dropped);
    CHECK_INT(k, 2);
    CHECK_INT(tupe_wordcount_size(&w), 10);
    CHECK_INT(tupe_wordcount_prune(&copy, (size_t)1 << 30, &dropped), 0);
    CHECK_INT(tupe_wordcount_size(&copy), 1110);
    uint32_t *order = tupe_wordcount_sorted(&w);
    CHECK_STR(tupe_strtab_str(&w.words, order[0]), "word1100");
    CHECK_STR(tupe_strtab_str(&w.words, order[9]), "word1109");
    free(order);
    tupe_wordcount_free(&w);
    tupe_wordcount_free(&copy);
}

UNIT_MAIN(T(hf_trainer_test_case), T(fastbpe_flavour), T(overlapping_pairs), T(pruning_rule))
