/* NumPy .npy (npy.h), the arrays tupe-convert and tupe-attnviz read. Whatever the reader
 * accepts must be consistent (data size = elements x item size) and survive the writer:
 * written back and read again, the same dtype, shape and bytes. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "fuzz.h"
#include "formats/npy.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tupe_npy a;
    tupe_err e;
    int rc = tupe_npy_read(path, &a, &e);
    close(fd);
    if (rc != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    uint64_t numel = 1;
    for (int i = 0; i < a.ndim; i++)
        numel *= a.shape[i];
    FUZZ_CHECK(numel == a.numel && a.itemsize > 0 && a.data != NULL);
    FUZZ_CHECK(a.numel * a.itemsize <= size);
    char out[4200];
    snprintf(out, sizeof out, "%s/rt.npy", fuzz_dir());
    FUZZ_CHECK(tupe_npy_write(out, a.descr, a.ndim, a.shape, a.data, &e) == 0);
    tupe_npy b;
    FUZZ_CHECK(tupe_npy_read(out, &b, &e) == 0);
    FUZZ_CHECK(strcmp(a.descr, b.descr) == 0 && a.ndim == b.ndim && a.numel == b.numel);
    FUZZ_CHECK(memcmp(a.shape, b.shape, (size_t)a.ndim * sizeof a.shape[0]) == 0);
    FUZZ_CHECK(memcmp(a.data, b.data, (size_t)(a.numel * a.itemsize)) == 0);
    tupe_npy_free(&a);
    tupe_npy_free(&b);
    return 0;
}
