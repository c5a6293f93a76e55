/* Corpus chunks (whole documents, member offsets, never across members), document framing in
 * each mode, and the ordered pipeline (input order whatever the thread count; errors in input
 * order). */
#include "base/strtab.h"
#include "text/corpus.h"
#include "text/jsonl.h"
#include "text/pipeline.h"
#include "text/pretok.h"
#include "unit.h"

/* Concatenate the chunks of a corpus, checking that each ends where a document may end. */
static char *chunks_of(const char *path, int docs, size_t target, size_t *nchunks, tupe_err *e)
{
    tupe_corpus *c;
    const char *paths[] = {path};
    if (tupe_corpus_open(&c, paths, 1, docs, e))
        return NULL;
    tupe_chunk ch = {0};
    size_t cap = 1 << 16, len = 0;
    char *all = malloc(cap);
    *nchunks = 0;
    int r;
    uint64_t off = 0;
    while ((r = tupe_corpus_next(c, &ch, target, e)) == 1) {
        CHECK_U64(ch.offset, off);
        CHECK_U64(ch.index, *nchunks);
        off += ch.len;
        if (docs != TUPE_DOCS_WIKI)
            CHECK_MSG(ch.data[ch.len - 1] == '\n', "chunk %zu does not end a line", *nchunks);
        if (docs == TUPE_DOCS_BLANK && ch.len >= 2 && r == 1 && len + ch.len < 100000)
            CHECK_MSG(ch.data[ch.len - 2] == '\n', "chunk %zu does not end at a blank line", *nchunks);
        while (len + ch.len + 1 > cap)
            cap *= 2;
        all = realloc(all, cap);
        memcpy(all + len, ch.data, ch.len);
        len += ch.len;
        (*nchunks)++;
    }
    all[len] = 0;
    tupe_chunk_free(&ch);
    tupe_corpus_close(c);
    if (r < 0) {
        free(all);
        return NULL;
    }
    return all;
}

static void chunks(void)
{
    const char *p = unit_path("c.txt");
    char *text = malloc(200000);
    size_t n = 0;
    for (int d = 0; n < 190000; d++) {
        for (int l = 0; l < d % 5 + 1; l++)
            n += (size_t)sprintf(text + n, "doc %d line %d %s\n", d, l, d % 7 ? "" : "more words");
        text[n++] = '\n';
    }
    unit_write(p, text, n);
    tupe_err e;
    size_t k;
    char *got = chunks_of(p, TUPE_DOCS_BLANK, 4096, &k, &e);
    CHECK(got && strlen(got) == n && memcmp(got, text, n) == 0);
    CHECK_MSG(k > 20, "%zu chunks", k);
    free(got);
    got = chunks_of(p, TUPE_DOCS_LINE, 1000, &k, &e);
    CHECK(got && strlen(got) == n && memcmp(got, text, n) == 0);
    free(got);
    /* a tiny target: long documents are cut at line ends, nothing is lost */
    got = chunks_of(p, TUPE_DOCS_BLANK, 1, &k, &e);
    CHECK(got && strlen(got) == n);
    free(got);
    /* BOM dropped, offsets count it */
    unit_write(p, "\xef\xbb\xbf" "a\n", 5);
    tupe_corpus *c;
    const char *paths[] = {p};
    CHECK_INT(tupe_corpus_open(&c, paths, 1, TUPE_DOCS_BLANK, &e), 0);
    tupe_chunk ch = {0};
    CHECK_INT(tupe_corpus_next(c, &ch, 100, &e), 1);
    CHECK(ch.len == 2 && memcmp(ch.data, "a\n", 2) == 0 && ch.offset == 3 && ch.member_start);
    CHECK_INT(tupe_corpus_next(c, &ch, 100, &e), 0);
    tupe_corpus_close(c);
    /* empty input is an error */
    unit_write(p, "", 0);
    CHECK_INT(tupe_corpus_open(&c, paths, 1, TUPE_DOCS_BLANK, &e), 0);
    CHECK_INT(tupe_corpus_next(c, &ch, 100, &e), -1);
    CHECK_HAS(e.msg, "empty input");
    tupe_corpus_close(c);
    const char *missing[] = {unit_path("none.txt")};
    CHECK_INT(tupe_corpus_open(&c, missing, 1, TUPE_DOCS_BLANK, &e), TUPE_ENOINPUT);
    tupe_chunk_free(&ch);
    free(text);
}

/* The lines of a chunk as "line|line||line|" (| after a line, an extra | at a document end). */
static const char *scan(const char *text, int docs, int keep_title)
{
    static char out[1024];
    tupe_chunk ch = {.data = (char *)text, .len = strlen(text), .member_start = 1};
    tupe_docscan d;
    tupe_docscan_init(&d, &ch, docs, keep_title);
    const char *line;
    size_t len, k = 0;
    int r;
    while ((r = tupe_docscan_next(&d, &line, &len)) != TUPE_SCAN_DONE) {
        if (r == TUPE_SCAN_LINE)
            k += (size_t)snprintf(out + k, sizeof out - k, "%.*s|", (int)len, line);
        else
            k += (size_t)snprintf(out + k, sizeof out - k, "|");
    }
    out[k] = 0;
    return out;
}

