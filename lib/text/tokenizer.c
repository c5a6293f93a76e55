#include "text/tokenizer.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/grow.h"
#include "text/pipeline.h"
#include "text/unicode.h"

typedef struct literal {
    const char *s;
    size_t n;
    uint32_t id;
} literal;

struct tupe_tokenizer {
    const tupe_vocab *v;
    tupe_tokenizer_opts o;
    tupe_pretok *pre;
    tupe_wordpiece *wp;
    tupe_bpe *bpe;
    literal lit[TUPE_SP_COUNT + TUPE_BPE_NHEAD];
    size_t nlit;
};

static int cmp_lit(const void *a, const void *b)
{
    const literal *x = a, *y = b;
    return (x->n < y->n) - (x->n > y->n); /* longest first */
}

int tupe_tokenizer_new(tupe_tokenizer **out, const tupe_vocab *v, const char *codes_path,
                       const tupe_tokenizer_opts *o, tupe_err *e)
{
    tupe_tokenizer *t = calloc(1, sizeof *t);
    if (!t)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    t->v = v;
    t->o = *o;
    tupe_pretok_opts po = {
        .kind = v->kind == TUPE_VOCAB_BPE ? TUPE_PRETOK_WHITESPACE : TUPE_PRETOK_BERT,
        .lowercase = o->lowercase,
        .strip_accents = o->strip_accents < 0 ? o->lowercase : o->strip_accents,
        .invalid = o->invalid,
    };
    int rc = 0;
    if (!(t->pre = tupe_pretok_new(&po)))
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    else if (v->kind == TUPE_VOCAB_WORDPIECE)
        rc = tupe_wordpiece_new(&t->wp, v, "##", e);
    else if (v->special[TUPE_SP_UNK] < 0)
        rc = tupe_fail(e, TUPE_EDATA, "%s: the vocabulary has no <unk>", tupe_path_name(v->path));
    else
        rc = tupe_bpe_load(&t->bpe, codes_path, v, e);
    if (rc) {
        tupe_tokenizer_free(t);
        return rc;
    }
    /* the literals matched by match_special: every special token the vocabulary has */
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        if (v->special[i] >= 0) {
            uint32_t id = (uint32_t)v->special[i];
            int dup = 0;
            for (size_t k = 0; k < t->nlit; k++)
                dup |= t->lit[k].id == id;
            if (!dup)
                t->lit[t->nlit++] = (literal){tupe_vocab_token(v, id), tupe_vocab_token_len(v, id), id};
        }
    qsort(t->lit, t->nlit, sizeof *t->lit, cmp_lit);
    *out = t;
    return 0;
}

void tupe_tokenizer_free(tupe_tokenizer *t)
{
    if (!t)
        return;
    tupe_pretok_free(t->pre);
    tupe_wordpiece_free(t->wp);
    tupe_bpe_free(t->bpe);
    free(t);
}


tupe_tokctx *tupe_tokctx_new(const tupe_tokenizer *t)
{
    tupe_tokctx *c = calloc(1, sizeof *c);
    if (!c)
        return NULL;
    if (t->bpe && !(c->cache = tupe_bpe_cache_new())) {
        free(c);
        return NULL;
    }
    return c;
}

void tupe_tokctx_free(tupe_tokctx *c)
{
    if (!c)
        return;
    tupe_words_free(&c->words);
    tupe_bpe_cache_free(c->cache);
    free(c->ids);
    free(c->scratch);
    free(c->line);
    free(c);
}

static int reserve_ids(tupe_tokctx *c, size_t extra) { return TUPE_RESERVE(c->ids, c->cap, c->n + extra); }

/* Normalize, split and segment (no special literals). */
static int encode_plain(const tupe_tokenizer *t, tupe_tokctx *c, const char *text, size_t len,
                        size_t *bad_at)
{
    tupe_words_clear(&c->words);
    int rc = tupe_pretok_run(t->pre, text, len, &c->words, bad_at);
    if (rc)
        return rc;
    const tupe_words *w = &c->words;
    if (reserve_ids(c, w->len))
        return -2;
    tupe_tokstats *st = &c->st;
    st->words += w->n;
    if (t->wp) {
        for (size_t i = 0; i < w->n; i++) {
            int unk;
            size_t k = tupe_wordpiece_encode(t->wp, w->buf + w->w[i].off, w->w[i].len,
                                             w->w[i].nchars, t->o.max_chars, c->ids + c->n, &unk);
            c->n += k;
            st->unk_words += (uint64_t)unk;
            st->unk_tokens += (uint64_t)unk;
        }
        return 0;
    }
    for (size_t i = 0; i < w->n; i++) {
        size_t unk = 0, len_i = w->w[i].len;
        size_t k = tupe_bpe_encode(t->bpe, c->cache, w->buf + w->w[i].off, len_i, c->ids + c->n,
                                   NULL, &unk);
        if (k == 0 && len_i)
            return -2;
        c->n += k;
        st->unk_tokens += unk;
        st->unk_words += unk != 0;
    }
    return 0;
}

