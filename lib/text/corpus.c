#include "text/corpus.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/grow.h"
#include "text/input.h"
#include "text/jsonl.h"

#define READ_BLOCK ((size_t)1 << 18)

struct tupe_corpus {
    char **paths;
    int npaths, cur;
    int docs;
    tupe_source *src;
    uint64_t src_bytes;    /* bytes read from the current source's members */
    char *member;          /* current member, NULL between members */
    uint64_t moff;         /* member offset of the next chunk */
    int member_eof, first_chunk;
    int inside;            /* the last chunk ended inside a document */
    char *carry;           /* read but not yet handed out */
    size_t carry_len, carry_cap;
    uint64_t index;
    uint64_t consumed_closed, total;
    char *field;           /* JSONL */
    uint64_t mline;        /* JSONL: line number of the next chunk's first line */
    int invalid;           /* JSONL: text/pretok.h's enum tupe_invalid */
    char *conv;            /* JSONL: the converted chunk */
    size_t conv_cap;
};

void tupe_chunk_free(tupe_chunk *ch)
{
    free(ch->data);
    free(ch->name);
    memset(ch, 0, sizeof *ch);
}

/* Directories stand for the files under them, recursively, in byte order of their paths
 * (so that a corpus directory, e.g. WikiExtractor's AA/wiki_00 ..., reads the same way every
 * time); hidden entries (names starting with '.') are skipped. */
typedef struct pathvec {
    char **v;
    int n, cap;
} pathvec;