static void framing(void)
{
    CHECK_STR(scan("a\nb\n\n \t\r\nc\n", TUPE_DOCS_BLANK, 0), "a|b||c||");
    CHECK_STR(scan("\n\na\n", TUPE_DOCS_BLANK, 0), "a||");
    CHECK_STR(scan("a\n\nb", TUPE_DOCS_LINE, 0), "a||||b||");
    const char *w = "junk\n<doc id=\"1\">\nTitle\n\nBody 1\nBody 2\n</doc>\n<doc id=\"2\">\nT\n</doc>\n";
    CHECK_STR(scan(w, TUPE_DOCS_WIKI, 0), "Body 1|Body 2|||");
    CHECK_STR(scan(w, TUPE_DOCS_WIKI, 1), "Title|Body 1|Body 2||T||");
    char buf[64];
    const char *esc = "a &lt;b&gt; &amp;lt; &x";
    size_t n = tupe_wiki_unescape(esc, strlen(esc), buf);
    CHECK(n == 13 && memcmp(buf, "a <b> &lt; &x", 13) == 0);
}

/* ---- pipeline ------------------------------------------------------------------------------ */

typedef struct sum {
    char *out;
    size_t len;
    uint64_t next;
    int fail_at;
} sum;

static void *ctx_new(void *arg) { return arg; }
static void ctx_free(void *ctx) {}
static void result_free(void *r) { free(r); }

static int work(void *ctx, tupe_job *job, tupe_err *e)
{
    sum *s = ctx;
    if ((int)job->chunk.index == s->fail_at)
        return tupe_fail(e, TUPE_EDATA, "chunk %llu failed", (unsigned long long)job->chunk.index);
    char *r = realloc(job->result, job->chunk.len + 1);
    for (size_t i = 0; i < job->chunk.len; i++) /* some work: upper-case */
        r[i] = (char)(job->chunk.data[i] >= 'a' && job->chunk.data[i] <= 'z' ? job->chunk.data[i] - 32
                                                                           : job->chunk.data[i]);
    r[job->chunk.len] = 0;
    job->result = r;
    return 0;
}

static int consume(void *arg, tupe_job *job, tupe_err *e)
{
    sum *s = arg;
    CHECK_U64(job->chunk.index, s->next);
    s->next++;
    size_t n = strlen(job->result);
    memcpy(s->out + s->len, job->result, n);
    s->len += n;
    return 0;
}

static void ordered_pipeline(void)
{
    const char *p = unit_path("p.txt");
    char *text = malloc(100000), *want = malloc(100000);
    size_t n = 0;
    for (int i = 0; n < 90000; i++)
        n += (size_t)sprintf(text + n, "line %d abc\n", i);
    for (size_t i = 0; i < n; i++)
        want[i] = (char)(text[i] >= 'a' && text[i] <= 'z' ? text[i] - 32 : text[i]);
    unit_write(p, text, n);
    static const tupe_pipeline_ops ops = {ctx_new, ctx_free, work, consume, result_free};
    for (int threads = 1; threads <= 5; threads += 2) {
        for (int fail = -1; fail < 30; fail += 13) {
            tupe_corpus *c;
            const char *paths[] = {p};
            tupe_err e;
            CHECK_INT(tupe_corpus_open(&c, paths, 1, TUPE_DOCS_LINE, &e), 0);
            sum s = {calloc(1, 100000), 0, 0, fail};
            int rc = tupe_pipeline_run(c, 997, threads, &ops, &s, &e);
            if (fail < 0) {
                CHECK_INT(rc, 0);
                CHECK(s.len == n && memcmp(s.out, want, n) == 0);
            } else {
                CHECK_INT(rc, TUPE_EDATA);
                CHECK_U64(s.next, (uint64_t)fail); /* everything before the failure, nothing after */
            }
            free(s.out);
            tupe_corpus_close(c);
        }
    }
    free(text);
    free(want);
}

