/* tupe-tokenize: train vocabularies, encode text to token streams, decode, inspect. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "base/progress.h"
#include "cli/cli.h"
#include "text/corpus.h"
#include "text/tokenizer.h"
#include "text/tokstream.h"
#include "text/vocabtrain.h"

enum {
    O_OUT = 1, O_VOCAB, O_FORMAT, O_DOCS, O_KEEP_TITLE, O_ADD_SPECIAL, O_LINE_SEP, O_MAX_CHARS,
    O_MATCH_SPECIAL, O_LOWER, O_CASED, O_STRIP, O_KEEP_ACCENTS, O_INVALID, O_SKIP_SPECIAL,
    O_MODEL, O_VOCAB_SIZE, O_MERGES, O_MIN_FREQ, O_LIMIT_ALPHA, O_MEMORY, O_FIELD
};

#define OPT_END {0, NULL, 0, 0, NULL, NULL, NULL}
#define OPT_DOCS                                                                                 \
    {O_DOCS, "docs", 0, TUPE_REQARG, "MODE",                                                     \
     "document boundaries: blank (a blank line ends a\ndocument; default), line (every line is " \
     "one),\nwiki (WikiExtractor <doc> blocks), jsonl (JSON Lines:\none object per line)",       \
     "list:blank line wiki jsonl"},                                                              \
    {O_KEEP_TITLE, "keep-title", 0, TUPE_NOARG, NULL,                                            \
     "--docs wiki: keep the title line of each article", NULL},                                  \
    {O_FIELD, "field", 0, TUPE_REQARG, "NAME",                                                   \
     "--docs jsonl: the string field with the text\n(default: text)", NULL}
#define OPT_CASE                                                                                 \
    {O_LOWER, "lowercase", 0, TUPE_NOARG, NULL, "lowercase the text (default)", NULL},           \
    {O_CASED, "cased", 0, TUPE_NOARG, NULL, "keep case", NULL},                                  \
    {O_STRIP, "strip-accents", 0, TUPE_NOARG, NULL,                                              \
     "WordPiece: remove accents (default: with --lowercase)", NULL},                             \
    {O_KEEP_ACCENTS, "keep-accents", 0, TUPE_NOARG, NULL, "WordPiece: keep accents", NULL}
#define OPT_INVALID                                                                              \
    {O_INVALID, "invalid", 0, TUPE_REQARG, "WHAT",                                              \
     "bytes that are not UTF-8: error (default), replace\n(with U+FFFD), skip",                  \
     "list:error replace skip"}
#define OPT_ENCODING                                                                             \
    {O_MAX_CHARS, "max-chars-per-word", 0, TUPE_REQARG, "N",                                     \
     "WordPiece: a longer word is [UNK] (default: 100)", NULL},                                  \
    {O_MATCH_SPECIAL, "match-special", 0, TUPE_NOARG, NULL,                                      \
     "literal special tokens in the text ([SEP], <s>...)\nbecome special ids, as Hugging Face "  \
     "does",                                                                                      \
     NULL}

static const tupe_opt train_opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH",
     "WordPiece: the vocab.txt to write (default: -);\nBPE: the directory for codes and dict.txt",
     "out:file"},
    {O_MODEL, "model", 0, TUPE_REQARG, "KIND", "wordpiece (default) or bpe", "list:wordpiece bpe"},
    {O_VOCAB_SIZE, "vocab-size", 0, TUPE_REQARG, "N",
     "entries, specials included (default: 32768)", NULL},
    {O_MERGES, "merges", 0, TUPE_REQARG, "N", "BPE: merges to learn (default: 32640)", NULL},
    {O_MIN_FREQ, "min-frequency", 0, TUPE_REQARG, "N",
     "stop when the best pair is rarer than N\n(default: 2; BPE: 1)", NULL},
    {O_LIMIT_ALPHA, "limit-alphabet", 0, TUPE_REQARG, "N",
     "WordPiece: keep the N most frequent characters\n(default: 1000; 0: all)", NULL},
    {O_MEMORY, "memory", 0, TUPE_REQARG, "SIZE",
     "memory budget of training (default: 2G); rare\nwords are pruned to stay under it",
     NULL},
    OPT_CASE, OPT_DOCS, OPT_INVALID, OPT_END};

static const tupe_opt encode_opts[] = {
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH",
     "vocab.txt (WordPiece) or a BPE directory (codes,\ndict.txt)", "file"},
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "where to write (default: -)", "out:file"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FORM",
     "binary (token stream, default), text (ids), tokens", "list:binary text tokens"},
    OPT_DOCS,
    {O_ADD_SPECIAL, "add-special", 0, TUPE_NOARG, NULL,
     "put [CLS] before and [SEP] after each document\n(<s> and </s> for BPE)", NULL},
    {O_LINE_SEP, "line-sep", 0, TUPE_NOARG, NULL,
     "put [SEP] (</s>) after every line of a document,\nas fairseq does", NULL},
    OPT_ENCODING, OPT_CASE, OPT_INVALID, OPT_END};

static const tupe_opt decode_opts[] = {
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "the vocabulary the ids belong to", "file"},
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "where to write (default: -)", "out:file"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FORM",
     "what the input is: binary (token stream) or text\n(ids); default: a file's content "
     "decides, stdin\nis binary",
     "list:binary text"},
    {O_SKIP_SPECIAL, "skip-special", 0, TUPE_NOARG, NULL, "leave out special tokens", NULL},
    OPT_END};

static const tupe_opt info_opts[] = {
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "the vocabulary to describe", "file"},
    {O_FORMAT, "format", 0, TUPE_REQARG, "FORM", "text (default) or json", "list:text json"},
    OPT_DOCS, OPT_ENCODING, OPT_CASE, OPT_INVALID, OPT_END};

static int cmd_train(tupe_cli *c, void *opts);
static int cmd_encode(tupe_cli *c, void *opts);
static int cmd_decode(tupe_cli *c, void *opts);
static int cmd_info(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"train", "[FILE]...", "learn a vocabulary from text",
     "Learns a WordPiece vocabulary (Hugging Face WordPieceTrainer semantics) or\n"
     "fastBPE merges with a fairseq dictionary from the FILEs (default: stdin).\n"
     "The same input and options give the same vocabulary whatever --threads is.",
     train_opts, "file", cmd_train},
    {"encode", "[FILE]...", "turn text into token ids",
     "Encodes the FILEs (default: stdin; plain, .zst, .gz, .xz, .bz2, .lz4, tar and\n"
     "zip) into a token stream for tupe-shard, or into text with --format.",
     encode_opts, "file", cmd_encode},
    {"decode", "[FILE]...", "turn token ids back into text",
     "Reads token streams, or text with one document of ids per line, and\n"
     "writes one line of text per document.",
     decode_opts, "file", cmd_decode},
    {"info", "[FILE]...", "describe a vocabulary and how it covers text",
     "Prints the vocabulary's size, special tokens and hash; with FILEs, also how\n"
     "it tokenizes them (tokens per word, unknown rate).",
     info_opts, "file", cmd_info},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-tokenize", "train vocabularies and encode text", cmds, NULL};

typedef struct args {
    const char *out, *vocab, *field;
    int format, docs, keep_title, add_special, line_sep, match_special, skip_special;
    int lowercase, strip_accents, invalid;
    long max_chars;
    int model;
    long vocab_size, merges, min_freq, limit_alpha;
    uint64_t memory;
    int format_set, min_freq_set, accents_set, max_chars_set;
} args;

static int parse(tupe_cli *c, args *a)
{
    const char *arg;
    int id;
    while ((id = tupe_cli_next(c, &arg)) > 0) {
        int bad = 0;
        switch (id) {
        case O_OUT: a->out = arg; break;
        case O_VOCAB: a->vocab = arg; break;
        case O_FORMAT:
            bad = tupe_cli_choice(c, arg,
                                  strcmp(c->cmd->name, "info") == 0     ? "text|json"
                                  : strcmp(c->cmd->name, "decode") == 0 ? "binary|text"
                                                                        : "binary|text|tokens",
                                  &a->format);
            a->format_set = 1;
            break;
        case O_DOCS: bad = tupe_cli_choice(c, arg, "blank|line|wiki|jsonl", &a->docs); break;
        case O_FIELD: a->field = arg; break;
        case O_KEEP_TITLE: a->keep_title = 1; break;
        case O_ADD_SPECIAL: a->add_special = 1; break;
        case O_LINE_SEP: a->line_sep = 1; break;
        case O_MATCH_SPECIAL: a->match_special = 1; break;
        case O_SKIP_SPECIAL: a->skip_special = 1; break;
        case O_LOWER: a->lowercase = 1; break;
        case O_CASED: a->lowercase = 0; break;
        case O_STRIP: a->strip_accents = a->accents_set = 1; break;
        case O_KEEP_ACCENTS:
            a->strip_accents = 0;
            a->accents_set = 1;
            break;
        case O_INVALID: bad = tupe_cli_choice(c, arg, "error|replace|skip", &a->invalid); break;
        case O_MAX_CHARS:
            bad = tupe_cli_long(c, arg, 1, 1 << 20, &a->max_chars);
            a->max_chars_set = 1;
            break;
        case O_MODEL: bad = tupe_cli_choice(c, arg, "wordpiece|bpe", &a->model); break;
        case O_VOCAB_SIZE: bad = tupe_cli_long(c, arg, 1, 1L << 24, &a->vocab_size); break;
        case O_MERGES: bad = tupe_cli_long(c, arg, 1, 1L << 24, &a->merges); break;
        case O_MIN_FREQ:
            bad = tupe_cli_long(c, arg, 0, 1L << 40, &a->min_freq);
            a->min_freq_set = 1;
            break;
        case O_LIMIT_ALPHA: bad = tupe_cli_long(c, arg, 0, 1L << 24, &a->limit_alpha); break;
        case O_MEMORY:
            bad = tupe_cli_size(c, arg, &a->memory);
            if (!bad && !a->memory)
                bad = tupe_cli_usage(c, "--memory: expected a size above 0, got '%s'", arg);
            break;
        }
        if (bad)
            return -1;
    }
    if (id < 0)
        return -1;
    /* an option that would do nothing in this combination is refused, not ignored */
    if (a->keep_title && a->docs != TUPE_DOCS_WIKI)
        return tupe_cli_usage(c, "--keep-title is for --docs wiki only"), -1;
    if (a->field && a->docs != TUPE_DOCS_JSONL)
        return tupe_cli_usage(c, "--field is for --docs jsonl only"), -1;
    if (strcmp(c->cmd->name, "train") != 0)
        return 0;
    if (a->model == 1 && (a->limit_alpha >= 0 || a->accents_set))
        return tupe_cli_usage(c, "%s for --model wordpiece only",
                              a->limit_alpha >= 0 ? "--limit-alphabet is"
                                                  : "--strip-accents and --keep-accents are"),
               -1;
    if (a->model != 1 && a->merges)
        return tupe_cli_usage(c, "--merges is for --model bpe only (WordPiece stops at "
                                 "--vocab-size)"),
               -1;
    return 0;
}

