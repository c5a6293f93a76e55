/* Error values that carry their context (file, line, byte offset, tensor name) up to cmd/.
 *
 * libtupe never prints and never exits: a function that can fail takes a `tupe_err *` and
 * returns one of the status codes below (0 on success). The message is complete by the time
 * it reaches cmd/, which prints it as "tupe-xxx: <message>" and exits with the code. */
#ifndef TUPE_ERROR_H
#define TUPE_ERROR_H

#include <stdarg.h>
#include <stdint.h>

/* Status codes double as exit codes; the same table is in every man page (EXIT STATUS). */
enum tupe_status {
    TUPE_OK = 0,
    TUPE_EFAIL = 1,       /* runtime failure not covered below (also: out of memory) */
    TUPE_EUSAGE = 2,      /* bad command line */
    TUPE_EDATA = 65,      /* malformed input data (sysexits EX_DATAERR) */
    TUPE_ENOINPUT = 66,   /* an input does not exist or cannot be opened (EX_NOINPUT) */
    TUPE_ECANTCREAT = 73, /* an output cannot be created (EX_CANTCREAT) */
    TUPE_EIO = 74,        /* read or write failed: disk full, device error (EX_IOERR) */
    TUPE_EINTR = 130      /* interrupted by a signal (SIGINT) */
};

#define TUPE_ERR_MSG 1024

typedef struct tupe_err {
    int code;                  /* a tupe_status */
    char msg[TUPE_ERR_MSG];    /* "file:line: what was expected", no program name, no newline */
} tupe_err;

#if defined(__GNUC__)
#define TUPE_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define TUPE_PRINTF(f, a)
#endif

/* Each sets *e (when e is not NULL) and returns code, so that `return tupe_fail(...)` works. */
int tupe_fail(tupe_err *e, int code, const char *fmt, ...) TUPE_PRINTF(3, 4);
/* "...: strerror(errnum)" appended. */
int tupe_fail_errno(tupe_err *e, int code, int errnum, const char *fmt, ...) TUPE_PRINTF(4, 5);
/* "path:line: message" (GNU style; line is 1-based). */
int tupe_fail_line(tupe_err *e, int code, const char *path, uint64_t line, const char *fmt, ...)
    TUPE_PRINTF(5, 6);
/* "path:line:column: message" (column 1-based, in bytes). */
int tupe_fail_linecol(tupe_err *e, int code, const char *path, uint64_t line, uint64_t col,
                      const char *fmt, ...) TUPE_PRINTF(6, 7);
/* "path: byte N: message" (N is the 0-based offset of the offending byte). */
int tupe_fail_byte(tupe_err *e, int code, const char *path, uint64_t offset, const char *fmt, ...)
    TUPE_PRINTF(5, 6);
/* "path: tensor 'name': message". */
int tupe_fail_tensor(tupe_err *e, int code, const char *path, const char *name, const char *fmt, ...)
    TUPE_PRINTF(5, 6);
/* Prefix an existing error with more context: "context: <old message>"; returns e->code. */
int tupe_err_wrap(tupe_err *e, const char *fmt, ...) TUPE_PRINTF(2, 3);
/* Reset to success. */
void tupe_err_clear(tupe_err *e);
/* Short name of a status code ("bad input data", "I/O error", ...). */
const char *tupe_status_name(int code);

/* The display form of a path: "-" is "(stdin)" for readers; NULL is "(unnamed)". */
const char *tupe_path_name(const char *path);

#endif
