/* Messages from the library to the user. The library never prints them: a module with
 * something to say hands each line (no newline) to the note function its caller gave it, and
 * the programs' function (tupe_cli_on_note) prints it on stderr, names the program, and
 * applies -q and -v. Without a function (NULL), nothing is said.
 *
 * The progress display of a long operation (progress.h) is drawn by that module itself, on
 * stderr and off under -q; a module that shows one clears it before a note. */
#ifndef TUPE_NOTE_H
#define TUPE_NOTE_H

#include <stdarg.h>

#include "base/error.h"

enum tupe_note_kind {
    TUPE_NOTE_INFO = 0,   /* a remark, shown as "prog: message" unless -q */
    TUPE_NOTE_DETAIL = 1, /* the same, only with -v */
    TUPE_NOTE_STATUS = 2  /* a progress or result line, shown as it is unless -q */
};

typedef void (*tupe_note_fn)(void *ctx, int kind, const char *msg);

/* Format a message and hand it to fn (nothing when fn is NULL). */
void tupe_note(tupe_note_fn fn, void *ctx, int kind, const char *fmt, ...) TUPE_PRINTF(4, 5);
void tupe_vnote(tupe_note_fn fn, void *ctx, int kind, const char *fmt, va_list ap);

#endif
