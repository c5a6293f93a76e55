#include "text/vocabtrain.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/outdir.h"
#include "base/grow.h"
#include "base/progress.h"
#include "text/bpe.h"
#include "text/merges.h"
#include "text/pipeline.h"
#include "text/pretok.h"

#define COUNT_CHUNK ((size_t)1 << 20)

static const char *const wp_specials[] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};

void tupe_vocabtrain_defaults(tupe_vocabtrain_opts *o, int kind)
{
    memset(o, 0, sizeof *o);
    o->kind = kind;
    o->vocab_size = 32768;
    o->merges = 32640;
    o->min_frequency = kind == TUPE_VOCAB_BPE ? 1 : 2;
    o->limit_alphabet = kind == TUPE_VOCAB_BPE ? 0 : 1000;
    o->memory = (uint64_t)2 << 30;
    o->lowercase = 1;
    o->strip_accents = -1;
    o->threads = 1;
}

/* ---- counting ------------------------------------------------------------------------------ */

typedef struct count_run {
    const tupe_vocabtrain_opts *o;
    tupe_pretok *pre;
    tupe_wordcount *wc;
    tupe_vocabtrain_report *r;
    tupe_corpus *c;
    tupe_progress *p;
} count_run;

typedef struct count_ctx {
    count_run *run;
    tupe_words words;
    char *line;
    size_t line_cap;
} count_ctx;

static void *count_ctx_new(void *arg)
{
    count_ctx *x = calloc(1, sizeof *x);
    if (x)
        x->run = arg;
    return x;
}

static void count_ctx_free(void *p)
{
    count_ctx *x = p;
    tupe_words_free(&x->words);
    free(x->line);
    free(x);
}

static void count_result_free(void *p)
{
    tupe_wordcount_free(p);
    free(p);
}

