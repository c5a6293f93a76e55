/* The token stream: the pipe format between tupe-tokenize and tupe-shard (man tupe-formats(5)).
 *
 * Little-endian throughout. A 64-byte header, then one record per document, then an end
 * marker; several streams may be concatenated (cat a.tok b.tok) if their vocabularies match.
 *
 *   header   0  8  magic "TUPETOKS"
 *            8  4  version (1)
 *           12  4  bytes per id: 2 (vocabulary <= 65536) or 4
 *           16  4  vocabulary size (ids are < this)
 *           20  4  flags (0; reserved)
 *           24  8  vocabulary hash (XXH3-64, see tupe-formats(5))
 *           32 20  special ids, int32 each, -1 if absent: pad, unk, cls, sep, mask
 *           52  8  reserved (0)
 *           60  4  check: low 32 bits of XXH3-64 of bytes 0..59
 *   record   4  n, the number of ids (< 0xFFFFFFFF)
 *            4  check: low 32 bits of XXH3-64 (seed n) of the id bytes
 *          n*w  ids
 *   end      4  0xFFFFFFFF
 *            4  check: low 32 bits of XXH3-64 of the 16 bytes that follow
 *            8  documents in this stream
 *            8  ids in this stream
 *
 * Streamable: nothing needs a seek or a length up front. The reader names the byte offset
 * and document of any truncation, corruption or out-of-range id. */
#ifndef TUPE_TOKSTREAM_H
#define TUPE_TOKSTREAM_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/fileio.h"
#include "text/vocab.h"

#define TUPE_TOK_MAGIC "TUPETOKS"
#define TUPE_TOK_VERSION 1
#define TUPE_TOK_HEADER 64
#define TUPE_TOK_END 0xFFFFFFFFu
#define TUPE_TOK_MAX_DOC (1u << 28)   /* ids per document; longer is treated as corruption */

typedef struct tupe_tok_header {
    uint32_t version;
    uint32_t id_bytes;       /* 2 or 4 */
    uint32_t vocab_size;
    uint32_t flags;
    uint64_t vocab_hash;
    int32_t special[TUPE_SP_COUNT];
} tupe_tok_header;

/* A header for a vocabulary: picks id_bytes from the size; specials start at -1. */
void tupe_tok_header_init(tupe_tok_header *h, uint32_t vocab_size, uint64_t vocab_hash);
void tupe_tok_header_encode(const tupe_tok_header *h, unsigned char out[TUPE_TOK_HEADER]);
/* Validates magic, version, check, id width. `path` and `offset` are for messages. */
int tupe_tok_header_decode(tupe_tok_header *h, const unsigned char in[TUPE_TOK_HEADER],
                           const char *path, uint64_t offset, tupe_err *e);

/* ---- reading ---------------------------------------------------------------------------- */

typedef struct tupe_tokr tupe_tokr;

int tupe_tokr_open(tupe_tokr **r, const char *path, tupe_err *e);
/* Read from an already-open input (not closed by the reader). */
int tupe_tokr_from(tupe_tokr **r, tupe_in *in, tupe_err *e);
const tupe_tok_header *tupe_tokr_header(const tupe_tokr *r);
/* Next document: 1 with ids (valid until the next call), 0 at the end of all concatenated
 * streams, -1 on error. */
int tupe_tokr_next(tupe_tokr *r, const uint32_t **ids, size_t *n, tupe_err *e);
uint64_t tupe_tokr_docs(const tupe_tokr *r);
uint64_t tupe_tokr_tokens(const tupe_tokr *r);
/* Byte offset of the next unread byte (for messages). */
uint64_t tupe_tokr_offset(const tupe_tokr *r);
void tupe_tokr_close(tupe_tokr *r);

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct tupe_tokw tupe_tokw;

/* Writes the header. A file path is written atomically (visible only after close). */
int tupe_tokw_open(tupe_tokw **w, const char *path, const tupe_tok_header *h, tupe_err *e);
int tupe_tokw_doc(tupe_tokw *w, const uint32_t *ids, size_t n, tupe_err *e);
/* Append records already encoded with tupe_tok_record_encode (parallel encoders). */
int tupe_tokw_raw(tupe_tokw *w, const void *buf, size_t bytes, uint64_t docs, uint64_t tokens,
                  tupe_err *e);
/* End marker, flush, commit. Frees w. */
int tupe_tokw_close(tupe_tokw *w, tupe_err *e);
/* Leave no output (file) behind. Frees w. */
void tupe_tokw_abort(tupe_tokw *w);

/* Size in bytes of one record of n ids, and its encoding (ids must be < vocab_size). */
size_t tupe_tok_record_size(const tupe_tok_header *h, size_t n);
void tupe_tok_record_encode(const tupe_tok_header *h, const uint32_t *ids, size_t n, void *out);

#endif