static void string_table(void)
{
    tupe_strtab t;
    tupe_strtab_init(&t);
    char buf[32];
    for (int i = 0; i < 5000; i++) {
        int n = snprintf(buf, sizeof buf, "s%d", 4999 - i);
        CHECK_INT(tupe_strtab_add(&t, buf, (size_t)n, NULL), i);
    }
    int added = 1;
    CHECK_INT(tupe_strtab_add(&t, "s4999", 5, &added), 0);
    CHECK_INT(added, 0);
    CHECK_INT(tupe_strtab_find(&t, "s17", 3), 4999 - 17);
    CHECK_INT(tupe_strtab_find(&t, "s5000", 5), -1);
    CHECK_INT(tupe_strtab_add(&t, "a\0b", 3, NULL), 5000); /* bytes, not C strings */
    CHECK_INT(tupe_strtab_find(&t, "a\0b", 3), 5000);
    CHECK_INT(tupe_strtab_find(&t, "a", 1), -1);
    uint32_t *order = tupe_strtab_sorted(&t);
    CHECK_STR(tupe_strtab_str(&t, order[0]), "a");
    CHECK_STR(tupe_strtab_str(&t, order[1]), "s0");
    CHECK_STR(tupe_strtab_str(&t, order[2]), "s1");
    CHECK_STR(tupe_strtab_str(&t, order[3]), "s10");
    free(order);
    tupe_strtab_clear(&t);
    CHECK_INT(tupe_strtab_find(&t, "s17", 3), -1);
    CHECK_INT(tupe_strtab_add(&t, "x", 1, NULL), 0);
    tupe_strtab_free(&t);
}

/* JSON Lines: the field's text in blank-line framing, errors with file:line. */
static char *convert_as(const char *in, const char *field, uint64_t first, int invalid, tupe_err *e)
{
    char *out = NULL;
    size_t cap = 0, n;
    if (tupe_jsonl_convert(in, strlen(in), field, "c.jsonl", first, 100, invalid, &out, &cap, &n, e)) {
        free(out);
        return NULL;
    }
    char *s = malloc(n + 1);
    memcpy(s, out ? out : "", n);
    s[n] = 0;
    free(out);
    return s;
}

static char *convert(const char *in, const char *field, uint64_t first, tupe_err *e)
{
    return convert_as(in, field, first, TUPE_INVALID_ERROR, e);
}

/* What JSON allows in the fields a corpus ignores is accepted (numbers jansson cannot hold),
 * and bytes that are not UTF-8 get tupe(7)'s message or --invalid's treatment. */
static void jsonl_edges(void)
{
    tupe_err e;
    char *s = convert("{\"id\": 18446744073709551615, \"x\": [1e400, -2.5E-999], \"text\": \"a 1e400\"}\n",
                      "text", 1, &e);
    CHECK_STR(s ? s : e.msg, "a 1e400\n\n");
    free(s);
    s = convert("{\"text\": \"a\"}\n{\"text\": \"b\xff\"}\n", "text", 1, &e);
    CHECK(!s && e.code == TUPE_EDATA);
    CHECK_HAS(e.msg, "c.jsonl: byte 125: invalid UTF-8 (see --invalid)");
    free(s);
    s = convert_as("{\"text\": \"b\xff" "c\"}\n", "text", 1, TUPE_INVALID_REPLACE, &e);
    CHECK_STR(s ? s : e.msg, "b\xef\xbf\xbd" "c\n\n");
    free(s);
    s = convert_as("{\"text\": \"b\xff" "c\"}\n", "text", 1, TUPE_INVALID_SKIP, &e);
    CHECK_STR(s ? s : e.msg, "bc\n\n");
    free(s);
}

static void jsonl(void)
{
    tupe_err e;
    char *s = convert("{\"text\": \"a b\\nc\", \"x\": [1]}\n\n{\"text\": \"\"}\r\n"
                    "{\"t\": 1, \"text\": \"\\u00e9\\n \\n\\nd\"}", "text", 1, &e);
    CHECK_STR(s, "a b\nc\n\n\xc3\xa9\nd\n\n");
    free(s);
    s = convert("{\"body\": \"x\"}\n", "body", 1, &e);
    CHECK_STR(s, "x\n\n");
    free(s);
    static const struct { const char *in, *msg; } bad[] = {
        {"{\"text\": \"a\"}\n{\"text\": 3}\n", "c.jsonl:8: \"text\" is a number, not a string"},
        {"{\"text\": \"a\"}\n{\"body\": \"b\"}\n", "c.jsonl:8: no \"text\" field"},
        {"\n\n[\"text\"]\n", "c.jsonl:9: expected a JSON object, found an array"},
        {"{\"text\": \"a\"\n", "c.jsonl:7:"},
        {"{\"text\": \"\xff\"}\n", "c.jsonl: byte 110: invalid UTF-8"},
        {"{\"text\": \"a\\u0000b\"}\n", "c.jsonl:7: \"text\" holds a NUL character (\\u0000): not text"},
        {"{\"id\": \"\\u0000\", \"text\": 7}\n", "c.jsonl:7: \"text\" is a number"},
        {"{\"text\": null}\n", "\"text\" is null"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s = convert(bad[i].in, "text", 7, &e);
        CHECK_MSG(s == NULL && e.code == TUPE_EDATA && strstr(e.msg, bad[i].msg),
                  "case %zu: %s", i, s ? s : e.msg);
        free(s);
    }
}

UNIT_MAIN(T(chunks), T(framing), T(ordered_pipeline), T(string_table), T(jsonl), T(jsonl_edges))