static int count_work(void *ctx, tupe_job *job, tupe_err *e)
{
    count_ctx *x = ctx;
    const tupe_vocabtrain_opts *o = x->run->o;
    tupe_wordcount *wc = job->result;
    if (!wc) {
        if (!(wc = job->result = malloc(sizeof *wc)))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        tupe_wordcount_init(wc);
    }
    tupe_wordcount_clear(wc);
    tupe_docscan ds;
    tupe_docscan_init(&ds, &job->chunk, o->docs, o->keep_title);
    const char *line;
    size_t len;
    int r;
    while ((r = tupe_docscan_next(&ds, &line, &len)) != TUPE_SCAN_DONE) {
        if (r != TUPE_SCAN_LINE)
            continue;
        size_t tlen;
        const char *text = tupe_docscan_text(&ds, line, len, &x->line, &x->line_cap, &tlen);
        if (!text)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        tupe_words_clear(&x->words);
        size_t bad;
        int rc = tupe_pretok_run(x->run->pre, text, tlen, &x->words, &bad);
        if (rc == -1)
            return tupe_fail_byte(e, TUPE_EDATA, job->chunk.name,
                                  job->chunk.offset + (uint64_t)(line - job->chunk.data) +
                                      (text == line ? bad : 0),
                                  "invalid UTF-8 (see --invalid)");
        if (rc)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        for (size_t i = 0; i < x->words.n; i++)
            if (tupe_wordcount_add(wc, x->words.buf + x->words.w[i].off, x->words.w[i].len, 1))
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    return 0;
}

static int count_consume(void *arg, tupe_job *job, tupe_err *e)
{
    count_run *run = arg;
    if (tupe_wordcount_merge(run->wc, job->result))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t limit = (size_t)(run->o->memory / TUPE_TRAIN_TABLE_SHARE);
    if (tupe_wordcount_bytes(run->wc) > limit) {
        uint64_t dropped, k = tupe_wordcount_prune(run->wc, limit, &dropped);
        if (k == UINT64_MAX)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        run->r->pruned_words += dropped;
        if (k > run->r->prune_max)
            run->r->prune_max = k;
    }
    tupe_progress_set(run->p, tupe_corpus_consumed(run->c));
    return 0;
}

int tupe_vocabtrain_count(tupe_corpus *c, const tupe_vocabtrain_opts *o, tupe_wordcount *wc,
                          tupe_vocabtrain_report *r, tupe_err *e)
{
    tupe_pretok_opts po = {
        .kind = o->kind == TUPE_VOCAB_BPE ? TUPE_PRETOK_WHITESPACE : TUPE_PRETOK_BERT,
        .lowercase = o->lowercase,
        .strip_accents = o->strip_accents < 0 ? o->lowercase : o->strip_accents,
        .invalid = o->invalid,
    };
    tupe_progress p;
    tupe_progress_start(&p, "count words", tupe_corpus_total(c), "B", o->quiet);
    count_run run = {o, tupe_pretok_new(&po), wc, r, c, &p};
    if (!run.pre)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    static const tupe_pipeline_ops ops = {count_ctx_new, count_ctx_free, count_work,
                                          count_consume, count_result_free};
    int rc = tupe_pipeline_run(c, COUNT_CHUNK, o->threads, &ops, &run, e);
    tupe_pretok_free(run.pre);
    tupe_progress_finish(&p);
    if (rc)
        return rc;
    r->words = wc->total;
    r->distinct = tupe_wordcount_size(wc);
    if (!r->distinct && r->pruned_words)
        return tupe_fail(e, TUPE_EUSAGE, "the memory budget (--memory) is too small: pruning "
                         "dropped every word");
    if (!r->distinct)
        return tupe_fail(e, TUPE_EDATA, "%s",
                         o->docs == TUPE_DOCS_WIKI ? "no words inside <doc> blocks in the input "
                                                     "(--docs wiki reads WikiExtractor output)"
                                                   : "no words in the input");
    return 0;
}

/* ---- shared by both models ----------------------------------------------------------------- */

/* Length of the UTF-8 character starting at s[i] (the input is valid). */
static size_t char_len(const char *s, size_t i, size_t n)
{
    size_t j = i + 1;
    while (j < n && ((unsigned char)s[j] & 0xC0) == 0x80)
        j++;
    return j - i;
}

/* Add the words (in sorted order) to m; sym_of gives the token of the i-th character of a word
 * (or -1 to skip it). */
typedef int64_t (*sym_fn)(void *arg, const char *ch, size_t n, int first, int last);

static int build_words(tupe_merges *m, const tupe_wordcount *wc, const uint32_t *order,
                       sym_fn sym_of, void *arg)
{
    uint32_t nw = tupe_wordcount_size(wc);
    tupe_u32vec sym = {0};
    if (!(m->wstart = malloc((nw ? nw : 1) * sizeof *m->wstart)) ||
        !(m->wlen = malloc((nw ? nw : 1) * sizeof *m->wlen)) ||
        !(m->wcount = malloc((nw ? nw : 1) * sizeof *m->wcount)))
        return -1;
    size_t k = 0;
    for (uint32_t i = 0; i < nw; i++) {
        uint32_t id = order[i];
        const char *s = tupe_strtab_str(&wc->words, id);
        size_t n = tupe_strtab_len(&wc->words, id), start = sym.n;
        for (size_t j = 0; j < n;) {
            size_t l = char_len(s, j, n);
            int64_t t = sym_of(arg, s + j, l, j == 0, j + l == n);
            if (t < -1 || (t >= 0 && tupe_u32vec_push(&sym, (uint32_t)t))) {
                free(sym.v);
                return -1;
            }
            j += l;
        }
        if (sym.n == start)
            continue;
        m->wstart[k] = start;
        m->wlen[k] = (uint32_t)(sym.n - start);
        m->wcount[k] = wc->count[id];
        k++;
    }
    m->nwords = k;
    m->sym = sym.v;
    return 0;
}

/* Finish the vocabulary, report, and give it to the caller. */
static int hand_over(tupe_vocab **v, const tupe_merges *m, tupe_vocabtrain_report *r, tupe_vocab **out,
                     tupe_err *e)
{
    int rc = tupe_vocab_finish(*v, e);
    if (rc)
        return rc;
    r->vocab_size = tupe_vocab_size(*v);
    r->merges = m->nmerges;
    *out = *v;
    *v = NULL;
    return 0;
}

static int learn(tupe_merges *m, const tupe_merges_opts *mo, const tupe_vocabtrain_opts *o,
                 size_t total, tupe_err *e)
{
    tupe_progress p;
    tupe_progress_start(&p, "merges", total, "merges", o->quiet);
    int rc = tupe_merges_learn(m, mo, &p, e);
    tupe_progress_finish(&p);
    return rc;
}

/* ---- WordPiece ------------------------------------------------------------------------------ */

typedef struct wp_build {
    tupe_strtab *strings;
    int64_t *char_tok;    /* string id of a character -> token, -1: not in the alphabet */
    int64_t *cont_tok;    /* same for its "##" form */
    tupe_strtab chars;    /* the kept alphabet, as strings */
} wp_build;

static int64_t wp_sym(void *arg, const char *ch, size_t n, int first, int last)
{
    wp_build *b = arg;
    int64_t c = tupe_strtab_find(&b->chars, ch, n);
    if (c < 0)
        return -1; /* not in the alphabet: dropped, as Hugging Face does */
    return first ? b->char_tok[c] : b->cont_tok[c];
}

/* A string with its count (alphabet characters, dictionary pieces). */
typedef struct counted {
    const char *s;
    uint32_t len;
    uint64_t count;
} counted;

/* Least frequent first; among equals the greater bytes (code point) first. */
static int cmp_rarest(const void *a, const void *b)
{
    const counted *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? -1 : 1;
    int c = memcmp(x->s, y->s, x->len < y->len ? x->len : y->len);
    c = c ? c : (x->len > y->len) - (x->len < y->len);
    return -c;
}

int tupe_vocabtrain_wordpiece(tupe_wordcount *wc, const tupe_vocabtrain_opts *o, tupe_vocab **out,
                              tupe_vocabtrain_report *r, tupe_err *e)
{
    tupe_strtab strings;
    tupe_strtab_init(&strings);
    tupe_merges m;
    memset(&m, 0, sizeof m);
    m.strings = &strings;
    wp_build b;
    memset(&b, 0, sizeof b);
    tupe_strtab_init(&b.chars);
    tupe_wordcount alphabet;
    tupe_wordcount_init(&alphabet);
    uint32_t *order = NULL, *chars_sorted = NULL;
    counted *al = NULL;
    tupe_vocab *v = NULL;
    int rc = TUPE_EFAIL;

    /* 1. specials */
    for (size_t i = 0; i < 5; i++) {
        int64_t sid = tupe_strtab_add(&strings, wp_specials[i], strlen(wp_specials[i]), NULL);
        if (sid < 0 || tupe_merges_add_token(&m, (uint32_t)sid) < 0)
            goto oom;
    }
    /* 2. alphabet: characters weighted by word counts, the most frequent kept */
    for (uint32_t id = 0; id < tupe_wordcount_size(wc); id++) {
        const char *s = tupe_strtab_str(&wc->words, id);
        size_t n = tupe_strtab_len(&wc->words, id);
        for (size_t j = 0; j < n;) {
            size_t l = char_len(s, j, n);
            if (tupe_wordcount_add(&alphabet, s + j, l, wc->count[id]))
                goto oom;
            j += l;
        }
    }
    uint32_t na = tupe_wordcount_size(&alphabet);
    if (!(al = malloc((na ? na : 1) * sizeof *al)))
        goto oom;
    for (uint32_t i = 0; i < na; i++)
        al[i] = (counted){tupe_strtab_str(&alphabet.words, i), tupe_strtab_len(&alphabet.words, i),
                        alphabet.count[i]};
    size_t drop = 0;
    if (o->limit_alphabet && na > o->limit_alphabet) {
        qsort(al, na, sizeof *al, cmp_rarest);
        drop = na - o->limit_alphabet;
    }
    for (uint32_t i = (uint32_t)drop; i < na; i++)
        if (tupe_strtab_add(&b.chars, al[i].s, al[i].len, NULL) < 0)
            goto oom;
    /* ids by code point (UTF-8 byte order is code point order) */
    uint32_t nc = b.chars.n;
    if (!(chars_sorted = tupe_strtab_sorted(&b.chars)) ||
        !(b.char_tok = malloc((nc ? nc : 1) * sizeof *b.char_tok)) ||
        !(b.cont_tok = malloc((nc ? nc : 1) * sizeof *b.cont_tok)))
        goto oom;
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t c = chars_sorted[i];
        int added;
        int64_t sid = tupe_strtab_add(&strings, tupe_strtab_str(&b.chars, c),
                                      tupe_strtab_len(&b.chars, c), &added);
        if (sid < 0)
            goto oom;
        b.char_tok[c] = added ? tupe_merges_add_token(&m, (uint32_t)sid) : -1;
        if (added && b.char_tok[c] < 0)
            goto oom;
        b.cont_tok[c] = -1;
    }
    /* 3. "##" forms of the characters that appear after the first position, by code point */
    for (uint32_t id = 0; id < tupe_wordcount_size(wc); id++) {
        const char *s = tupe_strtab_str(&wc->words, id);
        size_t n = tupe_strtab_len(&wc->words, id);
        for (size_t j = char_len(s, 0, n); j < n;) {
            size_t l = char_len(s, j, n);
            int64_t c = tupe_strtab_find(&b.chars, s + j, l);
            if (c >= 0)
                b.cont_tok[c] = -2; /* needed */
            j += l;
        }
    }
    for (uint32_t i = 0; i < nc; i++) {
        uint32_t c = chars_sorted[i];
        if (b.cont_tok[c] != -2) {
            b.cont_tok[c] = -1;
            continue;
        }
        char tmp[8];
        size_t l = tupe_strtab_len(&b.chars, c);
        memcpy(tmp, "##", 2);
        memcpy(tmp + 2, tupe_strtab_str(&b.chars, c), l);
        int64_t sid = tupe_strtab_add(&strings, tmp, l + 2, NULL);
        if (sid < 0 || (b.cont_tok[c] = tupe_merges_add_token(&m, (uint32_t)sid)) < 0)
            goto oom;
    }
    /* 4. words as tokens; 5. merges */
    if (!(order = tupe_wordcount_sorted(wc)) || build_words(&m, wc, order, wp_sym, &b))
        goto oom;
    /* the words are in m now: the table's memory goes back before the merges need theirs */
    free(order);
    order = NULL;
    tupe_wordcount_free(wc);
    tupe_wordcount_free(&alphabet);
    free(al);
    al = NULL;
    tupe_merges_opts mo = {TUPE_MERGES_HF, o->vocab_size, 0, o->min_frequency, "##"};
    size_t want = o->vocab_size > m.ntok ? o->vocab_size - m.ntok : 0;
    if ((rc = learn(&m, &mo, o, want, e)))
        goto done;
    if (!(v = tupe_vocab_new(TUPE_VOCAB_WORDPIECE)))
        goto oom;
    for (size_t t = 0; t < m.ntok; t++)
        if (tupe_vocab_add(v, tupe_strtab_str(&strings, m.tok_str[t]),
                           tupe_strtab_len(&strings, m.tok_str[t]), 0) < 0)
            goto oom;
    rc = hand_over(&v, &m, r, out, e);
    goto done;
oom:
    rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
done:
    tupe_vocab_free(v);
    free(order);
    free(chars_sorted);
    free(al);
    free(b.char_tok);
    free(b.cont_tok);
    tupe_strtab_free(&b.chars);
    tupe_wordcount_free(&alphabet);
    tupe_merges_free(&m);
    tupe_strtab_free(&strings);
    return rc;
}

