/* A small unit-test harness: one binary per test file, one "ok"/"not ok" line per test (or
 * "ok ... # SKIP reason" for one that cannot run here), diagnostics as "#" lines. tests/run
 * counts the lines and prints the summary. */
#ifndef TUPE_UNIT_H
#define TUPE_UNIT_H

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct unit_test {
    const char *name;
    void (*fn)(void);
} unit_test;

extern int unit_fails;            /* checks failed in the current test */
extern const char *unit_prog;     /* this binary's name */

void unit_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* A fresh temporary directory for the current test (removed at exit). */
const char *unit_tmpdir(void);
/* Path inside unit_tmpdir() (static rotating buffers; copy if kept long). */
const char *unit_path(const char *name);
/* Root of the source tree and the shared data directory (from the environment). */
const char *unit_src(void);
const char *unit_data(void);
/* The path of REL in the shared data directory (static rotating buffers), or NULL when it is
 * not there, after marking the current test skipped: `if (!(p = unit_need_data("glue"))) return;` */
const char *unit_need_data(const char *rel);
/* Marks the current test skipped for the reason given (it should return without checking). */
void unit_skip(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Read a whole file (test helper); exits the test binary on failure. */
char *unit_slurp(const char *path, size_t *len);
void unit_write(const char *path, const void *buf, size_t len);
/* Decode a PNG with libpng (independently of what wrote it) to 8-bit RGB rows, top to bottom;
 * NULL when it does not decode. malloc'd. */
unsigned char *unit_png_rgb(const char *path, int *width, int *height);
int unit_main(const unit_test *tests, int argc, char **argv);

#define CHECK(c) do { if (!(c)) unit_fail(__FILE__, __LINE__, "check failed: %s", #c); } while (0)
#define CHECK_MSG(c, ...) do { if (!(c)) unit_fail(__FILE__, __LINE__, __VA_ARGS__); } while (0)
#define CHECK_INT(a, b) do { long long a_ = (long long)(a), b_ = (long long)(b); \
    if (a_ != b_) unit_fail(__FILE__, __LINE__, "%s == %lld, expected %s == %lld", #a, a_, #b, b_); } while (0)
#define CHECK_U64(a, b) do { unsigned long long a_ = (unsigned long long)(a), b_ = (unsigned long long)(b); \
    if (a_ != b_) unit_fail(__FILE__, __LINE__, "%s == 0x%llx, expected 0x%llx", #a, a_, b_); } while (0)
#define CHECK_STR(a, b) do { const char *a_ = (a), *b_ = (b); \
    if (!a_ || !b_ || strcmp(a_, b_) != 0) unit_fail(__FILE__, __LINE__, "%s == \"%s\", expected \"%s\"", #a, a_ ? a_ : "(null)", b_ ? b_ : "(null)"); } while (0)
#define CHECK_HAS(s, sub) do { const char *s_ = (s), *u_ = (sub); \
    if (!s_ || !strstr(s_, u_)) unit_fail(__FILE__, __LINE__, "%s == \"%s\" does not contain \"%s\"", #s, s_ ? s_ : "(null)", u_); } while (0)
#define CHECK_NEAR(a, b, tol) do { double a_ = (a), b_ = (b); \
    if (!(fabs(a_ - b_) <= (tol))) unit_fail(__FILE__, __LINE__, "%s == %.9g, expected %.9g (tolerance %g)", #a, a_, b_, (double)(tol)); } while (0)

#define UNIT_MAIN(...) \
    static const unit_test unit_tests_[] = {__VA_ARGS__, {NULL, NULL}}; \
    int main(int argc, char **argv) { return unit_main(unit_tests_, argc, argv); }
#define T(fn) {#fn, fn}

#endif