static int open_corpus(tupe_cli *c, int docs, const char *field, int invalid, tupe_corpus **corpus)
{
    static const char *const stdin_only[] = {"-"};
    tupe_err e;
    const char *const *paths = c->nargs ? (const char *const *)c->args : stdin_only;
    if (tupe_corpus_open(corpus, paths, c->nargs ? c->nargs : 1, docs, &e))
        return tupe_cli_error(c, &e);
    if (field && tupe_corpus_set_field(*corpus, field, &e)) {
        tupe_corpus_close(*corpus);
        return tupe_cli_error(c, &e);
    }
    tupe_corpus_set_invalid(*corpus, invalid);
    return 0;
}

static int load_tokenizer(tupe_cli *c, const args *a, tupe_vocab **v, tupe_tokenizer **t)
{
    tupe_err e;
    if (!a->vocab)
        return tupe_cli_usage(c, "--vocab is required");
    if (tupe_vocab_load(v, a->vocab, &e))
        return tupe_cli_error(c, &e);
    if ((*v)->kind == TUPE_VOCAB_BPE && (a->accents_set || a->max_chars_set)) {
        tupe_vocab_free(*v);
        *v = NULL;
        return tupe_cli_usage(c, "%s is a BPE vocabulary: %s for WordPiece only", a->vocab,
                              a->max_chars_set ? "--max-chars-per-word is"
                                               : "--strip-accents and --keep-accents are");
    }
    char codes[4096];
    snprintf(codes, sizeof codes, "%s/codes", a->vocab);
    tupe_tokenizer_opts o = {
        .lowercase = a->lowercase,
        .strip_accents = a->strip_accents,
        .invalid = a->invalid,
        .max_chars = (size_t)a->max_chars,
        .match_special = a->match_special,
    };
    if (tupe_tokenizer_new(t, *v, codes, &o, &e)) {
        tupe_vocab_free(*v);
        *v = NULL;
        return tupe_cli_error(c, &e);
    }
    return 0;
}

