/* What an output directory is, and who is writing it.
 *
 * Kinds. Every directory a tupe program writes holds a file ".tupe-kind" whose one line names
 * what the directory is ("pre-training run", "shard directory", "checkpoint"...), written only
 * by the program that makes that kind. A program replaces, or writes into, an existing
 * directory only when that file says it is the program's own kind, so that a mistyped -o
 * never deletes or mixes into a tree of another kind: not config.json or another file that
 * several kinds share. Two modes:
 *   TUPE_OUTDIR_REPLACE  the directory is replaced as a whole, or is a run whose files are
 *                        rewritten: it must be absent, empty, or marked with this kind;
 *   TUPE_OUTDIR_INTO     files are added to it (figures, predictions): it must be absent or
 *                        not marked with another kind (a plain directory of the user's, such
 *                        as ".", is fine).
 * A directory written before kinds were recorded has no ".tupe-kind": it is refused with a
 * message saying so and what to do (remove it, choose another output, or resume it where the
 * program knows how to recognise its own: tupe_outdir_mark then adopts it). Refusing is the
 * safe side: the old test, a file that several kinds hold, is how whole runs were lost.
 *
 * Locks. A program that writes a directory over a long time (a training run, a sweep) holds
 * an exclusive flock on its ".tupe-lock" for the life of the run, the file holding its PID;
 * a second process gets TUPE_ECANTCREAT naming that PID. The lock goes with the process,
 * however it ends; the file stays (it is not a sign of a live run, the flock is). */
#ifndef TUPE_OUTDIR_H
#define TUPE_OUTDIR_H

#include <stddef.h>

#include "base/error.h"

#define TUPE_KIND_FILE ".tupe-kind"
#define TUPE_LOCK_FILE ".tupe-lock"
/* The names a directory replaced as a whole was written with (fileio.h, tupe_dirtx), one a
 * line: what else is in it when it is replaced again is the user's and is kept. */
#define TUPE_FILES_FILE ".tupe-files"

enum { TUPE_OUTDIR_REPLACE = 0, TUPE_OUTDIR_INTO = 1 };

/* Whether an output of `kind` may be put at `path` (see above): 0, or TUPE_ECANTCREAT with a
 * message that names what the directory is and what to do. A path that exists and is not a
 * directory is refused too, and so is a path inside another output that cannot hold it,
 * found through every parent (links resolved): nothing lies inside a directory that is
 * replaced or pruned as a whole (a checkpoint, a Hugging Face model, shards, a vocabulary),
 * and a run never lies inside another run (a sweep holds its fine-tuning runs); runs and the
 * directories that files are added to (figures, predictions, event files) hold the rest. */
int tupe_outdir_check(const char *path, const char *kind, int mode, tupe_err *e);
/* A directory that files of `kind` are to be added to (TUPE_OUTDIR_INTO): checked, created
 * when missing, and marked with the kind when it is new or empty; a plain directory of the
 * user's (".") is left unmarked. */
int tupe_outdir_into(const char *dir, const char *kind, tupe_err *e);
/* The nearest directory above path (not path itself) that records a kind: 1 with its
 * resolved path and kind, 0 when none does. */
int tupe_outdir_enclosing(const char *path, char *dir, size_t dcap, char *kind, size_t kcap);
/* Undo tupe_outdir_into for a directory it made when the work then failed: removed when it
 * holds nothing but tupe's bookkeeping (its .tupe-kind, a lock), else left as it is. */
void tupe_outdir_discard(const char *dir);
/* Record `kind` in DIR/.tupe-kind (atomically; DIR exists). */
int tupe_outdir_mark(const char *dir, const char *kind, tupe_err *e);
/* The kind recorded in dir: 1 (copied to kind), 0 when there is none, -1 when ".tupe-kind" is
 * unreadable or not a kind line. */
int tupe_outdir_kind(const char *dir, char *kind, size_t cap);

typedef struct tupe_dirlock tupe_dirlock;

/* Take DIR's lock (DIR exists) without waiting. Held by another process: TUPE_ECANTCREAT
 * "DIR: in use: process PID is writing it ...". */
int tupe_dirlock_take(tupe_dirlock **l, const char *dir, tupe_err *e);
/* Release it (NULL is a no-op). */
void tupe_dirlock_release(tupe_dirlock *l);

#endif
