/* TensorBoard event files: the scalars of metrics.jsonl, readable by TensorBoard (and
 * tensorboard.backend.event_processing, tf.summary.summary_iterator, tbparse).
 *
 * The file is a sequence of TFRecords (length u64 LE, masked CRC-32C of the length, an Event
 * protobuf, masked CRC-32C of it; crc32c.h); the Events are encoded by protobuf-c from
 * lib/tfevent.proto, TensorFlow's event.proto / summary.proto subset. The first Event is the
 * file_version "brain.Event:2"; each scalar is an Event with wall_time, step and a Summary of
 * one Value {tag, simple_value}. Records are flushed as they are written, so TensorBoard shows
 * a run while it trains; a resumed run writes a new file beside the old ones, as TensorFlow
 * does, after the old ones were cut back to the step it resumes from (tupe_tfevents_trim_dir)
 * and starting with a SessionLog START at the first step it writes (tupe_tfevents_restart),
 * the marker on which TensorBoard discards what an earlier file holds from that step on: each
 * step is shown once. */
#ifndef TUPE_TFEVENTS_H
#define TUPE_TFEVENTS_H

#include <stdint.h>

#include "base/error.h"

/* What a directory of event files says in its .tupe-kind (base/outdir.h). */
#define TUPE_TFEVENTS_KIND "TensorBoard events"

typedef struct tupe_tfevents tupe_tfevents;

/* Create `dir` (and its parents) and a new file events.out.tfevents.SECONDS.HOST.PID in it: a
 * directory of event files, new (then marked as one, base/outdir.h) or of the user's; one of
 * another kind is TUPE_ECANTCREAT. */
int tupe_tfevents_open_dir(tupe_tfevents **w, const char *dir, tupe_err *e);
/* Create (replace) the file `path`; `wall` is the time of its first record (seconds since
 * the epoch). */
int tupe_tfevents_open(tupe_tfevents **w, const char *path, double wall, tupe_err *e);
const char *tupe_tfevents_path(const tupe_tfevents *w);

/* One scalar (stored as float32, TensorBoard's simple_value). */
int tupe_tfevents_scalar(tupe_tfevents *w, const char *tag, int64_t step, double value,
                         double wall, tupe_err *e);
/* Every number of a metrics.jsonl object as a scalar at its "step": keys are tags, nested
 * objects give "outer/inner" (tupe-glue's "dev/accuracy"); strings, booleans, null, arrays
 * and non-finite values (printf's nan and inf, which metrics.jsonl may hold) are left out. The line must be a JSON object with an integer "step". */
int tupe_tfevents_json(tupe_tfevents *w, const char *line, double wall, tupe_err *e);

/* A SessionLog START at `step`: TensorBoard drops the events of earlier files at that step and
 * later (a run resumed from step - 1, whose killed predecessor logged past its checkpoint). */
int tupe_tfevents_restart(tupe_tfevents *w, int64_t step, double wall, tupe_err *e);
/* Cut the event file `path` after the events of `step`: the records of later steps, and a torn
 * last record (a killed writer's), are dropped, the file rewritten atomically when anything
 * was. A file whose first record is not a TFRecord is left alone. */
int tupe_tfevents_trim_file(const char *path, int64_t step, tupe_err *e);
/* The same for every event file of dir (events.out.tfevents.*, regular files only). */
int tupe_tfevents_trim_dir(const char *dir, int64_t step, tupe_err *e);

/* Seconds since the epoch, for `wall`. */
double tupe_tfevents_now(void);

/* Flush and close; 0 or the write error. NULL is accepted. */
int tupe_tfevents_close(tupe_tfevents *w, tupe_err *e);

#endif
