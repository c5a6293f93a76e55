/* Run directories: what a training program writes under -o (tupe-pretrain train, tupe-glue
 * train and each run of a sweep), and the one set of rules for them:
 *
 *   - an existing -o is written into only when it is empty or a run of the same kind (its
 *     .tupe-kind says so, base/outdir.h); a directory of something else (a Hugging Face model,
 *     a shard directory, a run of the other kind) is refused untouched with TUPE_ECANTCREAT,
 *     before any data is read;
 *   - one process writes a run: it holds the directory's lock (.tupe-lock) from
 *     tupe_rundir_claim (or tupe_rundir_begin) to tupe_rundir_end, and a second gets
 *     TUPE_ECANTCREAT naming its PID;
 *   - a run that starts removes the file that marks a finished run (the kind's `done`), so
 *     that a run that then fails never looks finished;
 *   - metrics.jsonl holds one JSON object per line, each starting {"step":N: a new run starts
 *     it empty, a resumed run keeps the lines up to the step it resumes from (a killed run
 *     may have logged past its last checkpoint);
 *   - every line of metrics.jsonl is also written, as TensorBoard scalars (formats/tfevents.h),
 *     to an event file in tensorboard/ (or a directory of the caller's, or nowhere): both
 *     are written by the one call, so they cannot differ. A new run removes the event files
 *     of tensorboard/ (TensorBoard would draw them as part of it); a resumed run, or a
 *     directory of the caller's, gets a file beside those there. A resumed run first cuts
 *     them back to its step, as metrics.jsonl: all of tensorboard/, and in a directory of the
 *     caller's (which may hold other runs' files) those it listed in .tupe-events; its new
 *     file starts with TensorBoard's SessionLog START marker. A failed write of the event
 *     file stops the event file, not the run: metrics.jsonl goes on, and tupe_rundir_end
 *     returns the error;
 *   - checkpoints/step-NNNNNNNN/ count only once complete (their model file in place): the
 *     temporary directories of a killed save (".step-....tmp....") are never listed, and
 *     pruning removes them.
 *
 * A run is written between tupe_rundir_claim and tupe_rundir_end, by one process (rank 0). */
#ifndef TUPE_RUNDIR_H
#define TUPE_RUNDIR_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/pathguard.h"

typedef struct tupe_run_kind {
    const char *kind;       /* what its .tupe-kind says: "pre-training run", "fine-tuning run" */
    const char *done;       /* the file that marks a finished run, or NULL */
} tupe_run_kind;

extern const tupe_run_kind tupe_run_pretrain;  /* checkpoints/, metrics.jsonl */
extern const tupe_run_kind tupe_run_finetune;  /* metrics.jsonl, best/, results.json (done) */

/* 0 when dir is missing (it is created later), empty, or a run of kind k; TUPE_ECANTCREAT
 * with the reason otherwise. Reads only. `adopt`: a directory without .tupe-kind that holds
 * this kind's checkpoints (checkpoints/step-N/: a run from before kinds were recorded, being
 * resumed) counts as one. */
int tupe_rundir_check(const char *dir, const tupe_run_kind *k, int adopt, tupe_err *e);

/* Where a run is written, and what may not change under it. */
typedef struct tupe_rundir_spec {
    const char *dir;
    const tupe_run_kind *k;
    int adopt;                  /* see tupe_rundir_check */
    const char *tensorboard;    /* the event files' directory; NULL: dir/tensorboard */
    int no_tensorboard;         /* none */
    const tupe_guard *inputs;   /* the program's inputs (base/pathguard.h), or NULL */
} tupe_rundir_spec;

typedef struct tupe_rundir tupe_rundir;

/* Before the work: check dir and the event files' directory (kinds, parents: base/outdir.h)
 * and, when dir exists, take it now (its lock, its kind), so that a second writer is refused
 * before anything is read. Nothing is created: a run that fails before it starts leaves no
 * directory behind (*rd stays NULL when dir does not exist). */
int tupe_rundir_claim(tupe_rundir **rd, const tupe_rundir_spec *s, tupe_err *e);
/* Start writing the run: take dir if tupe_rundir_claim did not (creating it), and check it
 * again under the lock: check, lock, check again. Its kind and parents are checked anew, the
 * directory (and the event files') against the inputs again (a -o replaced by a link since
 * the command line was read), and its checkpoints against what the run was started from: a
 * new run (resume_step < 0) finds none, a resumed run finds resume_step the latest; anything
 * else means another process wrote the directory in between (TUPE_ECANTCREAT, nothing
 * touched). Then remove the done marker, and open metrics.jsonl: empty for a new run, else
 * cut after the lines of resume_step; and its TensorBoard copy (none with no_tensorboard). */
int tupe_rundir_begin(tupe_rundir **rd, const tupe_rundir_spec *s, int64_t resume_step,
                      tupe_err *e);
/* One metrics line, a JSON object starting {"step":N, without its newline: appended to
 * metrics.jsonl and the event file, both flushed at once. NULL rd: nothing (the other ranks). */
void tupe_rundir_metric(tupe_rundir *rd, const char *fmt, ...) TUPE_PRINTF(2, 3);
/* Close both and release the lock; 0, or the first error writing either. NULL is accepted. */
int tupe_rundir_end(tupe_rundir *rd, tupe_err *e);

/* ---- checkpoints/step-NNNNNNNN/ ----------------------------------------------------------- */

void tupe_rundir_checkpoint(char *dst, size_t cap, const char *dir, int64_t step);
/* The latest complete checkpoint of a run (its path, "" and step 0 when none). */
int tupe_rundir_latest(const char *dir, char *path, size_t cap, int64_t *step, tupe_err *e);
/* Keep the newest `keep_last` checkpoints and the steps listed in keep[n_keep]; remove the
 * others and the temporary directories of killed saves. Best effort. */
void tupe_rundir_prune(const char *dir, int keep_last, const int64_t *keep, int n_keep);

#endif
