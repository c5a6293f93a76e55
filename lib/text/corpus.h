/* A corpus: the members of one or more sources (input.h), read as chunks of whole documents
 * for parallel processing, and the documents and lines inside a chunk.
 *
 * Document framing (--docs):
 *   BLANK  a line that is empty or holds only spaces, tabs and CRs ends a document
 *   LINE   every line is a document (empty lines are empty documents)
 *   WIKI   WikiExtractor output: a document runs from a `<doc ...>` line to a `</doc>` line;
 *          the line after `<doc>` (the title) is dropped unless asked for; lines outside
 *          documents and blank lines are ignored; &lt; &gt; &amp; are unescaped.
 *   JSONL  JSON Lines: every line is a document, the text in one string field (jsonl.h); the
 *          chunks hand out that text in BLANK framing (a document's lines, then an empty
 *          line), and the scanner reads it as BLANK.
 * The end of every member also ends a document. A UTF-8 byte order mark at the start of a
 * member is dropped.
 *
 * Chunks end at a document boundary where they can (so that workers take whole documents)
 * and never span two members. With BLANK framing, a document of more than twice the target
 * size is cut at line ends into several chunks, flagged ends_inside / starts_inside, so that
 * long documents neither serialize the work nor need their whole text in memory; the
 * consumer joins the pieces. Otherwise the size is a target, not a limit, except that a
 * single document (LINE: a line) over TUPE_CHUNK_MAX is refused. */
#ifndef TUPE_CORPUS_H
#define TUPE_CORPUS_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

enum tupe_docs { TUPE_DOCS_BLANK = 0, TUPE_DOCS_LINE = 1, TUPE_DOCS_WIKI = 2, TUPE_DOCS_JSONL = 3 };

#define TUPE_CHUNK_MAX ((size_t)1 << 30)

typedef struct tupe_chunk {
    char *data;
    size_t len, cap;
    char *name;      /* the member (owned by the chunk) */
    uint64_t offset; /* byte offset of data[0] in the member (decompressed) */
    uint64_t index;  /* 0, 1, 2... in corpus order */
    int member_start;/* the first chunk of its member */
    int starts_inside, ends_inside; /* BLANK: a document runs into or out of this chunk */
} tupe_chunk;

typedef struct tupe_corpus tupe_corpus;

int tupe_corpus_open(tupe_corpus **c, const char *const *paths, int npaths, int docs, tupe_err *e);
/* JSONL: the field that holds the text (default TUPE_JSONL_FIELD, "text"); copied. */
int tupe_corpus_set_field(tupe_corpus *c, const char *field, tupe_err *e);
/* JSONL: what to do with bytes that are not UTF-8 (text/pretok.h's enum tupe_invalid; the
 * default is the error). Plain text keeps them for the tokenizer, which applies the same. */
void tupe_corpus_set_invalid(tupe_corpus *c, int invalid);
/* Fill ch with the next chunk of about `target` bytes: 1, 0 at the end of the corpus, or -1
 * on error (e says why). Empty members produce no chunk; an input whose members are all empty
 * is an error ("empty input"). */
int tupe_corpus_next(tupe_corpus *c, tupe_chunk *ch, size_t target, tupe_err *e);
/* For progress: bytes of the input files consumed so far, and their total size (0 if some
 * size is unknown). */
uint64_t tupe_corpus_consumed(const tupe_corpus *c);
uint64_t tupe_corpus_total(const tupe_corpus *c);
void tupe_corpus_close(tupe_corpus *c);

void tupe_chunk_free(tupe_chunk *ch);

/* Walking the documents of a chunk. */
typedef struct tupe_docscan {
    const char *p, *end;
    int docs, keep_title;
    int open_end;    /* the chunk ends inside a document: no TUPE_SCAN_END for it */
    int in_doc;      /* a document has started (and has lines, for BLANK) */
    int title_next;  /* WIKI: the next line is the title */
} tupe_docscan;

enum { TUPE_SCAN_DONE = 0, TUPE_SCAN_LINE = 1, TUPE_SCAN_END = 2 };

void tupe_docscan_init(tupe_docscan *d, const tupe_chunk *ch, int docs, int keep_title);
/* TUPE_SCAN_LINE with the next line of the current document (without its newline; a CR
 * before it is kept), TUPE_SCAN_END when the current document ends, TUPE_SCAN_DONE at the
 * end of the chunk (after the last TUPE_SCAN_END). A chunk that starts inside a document
 * continues it: its first TUPE_SCAN_END may come before any line. */
int tupe_docscan_next(tupe_docscan *d, const char **line, size_t *len);

/* WIKI: unescape &lt; &gt; &amp; (out has room for n bytes); returns the new length. */
size_t tupe_wiki_unescape(const char *s, size_t n, char *out);
/* The text of a line returned by tupe_docscan_next: the line itself, or for WIKI its unescaped
 * form in *buf (capacity *cap, grown as needed). *n receives the length; NULL when out of
 * memory. */
const char *tupe_docscan_text(const tupe_docscan *d, const char *line, size_t len, char **buf,
                              size_t *cap, size_t *n);

#endif