int tupe_tokenizer_encode(const tupe_tokenizer *t, tupe_tokctx *c, const char *text, size_t len,
                          size_t *bad_at)
{
    size_t n0 = c->n;
    if (t->o.match_special && t->nlit) {
        size_t seg = 0;
        for (size_t i = 0; i < len; i++) {
            if (text[i] != '[' && text[i] != '<')
                continue;
            for (size_t k = 0; k < t->nlit; k++) {
                const literal *l = &t->lit[k];
                if (l->n <= len - i && memcmp(text + i, l->s, l->n) == 0) {
                    int rc = encode_plain(t, c, text + seg, i - seg, bad_at);
                    if (rc) {
                        *bad_at += seg;
                        c->n = n0;
                        return rc;
                    }
                    if (reserve_ids(c, 1))
                        return -2;
                    c->ids[c->n++] = l->id;
                    c->st.words++;
                    i += l->n - 1;
                    seg = i + 1;
                    break;
                }
            }
        }
        int rc = encode_plain(t, c, text + seg, len - seg, bad_at);
        if (rc) {
            *bad_at += seg;
            c->n = n0;
        }
        c->st.tokens += c->n - n0;
        return rc;
    }
    int rc = encode_plain(t, c, text, len, bad_at);
    if (rc)
        c->n = n0;
    c->st.tokens += c->n - n0;
    return rc;
}

/* ---- chunks ------------------------------------------------------------------------------- */

