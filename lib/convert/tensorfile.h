/* Whole-file operations on safetensors files for tupe-convert: a summary of what a file holds
 * (info), a change of floating-point precision with its error measured (cast), and the tensors
 * as NumPy .npy files (npy).
 *
 * An input is a safetensors file, a Hugging Face index (model.safetensors.index.json), or a
 * directory holding either (a tupe checkpoint, a Hugging Face model). Files that carry
 * per-tensor hashes (tupe checkpoints) are verified on every read. */
#ifndef TUPE_TENSORFILE_H
#define TUPE_TENSORFILE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

/* The summary as a JSON object:
 *   {"path", "files", "bytes", "parameters" (elements of the float tensors),
 *    "dtypes": {"F32": elements, ...}, "tensors": [{"name", "dtype", "shape", "numel"}...],
 *    "metadata": {key: value} (config, train_state and optimizer parsed as JSON),
 *    "hashes": "verified" | "absent", and "optimizer": true when a checkpoint directory has
 *    its optimizer state}. */
int tupe_tf_info(const char *path, json_t **out, tupe_err *e);

typedef struct tupe_cast_stat {
    const char *name;        /* into the input file: valid until tupe_cast_free */
    int from, to;            /* dtypes */
    uint64_t numel;
    double max_abs;          /* max |cast - original| over elements finite in both */
    double max_rel;          /* max of the same over |original|, original != 0 */
    uint64_t overflow;       /* finite values that became infinite (fp16 beyond 65504) */
    uint64_t underflow;      /* nonzero values that became zero */
} tupe_cast_stat;

typedef struct tupe_cast_report {
    tupe_cast_stat *t;       /* in file order */
    size_t n;
    int optimizer_left;      /* the input checkpoint had optimizer state, not carried */
    void *priv;
} tupe_cast_report;

/* Every floating-point tensor of `in` converted to `dtype` (TUPE_F32, TUPE_BF16, TUPE_F16;
 * round to nearest even), other tensors and the metadata kept, hashes recomputed; written
 * atomically to `out`: a file for a file, a directory for a directory (its other files copied,
 * except a checkpoint's optimizer state). */
int tupe_tf_cast(const char *in, const char *out, int dtype, tupe_cast_report *r, tupe_err *e);
void tupe_cast_free(tupe_cast_report *r);

/* Tensor `name` of `in` to the .npy file `out` ("-" is stdout), or with name NULL every tensor
 * to the directory `out` as NAME.npy. Floats are written as <f4 (F64 as <f8), or BF16 as its
 * raw bits in <u2 with raw_bf16; integers as their own type. *count receives the files
 * written. */
int tupe_tf_npy(const char *in, const char *name, const char *out, int raw_bf16, size_t *count,
                tupe_err *e);

/* What a directory of .npy files' .tupe-kind says (base/outdir.h). */
#define TUPE_NPY_KIND "npy directory"

#endif
