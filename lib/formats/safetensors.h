/* safetensors read and write (https://github.com/huggingface/safetensors format):
 *
 *   u64 N (little-endian) | N bytes of JSON header | data section
 *
 * The header maps tensor names to {"dtype", "shape", "data_offsets": [begin, end)} relative
 * to the data section, plus an optional "__metadata__" object of string values. Reading is
 * strict, as the reference implementation is: N <= 100,000,000; the header is a JSON object
 * starting with '{' (trailing spaces allowed), without duplicate keys; dtypes known; shapes
 * of non-negative integers; end - begin equal to the element count times the element size;
 * tensors tile the data section exactly (no gap, no overlap, nothing after the last one).
 *
 * Writing follows the reference writer byte for byte: compact JSON, "__metadata__" first,
 * tensors ordered by dtype rank (widest first) then name, header padded with spaces to a
 * multiple of 8. Files we write load in Python `safetensors` unchanged. */
#ifndef TUPE_SAFETENSORS_H
#define TUPE_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "base/error.h"

#define TUPE_ST_MAX_HEADER 100000000u
#define TUPE_ST_MAX_DIM 16
/* Metadata key under which tupe records an XXH3 of the data section (optional). */
#define TUPE_ST_CHECK_KEY "tupe.data_xxh3"

typedef struct tupe_st_tensor {
    const char *name;
    int dtype;                         /* enum tupe_dtype */
    int ndim;
    uint64_t shape[TUPE_ST_MAX_DIM];
    uint64_t numel;
    uint64_t begin, end;               /* offsets in the data section */
    const void *data;                  /* points into the mapped file */
} tupe_st_tensor;

typedef struct tupe_st tupe_st;

/* Map and validate a file. Errors name the file and the offending tensor or byte. */
int tupe_st_open(tupe_st **st, const char *path, tupe_err *e);
/* Validate a buffer (copied). `name` is used in messages. */
int tupe_st_parse(tupe_st **st, const void *buf, size_t len, const char *name, tupe_err *e);
void tupe_st_close(tupe_st *st);

const char *tupe_st_path(const tupe_st *st);
/* Tensors in name order. */
size_t tupe_st_count(const tupe_st *st);
const tupe_st_tensor *tupe_st_at(const tupe_st *st, size_t i);
const tupe_st_tensor *tupe_st_find(const tupe_st *st, const char *name);
/* Metadata in header order. */
size_t tupe_st_meta_count(const tupe_st *st);
void tupe_st_meta_at(const tupe_st *st, size_t i, const char **key, const char **value);
const char *tupe_st_meta(const tupe_st *st, const char *key);
/* Size of the whole file and of the header. */
uint64_t tupe_st_file_size(const tupe_st *st);
uint64_t tupe_st_header_size(const tupe_st *st);
/* If the file carries TUPE_ST_CHECK_KEY, recompute it; mismatch is TUPE_EDATA. */
int tupe_st_verify(const tupe_st *st, tupe_err *e);

/* Read a float tensor as fp32, checking its shape (ndim < 0: any shape, n elements).
 * Missing tensor, wrong shape or a non-float dtype is TUPE_EDATA naming the tensor. */
int tupe_st_read_f32(const tupe_st *st, const char *name, int ndim, const uint64_t *shape,
                     float *out, uint64_t n, tupe_err *e);

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct tupe_stw tupe_stw;

tupe_stw *tupe_stw_new(void);
void tupe_stw_free(tupe_stw *w);
/* Metadata, kept in the order added (a key added twice keeps the last value). */
int tupe_stw_meta(tupe_stw *w, const char *key, const char *value, tupe_err *e);
/* Add a tensor. `data` is referenced, not copied: it must stay valid until tupe_stw_write. */
int tupe_stw_add(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                 const void *data, tupe_err *e);
/* Same, taking a private copy of the bytes. */
int tupe_stw_add_copy(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                      const void *data, tupe_err *e);
/* Add an fp32 array stored as `dtype` (F32, F16, BF16): converted into a private buffer. */
int tupe_stw_add_f32(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                     const float *data, tupe_err *e);
/* Record TUPE_ST_CHECK_KEY in the metadata when writing. */
void tupe_stw_set_checksum(tupe_stw *w, int on);
/* Write atomically (temporary name, fsync, rename). "-" writes to stdout. */
int tupe_stw_write(tupe_stw *w, const char *path, tupe_err *e);
/* The header the file will carry (for tests): malloc'd, caller frees; *n is its length. */
char *tupe_stw_header(tupe_stw *w, size_t *n, tupe_err *e);

#endif