/* ---- BPE ------------------------------------------------------------------------------------ */

typedef struct bpe_build {
    tupe_strtab *strings;
    char tmp[64];
} bpe_build;

static int64_t bpe_sym(void *arg, const char *ch, size_t n, int first, int last)
{
    bpe_build *b = arg;
    memcpy(b->tmp, ch, n);
    if (last)
        memcpy(b->tmp + n, TUPE_BPE_END, 4);
    int64_t s = tupe_strtab_find(b->strings, b->tmp, n + (last ? 4 : 0));
    return s < 0 ? -2 : s;
}

/* fairseq's dictionary order: most frequent first, ties by bytes. */
static int cmp_dict(const void *a, const void *b) { return cmp_rarest(b, a); }

int tupe_vocabtrain_bpe(const tupe_wordcount *wc, const tupe_vocabtrain_opts *o, tupe_buf *codes,
                        tupe_vocab **out, tupe_vocabtrain_report *r, tupe_err *e)
{
    tupe_strtab initial, strings;
    tupe_strtab_init(&initial);
    tupe_strtab_init(&strings);
    tupe_merges m;
    memset(&m, 0, sizeof m);
    m.strings = &strings;
    uint32_t *order = NULL, *sorted = NULL, *ids = NULL, *ends = NULL;
    tupe_bpe *bpe = NULL;
    tupe_bpe_cache *cache = NULL;
    tupe_wordcount pieces;
    tupe_wordcount_init(&pieces);
    counted *de = NULL;
    tupe_vocab *v = NULL;
    char *pbuf = NULL;
    int rc = TUPE_EFAIL;
    uint32_t nw = tupe_wordcount_size(wc);

    /* 1. the characters, final ones with </w>; ids in byte order */
    char tmp[64];
    for (uint32_t id = 0; id < nw; id++) {
        const char *s = tupe_strtab_str(&wc->words, id);
        size_t n = tupe_strtab_len(&wc->words, id);
        for (size_t j = 0; j < n;) {
            size_t l = char_len(s, j, n);
            memcpy(tmp, s + j, l);
            if (j + l == n)
                memcpy(tmp + l, TUPE_BPE_END, 4);
            if (tupe_strtab_add(&initial, tmp, l + (j + l == n ? 4 : 0), NULL) < 0)
                goto oom;
            j += l;
        }
    }
    if (!(sorted = tupe_strtab_sorted(&initial)))
        goto oom;
    for (uint32_t i = 0; i < initial.n; i++) {
        int64_t sid = tupe_strtab_add(&strings, tupe_strtab_str(&initial, sorted[i]),
                                      tupe_strtab_len(&initial, sorted[i]), NULL);
        if (sid < 0 || tupe_merges_add_token(&m, (uint32_t)sid) < 0)
            goto oom;
    }
    /* string id == token id for these */
    bpe_build bb = {&strings, {0}};
    if (!(order = tupe_wordcount_sorted(wc)) || build_words(&m, wc, order, bpe_sym, &bb))
        goto oom;
    /* 2. merges */
    tupe_merges_opts mo = {TUPE_MERGES_FASTBPE, 0, o->merges, o->min_frequency, NULL};
    if ((rc = learn(&m, &mo, o, o->merges, e)))
        goto done;
    rc = TUPE_EFAIL;
    /* 3. codes, and the same merges as a model to apply */
    if (!(bpe = tupe_bpe_new()))
        goto oom;
    for (size_t i = 0; i < m.nmerges; i++) {
        const tupe_merge *g = &m.merges[i];
        const char *ls = tupe_strtab_str(&strings, m.tok_str[g->left]);
        const char *rs = tupe_strtab_str(&strings, m.tok_str[g->right]);
        size_t ll = tupe_strtab_len(&strings, m.tok_str[g->left]);
        size_t rl = tupe_strtab_len(&strings, m.tok_str[g->right]);
        if (tupe_buf_reserve(codes, ll + rl + 24))
            goto oom;
        memcpy(codes->p + codes->len, ls, ll);
        codes->len += ll;
        codes->p[codes->len++] = ' ';
        memcpy(codes->p + codes->len, rs, rl);
        codes->len += rl;
        codes->len += (size_t)snprintf((char *)codes->p + codes->len, 24, " %llu\n",
                                       (unsigned long long)g->count);
        /* the same pair of strings twice (fastBPE can learn that): the first rank wins */
        if (tupe_bpe_add_merge(bpe, ls, ll, rs, rl) == -2)
            goto oom;
    }
    if (tupe_bpe_bind(bpe, NULL) || !(cache = tupe_bpe_cache_new()))
        goto oom;
    /* 4. the dictionary: pieces of the training words, weighted by their counts */
    size_t maxlen = 0;
    for (uint32_t id = 0; id < nw; id++)
        if (tupe_strtab_len(&wc->words, id) > maxlen)
            maxlen = tupe_strtab_len(&wc->words, id);
    if (!(ids = malloc((maxlen + 1) * sizeof *ids)) || !(ends = malloc((maxlen + 1) * sizeof *ends)) ||
        !(pbuf = malloc(maxlen + 3)))
        goto oom;
    for (uint32_t i = 0; i < nw; i++) {
        uint32_t id = order[i];
        const uint8_t *s = (const uint8_t *)tupe_strtab_str(&wc->words, id);
        size_t n = tupe_strtab_len(&wc->words, id), unk = 0;
        size_t k = tupe_bpe_encode(bpe, cache, s, n, ids, ends, &unk);
        if (k == 0 && n)
            goto oom;
        for (size_t j = 0; j < k; j++) {
            size_t start = j ? ends[j - 1] : 0, l = ends[j] - start;
            memcpy(pbuf, s + start, l);
            if (j + 1 < k) {
                memcpy(pbuf + l, TUPE_BPE_SEP, 2);
                l += 2;
            }
            if (tupe_wordcount_add(&pieces, pbuf, l, wc->count[id]))
                goto oom;
        }
    }
    uint32_t np = tupe_wordcount_size(&pieces);
    if (!(de = malloc((np ? np : 1) * sizeof *de)))
        goto oom;
    for (uint32_t i = 0; i < np; i++)
        de[i] = (counted){tupe_strtab_str(&pieces.words, i), tupe_strtab_len(&pieces.words, i),
                             pieces.count[i]};
    qsort(de, np, sizeof *de, cmp_dict);
    size_t keep = o->vocab_size > TUPE_BPE_NHEAD ? o->vocab_size - TUPE_BPE_NHEAD : 0;
    if (keep > np)
        keep = np;
    if (!(v = tupe_vocab_new(TUPE_VOCAB_BPE)))
        goto oom;
    for (size_t i = 0; i < keep; i++)
        if (tupe_vocab_add(v, de[i].s, de[i].len, de[i].count) == -2)
            goto oom;
    /* fairseq pads the dictionary (specials included) to a multiple of 8 */
    for (int pad = 0; tupe_vocab_size(v) % 8; pad++) {
        char name[32];
        int l = snprintf(name, sizeof name, "madeupword%04d", pad);
        if (tupe_vocab_add(v, name, (size_t)l, 0) == -2)
            goto oom;
    }
    rc = hand_over(&v, &m, r, out, e);
    goto done;
oom:
    rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
done:
    tupe_vocab_free(v);
    free(de);
    free(pbuf);
    free(ids);
    free(ends);
    tupe_bpe_cache_free(cache);
    tupe_bpe_free(bpe);
    tupe_wordcount_free(&pieces);
    free(order);
    free(sorted);
    tupe_merges_free(&m);
    tupe_strtab_free(&strings);
    tupe_strtab_free(&initial);
    return rc;
}