static char *put_u32(char *p, uint32_t v)
{
    char tmp[10];
    int k = 0;
    do {
        tmp[k++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (k)
        *p++ = tmp[--k];
    return p;
}

static int emit_doc(const tupe_tokenizer *t, const tupe_encode_opts *o, const tupe_tok_header *h,
                    const uint32_t *ids, size_t n, tupe_buf *out)
{
    if (o->format == TUPE_ENC_BINARY) {
        size_t sz = tupe_tok_record_size(h, n);
        if (tupe_buf_reserve(out, sz))
            return -1;
        tupe_tok_record_encode(h, ids, n, out->p + out->len);
        out->len += sz;
        return 0;
    }
    if (o->format == TUPE_ENC_TEXT) {
        if (tupe_buf_reserve(out, n * 11 + 1))
            return -1;
        char *p = (char *)out->p + out->len;
        for (size_t i = 0; i < n; i++) {
            if (i)
                *p++ = ' ';
            p = put_u32(p, ids[i]);
        }
        *p++ = '\n';
        out->len = (size_t)(p - (char *)out->p);
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        size_t l = tupe_vocab_token_len(t->v, ids[i]);
        if (tupe_buf_reserve(out, l + 2))
            return -1;
        if (i)
            out->p[out->len++] = ' ';
        memcpy(out->p + out->len, tupe_vocab_token(t->v, ids[i]), l);
        out->len += l;
    }
    if (tupe_buf_reserve(out, 1))
        return -1;
    out->p[out->len++] = '\n';
    return 0;
}

/* A finished document into the output, [SEP] first with add_special; too long is an error. */
static int finish_doc(const tupe_tokenizer *t, const tupe_encode_opts *o, const tupe_tok_header *h,
                      uint32_t **ids, size_t *n, size_t *cap, const tupe_chunk *ch, tupe_buf *out,
                      tupe_err *e)
{
    if (o->add_special) {
        if (TUPE_RESERVE(*ids, *cap, *n + 1))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        (*ids)[(*n)++] = (uint32_t)t->v->special[TUPE_SP_SEP];
    }
    if (*n >= TUPE_TOK_MAX_DOC)
        return tupe_fail_byte(e, TUPE_EDATA, ch->name, ch->offset,
                              "a document of %zu tokens is over the token stream's limit of %u "
                              "per document",
                              *n, TUPE_TOK_MAX_DOC);
    if (emit_doc(t, o, h, *ids, *n, out))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    return 0;
}

static int keep_piece(tupe_u32vec *dst, const uint32_t *ids, size_t n)
{
    dst->n = 0;
    if (TUPE_RESERVE(dst->v, dst->cap, n))
        return -1;
    if (n)
        memcpy(dst->v, ids, n * sizeof *ids);
    dst->n = n;
    return 0;
}

int tupe_encode_chunk(const tupe_tokenizer *t, tupe_tokctx *c, const tupe_encode_opts *o,
                      const tupe_tok_header *h, const tupe_chunk *ch, tupe_buf *out,
                      tupe_enc_pieces *pc, tupe_err *e)
{
    const tupe_vocab *v = t->v;
    tupe_docscan ds;
    tupe_docscan_init(&ds, ch, o->docs, o->keep_title);
    const char *line;
    size_t len;
    int r, rc;
    uint32_t cls = (uint32_t)v->special[TUPE_SP_CLS], sep = (uint32_t)v->special[TUPE_SP_SEP];
    /* the first document continues one from the chunks before: its ids are the lead piece */
    int lead = ds.in_doc;
    if (pc)
        memset(&pc->has_lead, 0, sizeof *pc - offsetof(tupe_enc_pieces, has_lead));
    if ((lead || ds.open_end) && !pc)
        return tupe_fail(e, TUPE_EFAIL, "a chunk inside a document needs tupe_enc_pieces");
    c->n = 0;
    if (o->add_special && reserve_ids(c, 1))
        goto oom;
    if (o->add_special && !lead)
        c->ids[c->n++] = cls;
    size_t text_ids = 0; /* of the document, separators not counted */
    while ((r = tupe_docscan_next(&ds, &line, &len)) != TUPE_SCAN_DONE) {
        if (r == TUPE_SCAN_END) {
            if (lead) {
                if (keep_piece(&pc->lead, c->ids, c->n))
                    goto oom;
                pc->has_lead = pc->lead_closes = 1;
                pc->lead_text = text_ids;
                lead = 0;
            } else if (text_ids > 0 || o->docs == TUPE_DOCS_LINE) {
                if ((rc = finish_doc(t, o, h, &c->ids, &c->n, &c->cap, ch, out, e)))
                    return rc;
                c->st.docs++;
                c->st.ids += c->n;
            }
            c->n = 0;
            text_ids = 0;
            if (o->add_special)
                c->ids[c->n++] = cls;
            continue;
        }
        size_t tlen;
        const char *text = tupe_docscan_text(&ds, line, len, &c->line, &c->line_cap, &tlen);
        if (!text)
            goto oom;
        size_t bad, before = c->n;
        rc = tupe_tokenizer_encode(t, c, text, tlen, &bad);
        if (rc == -1) {
            if (text != line)
                bad = tupe_utf8_first_bad(line, len);
            return tupe_fail_byte(e, TUPE_EDATA, ch->name,
                                  ch->offset + (uint64_t)(line - ch->data) + bad,
                                  "invalid UTF-8 (see --invalid)");
        }
        if (rc)
            goto oom;
        text_ids += c->n - before;
        c->st.lines++;
        c->st.bytes += len + 1;
        if (o->line_sep) {
            if (reserve_ids(c, 1))
                goto oom;
            c->ids[c->n++] = sep;
        }
    }
    if (ds.open_end) { /* the last document goes on in the next chunk */
        tupe_u32vec *dst = lead ? &pc->lead : &pc->trail;
        if (keep_piece(dst, c->ids, c->n))
            goto oom;
        if (lead)
            pc->has_lead = 1, pc->lead_text = text_ids;
        else
            pc->has_trail = 1, pc->trail_text = text_ids;
    }
    return 0;
oom:
    return tupe_fail(e, TUPE_EFAIL, "out of memory");
}

typedef struct enc_run {
    const tupe_tokenizer *t;
    const tupe_encode_opts *o;
    const tupe_tok_header *h;
    tupe_encode_sink sink;
    void *arg;
    tupe_tokstats *st;
    /* a document that runs over several chunks, joined here */
    tupe_u32vec open;
    uint64_t open_text;
    tupe_buf tmp;
} enc_run;

typedef struct enc_ctx {
    const enc_run *run;
    tupe_tokctx *c;
} enc_ctx;

typedef struct enc_result {
    tupe_buf out;
    tupe_enc_pieces pc;
    tupe_tokstats st; /* of this chunk */
} enc_result;

static void *enc_ctx_new(void *arg)
{
    enc_ctx *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->run = arg;
    if (!(x->c = tupe_tokctx_new(x->run->t))) {
        free(x);
        return NULL;
    }
    return x;
}

static void enc_ctx_free(void *ctx)
{
    enc_ctx *x = ctx;
    tupe_tokctx_free(x->c);
    free(x);
}

static void enc_result_free(void *p)
{
    enc_result *r = p;
    tupe_buf_free(&r->out);
    free(r->pc.lead.v);
    free(r->pc.trail.v);
    free(r);
}

static int enc_work(void *ctx, tupe_job *job, tupe_err *e)
{
    enc_ctx *x = ctx;
    enc_result *res = job->result;
    if (!res && !(res = job->result = calloc(1, sizeof *res)))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    res->out.len = 0;
    memset(&x->c->st, 0, sizeof x->c->st);
    int rc = tupe_encode_chunk(x->run->t, x->c, x->run->o, x->run->h, &job->chunk, &res->out,
                               &res->pc, e);
    res->st = x->c->st;
    return rc;
}

static int enc_consume(void *arg, tupe_job *job, tupe_err *e)
{
    enc_run *run = arg;
    enc_result *res = job->result;
    tupe_tokstats *a = run->st;
    const tupe_tokstats *b = &res->st;
    const tupe_enc_pieces *pc = &res->pc;
    a->docs += b->docs, a->lines += b->lines, a->bytes += b->bytes, a->words += b->words;
    a->tokens += b->tokens, a->unk_tokens += b->unk_tokens, a->unk_words += b->unk_words;
    a->ids += b->ids;
    int rc;
    if (pc->has_lead) {
        if (TUPE_RESERVE(run->open.v, run->open.cap, run->open.n + pc->lead.n))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        if (pc->lead.n) /* an empty piece may have no buffer */
            memcpy(run->open.v + run->open.n, pc->lead.v, pc->lead.n * sizeof *pc->lead.v);
        run->open.n += pc->lead.n;
        run->open_text += pc->lead_text;
        if (pc->lead_closes) {
            run->tmp.len = 0;
            if (run->open_text > 0) {
                if ((rc = finish_doc(run->t, run->o, run->h, &run->open.v, &run->open.n,
                                     &run->open.cap, &job->chunk, &run->tmp, e)) ||
                    (rc = run->sink(run->arg, run->tmp.p, run->tmp.len, 1, run->open.n, e)))
                    return rc;
                a->docs++;
                a->ids += run->open.n;
            }
            run->open.n = 0;
            run->open_text = 0;
        }
    }
    /* a chunk in the middle of a long document writes nothing (and may have no buffer) */
    if ((rc = run->sink(run->arg, res->out.p ? res->out.p : (const uint8_t *)"", res->out.len,
                        b->docs, b->ids, e)))
        return rc;
    if (pc->has_trail) {
        if (keep_piece(&run->open, pc->trail.v, pc->trail.n))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        run->open_text = pc->trail_text;
    }
    return 0;
}

int tupe_encode_corpus(const tupe_tokenizer *t, tupe_corpus *c, const tupe_encode_opts *o,
                       const tupe_tok_header *h, int threads, tupe_encode_sink sink, void *arg,
                       tupe_tokstats *st, tupe_err *e)
{
    enc_run run = {t, o, h, sink, arg, st, {0}, 0, {0}};
    static const tupe_pipeline_ops ops = {enc_ctx_new, enc_ctx_free, enc_work, enc_consume,
                                          enc_result_free};
    int rc = tupe_pipeline_run(c, o->chunk ? o->chunk : (size_t)1 << 20, threads, &ops, &run, e);
    free(run.open.v);
    tupe_buf_free(&run.tmp);
    return rc;
}

/* ---- decoding ------------------------------------------------------------------------------ */

/* Hugging Face's WordPiece decoder cleans up the space before a token that starts with
 * punctuation or a clitic (its `cleanup`, applied token by token: " ." -> ".", " ?", " !",
 * " ,", " n't", " 'm", " 's", " 've", " 're"), so "hello world ." decodes to "hello world.". */
static int hf_glued(const char *s, size_t l)
{
    static const char *const lead[] = {".", "?", "!", ",", "n't", "'m", "'s", "'ve", "'re"};
    for (size_t k = 0; k < sizeof lead / sizeof lead[0]; k++) {
        size_t m = strlen(lead[k]);
        if (l >= m && memcmp(s, lead[k], m) == 0)
            return 1;
    }
    return 0;
}

int tupe_decode_ids(const tupe_vocab *v, const uint32_t *ids, size_t n, int skip_special,
                    tupe_buf *out)
{
    int glue = 1; /* no space before the next token */
    for (size_t i = 0; i < n; i++) {
        if (skip_special && tupe_vocab_is_special(v, ids[i]))
            continue;
        const char *s = tupe_vocab_token(v, ids[i]);
        size_t l = tupe_vocab_token_len(v, ids[i]);
        int next_glue = 0;
        if (tupe_vocab_is_continuation(v, ids[i])) {
            if (v->kind == TUPE_VOCAB_WORDPIECE)
                s += 2, glue = 1;
            else
                next_glue = 1;
            l -= 2;
        }
        if (tupe_buf_reserve(out, l + 1))
            return -1;
        if (!glue && v->kind == TUPE_VOCAB_WORDPIECE && hf_glued(s, l))
            glue = 1;
        if (!glue)
            out->p[out->len++] = ' ';
        memcpy(out->p + out->len, s, l);
        out->len += l;
        glue = next_glue;
    }
    return 0;
}

int tupe_decode_input(const tupe_vocab *v, const char *path, int format, int skip_special,
                      tupe_out *o, tupe_buf *b, tupe_err *e)
{
    tupe_in *in;
    int rc, binary = format != TUPE_DEC_TEXT;
    if (format == TUPE_DEC_AUTO && strcmp(path, "-") != 0) {
        /* a file says what it is: a token stream starts with its magic */
        unsigned char magic[8];
        size_t got = 0;
        if ((rc = tupe_in_open(&in, path, e)))
            return rc;
        rc = tupe_in_read(in, magic, sizeof magic, &got, e);
        tupe_in_close(in);
        if (rc)
            return rc;
        binary = got == 8 && memcmp(magic, TUPE_TOK_MAGIC, 8) == 0;
        /* Text ids start with a digit or a space: anything else is neither (a device such as
         * /dev/zero would otherwise be read as one endless line). */
        if (!binary && got && !isdigit(magic[0]) && !isspace(magic[0]))
            return tupe_fail_byte(e, TUPE_EDATA, path, 0, "neither a token stream (no %.8s "
                                  "magic) nor ids as text", TUPE_TOK_MAGIC);
    }
    if (binary) {
        tupe_tokr *r;
        if ((rc = tupe_tokr_open(&r, path, e)))
            return rc;
        tupe_tok_header h = *tupe_tokr_header(r);
        if (h.vocab_hash != v->hash || h.vocab_size != tupe_vocab_size(v)) {
            tupe_tokr_close(r);
            return tupe_fail(e, TUPE_EDATA,
                             "%s: the token stream was made with another vocabulary (hash "
                             "%016llx, %u ids; --vocab has %016llx, %u)",
                             tupe_path_name(path), (unsigned long long)h.vocab_hash, h.vocab_size,
                             (unsigned long long)v->hash, tupe_vocab_size(v));
        }
        const uint32_t *ids;
        size_t n;
        int r2;
        while ((r2 = tupe_tokr_next(r, &ids, &n, e)) == 1) {
            b->len = 0;
            if (tupe_decode_ids(v, ids, n, skip_special, b) || tupe_buf_reserve(b, 1)) {
                tupe_tokr_close(r);
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            }
            b->p[b->len++] = '\n';
            if ((rc = tupe_out_write(o, b->p, b->len, e))) {
                tupe_tokr_close(r);
                return rc;
            }
        }
        tupe_tokr_close(r);
        return r2 < 0 ? e->code : 0;
    }
    if ((rc = tupe_in_open(&in, path, e)))
        return rc;
    char *line;
    size_t len;
    int r;
    uint32_t *ids = NULL;
    size_t cap = 0;
    while ((r = tupe_in_getline(in, &line, &len, e)) == 1) {
        size_t n = 0;
        for (size_t i = 0; i < len;) {
            while (i < len && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r'))
                i++;
            if (i == len)
                break;
            uint64_t x = 0;
            size_t j = i;
            while (j < len && line[j] >= '0' && line[j] <= '9' && x < (1ull << 32))
                x = x * 10 + (uint64_t)(line[j++] - '0');
            if (j == i || (j < len && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ||
                x >= tupe_vocab_size(v)) {
                rc = tupe_fail_line(e, TUPE_EDATA, path, tupe_in_lineno(in),
                                    "expected ids below %u separated by spaces",
                                    tupe_vocab_size(v));
                goto text_done;
            }
            if (n == cap) {
                cap = cap ? cap * 2 : 1024;
                uint32_t *p = realloc(ids, cap * sizeof *p);
                if (!p) {
                    rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                    goto text_done;
                }
                ids = p;
            }
            ids[n++] = (uint32_t)x;
            i = j;
        }
        b->len = 0;
        if (tupe_decode_ids(v, ids, n, skip_special, b) || tupe_buf_reserve(b, 1)) {
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
            goto text_done;
        }
        b->p[b->len++] = '\n';
        if ((rc = tupe_out_write(o, b->p, b->len, e)))
            goto text_done;
    }
    if (r < 0)
        rc = e->code;
text_done:
    free(ids);
    tupe_in_close(in);
    return rc;
}
