/* .npy: files saved by numpy load here, and our writer gives numpy's bytes. */
#include "formats/npy.h"
#include "unit.h"

static double fv(int i) { return (i * 7 % 23) - 11 + 0.25 * (i % 4); }

static const char *fix(const char *name)
{
    static char p[4096];
    snprintf(p, sizeof p, "%s/tests/fixtures/npy/%s", unit_src(), name);
    return p;
}

static void same_bytes(const char *ours, const char *name)
{
    size_t a, b;
    char *x = unit_slurp(ours, &a), *y = unit_slurp(fix(name), &b);
    CHECK_MSG(a == b && memcmp(x, y, a) == 0, "%s differs from numpy's (%zu vs %zu bytes)", name, a, b);
    free(x), free(y);
}

static void reads_and_writes_numpy_files(void)
{
    tupe_npy a;
    tupe_err e;
    CHECK_INT(tupe_npy_read(fix("f4_2x3x4.npy"), &a, &e), 0);
    CHECK_STR(a.descr, "<f4");
    CHECK(a.ndim == 3 && a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 4 && a.numel == 24);
    for (int i = 0; i < 24; i++)
        CHECK_NEAR(((float *)a.data)[i], fv(i), 0);
    CHECK_INT(tupe_npy_write(unit_path("a.npy"), "<f4", 3, a.shape, a.data, &e), 0);
    same_bytes(unit_path("a.npy"), "f4_2x3x4.npy");
    tupe_npy_free(&a);

    CHECK_INT(tupe_npy_read(fix("i8_5.npy"), &a, &e), 0);
    CHECK(a.ndim == 1 && a.numel == 5 && ((int64_t *)a.data)[3] == 21 % 23);
    CHECK_INT(tupe_npy_write(unit_path("b.npy"), "<i8", 1, a.shape, a.data, &e), 0);
    same_bytes(unit_path("b.npy"), "i8_5.npy");
    tupe_npy_free(&a);

    CHECK_INT(tupe_npy_read(fix("f2_scalar.npy"), &a, &e), 0);
    CHECK(a.ndim == 0 && a.numel == 1 && a.itemsize == 2);
    CHECK_INT(tupe_npy_write(unit_path("c.npy"), "<f2", 0, NULL, a.data, &e), 0);
    same_bytes(unit_path("c.npy"), "f2_scalar.npy");
    tupe_npy_free(&a);

    static const char *others[][2] = {{"u2_7.npy", "<u2"}, {"f4_0.npy", "<f4"}, {"f8_3x2.npy", "<f8"}, {"u1_4.npy", "|u1"}};
    for (int k = 0; k < 4; k++) {
        CHECK_INT(tupe_npy_read(fix(others[k][0]), &a, &e), 0);
        CHECK_STR(a.descr, others[k][1]);
        CHECK_INT(tupe_npy_write(unit_path("d.npy"), a.descr, a.ndim, a.shape, a.data, &e), 0);
        same_bytes(unit_path("d.npy"), others[k][0]);
        tupe_npy_free(&a);
    }
}

static void refuses_malformed(void)
{
    size_t n;
    char *good = unit_slurp(fix("f4_2x3x4.npy"), &n);
    const char *p = unit_path("bad.npy");
    tupe_npy a;
    tupe_err e;
    unit_write(p, good, n - 4);
    CHECK_INT(tupe_npy_read(p, &a, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "data is 92 bytes, shape and dtype need 96");
    unit_write(p, "NUMPY", 5);
    CHECK_INT(tupe_npy_read(p, &a, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "bad.npy: byte 0: not a .npy file");
    char *x = malloc(n);
    memcpy(x, good, n);
    memcpy(x + 10 + 11, ">f4", 3);
    unit_write(p, x, n);
    CHECK_INT(tupe_npy_read(p, &a, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "unsupported dtype '>f4'");
    memcpy(x, good, n);
    memcpy(strstr(x + 10, "False"), "True ", 5);
    unit_write(p, x, n);
    CHECK_INT(tupe_npy_read(p, &a, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "Fortran-order");
    memcpy(x, good, n);
    x[8] = (char)0xff;
    x[9] = (char)0xff;
    unit_write(p, x, n);
    CHECK_INT(tupe_npy_read(p, &a, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "runs past the end");
    free(x), free(good);
}

UNIT_MAIN(T(reads_and_writes_numpy_files), T(refuses_malformed))