/* Plain text read with --docs wiki gives nothing at all: an error, not an empty output. */
static int check_wiki(const args *a, const tupe_tokstats *st, tupe_err *e)
{
    if (a->docs != TUPE_DOCS_WIKI || st->docs)
        return 0;
    return tupe_fail(e, TUPE_EDATA, "no <doc> block with text in the input (--docs wiki reads "
                                    "WikiExtractor output)");
}

/* ---- encode ------------------------------------------------------------------------------- */

typedef struct sink {
    tupe_tokw *w;
    tupe_out *o;
    tupe_corpus *corpus;
    tupe_progress *p;
} sink;

static int write_chunk(void *arg, const uint8_t *buf, size_t len, uint64_t docs, uint64_t ids,
                       tupe_err *e)
{
    sink *s = arg;
    int rc = s->w ? tupe_tokw_raw(s->w, buf, len, docs, ids, e) : tupe_out_write(s->o, buf, len, e);
    tupe_progress_set(s->p, tupe_corpus_consumed(s->corpus));
    return rc;
}

static void header_for(const tupe_vocab *v, tupe_tok_header *h)
{
    tupe_tok_header_init(h, tupe_vocab_size(v), v->hash);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        h->special[i] = v->special[i];
}

static int cmd_encode(tupe_cli *c, void *opts)
{
    const args *a = opts;
    tupe_vocab *v = NULL;
    tupe_tokenizer *t = NULL;
    tupe_corpus *corpus = NULL;
    if (a->format == TUPE_ENC_BINARY && strcmp(a->out, "-") == 0 && isatty(STDOUT_FILENO))
        return tupe_cli_usage(c, "a token stream is binary: not written to a terminal (give -o "
                                 "FILE, a pipe, or --format text)");
    int rc = load_tokenizer(c, a, &v, &t);
    if (rc)
        return rc;
    if ((a->add_special || a->line_sep) &&
        (v->special[TUPE_SP_CLS] < 0 || v->special[TUPE_SP_SEP] < 0)) {
        tupe_err e;
        tupe_fail(&e, TUPE_EDATA, "%s: --add-special/--line-sep need %s in the vocabulary", a->vocab,
                  v->kind == TUPE_VOCAB_BPE ? "<s> and </s>" : "[CLS] and [SEP]");
        rc = tupe_cli_error(c, &e);
        goto done;
    }
    if ((rc = open_corpus(c, a->docs, a->field, a->invalid, &corpus)))
        goto done;
    tupe_tok_header h;
    header_for(v, &h);
    tupe_err e;
    sink s = {NULL, NULL, corpus, NULL};
    if (a->format == TUPE_ENC_BINARY ? tupe_tokw_open(&s.w, a->out, &h, &e)
                                     : tupe_out_open(&s.o, a->out, &e)) {
        rc = tupe_cli_error(c, &e);
        goto done;
    }
    tupe_progress p;
    tupe_progress_start(&p, "encode", tupe_corpus_total(corpus), "B", c->quiet);
    s.p = &p;
    tupe_encode_opts eo = {a->docs, a->keep_title, a->add_special, a->line_sep, a->format, 0};
    tupe_tokstats st = {0};
    rc = tupe_encode_corpus(t, corpus, &eo, &h, c->threads, write_chunk, &s, &st, &e);
    tupe_progress_finish(&p);
    if (!rc)
        rc = check_wiki(a, &st, &e);
    if (rc) {
        tupe_tokw_abort(s.w);
        tupe_out_abort(s.o);
        rc = tupe_cli_error(c, &e);
        goto done;
    }
    if (s.w ? tupe_tokw_close(s.w, &e) : tupe_out_commit(s.o, &e)) {
        rc = tupe_cli_error(c, &e);
        goto done;
    }
    if (c->verbose)
        tupe_cli_note(c, "%llu documents, %llu words, %llu tokens (%llu unknown)",
                      (unsigned long long)st.docs, (unsigned long long)st.words,
                      (unsigned long long)st.tokens, (unsigned long long)st.unk_tokens);
done:
    tupe_corpus_close(corpus);
    tupe_tokenizer_free(t);
    tupe_vocab_free(v);
    return rc;
}

