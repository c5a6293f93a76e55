/* Progress: plain lines when not a terminal, nothing under -q, a bar when forced. */
#include <unistd.h>

#include "base/progress.h"
#include "unit.h"

static char *capture(int mode, uint64_t total, int steps, const char *unit)
{
    const char *p = unit_path("progress.txt");
    FILE *f = fopen(p, "w+");
    setenv("TUPE_PROGRESS_INTERVAL", "0", 1);
    tupe_progress pr;
    tupe_progress_start_mode(&pr, "encode", total, unit, mode, f);
    for (int i = 1; i <= steps; i++) {
        tupe_progress_set(&pr, (uint64_t)i * 1000000);
        usleep(1000);
    }
    tupe_progress_clear(&pr); /* a line of its own, as a note after a bar needs */
    if (mode != TUPE_PROGRESS_QUIET)
        fprintf(f, "a note %d\n", 7);
    tupe_progress_finish(&pr);
    fclose(f);
    unsetenv("TUPE_PROGRESS_INTERVAL");
    return unit_slurp(p, NULL);
}

static void lines_when_not_a_terminal(void)
{
    char *s = capture(TUPE_PROGRESS_LINES, 4000000, 4, "B");
    CHECK_HAS(s, "encode: 25% 1.00 MB of 4.00 MB");
    CHECK_HAS(s, "ETA");
    CHECK_HAS(s, "a note 7\n");
    CHECK_HAS(s, "encode: 4.00 MB in 0:00 (");
    CHECK(strchr(s, '\r') == NULL && strchr(s, '\033') == NULL);
    free(s);
    s = capture(TUPE_PROGRESS_LINES, 0, 2, "tok");
    CHECK_HAS(s, "encode: 1.00M tok, ");
    CHECK_HAS(s, "elapsed");
    free(s);
}

static void auto_mode_on_a_file_is_lines(void)
{
    char *s = capture(TUPE_PROGRESS_AUTO, 2000000, 2, "B");
    CHECK_HAS(s, "encode: 50%");
    CHECK(strchr(s, '\r') == NULL);
    free(s);
}

static void quiet_is_silent(void)
{
    char *s = capture(TUPE_PROGRESS_QUIET, 4000000, 4, "B");
    CHECK_STR(s, "");
    free(s);
}

static void bar_redraws_in_place(void)
{
    char *s = capture(TUPE_PROGRESS_BAR, 4000000, 4, "B");
    CHECK_HAS(s, "\r\033[Kencode [");
    CHECK_HAS(s, "100%");
    free(s);
}

static void amounts_and_durations(void)
{
    char b[64];
    tupe_fmt_amount(b, sizeof b, 999, "B");
    CHECK_STR(b, "999 B");
    tupe_fmt_amount(b, sizeof b, 1234567, "B");
    CHECK_STR(b, "1.23 MB");
    tupe_fmt_amount(b, sizeof b, 45600, "tok");
    CHECK_STR(b, "45.6k tok");
    tupe_fmt_amount(b, sizeof b, 2.5e12, "B");
    CHECK_STR(b, "2.50 TB");
    tupe_fmt_duration(b, sizeof b, 62);
    CHECK_STR(b, "1:02");
    tupe_fmt_duration(b, sizeof b, 3723);
    CHECK_STR(b, "1:02:03");
    tupe_fmt_duration(b, sizeof b, -1);
    CHECK_STR(b, "?");
}

UNIT_MAIN(T(lines_when_not_a_terminal), T(auto_mode_on_a_file_is_lines), T(quiet_is_silent),
          T(bar_redraws_in_place), T(amounts_and_durations))
