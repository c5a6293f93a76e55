#include "text/vocab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checksum.h"
#include "base/fault.h"
#include "base/fileio.h"
#include "base/grow.h"
#include "text/unicode.h"

#define MAX_VOCAB_FILE (1u << 30)

static const char *const wp_special[TUPE_SP_COUNT] = {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"};
static const char *const bpe_special[TUPE_SP_COUNT] = {"<pad>", "<unk>", "<s>", "</s>", "<mask>"};
static const char *const bpe_head[TUPE_BPE_NHEAD] = {"<s>", "<pad>", "</s>", "<unk>"};

const char *tupe_special_role(int role)
{
    static const char *const names[TUPE_SP_COUNT] = {"pad", "unk", "cls", "sep", "mask"};
    return role >= 0 && role < TUPE_SP_COUNT ? names[role] : "?";
}

tupe_vocab *tupe_vocab_new(int kind)
{
    tupe_vocab *v = calloc(1, sizeof *v);
    if (!v)
        return NULL;
    v->kind = kind;
    tupe_strtab_init(&v->tok);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        v->special[i] = -1;
    if (kind == TUPE_VOCAB_BPE)
        for (int i = 0; i < TUPE_BPE_NHEAD; i++)
            if (tupe_vocab_add(v, bpe_head[i], strlen(bpe_head[i]), 0) < 0) {
                tupe_vocab_free(v);
                return NULL;
            }
    return v;
}

void tupe_vocab_free(tupe_vocab *v)
{
    if (!v)
        return;
    tupe_strtab_free(&v->tok);
    free(v->count);
    free(v->path);
    free(v);
}

int64_t tupe_vocab_add(tupe_vocab *v, const void *tok, size_t n, uint64_t count)
{
    int added;
    int64_t id = tupe_strtab_add(&v->tok, tok, n, &added);
    if (id < 0)
        return -2;
    if (!added)
        return -1;
    if (v->kind == TUPE_VOCAB_BPE) {
        if (TUPE_RESERVE(v->count, v->count_cap, (size_t)id + 1))
            return -2;
        v->count[id] = count;
    }
    return id;
}

int tupe_vocab_finish(tupe_vocab *v, tupe_err *e)
{
    const char *const *names = v->kind == TUPE_VOCAB_BPE ? bpe_special : wp_special;
    if (v->kind == TUPE_VOCAB_BPE && tupe_vocab_find(v, "<mask>", 6) < 0) {
        if (tupe_vocab_add(v, "<mask>", 6, 0) < 0)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        v->mask_appended = 1;
    }
    for (int i = 0; i < TUPE_SP_COUNT; i++) {
        int64_t id = tupe_vocab_find(v, names[i], strlen(names[i]));
        v->special[i] = id >= 0 ? (int32_t)id : -1;
    }
    tupe_hasher *h = tupe_hasher_new();
    if (!h)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (uint32_t id = 0; id < v->tok.n; id++) {
        tupe_hasher_update(h, tupe_vocab_token(v, id), tupe_vocab_token_len(v, id));
        tupe_hasher_update(h, "\n", 1);
    }
    v->hash = tupe_hasher_digest(h);
    tupe_hasher_free(h);
    return 0;
}

int tupe_vocab_is_continuation(const tupe_vocab *v, uint32_t id)
{
    const char *s = tupe_vocab_token(v, id);
    uint32_t l = tupe_vocab_token_len(v, id);
    if (l <= 2)
        return 0;
    return v->kind == TUPE_VOCAB_WORDPIECE ? s[0] == '#' && s[1] == '#'
                                           : s[l - 2] == '@' && s[l - 1] == '@';
}

int tupe_vocab_is_special(const tupe_vocab *v, uint32_t id)
{
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        if (v->special[i] == (int32_t)id)
            return 1;
    if (v->kind == TUPE_VOCAB_BPE && id < TUPE_BPE_NHEAD)
        return 1;
    return 0;
}

/* Shared by both loaders: checks UTF-8 of a line, reports the byte offset. */
static int check_utf8(const char *path, const char *buf, size_t start, size_t n, tupe_err *e)
{
    size_t bad = tupe_utf8_first_bad(buf + start, n);
    if (bad < n)
        return tupe_fail_byte(e, TUPE_EDATA, path, start + bad, "invalid UTF-8 in vocabulary");
    return 0;
}

/* One line of a vocabulary file (trailing spaces, tabs and CR removed, UTF-8 checked). */
typedef int (*line_fn)(tupe_vocab *v, const char *s, size_t n, const char *path, uint64_t line,
                       tupe_err *e);

static int parse_lines(tupe_vocab **out, int kind, const char *buf, size_t len, const char *path,
                       line_fn fn, const char *what, tupe_err *e)
{
    if (!path)
        path = "(buffer)";
    tupe_vocab *v = tupe_vocab_new(kind);
    if (!v)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc;
    uint32_t first = v->tok.n;
    uint64_t line = 0;
    for (size_t i = 0; i < len;) {
        const char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - i;
        line++;
        /* Hugging Face trims trailing whitespace (and so the CR of CRLF files) */
        while (n && (buf[i + n - 1] == ' ' || buf[i + n - 1] == '\t' || buf[i + n - 1] == '\r'))
            n--;
        if ((rc = check_utf8(path, buf, i, n, e)) || (rc = fn(v, buf + i, n, path, line, e)))
            goto fail;
        i = end + 1;
    }
    if (v->tok.n == first) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: no %s", tupe_path_name(path), what);
        goto fail;
    }
    if ((rc = tupe_vocab_finish(v, e)))
        goto fail;
    if (!(v->path = strdup(path))) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto fail;
    }
    *out = v;
    return 0;
