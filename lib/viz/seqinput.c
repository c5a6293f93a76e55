#include "viz/seqinput.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/grow.h"
#include "data/shard.h"
#include "data/shardread.h"
#include "text/tokenizer.h"
#include "text/unicode.h"

struct tupe_textenc {
    tupe_vocab *v;
    tupe_tokenizer *tok;
    tupe_tokctx *ctx;
    int32_t cls, sep;
};

void tupe_seqs_free(tupe_seqs *s)
{
    free(s->ids), free(s->off), free(s->len);
    memset(s, 0, sizeof *s);
}

/* Append one sequence of n ids (the caller cuts them to max_len). */
static int push(tupe_seqs *s, const int32_t *ids, size_t n, tupe_err *e)
{
    if (TUPE_RESERVE(s->ids, s->cap_ids, s->nids + n) || TUPE_RESERVE(s->off, s->cap_off, s->n + 1) ||
        TUPE_RESERVE(s->len, s->cap_len, s->n + 1))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    memcpy(s->ids + s->nids, ids, n * sizeof *ids);
    s->off[s->n] = s->nids;
    s->len[s->n] = (int32_t)n;
    s->nids += n;
    s->n++;
    if ((int)n > s->maxlen)
        s->maxlen = (int)n;
    return 0;
}

int tupe_textenc_new(tupe_textenc **out, const char *vocab_path, int lowercase, tupe_err *e)
{
    *out = NULL;
    tupe_textenc *t = calloc(1, sizeof *t);
    if (!t)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc = tupe_vocab_load(&t->v, vocab_path, e);
    if (!rc) {
        t->cls = t->v->special[TUPE_SP_CLS];
        t->sep = t->v->special[TUPE_SP_SEP];
        if (t->cls < 0 || t->sep < 0)
            rc = tupe_fail(e, TUPE_EDATA, "%s: the vocabulary has no %s token", vocab_path,
                           t->cls < 0 ? "[CLS]/<s>" : "[SEP]/</s>");
    }
    if (!rc) {
        tupe_tokenizer_opts to = {lowercase, -1, TUPE_INVALID_REPLACE, 100, 0};
        char codes[4200];
        snprintf(codes, sizeof codes, "%s/codes", vocab_path);
        rc = tupe_tokenizer_new(&t->tok, t->v, t->v->kind == TUPE_VOCAB_BPE ? codes : NULL, &to, e);
    }
    if (!rc && !(t->ctx = tupe_tokctx_new(t->tok)))
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (rc) {
        tupe_textenc_free(t);
        return rc;
    }
    *out = t;
    return 0;
}

void tupe_textenc_free(tupe_textenc *t)
{
    if (!t)
        return;
    tupe_tokctx_free(t->ctx);
    tupe_tokenizer_free(t->tok);
    tupe_vocab_free(t->v);
    free(t);
}

const tupe_vocab *tupe_textenc_vocab(const tupe_textenc *t) { return t->v; }

/* Text that is not UTF-8 is refused, as tupe-tokenize refuses it: "name: byte N: ..." with N
 * counted from `at`, the text's offset in its file. */
static int check_utf8(const char *name, uint64_t at, const char *text, size_t len, tupe_err *e)
{
    size_t bad = tupe_utf8_first_bad(text, len);
    if (bad == len)
        return 0;
    return tupe_fail_byte(e, TUPE_EDATA, name, at + bad, "invalid UTF-8");
}

int tupe_seqs_add_text(tupe_seqs *s, tupe_textenc *t, const char *text, size_t len, int max_len,
                       tupe_err *e)
{
    if (max_len < 2)
        return tupe_fail(e, TUPE_EUSAGE, "sequences of %d ids cannot hold [CLS] and [SEP]", max_len);
    int rc = check_utf8("the text", 0, text, len, e);
    if (rc)
        return rc;
    t->ctx->n = 0;
    size_t bad;
    if (tupe_tokenizer_encode(t->tok, t->ctx, text, len, &bad) == -2)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t n = t->ctx->n, keep = n + 2 > (size_t)max_len ? (size_t)max_len - 2 : n;
    int32_t *ids = malloc((keep + 2) * sizeof *ids);
    if (!ids)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    ids[0] = t->cls;
    for (size_t i = 0; i < keep; i++)
        ids[i + 1] = (int32_t)t->ctx->ids[i];
    ids[keep + 1] = t->sep;
    rc = push(s, ids, keep + 2, e);
    free(ids);
    if (!rc && keep < n)
        s->truncated++;
    return rc;
}

int tupe_seqs_add_lines(tupe_seqs *s, tupe_textenc *t, const char *path, int max_len,
                        size_t max_seqs, tupe_err *e)
{
    tupe_in *in;
    int rc = tupe_in_open(&in, path, e);
    if (rc)
        return rc;
    tupe_in_max_line(in, 16 << 20); /* sentences */
    char *line;
    size_t len;
    int got;
    uint64_t at = 0;
    while ((max_seqs == 0 || s->n < max_seqs) && (got = tupe_in_getline(in, &line, &len, e)) == 1) {
        uint64_t line_at = at;
        at = tupe_in_offset(in);
        if ((rc = check_utf8(path, line_at, line, len, e)))
            break;
        size_t k = 0;
        while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r'))
            k++;
        if (k == len)
            continue;
        if ((rc = tupe_seqs_add_text(s, t, line, len, max_len, e)))
            break;
    }
    if (!rc && got < 0)
        rc = e->code;
    tupe_in_close(in);
    return rc;
}

int tupe_seqs_add_shards(tupe_seqs *s, const char *dir, int max_len, size_t max_seqs,
                         uint32_t *vocab_size, uint64_t *vocab_hash, tupe_err *e)
{
    tupe_shard_meta man;
    int rc = tupe_manifest_read(dir, &man, e);
    if (rc)
        return rc;
    tupe_shardr_opts o;
    tupe_shardr_opts_init(&o);
    o.split = man.split[TUPE_SPLIT_VALID].sequences > 0 ? TUPE_SPLIT_VALID : TUPE_SPLIT_TRAIN;
    o.shuffle = 0;
    o.prefetch = 0;
    tupe_shard_meta_free(&man);
    tupe_shardr *r;
    if ((rc = tupe_shardr_open(&r, dir, &o, e)))
        return rc;
    const tupe_shard_meta *m = tupe_shardr_meta(r);
    *vocab_size = m->vocab_size;
    *vocab_hash = m->vocab_hash;
    uint32_t *buf = malloc((size_t)m->seq_len * sizeof *buf);
    int32_t *ids = malloc((size_t)m->seq_len * sizeof *ids);
    if (!buf || !ids)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    uint64_t total = tupe_shardr_size(r);
    for (uint64_t i = 0; !rc && i < total && (max_seqs == 0 || s->n < max_seqs); i++) {
        uint32_t len;
        if ((rc = tupe_shardr_get(r, i, buf, &len, e)))
            break;
        uint32_t keep = len > (uint32_t)max_len ? (uint32_t)max_len : len;
        for (uint32_t k = 0; k < keep; k++)
            ids[k] = (int32_t)buf[k];
        if (keep == 0)
            continue;
        rc = push(s, ids, keep, e);
        if (!rc && keep < len)
            s->truncated++;
    }
    free(buf);
    free(ids);
    tupe_shardr_close(r);
    return rc;
}
