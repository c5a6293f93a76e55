/* Corpus sources (input.h): plain text, compressed files (zstd, gzip, xz, bzip2, lz4) and
 * archives (tar, zip), told apart by their content. Every member is read (up to 8 MiB in all:
 * a small file may expand a lot); plain text must come back byte for byte as one member;
 * errors are bad data (a memory file never fails to read). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "text/input.h"

#define CAP ((size_t)8 << 20)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tupe_source *s;
    tupe_err e;
    if (tupe_source_open(&s, path, &e) != 0) {
        FUZZ_ERR(&e);
        close(fd);
        return 0;
    }
    const char *kind = tupe_source_kind(s);
    int text = strcmp(kind, "text") == 0;
    static uint8_t buf[1 << 16];
    size_t total = 0, members = 0, at = 0;
    const char *name;
    int r;
    while (total < CAP && (r = tupe_source_next(s, &name, &e)) == 1) {
        FUZZ_CHECK(name && name[0]);
        members++;
        for (;;) {
            size_t got;
            if (tupe_source_read(s, buf, sizeof buf, &got, &e) != 0) {
                FUZZ_ERR(&e);
                r = -1;
                break;
            }
            if (got == 0 || (total += got) >= CAP)
                break;
            if (text) {
                FUZZ_CHECK(at + got <= size && memcmp(buf, data + at, got) == 0);
                at += got;
            }
        }
        if (r < 0)
            break;
    }
    FUZZ_CHECK(r == 0 || r == 1 || r == -1);
    if (r < 0)
        FUZZ_ERR(&e);
    if (text && r == 0)
        FUZZ_CHECK(members == 1 && at == size);
    FUZZ_CHECK(tupe_source_consumed(s) <= size);
    tupe_source_close(s);
    close(fd);
    return 0;
}
