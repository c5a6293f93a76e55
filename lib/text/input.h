/* Corpus sources: one path (or "-" for stdin) read as a sequence of members, whatever its
 * packaging. The content decides, not the file name:
 *   plain text                      one member, read directly
 *   zstd, gzip, xz, bzip2, lz4      one member, decompressed through libarchive (which
 *                                   streams zstd with libzstd)
 *   tar (also compressed), zip      every regular file in archive order, through libarchive
 * A member's name is the path, or "path:member" inside an archive. Errors say which member and
 * what went wrong: truncated or corrupt data is TUPE_EDATA, a failed read TUPE_EIO, a missing
 * file TUPE_ENOINPUT. */
#ifndef TUPE_INPUT_H
#define TUPE_INPUT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct tupe_source tupe_source;

int tupe_source_open(tupe_source **s, const char *path, tupe_err *e);
/* Advance to the next member: 1 (its display name in *name, valid until the next call), 0 when
 * there are no more, or an error code < 0 (e says why). */
int tupe_source_next(tupe_source *s, const char **name, tupe_err *e);
/* Read from the current member: 0 with *got bytes (0 at the member's end), or an error code. */
int tupe_source_read(tupe_source *s, void *buf, size_t cap, size_t *got, tupe_err *e);
/* Bytes of the underlying file consumed so far. */
uint64_t tupe_source_consumed(const tupe_source *s);
/* What was detected: "text", "compressed" (one compressed file) or "archive" (tar, zip). */
const char *tupe_source_kind(const tupe_source *s);
void tupe_source_close(tupe_source *s);

#endif
