/* Progress on stderr: a redrawn bar with rate and ETA when stderr is a terminal, plain
 * periodic lines when it is not (logs, CI), nothing under -q.
 *
 * Updates are cheap (a clock read every 64 calls at most) and may come from one thread at a
 * time; callers that count from several threads add into an atomic and report from one. */
#ifndef TUPE_PROGRESS_H
#define TUPE_PROGRESS_H

#include <stdint.h>
#include <stdio.h>

enum tupe_progress_mode {
    TUPE_PROGRESS_AUTO = 0,  /* bar on a terminal, lines otherwise */
    TUPE_PROGRESS_QUIET,     /* nothing */
    TUPE_PROGRESS_BAR,       /* force the redrawn bar */
    TUPE_PROGRESS_LINES      /* force plain lines */
};

typedef struct tupe_progress {
    FILE *fp;
    int mode;
    char label[48];
    char unit[8];          /* "B" gives kB/MB/GB; anything else gives k/M/G <unit> */
    uint64_t total;        /* 0 = unknown */
    uint64_t done;
    double t0, last_draw;
    double interval;       /* seconds between plain lines (TUPE_PROGRESS_INTERVAL, default 10) */
    unsigned calls;
    int drawn;             /* a bar is on screen and needs a newline at the end */
} tupe_progress;

/* quiet: non-zero for -q. fp NULL means stderr. */
void tupe_progress_start(tupe_progress *p, const char *label, uint64_t total, const char *unit,
                         int quiet);
/* Same with an explicit mode and stream (tests, or a caller with its own policy). */
void tupe_progress_start_mode(tupe_progress *p, const char *label, uint64_t total,
                              const char *unit, int mode, FILE *fp);
void tupe_progress_set(tupe_progress *p, uint64_t done);
void tupe_progress_add(tupe_progress *p, uint64_t delta);
/* Final line: "label: 1.2 GB in 0:42 (29.3 MB/s)". */
void tupe_progress_finish(tupe_progress *p);
/* Erase a drawn bar, so that a line written next starts on a clean line (the bar comes back
 * at the next update). */
void tupe_progress_clear(tupe_progress *p);
/* Seconds between plain lines: TUPE_PROGRESS_INTERVAL, default 10 (also for callers that
 * report at that pace on their own). */
double tupe_progress_interval(void);

/* Helpers also used elsewhere: "1.23 GB", "45.6 k tok", "1:02:03". */
void tupe_fmt_amount(char *dst, size_t cap, double v, const char *unit);
void tupe_fmt_duration(char *dst, size_t cap, double seconds);
double tupe_now(void);   /* monotonic seconds */

#endif