/* ---- decode ------------------------------------------------------------------------------- */

static int cmd_decode(tupe_cli *c, void *opts)
{
    const args *a = opts;
    tupe_err e;
    if (!a->vocab)
        return tupe_cli_usage(c, "--vocab is required");
    tupe_vocab *v;
    if (tupe_vocab_load(&v, a->vocab, &e))
        return tupe_cli_error(c, &e);
    tupe_out *o;
    if (tupe_out_open(&o, a->out, &e)) {
        tupe_vocab_free(v);
        return tupe_cli_error(c, &e);
    }
    tupe_buf b = {0};
    int rc = 0;
    for (int i = 0; i < (c->nargs ? c->nargs : 1) && !rc; i++)
        rc = tupe_decode_input(v, c->nargs ? c->args[i] : "-", a->format_set ? a->format : -1,
                               a->skip_special, o, &b, &e);
    tupe_buf_free(&b);
    if (!rc)
        rc = tupe_out_commit(o, &e);
    else
        tupe_out_abort(o);
    tupe_vocab_free(v);
    return rc ? tupe_cli_error(c, &e) : 0;
}

/* ---- info --------------------------------------------------------------------------------- */

static int discard(void *arg, const uint8_t *buf, size_t len, uint64_t docs, uint64_t ids,
                   tupe_err *e)
{
    sink *s = arg;
    tupe_progress_set(s->p, tupe_corpus_consumed(s->corpus));
    return 0;
}

