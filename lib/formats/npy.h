/* NumPy .npy files (format 1.0; 2.0 for headers over 64 KiB), the form numpy.load reads:
 * magic "\x93NUMPY", version, header length, a Python-dict header
 * {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with spaces to a
 * multiple of 64 bytes and ended by '\n', then the data in C order, little-endian. */
#ifndef TUPE_NPY_H
#define TUPE_NPY_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

#define TUPE_NPY_MAX_DIM 16

typedef struct tupe_npy {
    char descr[8];              /* "<f4", "<f2", "<u2", "<i4", "<i8", "<f8", "|u1", "|b1" */
    int ndim;
    uint64_t shape[TUPE_NPY_MAX_DIM];
    uint64_t numel;
    size_t itemsize;
    void *data;                 /* numel * itemsize bytes, malloc'd */
} tupe_npy;

/* Write `data` (C order) atomically. descr as above; ndim 0 is a scalar. */
int tupe_npy_write(const char *path, const char *descr, int ndim, const uint64_t *shape,
                   const void *data, tupe_err *e);
/* Read a file written by numpy (or us): little-endian, C order; the types above. */
int tupe_npy_read(const char *path, tupe_npy *out, tupe_err *e);
void tupe_npy_free(tupe_npy *a);

#endif
