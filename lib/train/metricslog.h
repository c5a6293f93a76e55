/* The metrics of a run: metrics.jsonl (one JSON object per line) and, unless turned off, the
 * same values as TensorBoard scalars (tfevents.h) in a directory of event files, by default
 * RUN/tensorboard beside metrics.jsonl. tupe-pretrain and tupe-glue log through it.
 *
 * A line is written and flushed to both at once. A failure to write the event file does not
 * stop the run: the event file is closed, metrics.jsonl goes on, and tupe_mlog_close returns
 * the error, so that the run ends with it. */
#ifndef TUPE_METRICSLOG_H
#define TUPE_METRICSLOG_H

#include "base/error.h"

typedef struct tupe_mlog tupe_mlog;

/* Open `jsonl` (append: keep its lines; else replace them) and, when tbdir is not NULL, a new
 * event file in tbdir (created as needed); with tb_fresh, the event files already there are
 * removed first (a new run in the same run directory, like metrics.jsonl). */
int tupe_mlog_open(tupe_mlog **m, const char *jsonl, int append, const char *tbdir, int tb_fresh,
                   tupe_err *e);
/* One record: a JSON object with an integer "step", without its newline. */
void tupe_mlog_line(tupe_mlog *m, const char *json);
/* The event file written, or NULL. */
const char *tupe_mlog_events(const tupe_mlog *m);
/* Close both; 0, or the first write error. NULL is accepted. */
int tupe_mlog_close(tupe_mlog *m, tupe_err *e);

#endif