static int cmd_info(tupe_cli *c, void *opts)
{
    const args *a = opts;
    tupe_vocab *v = NULL;
    tupe_tokenizer *t = NULL;
    int rc = load_tokenizer(c, a, &v, &t);
    if (rc)
        return rc;
    uint32_t n = tupe_vocab_size(v), cont = 0, maxlen = 0, maxid = 0;
    for (uint32_t id = 0; id < n; id++) {
        uint32_t l = tupe_vocab_token_len(v, id);
        cont += (uint32_t)tupe_vocab_is_continuation(v, id);
        if (l > maxlen)
            maxlen = l, maxid = id;
    }
    char hash[22];
    tupe_hash_hex(v->hash, hash);
    int json = a->format == 1;
    tupe_tokstats st = {0};
    int have_text = c->nargs > 0;
    if (have_text) {
        tupe_corpus *corpus;
        if ((rc = open_corpus(c, a->docs, a->field, a->invalid, &corpus)))
            goto done;
        tupe_tok_header h;
        header_for(v, &h);
        tupe_progress p;
        tupe_progress_start(&p, "info", tupe_corpus_total(corpus), "B", c->quiet);
        sink s = {NULL, NULL, corpus, &p};
        tupe_encode_opts eo = {a->docs, a->keep_title, 0, 0, TUPE_ENC_TEXT, 0};
        tupe_err e;
        rc = tupe_encode_corpus(t, corpus, &eo, &h, c->threads, discard, &s, &st, &e);
        tupe_progress_finish(&p);
        if (!rc)
            rc = check_wiki(a, &st, &e);
        tupe_corpus_close(corpus);
        if (rc) {
            rc = tupe_cli_error(c, &e);
            goto done;
        }
    }
    const char *kind = v->kind == TUPE_VOCAB_BPE ? "bpe" : "wordpiece";
    double unk_rate = st.tokens ? (double)st.unk_tokens / (double)st.tokens : 0;
    double per_word = st.words ? (double)st.tokens / (double)st.words : 0;
    double unk_words = st.words ? (double)st.unk_words / (double)st.words : 0;
    if (json) {
        /* the path as a JSON string: quotes and backslashes escaped */
        json_t *js = json_string_nocheck(a->vocab);
        char *path = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
        json_decref(js);
        printf("{\"vocab\": %s, \"kind\": \"%s\", \"size\": %u, \"hash\": \"%s\", "
               "\"continuation_tokens\": %u, \"longest_token_bytes\": %u",
               path ? path : "null", kind, n, hash, cont, maxlen);
        free(path);
        for (int i = 0; i < TUPE_SP_COUNT; i++)
            printf(", \"%s_id\": %d", tupe_special_role(i), v->special[i]);
        if (have_text)
            printf(", \"documents\": %llu, \"bytes\": %llu, \"words\": %llu, \"tokens\": %llu, "
                   "\"unknown_tokens\": %llu, \"unknown_rate\": %.6f, \"tokens_per_word\": %.4f, "
                   "\"unknown_words\": %llu, \"bytes_per_token\": %.4f",
                   (unsigned long long)st.docs, (unsigned long long)st.bytes,
                   (unsigned long long)st.words, (unsigned long long)st.tokens,
                   (unsigned long long)st.unk_tokens, unk_rate, per_word,
                   (unsigned long long)st.unk_words,
                   st.tokens ? (double)st.bytes / (double)st.tokens : 0);
        printf("}\n");
    } else {
        printf("vocabulary     %s\nkind           %s\nsize           %u\nhash           %s\n",
               a->vocab, kind, n, hash);
        printf("continuations  %u (%s)\nlongest token  %u bytes (id %u)\n", cont,
               v->kind == TUPE_VOCAB_BPE ? "ending in @@" : "starting with ##", maxlen, maxid);
        for (int i = 0; i < TUPE_SP_COUNT; i++) {
            if (v->special[i] >= 0)
                printf("%-15s%d %s\n", tupe_special_role(i), v->special[i],
                       tupe_vocab_token(v, (uint32_t)v->special[i]));
            else
                printf("%-15s-\n", tupe_special_role(i));
        }
        if (have_text) {
            printf("documents      %llu\nbytes          %llu\nwords          %llu\n",
                   (unsigned long long)st.docs, (unsigned long long)st.bytes,
                   (unsigned long long)st.words);
            printf("tokens         %llu (%.3f per word, %.2f bytes each)\n",
                   (unsigned long long)st.tokens, per_word,
                   st.tokens ? (double)st.bytes / (double)st.tokens : 0);
            printf("unknown        %llu tokens (%.4f%%), %llu words (%.4f%%)\n",
                   (unsigned long long)st.unk_tokens, 100 * unk_rate,
                   (unsigned long long)st.unk_words, 100 * unk_words);
        }
    }
done:
    tupe_tokenizer_free(t);
    tupe_vocab_free(v);
    return rc;
}

