/* Corpus input through tokenization (input.h, corpus.h, tokenizer.h): a file of any packaging
 * (text, compressed, archive), framed into documents (--docs blank|line|wiki), checked for
 * UTF-8 and encoded with a small WordPiece vocabulary. Byte 0 picks the framing (bits 0-1),
 * the --invalid mode (bits 2-3), whether wiki titles are kept (bit 4) and a chunk size (bits
 * 5-7: 1 to 2^14 bytes); the rest is the file. The same file is encoded in small chunks and in
 * one 1 MiB chunk: the output, the counts and any error must not depend on where chunks end
 * (only what was written before an error may).
 * Invalid UTF-8 in a plain-text file with --invalid=error must be reported, and only then. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "text/corpus.h"
#include "fuzz.h"
#include "text/input.h"
#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocab.h"

static const char vocab_txt[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\nof\nand\na\nb\nc\nd\ne\nf\ng\nh\ni\nj\nk\nl\nm\nn\no\n"
    "p\nq\nr\ns\nt\nu\nv\nw\nx\ny\nz\n##a\n##b\n##c\n##d\n##e\n##s\n##ing\n##ed\n.\n,\n<\n>\n&\n"
    "0\n1\n2\n3\n##0\n##1\n\xc3\xa9\n##\xc3\xa9\n\xe4\xb8\xad\n";

static tupe_tokenizer *tok[3];
static tupe_vocab *vocab;

typedef struct sink_buf {
    uint8_t *p;
    size_t len, cap;
    uint64_t docs, ids;
} sink_buf;

static int sink(void *arg, const uint8_t *buf, size_t len, uint64_t docs, uint64_t ids, tupe_err *e)
{
    (void)e;
    sink_buf *s = arg;
    s->docs += docs;
    s->ids += ids;
    if (!len)
        return 0;
    if (s->len + len > s->cap) {
        s->cap = (s->len + len) * 2;
        s->p = realloc(s->p, s->cap);
    }
    memcpy(s->p + s->len, buf, len);
    s->len += len;
    return 0;
}


typedef struct result {
    int rc;
    tupe_err e;
    sink_buf out;
    tupe_tokstats st;
} result;

static void encode(const char *path, int mode, size_t chunk, result *r)
{
    memset(r, 0, sizeof *r);
    tupe_corpus *c;
    const char *paths[1] = {path};
    int docs = (mode & 3) % 3;
    if ((r->rc = tupe_corpus_open(&c, paths, 1, docs, &r->e)))
        return;
    tupe_encode_opts o = {docs, (mode >> 4) & 1, 1, docs != TUPE_DOCS_LINE, TUPE_ENC_BINARY, chunk};
    tupe_tok_header h;
    tupe_tok_header_init(&h, tupe_vocab_size(vocab), vocab->hash);
    r->rc = tupe_encode_corpus(tok[((mode >> 2) & 3) % 3], c, &o, &h, 1, sink, &r->out, &r->st, &r->e);
    tupe_corpus_close(c);
}

/* Whether the file is read as plain text, and if so whether it is valid UTF-8 (a byte order
 * mark at its start is dropped by the reader, and valid anyway). */
static int plain_valid_utf8(const char *path, const uint8_t *d, size_t n, int *valid)
{
    tupe_source *s;
    tupe_err e;
    if (tupe_source_open(&s, path, &e))
        return 0;
    int text = strcmp(tupe_source_kind(s), "text") == 0;
    tupe_source_close(s);
    *valid = 1;
    for (const uint8_t *p = d, *end = d + n; p < end;) {
        uint32_t cp;
        int k = tupe_utf8_decode(p, end, &cp);
        if (k < 0) {
            *valid = 0;
            break;
        }
        p += k;
    }
    return text;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_err e;
    if (!vocab) {
        FUZZ_CHECK(tupe_vocab_parse(&vocab, TUPE_VOCAB_WORDPIECE, vocab_txt, sizeof vocab_txt - 1,
                                    "vocab", &e) == 0);
        for (int i = 0; i < 3; i++) {
            tupe_tokenizer_opts o = {1, -1, i, 100, i == 1};
            FUZZ_CHECK(tupe_tokenizer_new(&tok[i], vocab, NULL, &o, &e) == 0);
        }
    }
    if (size < 1)
        return 0;
    int mode = data[0];
    size_t chunk = (size_t)1 << (2 * (mode >> 5));
    char path[64];
    int fd = fuzz_memfile(data + 1, size - 1, path, sizeof path);
    result a, b;
    encode(path, mode, chunk, &a);
    encode(path, mode, (size_t)1 << 20, &b);
    if (a.rc || b.rc) {
        /* what was written before the error depends on the chunks; the error does not */
        FUZZ_CHECK(a.rc == b.rc && strcmp(a.e.msg, b.e.msg) == 0);
        FUZZ_ERR(&a.e);
    } else {
        FUZZ_CHECK(a.out.len == b.out.len && (!a.out.len || memcmp(a.out.p, b.out.p, a.out.len) == 0));
        FUZZ_CHECK(a.out.docs == b.out.docs && a.out.ids == b.out.ids);
        FUZZ_CHECK(a.st.docs == b.st.docs && a.st.ids == b.st.ids && a.st.tokens == b.st.tokens &&
                   a.st.words == b.st.words && a.st.unk_tokens == b.st.unk_tokens);
        FUZZ_CHECK(a.out.docs == a.st.docs && a.out.ids == a.st.ids);
    }
    int valid;
    if (((mode >> 2) & 3) % 3 == TUPE_INVALID_ERROR && plain_valid_utf8(path, data + 1, size - 1, &valid)) {
        int utf8_error = a.rc == TUPE_EDATA && strstr(a.e.msg, "UTF-8") != NULL;
        FUZZ_CHECK(utf8_error == !valid || (!valid && a.rc == 0 && (mode & 3) % 3 == TUPE_DOCS_WIKI));
    }
    free(a.out.p), free(b.out.p);
    close(fd);
    return 0;
}
