/* Outputs never destroy inputs: an output that is an input (by any name: another spelling, a
 * symbolic link, a hard link), lies inside an input directory, or contains an input it would
 * replace, is refused; what is merely next to an input is not. */
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/pathguard.h"
#include "unit.h"

static char *dup_path(const char *name) { return strdup(unit_path(name)); }

static int check1(const char *in, const char *out, int mode, tupe_err *e)
{
    const char *ins[1] = {in};
    return tupe_guard_check(ins, 1, out, mode, e);
}

static void same_file_by_any_name(void)
{
    char *a = dup_path("a.txt"), *d = dup_path("d"), *lnk = dup_path("link.txt"),
         *hard = dup_path("hard.txt");
    unit_write(a, "x\n", 2);
    mkdir(d, 0777);
    CHECK_INT(symlink(a, lnk), 0);
    CHECK_INT(link(a, hard), 0);
    char other[4200];
    snprintf(other, sizeof other, "%s/../a.txt", d);
    tupe_err e;
    CHECK_INT(check1(a, a, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "is the input");
    CHECK_INT(check1(a, other, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "(the same file)");
    CHECK_INT(check1(a, lnk, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_INT(check1(lnk, a, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_INT(check1(a, hard, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    /* a file next to the input is fine, and so is one that does not exist yet */
    CHECK_INT(check1(a, unit_path("b.txt"), TUPE_GUARD_REPLACE, &e), 0);
    free(a), free(d), free(lnk), free(hard);
}

static void inside_an_input_directory(void)
{
    char *d = dup_path("in"), *sub = dup_path("in/sub");
    mkdir(d, 0777);
    mkdir(sub, 0777);
    char f[4200], deep[4200], via[4200];
    snprintf(f, sizeof f, "%s/new.shard", d);
    snprintf(deep, sizeof deep, "%s/x/y/z", sub);
    tupe_err e;
    CHECK_INT(check1(d, f, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "lies inside the input");
    /* deeper, through directories that do not exist yet */
    CHECK_INT(check1(d, deep, TUPE_GUARD_INTO, &e), TUPE_ECANTCREAT);
    /* through a symbolic link to the input directory */
    char *ln = dup_path("to-in");
    CHECK_INT(symlink(d, ln), 0);
    snprintf(via, sizeof via, "%s/out.txt", ln);
    CHECK_INT(check1(d, via, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    /* the directory itself, written into */
    CHECK_INT(check1(d, d, TUPE_GUARD_INTO, &e), TUPE_ECANTCREAT);
    /* next to it: fine; "in/../out" is not inside "in" */
    char beside[4200];
    snprintf(beside, sizeof beside, "%s/../out", d);
    CHECK_INT(check1(d, beside, TUPE_GUARD_REPLACE, &e), 0);
    free(d), free(sub), free(ln);
}

static void containing_an_input(void)
{
    char *d = dup_path("run"), *in = dup_path("run/checkpoints/step-1");
    mkdir(d, 0777);
    mkdir(unit_path("run/checkpoints"), 0777);
    mkdir(in, 0777);
    tupe_err e;
    CHECK_INT(check1(in, d, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "contains the input");
    /* a directory that files are only added to may hold inputs (figures into ".") */
    CHECK_INT(check1(in, d, TUPE_GUARD_INTO, &e), 0);
    /* an input file through a symbolic link placed in the output directory */
    char *target = dup_path("elsewhere.txt"), *ln = dup_path("run/link.txt");
    unit_write(target, "t\n", 2);
    CHECK_INT(symlink(target, ln), 0);
    CHECK_INT(check1(ln, d, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    free(d), free(in), free(target), free(ln);
}

static void names_and_empty_paths(void)
{
    char *a = dup_path("named.txt");
    unit_write(a, "x\n", 2);
    tupe_guard *g = tupe_guard_new();
    tupe_err e;
    CHECK_INT(tupe_guard_input(g, a, "--vocab", &e), 0);
    CHECK_INT(tupe_guard_input(g, unit_path("missing"), "FILE", &e), 0); /* its open says so */
    CHECK_INT(tupe_guard_output(g, a, "--output", TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "is the input --vocab");
    CHECK_INT(tupe_guard_output(g, "", "--output", TUPE_GUARD_REPLACE, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "--output: an empty path");
    CHECK_INT(tupe_guard_input(g, "", "--data", &e), TUPE_EUSAGE);
    tupe_guard_free(g);
    free(a);
}

static void standard_streams(void)
{
    /* stdin redirected from a file is that file; stdout redirected to it is refused */
    char *a = dup_path("std.txt");
    unit_write(a, "x\n", 2);
    int saved_in = dup(0), saved_out = dup(1);
    int fd = open(a, O_RDWR);
    dup2(fd, 0);
    tupe_err e;
    CHECK_INT(check1("-", a, TUPE_GUARD_REPLACE, &e), TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "the input (stdin)");
    dup2(saved_in, 0);
    fflush(stdout);
    dup2(fd, 1);
    int rc = check1(a, "-", TUPE_GUARD_REPLACE, &e);
    dup2(saved_out, 1);
    CHECK_INT(rc, TUPE_ECANTCREAT);
    CHECK_HAS(e.msg, "(stdout): is the input");
    close(fd), close(saved_in), close(saved_out);
    free(a);
}

UNIT_MAIN(T(same_file_by_any_name), T(inside_an_input_directory), T(containing_an_input),
          T(names_and_empty_paths), T(standard_streams))