static int push_path(pathvec *pv, const char *p)
{
    if (pv->n == pv->cap) {
        int nc = pv->cap ? pv->cap * 2 : 16;
        char **nv = realloc(pv->v, (size_t)nc * sizeof *nv);
        if (!nv)
            return -1;
        pv->v = nv;
        pv->cap = nc;
    }
    if (!(pv->v[pv->n] = strdup(p)))
        return -1;
    pv->n++;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The directories on the way down, so that a symbolic link back up is caught instead of
 * reading the same files again at every level until the path is too long. */
typedef struct dirchain {
    const struct dirchain *up;
    const char *path;
    dev_t dev;
    ino_t ino;
} dirchain;

static int add_dir(pathvec *pv, const char *dir, const dirchain *up, int depth, tupe_err *e)
{
    if (depth > 64)
        return tupe_fail(e, TUPE_EDATA, "%s: directories nested too deep", dir);
    struct stat ds;
    if (stat(dir, &ds) != 0)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", dir);
    for (const dirchain *a = up; a; a = a->up)
        if (a->dev == ds.st_dev && a->ino == ds.st_ino)
            return tupe_fail(e, TUPE_EDATA, "%s: a symbolic link loop (it is %s again)", dir,
                             a->path);
    dirchain here_dir = {up, dir, ds.st_dev, ds.st_ino};
    DIR *d = opendir(dir);
    if (!d)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", dir);
    pathvec here = {NULL, 0, 0};
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char p[PATH_MAX];
        if (snprintf(p, sizeof p, "%s/%s", dir, de->d_name) >= (int)sizeof p)
            rc = tupe_fail(e, TUPE_ENOINPUT, "%s/%s: path too long", dir, de->d_name);
        else if (push_path(&here, p))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    closedir(d);
    if (here.n)
        qsort(here.v, (size_t)here.n, sizeof *here.v, cmp_str);
    for (int i = 0; i < here.n; i++) {
        struct stat st;
        if (!rc && stat(here.v[i], &st) == 0) {
            if (S_ISDIR(st.st_mode))
                rc = add_dir(pv, here.v[i], &here_dir, depth + 1, e);
            else if (S_ISREG(st.st_mode) && push_path(pv, here.v[i]))
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        }
        free(here.v[i]);
    }
    free(here.v);
    return rc;
}

int tupe_corpus_open(tupe_corpus **out, const char *const *paths, int npaths, int docs, tupe_err *e)
{
    tupe_corpus *c = calloc(1, sizeof *c);
    if (!c)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    c->docs = docs;
    pathvec pv = {NULL, 0, 0};
    int sizes_known = 1, rc = 0;
    for (int i = 0; i < npaths && !rc; i++) {
        /* missing inputs are reported before any work starts */
        struct stat st;
        if (strcmp(paths[i], "-") == 0) {
            sizes_known = 0;
            if (push_path(&pv, paths[i]))
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        } else if (stat(paths[i], &st) != 0) {
            rc = tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", paths[i]);
        } else if (S_ISDIR(st.st_mode)) {
            int before = pv.n;
            rc = add_dir(&pv, paths[i], NULL, 0, e);
            if (!rc && pv.n == before)
                rc = tupe_fail(e, TUPE_ENOINPUT, "%s: a directory without files", paths[i]);
        } else {
            if (push_path(&pv, paths[i]))
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        }
    }
    for (int i = 0; !rc && i < pv.n; i++) {
        struct stat st;
        if (strcmp(pv.v[i], "-") != 0 && stat(pv.v[i], &st) == 0 && S_ISREG(st.st_mode))
            c->total += (uint64_t)st.st_size;
        else
            sizes_known = 0;
    }
    c->paths = pv.v;
    c->npaths = pv.n;
    if (rc) {
        tupe_corpus_close(c);
        return rc;
    }
    if (!c->paths && !(c->paths = calloc(1, sizeof *c->paths))) {
        tupe_corpus_close(c);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    if (!sizes_known)
        c->total = 0;
    *out = c;
    return 0;
}

void tupe_corpus_close(tupe_corpus *c)
{
    if (!c)
        return;
    if (c->paths)
        for (int i = 0; i < c->npaths; i++)
            free(c->paths[i]);
    free(c->paths);
    tupe_source_close(c->src);
    free(c->member);
    free(c->carry);
    free(c->field);
    free(c->conv);
    free(c);
}

void tupe_corpus_set_invalid(tupe_corpus *c, int invalid) { c->invalid = invalid; }

int tupe_corpus_set_field(tupe_corpus *c, const char *field, tupe_err *e)
{
    char *f = strdup(field);
    if (!f)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    free(c->field);
    c->field = f;
    return 0;
}

/* JSONL: the chunk's lines become the text of their documents, in BLANK framing. */
static int convert_jsonl(tupe_corpus *c, tupe_chunk *ch, tupe_err *e)
{
    size_t n;
    if (tupe_jsonl_convert(ch->data, ch->len, c->field ? c->field : TUPE_JSONL_FIELD, ch->name,
                           c->mline, ch->offset, c->invalid, &c->conv, &c->conv_cap, &n, e))
        return -1;
    for (const char *p = ch->data, *end = ch->data + ch->len; (p = memchr(p, '\n', (size_t)(end - p))); p++)
        c->mline++;
    char *d = ch->data;
    size_t cap = ch->cap;
    ch->data = c->conv, ch->cap = c->conv_cap, ch->len = n;
    c->conv = d, c->conv_cap = cap;
    return 0;
}

uint64_t tupe_corpus_consumed(const tupe_corpus *c)
{
    return c->consumed_closed + (c->src ? tupe_source_consumed(c->src) : 0);
}

uint64_t tupe_corpus_total(const tupe_corpus *c) { return c->total; }

static int blank_line(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (p[i] != ' ' && p[i] != '\t' && p[i] != '\r')
            return 0;
    return 1;
}

static int line_is(const char *p, size_t n, const char *what)
{
    size_t k = strlen(what);
    while (n > k && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    return n == k && memcmp(p, what, k) == 0;
}

/* Where a chunk may end: just after a line that closes a document, searching the complete
 * lines that start at or after *from. Returns the cut (0 if none) and moves *from to the
 * first line not yet examined. */
static size_t find_cut(int docs, const char *d, size_t len, size_t *from)
{
    size_t i = *from;
    if (docs == TUPE_DOCS_LINE) {
        const char *nl = memchr(d + i, '\n', len - i);
        if (nl)
            return (size_t)(nl - d) + 1;
        *from = len;
        return 0;
    }
    if (i > 0 && d[i - 1] != '\n') { /* start at a line start */
        const char *nl = memchr(d + i, '\n', len - i);
        if (!nl) {
            *from = len;
            return 0;
        }
        i = (size_t)(nl - d) + 1;
    }
    while (i < len) {
        const char *nl = memchr(d + i, '\n', len - i);
        if (!nl)
            break;
        size_t n = (size_t)(nl - d) - i;
        if (docs == TUPE_DOCS_BLANK ? blank_line(d + i, n) : line_is(d + i, n, "</doc>"))
            return i + n + 1;
        i += n + 1;
    }
    *from = i;
    return 0;
}

/* Errors of tupe_corpus_next: e is set, the return value is -1. */
#define FAIL(call) \
    do {           \
        (call);    \
        return -1; \
    } while (0)

int tupe_corpus_next(tupe_corpus *c, tupe_chunk *ch, size_t target, tupe_err *e)
{
    if (target == 0)
        target = 1;
    for (;;) {
        if (!c->member) {
            if (!c->src) {
                if (c->cur == c->npaths)
                    return 0;
                if (tupe_source_open(&c->src, c->paths[c->cur], e))
                    return -1;
                c->src_bytes = 0;
            }
            const char *name;
            int r = tupe_source_next(c->src, &name, e);
            if (r < 0)
                return -1;
            if (r == 0) {
                c->consumed_closed += tupe_source_consumed(c->src);
                tupe_source_close(c->src);
                c->src = NULL;
                if (c->src_bytes == 0)
                    FAIL(tupe_fail(e, TUPE_EDATA, "%s: empty input",
                                   tupe_path_name(c->paths[c->cur])));
                c->cur++;
                continue;
            }
            if (!(c->member = strdup(name)))
                FAIL(tupe_fail(e, TUPE_EFAIL, "out of memory"));
            c->moff = 0;
            c->member_eof = 0;
            c->first_chunk = 1;
            c->carry_len = 0;
            c->inside = 0;
            c->mline = 1;
        }
        if (TUPE_RESERVE(ch->data, ch->cap, c->carry_len + READ_BLOCK))
            FAIL(tupe_fail(e, TUPE_EFAIL, "out of memory"));
        if (c->carry_len)
            memcpy(ch->data, c->carry, c->carry_len);
        ch->len = c->carry_len;
        c->carry_len = 0;
        /* cut near the target: lines end anywhere, so LINE cuts at the first line end after
         * it; documents may be long, so other framings take the first boundary after half */
        int framing = c->docs == TUPE_DOCS_JSONL ? TUPE_DOCS_LINE : c->docs;
        size_t from = framing == TUPE_DOCS_LINE ? target - 1 : target / 2, cut = 0;
        int bom_checked = !c->first_chunk, split = 0;
        for (;;) {
            if (ch->len >= target && from < ch->len &&
                (cut = find_cut(framing, ch->data, ch->len, &from)))
                break;
            if (c->docs == TUPE_DOCS_BLANK && !c->member_eof && ch->len >= 2 * target) {
                size_t f = target - 1;
                if ((cut = find_cut(TUPE_DOCS_LINE, ch->data, ch->len, &f))) {
                    split = 1;
                    break;
                }
            }
            if (c->member_eof) {
                cut = ch->len;
                break;
            }
            if (ch->len > TUPE_CHUNK_MAX)
                FAIL(tupe_fail_byte(e, TUPE_EDATA, c->member, c->moff,
                                    "a document longer than %zu bytes (are documents separated "
                                    "as --docs expects?)",
                                    TUPE_CHUNK_MAX));
            if (TUPE_RESERVE(ch->data, ch->cap, ch->len + READ_BLOCK))
                FAIL(tupe_fail(e, TUPE_EFAIL, "out of memory"));
            size_t got;
            if (tupe_source_read(c->src, ch->data + ch->len, READ_BLOCK, &got, e))
                return -1;
            if (got == 0)
                c->member_eof = 1;
            ch->len += got;
            c->src_bytes += got;
            if (!bom_checked && (ch->len >= 3 || c->member_eof)) {
                bom_checked = 1;
                if (ch->len >= 3 && memcmp(ch->data, "\xEF\xBB\xBF", 3) == 0) {
                    memmove(ch->data, ch->data + 3, ch->len - 3);
                    ch->len -= 3;
                    c->moff = 3;
                }
            }
        }
        size_t rest = ch->len - cut;
        if (rest) {
            if (TUPE_RESERVE(c->carry, c->carry_cap, rest))
                FAIL(tupe_fail(e, TUPE_EFAIL, "out of memory"));
            memcpy(c->carry, ch->data + cut, rest);
            c->carry_len = rest;
        }
        ch->len = cut;
        int first = c->first_chunk;
        uint64_t off = c->moff;
        c->moff += cut;
        c->first_chunk = 0;
        /* an empty chunk still closes a document left open before the member's end */
        int inside = c->inside;
        c->inside = split;
        char *name = cut || inside ? strdup(c->member) : NULL;
        if (c->member_eof && rest == 0) {
            free(c->member);
            c->member = NULL;
        }
        if (cut == 0 && !inside)
            continue;
        if (!name)
            FAIL(tupe_fail(e, TUPE_EFAIL, "out of memory"));
        free(ch->name);
        ch->name = name;
        ch->offset = off;
        ch->index = c->index++;
        ch->member_start = first;
        ch->starts_inside = inside;
        ch->ends_inside = split;
        if (c->docs == TUPE_DOCS_JSONL && convert_jsonl(c, ch, e))
            return -1;
        return 1;
    }
}

void tupe_docscan_init(tupe_docscan *d, const tupe_chunk *ch, int docs, int keep_title)
{
    memset(d, 0, sizeof *d);
    d->p = ch->data;
    d->end = ch->data + ch->len;
    d->docs = docs == TUPE_DOCS_JSONL ? TUPE_DOCS_BLANK : docs; /* converted by the corpus */
    d->keep_title = keep_title;
    d->in_doc = docs == TUPE_DOCS_BLANK && ch->starts_inside;
    d->open_end = docs == TUPE_DOCS_BLANK && ch->ends_inside;
}

int tupe_docscan_next(tupe_docscan *d, const char **line, size_t *len)
{
    for (;;) {
        if (d->p >= d->end) {
            if (d->in_doc && !d->open_end) {
                d->in_doc = 0;
                return TUPE_SCAN_END;
            }
            return TUPE_SCAN_DONE;
        }
        const char *s = d->p, *nl = memchr(s, '\n', (size_t)(d->end - s));
        size_t n = nl ? (size_t)(nl - s) : (size_t)(d->end - s);
        switch (d->docs) {
        case TUPE_DOCS_LINE:
            if (!d->in_doc) {
                d->in_doc = 1;
                *line = s, *len = n;
                return TUPE_SCAN_LINE;
            }
            d->p = nl ? nl + 1 : d->end;
            d->in_doc = 0;
            return TUPE_SCAN_END;
        case TUPE_DOCS_BLANK:
            d->p = nl ? nl + 1 : d->end;
            if (blank_line(s, n)) {
                if (d->in_doc) {
                    d->in_doc = 0;
                    return TUPE_SCAN_END;
                }
                continue;
            }
            d->in_doc = 1;
            *line = s, *len = n;
            return TUPE_SCAN_LINE;
        default: /* WIKI */
            d->p = nl ? nl + 1 : d->end;
            if (!d->in_doc) {
                if (n >= 5 && memcmp(s, "<doc ", 5) == 0) {
                    d->in_doc = 1;
                    d->title_next = 1;
                }
                continue;
            }
            if (line_is(s, n, "</doc>")) {
                d->in_doc = 0;
                return TUPE_SCAN_END;
            }
            if (d->title_next) {
                d->title_next = 0;
                if (!d->keep_title)
                    continue;
            }
            if (blank_line(s, n))
                continue;
            *line = s, *len = n;
            return TUPE_SCAN_LINE;
        }
    }
}

size_t tupe_wiki_unescape(const char *s, size_t n, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '&') {
            if (n - i >= 4 && memcmp(s + i, "&lt;", 4) == 0) {
                out[k++] = '<', i += 3;
                continue;
            }
            if (n - i >= 4 && memcmp(s + i, "&gt;", 4) == 0) {
                out[k++] = '>', i += 3;
                continue;
            }
            if (n - i >= 5 && memcmp(s + i, "&amp;", 5) == 0) {
                out[k++] = '&', i += 4;
                continue;
            }
        }
        out[k++] = s[i];
    }
    return k;
}

const char *tupe_docscan_text(const tupe_docscan *d, const char *line, size_t len, char **buf,
                              size_t *cap, size_t *n)
{
    *n = len;
    if (d->docs != TUPE_DOCS_WIKI || !memchr(line, '&', len))
        return line;
    if (TUPE_RESERVE(*buf, *cap, len))
        return NULL;
    *n = tupe_wiki_unescape(line, len, *buf);
    return *buf;
}