/* ---- train -------------------------------------------------------------------------------- */

static int cmd_train(tupe_cli *c, void *opts)
{
    const args *a = opts;
    tupe_vocabtrain_opts o;
    tupe_vocabtrain_defaults(&o, a->model == 1 ? TUPE_VOCAB_BPE : TUPE_VOCAB_WORDPIECE);
    if (a->vocab_size)
        o.vocab_size = (size_t)a->vocab_size;
    if (a->merges)
        o.merges = (size_t)a->merges;
    if (a->min_freq_set)
        o.min_frequency = (uint64_t)a->min_freq;
    if (a->limit_alpha >= 0)
        o.limit_alphabet = (size_t)a->limit_alpha;
    if (a->memory)
        o.memory = a->memory;
    o.lowercase = a->lowercase;
    o.strip_accents = a->strip_accents;
    o.invalid = a->invalid;
    o.docs = a->docs;
    o.keep_title = a->keep_title;
    o.threads = c->threads;
    o.quiet = c->quiet;
    o.verbose = c->verbose;
    if (o.kind == TUPE_VOCAB_BPE && o.vocab_size <= TUPE_BPE_NHEAD)
        return tupe_cli_usage(c, "--vocab-size %zu leaves no room beside the %d special tokens",
                              o.vocab_size, TUPE_BPE_NHEAD);
    if (o.kind == TUPE_VOCAB_BPE && strcmp(a->out, "-") == 0)
        return tupe_cli_usage(c, "--model bpe writes a directory: give it with -o");
    /* counting words needs whole lines, not whole documents: chunks may then cut anywhere,
     * which keeps them small whatever the documents' length */
    tupe_corpus *corpus;
    int rc = open_corpus(c, a->docs == TUPE_DOCS_WIKI || a->docs == TUPE_DOCS_JSONL ? a->docs
                                                                                  : TUPE_DOCS_LINE,
                         a->field, a->invalid, &corpus);
    if (rc)
        return rc;
    tupe_err e;
    tupe_vocabtrain_report rep;
    rc = tupe_vocabtrain(corpus, &o, a->out, &rep, &e);
    tupe_corpus_close(corpus);
    if (rc)
        return tupe_cli_error(c, &e);
    if (rep.pruned_words)
        tupe_cli_note(c,
                      "the word counts reached --memory: %llu rare words were pruned (counts up "
                      "to %llu)",
                      (unsigned long long)rep.pruned_words, (unsigned long long)rep.prune_max);
    if (o.kind == TUPE_VOCAB_WORDPIECE && rep.vocab_size > o.vocab_size)
        tupe_cli_note(c, "the special tokens and the alphabet alone are %zu entries, more than "
                      "--vocab-size %zu (--limit-alphabet keeps fewer characters)",
                      rep.vocab_size, o.vocab_size);
    if (c->verbose)
        tupe_cli_note(c, "%llu words (%llu distinct), %zu entries, %zu merges",
                      (unsigned long long)rep.words, (unsigned long long)rep.distinct,
                      rep.vocab_size, rep.merges);
    return 0;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a = {.out = "-", .lowercase = 1, .strip_accents = -1, .max_chars = 100, .limit_alpha = -1};
    if (parse(&c, &a)) {
        tupe_cli_end(&c);
        return c.exit_code;
    }
    c.threads = tupe_threads_apply(c.threads);
    int rc = tupe_cli_run(&c, &a);
    tupe_cli_end(&c);
    return rc;
}
