/* Checkpoints as a whole (checkpoint.h): a directory with model.safetensors and, optionally,
 * optimizer.safetensors. Input: byte 0 flags (bit 0: heads optional, bit 1: load the
 * optimizer state), bytes 1-4 the model file's length (little-endian), the model file, the
 * optimizer file (the rest, if any). The configuration stored in the checkpoint builds a model
 * (when small), which the checkpoint is then loaded into, with a model of another seed as the
 * starting point. Loaded parameters must be the file's values exactly (heads optional: the
 * file's or the starting ones). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "base/byteorder.h"
#include "base/fileio.h"
#include "model/checkpoint.h"
#include "fuzz.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/optim.h"

#define MAX_PARAMS (1u << 18)

static tupe_backend *be;

static void check_values(tupe_model *m, const char *file, int flags)
{
    tupe_st *st;
    tupe_err e;
    FUZZ_CHECK(tupe_st_open(&st, file, &e) == 0);
    const tupe_layout *lay = tupe_model_layout(m);
    float *a = malloc(lay->total * sizeof *a), *b = malloc(lay->total * sizeof *b);
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        const tupe_st_tensor *t = tupe_st_find(st, p->name);
        if (!t) {
            FUZZ_CHECK(flags & TUPE_CKPT_HEADS_OPTIONAL);
            continue;
        }
        FUZZ_CHECK(tupe_st_read_f32(st, p->name, -1, NULL, a, p->numel, &e) == 0);
        FUZZ_CHECK(tupe_model_get(m, p->name, b, p->numel, &e) == 0);
        FUZZ_CHECK(memcmp(a, b, p->numel * sizeof *a) == 0);
    }
    free(a), free(b);
    tupe_st_close(st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_err e;
    if (!be && tupe_backend_create(&be, "cpu", 1, &e) != 0)
        fuzz_fail(__FILE__, __LINE__, e.msg);
    if (size < 5)
        return 0;
    int flags = data[0] & 1 ? TUPE_CKPT_HEADS_OPTIONAL : 0, want_opt = data[0] & 2;
    size_t mlen = tupe_get32le(data + 1), rest = size - 5;
    if (mlen > rest)
        mlen = rest;
    char dir[4200], path[4300], opath[4300];
    snprintf(dir, sizeof dir, "%s/ckpt", fuzz_dir());
    FUZZ_CHECK(tupe_mkdir_p(dir, &e) == 0);
    fuzz_write(dir, TUPE_CKPT_MODEL_FILE, data + 5, mlen, path, sizeof path);
    snprintf(opath, sizeof opath, "%s/%s", dir, TUPE_CKPT_OPTIM_FILE);
    if (rest > mlen)
        fuzz_write(dir, TUPE_CKPT_OPTIM_FILE, data + 5 + mlen, rest - mlen, opath, sizeof opath);
    else
        unlink(opath);

    tupe_config c;
    if (tupe_ckpt_config(dir, &c, &e) != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    if (c.vocab_size <= 0)
        return 0;
    tupe_layout lay;
    FUZZ_CHECK(tupe_layout_build(&lay, &c, &e) == 0);
    size_t total = lay.total;
    tupe_layout_free(&lay);
    if (total > MAX_PARAMS || c.num_layers > 8)
        return 0;
    tupe_capacity cap = {1, c.max_position < 4 ? c.max_position : 4, 0};
    tupe_model *m;
    FUZZ_CHECK(tupe_model_create(&m, &c, be, &cap, &e) == 0);
    FUZZ_CHECK(tupe_model_init(m, 5, &e) == 0);
    tupe_adamw *opt = NULL;
    if (want_opt) {
        tupe_adamw_cfg oc;
        tupe_adamw_defaults(&oc);
        FUZZ_CHECK(tupe_adamw_create(&opt, m, &oc, &e) == 0);
    }
    char *ts = NULL;
    int rc = tupe_ckpt_load(dir, m, opt, &ts, flags, &e);
    if (rc == 0) {
        check_values(m, path, flags);
        if (opt)
            FUZZ_CHECK(tupe_adamw_steps(opt) >= 0);
    } else if (rc != TUPE_ENOINPUT || !opt) {
        FUZZ_ERR(&e);
    }
    free(ts);
    tupe_adamw_free(opt);
    tupe_model_free(m);
    return 0;
}
