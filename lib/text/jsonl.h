/* JSON Lines corpora (--docs jsonl: The Pile, C4, OSCAR, RedPajama): one JSON object per
 * line, the document's text in one string field (default "text").
 *
 * A chunk of whole lines is turned into the text the blank-line framing reads: each
 * document's lines (the field split at "\n"), then an empty line. Lines of the text that are
 * empty or blank are left out (in plain text they would end the document), so a document
 * gives the ids the same text gives as a plain document. Empty lines of the input are
 * skipped; a line that is not a JSON object, lacks the field or whose field is not a string
 * is an error naming the file and line. What JSON allows is accepted in the fields the corpus
 * ignores, numbers jansson cannot hold too (an id above 2^63, 1e400). Bytes that are not
 * UTF-8 get tupe(7)'s answer, "FILE: byte N: invalid UTF-8", or --invalid's: replaced by
 * U+FFFD or left out, as in plain text. One line is parsed at a time (jansson), so memory is
 * bounded by the chunk, whatever the size of the file. */
#ifndef TUPE_JSONL_H
#define TUPE_JSONL_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define TUPE_JSONL_FIELD "text"

/* Convert data[0..len) (whole lines; the last may lack its newline) into *out (capacity *cap,
 * grown as needed), setting *out_len. `name`, `first_line` (1-based number of data's first
 * line) and `first_byte` (its offset in the file) place errors; `invalid` is text/pretok.h's
 * enum tupe_invalid. 0, or TUPE_EDATA / TUPE_EFAIL with e set. */
int tupe_jsonl_convert(const char *data, size_t len, const char *field, const char *name,
                       uint64_t first_line, uint64_t first_byte, int invalid, char **out,
                       size_t *cap, size_t *out_len, tupe_err *e);

#endif
