/* Non-finite numbers in a line of JSON that printf wrote.
 *
 * A C program that logs a diverged loss with "%f" writes nan, -nan, inf or -inf, which are not
 * JSON: a reader (Python's json, jq, pandas) then refuses the whole file. Every such number
 * outside a string becomes null, which every reader takes, and the rest of the line is kept
 * byte for byte. */
#ifndef TUPE_JSONNUM_H
#define TUPE_JSONNUM_H

/* A new string (the caller frees it), or NULL when out of memory. */
char *tupe_jsonnum_finite(const char *line);

#endif