/* ---- everything ------------------------------------------------------------------------------ */

int tupe_vocabtrain(tupe_corpus *c, const tupe_vocabtrain_opts *o, const char *out,
                    tupe_vocabtrain_report *r, tupe_err *e)
{
    memset(r, 0, sizeof *r);
    tupe_wordcount wc;
    tupe_wordcount_init(&wc);
    tupe_vocab *v = NULL;
    tupe_buf codes = {0};
    /* before the work: the directory to replace must be a BPE vocabulary or empty */
    int rc = o->kind == TUPE_VOCAB_BPE ? tupe_outdir_check(out, TUPE_BPE_KIND, TUPE_OUTDIR_REPLACE, e) : 0;
    if (!rc)
        rc = tupe_vocabtrain_count(c, o, &wc, r, e);
    if (rc)
        goto done;
    if (o->kind == TUPE_VOCAB_WORDPIECE) {
        if ((rc = tupe_vocabtrain_wordpiece(&wc, o, &v, r, e)))
            goto done;
        rc = tupe_vocab_save(v, out, e);
        goto done;
    }
    if ((rc = tupe_vocabtrain_bpe(&wc, o, &codes, &v, r, e)))
        goto done;
    tupe_wordcount_free(&wc);
    tupe_dirtx *tx;
    if ((rc = tupe_dirtx_begin(&tx, out, TUPE_BPE_KIND, e)))
        goto done;
    char path[4096];
    snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, "codes"));
    if ((rc = tupe_write_file(path, codes.p, codes.len, e)) ||
        (rc = tupe_vocab_save(v, tupe_dirtx_file(tx, "dict.txt"), e))) {
        tupe_dirtx_abort(tx);
        goto done;
    }
    rc = tupe_dirtx_commit(tx, e);
done:
    tupe_buf_free(&codes);
    tupe_vocab_free(v);
    tupe_wordcount_free(&wc);
    return rc;
}
