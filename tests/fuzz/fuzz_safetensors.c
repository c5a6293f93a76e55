/* safetensors (safetensors.h): the header and the data section. Whatever the reader accepts
 * must be readable (every float tensor as fp32, the data check), and must survive the writer:
 * written back and read again, the same tensors (names, dtypes, shapes, bytes) and metadata. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "formats/safetensors.h"

#define MAX_READ (1u << 20)

static void round_trip(const tupe_st *st)
{
    tupe_stw *w = tupe_stw_new();
    tupe_err e;
    FUZZ_CHECK(w != NULL);
    for (size_t i = 0; i < tupe_st_meta_count(st); i++) {
        const char *k, *v;
        tupe_st_meta_at(st, i, &k, &v);
        FUZZ_CHECK(tupe_stw_meta(w, k, v, &e) == 0);
    }
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const tupe_st_tensor *t = tupe_st_at(st, i);
        FUZZ_CHECK(tupe_stw_add(w, t->name, t->dtype, t->ndim, t->shape, t->data, &e) == 0);
    }
    char path[4200];
    snprintf(path, sizeof path, "%s/rt.safetensors", fuzz_dir());
    int rc = tupe_stw_write(w, path, &e);
    tupe_stw_free(w);
    FUZZ_CHECK(rc == 0);
    tupe_st *b;
    FUZZ_CHECK(tupe_st_open(&b, path, &e) == 0);
    FUZZ_CHECK(tupe_st_count(b) == tupe_st_count(st));
    FUZZ_CHECK(tupe_st_meta_count(b) == tupe_st_meta_count(st));
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const tupe_st_tensor *x = tupe_st_at(st, i), *y = tupe_st_at(b, i);
        FUZZ_CHECK(strcmp(x->name, y->name) == 0 && x->dtype == y->dtype && x->ndim == y->ndim);
        FUZZ_CHECK(memcmp(x->shape, y->shape, (size_t)x->ndim * sizeof x->shape[0]) == 0);
        FUZZ_CHECK(x->end - x->begin == y->end - y->begin);
        FUZZ_CHECK(memcmp(x->data, y->data, (size_t)(x->end - x->begin)) == 0);
    }
    for (size_t i = 0; i < tupe_st_meta_count(st); i++) {
        const char *k, *v;
        tupe_st_meta_at(st, i, &k, &v);
        const char *v2 = tupe_st_meta(b, k);
        FUZZ_CHECK(v2 && strcmp(v, v2) == 0);
    }
    tupe_st_close(b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_st *st;
    tupe_err e;
    if (tupe_st_parse(&st, data, size, "fuzz.safetensors", &e) != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    FUZZ_CHECK(tupe_st_header_size(st) + 8 <= size && tupe_st_file_size(st) == size);
    if (tupe_st_verify(st, &e) != 0)
        FUZZ_ERR(&e);
    uint64_t total = 0;
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const tupe_st_tensor *t = tupe_st_at(st, i);
        FUZZ_CHECK(t->begin <= t->end && t->end <= size - 8 - tupe_st_header_size(st));
        FUZZ_CHECK(tupe_st_find(st, t->name) == t);
        total += t->end - t->begin;
        if (t->numel > MAX_READ)
            continue;
        float *out = malloc((t->numel ? t->numel : 1) * sizeof *out);
        int rc = tupe_st_read_f32(st, t->name, -1, NULL, out, t->numel, &e);
        int is_float = t->dtype == TUPE_F32 || t->dtype == TUPE_F16 || t->dtype == TUPE_BF16 ||
                       t->dtype == TUPE_F64;
        FUZZ_CHECK(is_float ? rc == 0 : rc == TUPE_EDATA);
        free(out);
    }
    FUZZ_CHECK(total == size - 8 - tupe_st_header_size(st));
    round_trip(st);
    tupe_st_close(st);
    return 0;
}
