/* Outputs never destroy inputs. An output path is refused (TUPE_ECANTCREAT) when it is one of
 * the run's inputs, lies inside an input directory, or (when it is replaced as a whole)
 * contains an input. Paths are compared by identity, the device and inode of the path and of
 * each of its existing ancestors, both as spelled and with symbolic links resolved, so that
 * another spelling ("./a", "dir/../a"), a symbolic link or a hard link of the same file is
 * caught as surely as the same string.
 *
 * "-" as an input is standard input, as an output standard output: each counts when it is a
 * regular file (`prog x.txt >> x.txt` would read what it writes). An input that does not exist
 * is ignored here: opening it reports it. An empty path is a usage error (TUPE_EUSAGE). */
#ifndef TUPE_PATHGUARD_H
#define TUPE_PATHGUARD_H

#include "base/error.h"

typedef struct tupe_guard tupe_guard;

/* How an output is written. */
enum tupe_guard_mode {
    TUPE_GUARD_REPLACE = 0, /* a file or directory put in place as a whole (what was there goes) */
    TUPE_GUARD_INTO = 1,    /* a directory that files are added to (figures, predictions) */
    TUPE_GUARD_SAME = 2     /* only never the same file (standard output, which may well be
                               redirected into an input directory: a report, say) */
};

tupe_guard *tupe_guard_new(void);
void tupe_guard_free(tupe_guard *g);

/* Record an input; `what` names it in messages ("--vocab", "FILE"), or NULL. 0, or TUPE_EUSAGE
 * for an empty path, or TUPE_EFAIL when out of memory. */
int tupe_guard_input(tupe_guard *g, const char *path, const char *what, tupe_err *e);

/* Check an output (named `what` in messages: "--output", or NULL) against every input. */
int tupe_guard_output(const tupe_guard *g, const char *path, const char *what, int mode,
                      tupe_err *e);

/* The two checks in one call, for a program with one output and a list of inputs. */
int tupe_guard_check(const char *const *inputs, int ninputs, const char *output, int mode,
                     tupe_err *e);

#endif
