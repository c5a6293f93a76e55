#include "base/error.h"

#include <stdio.h>
#include <string.h>

static int vset(tupe_err *e, int code, const char *prefix, const char *fmt, va_list ap)
    TUPE_PRINTF(4, 0);
static int vset(tupe_err *e, int code, const char *prefix, const char *fmt, va_list ap)
{
    if (!e)
        return code;
    e->code = code;
    size_t n = 0;
    if (prefix) {
        n = strlen(prefix);
        if (n >= sizeof e->msg)
            n = sizeof e->msg - 1;
        memcpy(e->msg, prefix, n);
        e->msg[n] = 0;
    }
    vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
    return code;
}

int tupe_fail(tupe_err *e, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, NULL, fmt, ap);
    va_end(ap);
    return code;
}

int tupe_fail_errno(tupe_err *e, int code, int errnum, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, NULL, fmt, ap);
    va_end(ap);
    if (e) {
        size_t n = strlen(e->msg);
        snprintf(e->msg + n, sizeof e->msg - n, ": %s", strerror(errnum));
    }
    return code;
}

int tupe_fail_line(tupe_err *e, int code, const char *path, uint64_t line, const char *fmt, ...)
{
    char pre[512];
    snprintf(pre, sizeof pre, "%s:%llu: ", tupe_path_name(path), (unsigned long long)line);
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, pre, fmt, ap);
    va_end(ap);
    return code;
}

int tupe_fail_linecol(tupe_err *e, int code, const char *path, uint64_t line, uint64_t col,
                      const char *fmt, ...)
{
    char pre[512];
    snprintf(pre, sizeof pre, "%s:%llu:%llu: ", tupe_path_name(path), (unsigned long long)line,
             (unsigned long long)col);
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, pre, fmt, ap);
    va_end(ap);
    return code;
}

int tupe_fail_byte(tupe_err *e, int code, const char *path, uint64_t offset, const char *fmt, ...)
{
    char pre[512];
    snprintf(pre, sizeof pre, "%s: byte %llu: ", tupe_path_name(path), (unsigned long long)offset);
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, pre, fmt, ap);
    va_end(ap);
    return code;
}

int tupe_fail_tensor(tupe_err *e, int code, const char *path, const char *name, const char *fmt, ...)
{
    char pre[512];
    snprintf(pre, sizeof pre, "%s: tensor '%s': ", tupe_path_name(path), name ? name : "?");
    va_list ap;
    va_start(ap, fmt);
    vset(e, code, pre, fmt, ap);
    va_end(ap);
    return code;
}

int tupe_err_wrap(tupe_err *e, const char *fmt, ...)
{
    if (!e)
        return TUPE_EFAIL;
    char old[TUPE_ERR_MSG];
    memcpy(old, e->msg, sizeof old);
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(e->msg, sizeof e->msg, fmt, ap);
    va_end(ap);
    if (n < 0)
        n = 0;
    /* Append ": old" by hand, truncating to the buffer. */
    size_t at = (size_t)n < sizeof e->msg ? (size_t)n : sizeof e->msg - 1;
    const char *parts[2] = {": ", old};
    for (int p = 0; p < 2; p++)
        for (const char *c = parts[p]; *c && at < sizeof e->msg - 1; c++)
            e->msg[at++] = *c;
    e->msg[at] = 0;
    if (e->code == TUPE_OK)
        e->code = TUPE_EFAIL;
    return e->code;
}

void tupe_err_clear(tupe_err *e)
{
    if (e) {
        e->code = TUPE_OK;
        e->msg[0] = 0;
    }
}

const char *tupe_status_name(int code)
{
    switch (code) {
    case TUPE_OK: return "success";
    case TUPE_EFAIL: return "failure";
    case TUPE_EUSAGE: return "usage error";
    case TUPE_EDATA: return "bad input data";
    case TUPE_ENOINPUT: return "missing input";
    case TUPE_ECANTCREAT: return "cannot create output";
    case TUPE_EIO: return "I/O error";
    case TUPE_EINTR: return "interrupted";
    default: return "unknown status";
    }
}

const char *tupe_path_name(const char *path)
{
    if (!path)
        return "(unnamed)";
    if (path[0] == '-' && path[1] == 0)
        return "(stdin)";
    return path;
}
