#include "base/progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

double tupe_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

void tupe_fmt_amount(char *dst, size_t cap, double v, const char *unit)
{
    static const char *pre[] = {"", "k", "M", "G", "T", "P"};
    int i = 0;
    while (fabs(v) >= 1000.0 && i < 5) {
        v /= 1000.0;
        i++;
    }
    int bytes = strcmp(unit, "B") == 0;
    if (i == 0)
        snprintf(dst, cap, bytes ? "%.0f B" : "%.0f %s", v, unit);
    else if (bytes)
        snprintf(dst, cap, "%.*f %sB", v < 10 ? 2 : v < 100 ? 1 : 0, v, pre[i]);
    else
        snprintf(dst, cap, "%.*f%s %s", v < 10 ? 2 : v < 100 ? 1 : 0, v, pre[i], unit);
}

void tupe_fmt_duration(char *dst, size_t cap, double s)
{
    if (!(s >= 0) || s > 1e9) {
        snprintf(dst, cap, "?");
        return;
    }
    unsigned long t = (unsigned long)(s + 0.5);
    if (t >= 3600)
        snprintf(dst, cap, "%lu:%02lu:%02lu", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(dst, cap, "%lu:%02lu", t / 60, t % 60);
}

void tupe_progress_start_mode(tupe_progress *p, const char *label, uint64_t total,
                              const char *unit, int mode, FILE *fp)
{
    memset(p, 0, sizeof *p);
    p->fp = fp ? fp : stderr;
    if (mode == TUPE_PROGRESS_AUTO)
        mode = isatty(fileno(p->fp)) ? TUPE_PROGRESS_BAR : TUPE_PROGRESS_LINES;
    if (mode == TUPE_PROGRESS_BAR) {
        const char *term = getenv("TERM");
        if (term && strcmp(term, "dumb") == 0)
            mode = TUPE_PROGRESS_LINES;
    }
    p->mode = mode;
    snprintf(p->label, sizeof p->label, "%s", label);
    snprintf(p->unit, sizeof p->unit, "%s", unit ? unit : "");
    p->total = total;
    p->t0 = tupe_now();
    p->last_draw = p->t0;
    p->interval = tupe_progress_interval();
}

double tupe_progress_interval(void)
{
    const char *iv = getenv("TUPE_PROGRESS_INTERVAL");
    double s = iv && *iv ? atof(iv) : 10.0;
    return s < 0 ? 0 : s;
}

void tupe_progress_start(tupe_progress *p, const char *label, uint64_t total, const char *unit,
                         int quiet)
{
    tupe_progress_start_mode(p, label, total, unit,
                             quiet ? TUPE_PROGRESS_QUIET : TUPE_PROGRESS_AUTO, NULL);
}

static void draw(tupe_progress *p, double now)
{
    char done[32], tot[32], rate[40], eta[24], el[24];
    double dt = now - p->t0;
    double r = dt > 0 ? (double)p->done / dt : 0;
    tupe_fmt_amount(done, sizeof done, (double)p->done, p->unit);
    tupe_fmt_amount(rate, sizeof rate, r, p->unit);
    strncat(rate, "/s", sizeof rate - strlen(rate) - 1);
    tupe_fmt_duration(el, sizeof el, dt);
    if (p->total) {
        double f = (double)p->done / (double)p->total;
        if (f > 1)
            f = 1;
        tupe_fmt_amount(tot, sizeof tot, (double)p->total, p->unit);
        tupe_fmt_duration(eta, sizeof eta, r > 0 ? (double)(p->total - (p->done < p->total ? p->done : p->total)) / r : -1);
        if (p->mode == TUPE_PROGRESS_BAR) {
            char bar[31];
            int w = (int)(f * 30);
            for (int i = 0; i < 30; i++)
                bar[i] = i < w ? '#' : '.';
            bar[30] = 0;
            fprintf(p->fp, "\r\033[K%s [%s] %3.0f%% %s/%s %s ETA %s", p->label, bar, f * 100, done,
                    tot, rate, eta);
        } else {
            fprintf(p->fp, "%s: %.0f%% %s of %s, %s, %s elapsed, ETA %s\n", p->label, f * 100,
                    done, tot, rate, el, eta);
        }
    } else {
        if (p->mode == TUPE_PROGRESS_BAR)
            fprintf(p->fp, "\r\033[K%s %s %s %s", p->label, done, rate, el);
        else
            fprintf(p->fp, "%s: %s, %s, %s elapsed\n", p->label, done, rate, el);
    }
    if (p->mode == TUPE_PROGRESS_BAR)
        p->drawn = 1;
    fflush(p->fp);
    p->last_draw = now;
}

void tupe_progress_set(tupe_progress *p, uint64_t done)
{
    p->done = done;
    if (p->mode == TUPE_PROGRESS_QUIET)
        return;
    /* Read the clock only every 64th call unless the interval is zero (tests). */
    if (p->interval > 0 && (++p->calls & 63) != 0)
        return;
    double now = tupe_now();
    double wait = p->mode == TUPE_PROGRESS_BAR && p->interval > 0.1 ? 0.1 : p->interval;
    if (now - p->last_draw >= wait)
        draw(p, now);
}

void tupe_progress_add(tupe_progress *p, uint64_t delta) { tupe_progress_set(p, p->done + delta); }


void tupe_progress_finish(tupe_progress *p)
{
    if (p->mode == TUPE_PROGRESS_QUIET)
        return;
    double dt = tupe_now() - p->t0;
    char done[32], rate[40], el[24];
    tupe_fmt_amount(done, sizeof done, (double)p->done, p->unit);
    tupe_fmt_amount(rate, sizeof rate, dt > 0 ? (double)p->done / dt : 0, p->unit);
    tupe_fmt_duration(el, sizeof el, dt);
    if (p->mode == TUPE_PROGRESS_BAR)
        fprintf(p->fp, "\r\033[K");
    fprintf(p->fp, "%s: %s in %s (%s/s)\n", p->label, done, el, rate);
    fflush(p->fp);
    p->drawn = 0;
}

void tupe_progress_clear(tupe_progress *p)
{
    if (p->drawn) {
        fprintf(p->fp, "\r\033[K");
        fflush(p->fp);
        p->drawn = 0;
    }
}
