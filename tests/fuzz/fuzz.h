/* Shared by the fuzz targets (tests/fuzz/fuzz_*.c). Each target defines
 * LLVMFuzzerTestOneInput; it is linked either with libFuzzer (`make fuzz`, clang) or with
 * replay.c (`make check`: every committed corpus and regression input, through the same entry
 * point). A target never prints; a violated expectation aborts through FUZZ_CHECK, which both
 * drivers report as a crash. */
#ifndef TUPE_FUZZ_H
#define TUPE_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

void fuzz_fail(const char *file, int line, const char *what);
#define FUZZ_CHECK(c) ((c) ? (void)0 : fuzz_fail(__FILE__, __LINE__, #c))

/* An error a reader may answer bad input with: a message, and bad data (65) or, for a
 * hostile size, out of memory (1). */
struct tupe_err;
void fuzz_check_err(const struct tupe_err *e, const char *file, int line);
#define FUZZ_ERR(e) fuzz_check_err(e, __FILE__, __LINE__)

/* An anonymous in-memory file holding d[0..n), readable through `path` ("/proc/self/fd/N"),
 * for readers that take a path. Returns the descriptor (close it when done); aborts on failure. */
int fuzz_memfile(const void *d, size_t n, char *path, size_t cap);
/* A private directory for readers of directories, made once per process and removed at exit. */
const char *fuzz_dir(void);
/* Write d[0..n) to dir/name (replacing it); aborts on failure. path receives the full name. */
void fuzz_write(const char *dir, const char *name, const void *d, size_t n, char *path,
                size_t cap);

/* Reading an input as a sequence of small fields (for the targets' own parameters). */
typedef struct fuzz_in {
    const uint8_t *p;
    size_t n;
} fuzz_in;
unsigned fuzz_u8(fuzz_in *in);        /* 0 when exhausted */
uint32_t fuzz_u32(fuzz_in *in);

#endif