fail:
    tupe_vocab_free(v);
    return rc;
}

static int load_lines(tupe_vocab **out, int kind, const char *path, line_fn fn, const char *what,
                      tupe_err *e)
{
    char *buf;
    size_t len;
    int rc = tupe_read_text(path, &buf, &len, MAX_VOCAB_FILE, e);
    if (rc)
        return rc;
    rc = parse_lines(out, kind, buf, len, path, fn, what, e);
    free(buf);
    return rc;
}

static int add_checked(tupe_vocab *v, const char *s, size_t n, uint64_t count, const char *path,
                       uint64_t line, tupe_err *e)
{
    int64_t id = tupe_vocab_add(v, s, n, count);
    if (id == -2)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (id == -1)
        return tupe_fail_line(e, TUPE_EDATA, path, line, "duplicate token '%.*s' (first on line %lld)",
                              (int)(n > 64 ? 64 : n), s,
                              (long long)tupe_vocab_find(v, s, n) + 1 -
                                  (v->kind == TUPE_VOCAB_BPE ? TUPE_BPE_NHEAD : 0));
    return 0;
}

static int wordpiece_line(tupe_vocab *v, const char *s, size_t n, const char *path, uint64_t line,
                          tupe_err *e)
{
    if (n == 0)
        return tupe_fail_line(e, TUPE_EDATA, path, line, "empty token");
    return add_checked(v, s, n, 0, path, line, e);
}

/* "symbol count", split at the last space as fairseq does */
static int dict_line(tupe_vocab *v, const char *s, size_t n, const char *path, uint64_t line,
                     tupe_err *e)
{
    size_t sp = n;
    while (sp > 0 && s[sp - 1] != ' ')
        sp--;
    if (sp <= 1 || sp == n)
        return tupe_fail_line(e, TUPE_EDATA, path, line, "expected 'symbol count'");
    uint64_t count = 0;
    for (size_t k = sp; k < n; k++) {
        if (s[k] < '0' || s[k] > '9' || count > (UINT64_MAX - 9) / 10)
            return tupe_fail_line(e, TUPE_EDATA, path, line, "bad count '%.*s'",
                                  (int)(n - sp > 32 ? 32 : n - sp), s + sp);
        count = count * 10 + (uint64_t)(s[k] - '0');
    }
    return add_checked(v, s, sp - 1, count, path, line, e);
}

int tupe_vocab_load_wordpiece(tupe_vocab **out, const char *path, tupe_err *e)
{
    return load_lines(out, TUPE_VOCAB_WORDPIECE, path, wordpiece_line, "tokens (empty vocabulary)", e);
}

int tupe_vocab_load_dict(tupe_vocab **out, const char *path, tupe_err *e)
{
    return load_lines(out, TUPE_VOCAB_BPE, path, dict_line, "symbols (empty dictionary)", e);
}

int tupe_vocab_parse(tupe_vocab **v, int kind, const char *buf, size_t len, const char *name,
                     tupe_err *e)
{
    if (kind == TUPE_VOCAB_BPE)
        return parse_lines(v, kind, buf, len, name, dict_line, "symbols (empty dictionary)", e);
    return parse_lines(v, TUPE_VOCAB_WORDPIECE, buf, len, name, wordpiece_line,
                       "tokens (empty vocabulary)", e);
}

int tupe_vocab_load(tupe_vocab **v, const char *path, tupe_err *e)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", path);
    if (!S_ISDIR(st.st_mode))
        return tupe_vocab_load_wordpiece(v, path, e);
    char p[4096];
    snprintf(p, sizeof p, "%s/dict.txt", path);
    int rc = tupe_vocab_load_dict(v, p, e);
    if (rc == 0) {
        free((*v)->path);
        (*v)->path = strdup(path);
    }
    return rc;
}

int tupe_vocab_save(const tupe_vocab *v, const char *path, tupe_err *e)
{
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (rc)
        return rc;
    uint32_t first = v->kind == TUPE_VOCAB_BPE ? TUPE_BPE_NHEAD : 0;
    uint32_t last = v->tok.n - (v->kind == TUPE_VOCAB_BPE && v->mask_appended ? 1 : 0);
    for (uint32_t id = first; id < last && !rc; id++) {
        rc = tupe_out_write(o, tupe_vocab_token(v, id), tupe_vocab_token_len(v, id), e);
        if (!rc && v->kind == TUPE_VOCAB_BPE)
            rc = tupe_out_printf(o, e, " %llu", (unsigned long long)v->count[id]);
        if (!rc)
            rc = tupe_out_write(o, "\n", 1, e);
        if (id == first + (last - first) / 2)
            tupe_fault_point("vocab.save");
    }
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}
