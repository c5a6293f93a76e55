/* Bringing another program's tensors into a tupe checkpoint (the Hugging Face and fairseq
 * importers of tupe-convert).
 *
 * A tensor set gathers the tensors of one safetensors file, or of every shard named by a
 * Hugging Face index (model.safetensors.index.json), under names the importer may rewrite
 * (legacy spellings, prefixes). Reading a tensor converts it to fp32 and checks its shape,
 * and marks it used, so that the importer can refuse whatever it did not account for: a
 * tensor the model has no place for must never be dropped silently.
 *
 * A model is then built from the importer's fill function on the CPU backend, with every
 * tensor the function does not fill drawn from the seed, and saved with the checkpoint
 * module, so that an imported checkpoint has exactly the format of a trained one. */
#ifndef TUPE_IMPORT_H
#define TUPE_IMPORT_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/note.h"
#include "formats/safetensors.h"
#include "model/config.h"
#include "model/model.h"
#include "model/params.h"

typedef struct tupe_tset tupe_tset;

/* One safetensors file. */
int tupe_tset_open(tupe_tset **s, const char *path, tupe_err *e);
/* A Hugging Face index: {"metadata": {...}, "weight_map": {name: shard file}}; the shards lie
 * beside it. Every listed tensor must be in its shard and every shard tensor listed. */
int tupe_tset_open_index(tupe_tset **s, const char *index, tupe_err *e);
/* Either of the above, or a directory holding model.safetensors (a checkpoint, a Hugging Face
 * model) or model.safetensors.index.json. */
int tupe_tset_open_path(tupe_tset **s, const char *path, tupe_err *e);
void tupe_tset_close(tupe_tset *s);

size_t tupe_tset_count(const tupe_tset *s);
const char *tupe_tset_name(const tupe_tset *s, size_t i);   /* current name */
const char *tupe_tset_orig(const tupe_tset *s, size_t i);   /* the name in the file */
const char *tupe_tset_file(const tupe_tset *s, size_t i);   /* the file that holds it */
const tupe_st_tensor *tupe_tset_tensor(const tupe_tset *s, size_t i);
/* The files themselves. */
int tupe_tset_nfiles(const tupe_tset *s);
const tupe_st *tupe_tset_st(const tupe_tset *s, int f);
/* __metadata__ of the (first) file. */
const char *tupe_tset_meta(const tupe_tset *s, const char *key);
/* Check the hashes the files carry: the whole-data hash of safetensors.h and the per-tensor
 * hashes of a tupe checkpoint ("tupe.tensor_xxh3", checkpoint.h). A mismatch is TUPE_EDATA
 * naming the tensor. Files without hashes pass; *checked receives how many were checked. */
int tupe_tset_verify(const tupe_tset *s, size_t *checked, tupe_err *e);
/* Total bytes of the files. */
uint64_t tupe_tset_bytes(const tupe_tset *s);

/* Rename tensor i. A name two tensors would share is TUPE_EDATA naming both. */
int tupe_tset_rename(tupe_tset *s, size_t i, const char *name, tupe_err *e);
/* Index of the tensor with this current name, or -1. */
long tupe_tset_find(const tupe_tset *s, const char *name);

/* Where expected shapes come from, appended to shape errors ("from config.json"); NULL: none. */
void tupe_tset_expect_source(tupe_tset *s, const char *what);
/* Read tensor `name` (current name) as fp32: a float dtype (F32, F16, BF16, F64) of exactly
 * this shape, else TUPE_EDATA naming the file and the tensor and what was expected. Marks it
 * used. */
int tupe_tset_read(tupe_tset *s, const char *name, int ndim, const uint64_t *shape, float *out,
                   tupe_err *e);
/* The same checks, without converting: the tensor's bytes (in the mapped file) and dtype. */
const void *tupe_tset_raw(tupe_tset *s, const char *name, int ndim, const uint64_t *shape,
                          int *dtype, tupe_err *e);
void tupe_tset_use(tupe_tset *s, size_t i);
int tupe_tset_used(const tupe_tset *s, size_t i);
/* The first tensor not used, or -1. */
long tupe_tset_unused(const tupe_tset *s);
/* 1 if some tensor's current name starts with prefix. */
int tupe_tset_has_prefix(const tupe_tset *s, const char *prefix);
/* Mark the unused tensors whose names start with prefix used, each with a level-1 note
 * "FILE: 'NAME' dropped: WHY"; returns how many. */
size_t tupe_tset_drop(tupe_tset *s, const char *prefix, const char *why, tupe_note_fn note,
                      void *ctx);

/* ---- building the model ------------------------------------------------------------------ */

/* Returned by a fill function that leaves a tensor at its seeded initial values. */
#define TUPE_IMPORT_KEEP (-1)

/* Fill dst (p->numel floats, the layout of params.h) and return 0; TUPE_IMPORT_KEEP; or an
 * error status with e set. dst NULL: fill nothing, only say which of the three it would be
 * (tupe_import_build asks every tensor so before it allocates the model). */
typedef int (*tupe_import_fill)(void *ctx, const tupe_param *p, float *dst, tupe_err *e);

/* A model of configuration c (vocab_size set) on a CPU backend of its own, every tensor given
 * by fill, or, where fill keeps it, the BERT initialization drawn from `seed` (the values
 * tupe_model_init gives). Every tensor is asked of fill (without a destination) before any
 * memory of the model is reserved. Free with tupe_import_free. */
int tupe_import_build(tupe_model **m, const tupe_config *c, uint64_t seed, tupe_import_fill fill,
                      void *ctx, tupe_err *e);
void tupe_import_free(tupe_model *m);
/* *equal = 1 when tensor `name` of the set (read as fp32, the parameter's shape) equals the
 * model's parameter `param` bit for bit: a tied tensor a file stores twice. */
int tupe_import_same(tupe_tset *s, const char *name, tupe_model *m, const char *param, int *equal,
                     tupe_err *e);

/* A tupe checkpoint (the directory or its model.safetensors) opened as a tensor set without
 * building a model, checked as tupe_ckpt_load checks it: the configuration in its metadata,
 * every parameter of that configuration's layout present with its shape and a float dtype,
 * no other tensor, every hash. *c and *lay receive the configuration and its layout (free
 * with tupe_layout_free). */
int tupe_import_open_ckpt(tupe_tset **s, const char *ckpt, tupe_config *c, tupe_layout *lay,
                          tupe_err *e);

/* "[a, b]" into buf. */
const char *tupe_shape_str(char *buf, size_t cap, int ndim, const uint64_t *shape);

#endif
