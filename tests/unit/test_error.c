/* Error values: formatting with context, wrapping, and the status table. */
#include <errno.h>

#include "base/error.h"
#include "unit.h"

static void formats_line(void)
{
    tupe_err e;
    int rc = tupe_fail_line(&e, TUPE_EDATA, "glue/QQP/train.tsv", 97932, "expected %d fields, got %d", 6, 3);
    CHECK_INT(rc, TUPE_EDATA);
    CHECK_INT(e.code, TUPE_EDATA);
    CHECK_STR(e.msg, "glue/QQP/train.tsv:97932: expected 6 fields, got 3");
}

static void formats_line_col(void)
{
    tupe_err e;
    tupe_fail_linecol(&e, TUPE_EDATA, "model.json", 3, 14, "expected ','");
    CHECK_STR(e.msg, "model.json:3:14: expected ','");
}

static void formats_byte_offset(void)
{
    tupe_err e;
    tupe_fail_byte(&e, TUPE_EDATA, "corpus.txt", 1234567, "invalid UTF-8 (byte 0x%02x)", 0xff);
    CHECK_STR(e.msg, "corpus.txt: byte 1234567: invalid UTF-8 (byte 0xff)");
    tupe_fail_byte(&e, TUPE_EDATA, "-", 0, "empty");
    CHECK_STR(e.msg, "(stdin): byte 0: empty");
}

static void formats_tensor(void)
{
    tupe_err e;
    tupe_fail_tensor(&e, TUPE_EDATA, "ckpt/model.safetensors", "encoder.0.wq", "shape [%d], expected [%d]", 3, 4);
    CHECK_STR(e.msg, "ckpt/model.safetensors: tensor 'encoder.0.wq': shape [3], expected [4]");
}

static void formats_errno(void)
{
    tupe_err e;
    tupe_fail_errno(&e, TUPE_ENOINPUT, ENOENT, "%s", "missing.txt");
    CHECK_STR(e.msg, "missing.txt: No such file or directory");
    CHECK_INT(e.code, TUPE_ENOINPUT);
}

static void wrap_adds_context(void)
{
    tupe_err e;
    tupe_fail_line(&e, TUPE_EDATA, "vocab.txt", 7, "duplicate token \"the\"");
    int rc = tupe_err_wrap(&e, "loading vocabulary");
    CHECK_INT(rc, TUPE_EDATA);
    CHECK_STR(e.msg, "loading vocabulary: vocab.txt:7: duplicate token \"the\"");
}

static void long_messages_truncate_safely(void)
{
    tupe_err e;
    char big[4000];
    memset(big, 'x', sizeof big - 1);
    big[sizeof big - 1] = 0;
    tupe_fail_line(&e, TUPE_EDATA, big, 1, "%s", big);
    CHECK(strlen(e.msg) < sizeof e.msg);
    tupe_err_wrap(&e, "%s", big);
    CHECK(strlen(e.msg) < sizeof e.msg);
}

static void null_err_is_allowed(void)
{
    CHECK_INT(tupe_fail(NULL, TUPE_EIO, "ignored"), TUPE_EIO);
}

static void status_codes_are_sysexits(void)
{
    CHECK_INT(TUPE_EUSAGE, 2);
    CHECK_INT(TUPE_EDATA, 65);
    CHECK_INT(TUPE_ENOINPUT, 66);
    CHECK_INT(TUPE_ECANTCREAT, 73);
    CHECK_INT(TUPE_EIO, 74);
    CHECK_STR(tupe_status_name(TUPE_EDATA), "bad input data");
    tupe_err e;
    tupe_fail(&e, TUPE_EIO, "x");
    tupe_err_clear(&e);
    CHECK_INT(e.code, 0);
    CHECK_STR(e.msg, "");
}

UNIT_MAIN(T(formats_line), T(formats_line_col), T(formats_byte_offset), T(formats_tensor),
          T(formats_errno), T(wrap_adds_context), T(long_messages_truncate_safely),
          T(null_err_is_allowed), T(status_codes_are_sysexits))
