#include "vocab.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "checksum.h"
#include "fileio.h"
#include "unicode.h"

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
        if ((size_t)id >= v->count_cap) {
            size_t cap = v->count_cap ? v->count_cap * 2 : 1024;
            uint64_t *c = realloc(v->count, cap * sizeof *c);
            if (!c)
                return -2;
            v->count = c, v->count_cap = cap;
        }
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
    const uint8_t *p = (const uint8_t *)buf + start, *end = p + n;
    while (p < end) {
        uint32_t cp;
        int k = tupe_utf8_decode(p, end, &cp);
        if (k < 0)
            return tupe_fail_byte(e, TUPE_EDATA, path, (uint64_t)(p - (const uint8_t *)buf),
                                  "invalid UTF-8 in vocabulary");
        p += k;
    }
    return 0;
}

static int read_whole(const char *path, char **buf, size_t *len, tupe_err *e)
{
    return tupe_read_file(path, buf, len, MAX_VOCAB_FILE, e);
}

int tupe_vocab_load_wordpiece(tupe_vocab **out, const char *path, tupe_err *e)
{
    char *buf;
    size_t len;
    int rc = read_whole(path, &buf, &len, e);
    if (rc)
        return rc;
    tupe_vocab *v = tupe_vocab_new(TUPE_VOCAB_WORDPIECE);
    if (!v) {
        free(buf);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    uint64_t line = 0;
    for (size_t i = 0; i < len;) {
        char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - i;
        line++;
        /* Hugging Face trims trailing whitespace (and so a CR of CRLF files) */
        while (n && (buf[i + n - 1] == ' ' || buf[i + n - 1] == '\t' || buf[i + n - 1] == '\r'))
            n--;
        if ((rc = check_utf8(path, buf, i, n, e)))
            goto fail;
        if (n == 0) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "empty token");
            goto fail;
        }
        int64_t id = tupe_vocab_add(v, buf + i, n, 0);
        if (id == -2) {
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
            goto fail;
        }
        if (id == -1) {
            int64_t first = tupe_vocab_find(v, buf + i, n);
            rc = tupe_fail_line(e, TUPE_EDATA, path, line,
                                "duplicate token '%.*s' (first on line %lld)", (int)(n > 64 ? 64 : n),
                                buf + i, (long long)first + 1);
            goto fail;
        }
        i = end + 1;
    }
    if (v->tok.n == 0) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: no tokens (empty vocabulary)", tupe_path_name(path));
        goto fail;
    }
    if ((rc = tupe_vocab_finish(v, e)))
        goto fail;
    v->path = strdup(path);
    free(buf);
    *out = v;
    return 0;
fail:
    free(buf);
    tupe_vocab_free(v);
    return rc;
}

int tupe_vocab_load_dict(tupe_vocab **out, const char *path, tupe_err *e)
{
    char *buf;
    size_t len;
    int rc = read_whole(path, &buf, &len, e);
    if (rc)
        return rc;
    tupe_vocab *v = tupe_vocab_new(TUPE_VOCAB_BPE);
    if (!v) {
        free(buf);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    uint64_t line = 0;
    for (size_t i = 0; i < len;) {
        char *nl = memchr(buf + i, '\n', len - i);
        size_t end = nl ? (size_t)(nl - buf) : len, n = end - i;
        line++;
        while (n && (buf[i + n - 1] == ' ' || buf[i + n - 1] == '\t' || buf[i + n - 1] == '\r'))
            n--;
        if ((rc = check_utf8(path, buf, i, n, e)))
            goto fail;
        /* "symbol count", split at the last space as fairseq does */
        size_t sp = n;
        while (sp > 0 && buf[i + sp - 1] != ' ')
            sp--;
        if (sp <= 1) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "expected 'symbol count'");
            goto fail;
        }
        char num[32];
        size_t nl2 = n - sp;
        if (nl2 == 0 || nl2 >= sizeof num) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "expected 'symbol count'");
            goto fail;
        }
        memcpy(num, buf + i + sp, nl2);
        num[nl2] = 0;
        uint64_t count = 0;
        int ok = 1;
        for (size_t k = 0; num[k]; k++) {
            if (num[k] < '0' || num[k] > '9' || count > (UINT64_MAX - 9) / 10)
                ok = 0;
            count = count * 10 + (uint64_t)(num[k] - '0');
        }
        if (!ok) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "bad count '%s'", num);
            goto fail;
        }
        int64_t id = tupe_vocab_add(v, buf + i, sp - 1, count);
        if (id == -2) {
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
            goto fail;
        }
        if (id == -1) {
            rc = tupe_fail_line(e, TUPE_EDATA, path, line, "duplicate symbol '%.*s'",
                                (int)(sp - 1 > 64 ? 64 : sp - 1), buf + i);
            goto fail;
        }
        i = end + 1;
    }
    if (v->tok.n == TUPE_BPE_NHEAD) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: no symbols (empty dictionary)", tupe_path_name(path));
        goto fail;
    }
    if ((rc = tupe_vocab_finish(v, e)))
        goto fail;
    v->path = strdup(path);
    free(buf);
    *out = v;
    return 0;
fail:
    free(buf);
    tupe_vocab_free(v);
    return rc;
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
    }
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}
