#include "base/note.h"

#include <stdio.h>
#include <stdlib.h>

void tupe_vnote(tupe_note_fn fn, void *ctx, int kind, const char *fmt, va_list ap)
{
    if (!fn)
        return;
    char *msg;
    if (vasprintf(&msg, fmt, ap) < 0)
        return; /* out of memory: a message is not worth failing for */
    fn(ctx, kind, msg);
    free(msg);
}

void tupe_note(tupe_note_fn fn, void *ctx, int kind, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tupe_vnote(fn, ctx, kind, fmt, ap);
    va_end(ap);
}
