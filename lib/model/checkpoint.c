#include "model/checkpoint.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checksum.h"
#include "base/fault.h"
#include "base/fileio.h"
#include "formats/safetensors.h"
#include "model/electra.h"

#define HASH_KEY "tupe.tensor_xxh3"

/* Add every tensor of the layout from a flat host buffer, with `prefix` before its name, and
 * its hash into `hashes`. */
static int add_all(tupe_stw *w, const tupe_layout *lay, const char *prefix, const float *flat,
                   json_t *hashes, tupe_err *e)
{
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        char name[TUPE_PARAM_NAME + 32];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
        const float *data = flat + p->offset;
        int rc = tupe_stw_add(w, name, TUPE_F32, p->ndim, shape, data, e);
        if (rc)
            return rc;
        char hex[22];
        tupe_hash_hex(tupe_hash64(data, p->numel * sizeof(float)), hex);
        if (json_object_set_new(hashes, name, json_string(hex)))
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    return 0;
}

static int meta_json(tupe_stw *w, const char *key, json_t *v, tupe_err *e)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS);
    if (!s)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc = tupe_stw_meta(w, key, s, e);
    free(s);
    return rc;
}

static int write_model(const char *path, tupe_model *m, const char *train_state, tupe_err *e)
{
    const tupe_layout *lay = tupe_model_layout(m);
    float *flat = malloc(lay->total * sizeof *flat);
    tupe_stw *w = tupe_stw_new();
    json_t *hashes = json_object();
    char *cfg = tupe_config_json(tupe_model_config(m), 0);
    int rc = 0;
    if (!flat || !w || !hashes || !cfg) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    tupe_model_params_get(m, flat);
    if ((rc = add_all(w, lay, "", flat, hashes, e)) || (rc = tupe_stw_meta(w, "format", "pt", e)) ||
        (rc = tupe_stw_meta(w, "tupe.checkpoint", "1", e)) ||
        (rc = tupe_stw_meta(w, "config", cfg, e)) || (rc = meta_json(w, HASH_KEY, hashes, e)))
        goto out;
    if (train_state) {
        json_error_t je;
        json_t *ts = json_loads(train_state, 0, &je);
        int bad = !ts || !json_is_object(ts);
        json_decref(ts);
        if (bad) {
            rc = tupe_fail(e, TUPE_EFAIL, "training state is not a JSON object: %s", train_state);
            goto out;
        }
        if ((rc = tupe_stw_meta(w, "train_state", train_state, e)))
            goto out;
    }
    rc = tupe_stw_write(w, path, e);
out:
    free(cfg);
    json_decref(hashes);
    tupe_stw_free(w);
    free(flat);
    return rc;
}

/* The optimizer file: the moments are o's, or `given` (exp_avg then exp_avg_sq, total floats
 * each) when not NULL. */
static int write_optim(const char *path, tupe_model *m, tupe_adamw *o, const float *given,
                       tupe_err *e)
{
    const tupe_layout *lay = tupe_model_layout(m);
    float *flat = given ? NULL : calloc(2 * lay->total, sizeof *flat);
    tupe_stw *w = tupe_stw_new();
    json_t *hashes = json_object();
    const tupe_adamw_cfg *c = tupe_adamw_config(o);
    json_t *oj = json_pack("{s:s, s:I, s:f, s:f, s:f, s:f, s:f, s:b}", "type", "adamw", "step",
                           (json_int_t)tupe_adamw_steps(o), "beta1", c->beta1, "beta2", c->beta2,
                           "eps", c->eps, "weight_decay", c->weight_decay, "clip", c->clip,
                           "exclude_ln_bias", c->exclude_ln_bias);
    int rc = 0;
    if ((!given && !flat) || !w || !hashes || !oj) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    if (!given)
        tupe_adamw_moments_get(o, flat, flat + lay->total);
    const float *mo = given ? given : flat;
    if ((rc = add_all(w, lay, "exp_avg.", mo, hashes, e)) ||
        (rc = add_all(w, lay, "exp_avg_sq.", mo + lay->total, hashes, e)) ||
        (rc = tupe_stw_meta(w, "format", "pt", e)) ||
        (rc = tupe_stw_meta(w, "tupe.checkpoint", "1", e)) ||
        (rc = meta_json(w, "optimizer", oj, e)) || (rc = meta_json(w, HASH_KEY, hashes, e)))
        goto out;
    rc = tupe_stw_write(w, path, e);
out:
    json_decref(oj);
    json_decref(hashes);
    tupe_stw_free(w);
    free(flat);
    return rc;
}

int tupe_ckpt_save(const char *dir, tupe_model *m, tupe_adamw *opt, const char *train_state,
                   tupe_err *e)
{
    return tupe_ckpt_save_moments(dir, m, opt, NULL, train_state, e);
}

int tupe_ckpt_save_moments(const char *dir, tupe_model *m, tupe_adamw *opt, const float *moments,
                           const char *train_state, tupe_err *e)
{
    tupe_dirtx *tx;
    int rc = tupe_dirtx_begin(&tx, dir, TUPE_CKPT_KIND, e);
    if (rc)
        return rc;
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, TUPE_CKPT_MODEL_FILE));
    rc = write_model(path, m, train_state, e);
    tupe_fault_point("ckpt.model");
    if (!rc && opt) {
        snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, TUPE_CKPT_OPTIM_FILE));
        rc = write_optim(path, m, opt, moments, e);
        tupe_fault_point("ckpt.optimizer");
    }
    if (rc) {
        tupe_dirtx_abort(tx);
        return rc;
    }
    return tupe_dirtx_commit(tx, e);
}

/* ---- reading ---------------------------------------------------------------------------------- */

static void file_in(char *dst, size_t cap, const char *path, const char *name)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        snprintf(dst, cap, "%s/%s", path, name);
    else
        snprintf(dst, cap, "%s", path);
}

static int open_checked(tupe_st **st, const char *path, json_t **hashes, tupe_err *e)
{
    int rc = tupe_st_open(st, path, e);
    if (rc)
        return rc;
    *hashes = NULL;
    const char *h = tupe_st_meta(*st, HASH_KEY);
    if (h) {
        json_error_t je;
        *hashes = json_loads(h, 0, &je);
        if (!*hashes || !json_is_object(*hashes)) {
            json_decref(*hashes);
            tupe_st_close(*st);
            return tupe_fail(e, TUPE_EDATA, "%s: __metadata__ %s is not a JSON object", path,
                             HASH_KEY);
        }
    }
    return 0;
}

static int parse_config(const tupe_st *st, tupe_config *c, tupe_err *e)
{
    const char *js = tupe_st_meta(st, "config");
    if (!js)
        return tupe_fail(e, TUPE_EDATA, "%s: no model configuration in __metadata__ (not a tupe "
                         "checkpoint?)", tupe_st_path(st));
    char name[PATH_MAX + 32];
    snprintf(name, sizeof name, "%s: __metadata__ config", tupe_st_path(st));
    return tupe_config_parse(c, js, strlen(js), name, e);
}

int tupe_ckpt_config(const char *path, tupe_config *c, tupe_err *e)
{
    char file[PATH_MAX];
    file_in(file, sizeof file, path, TUPE_CKPT_MODEL_FILE);
    tupe_st *st;
    int rc = tupe_st_open(&st, file, e);
    if (rc)
        return rc;
    rc = parse_config(st, c, e);
    tupe_st_close(st);
    return rc;
}

/* The pre-training and task heads; with an ELECTRA pair's checkpoint, its generator and the
 * discriminator's replaced-token head too (fine-tuning takes its discriminator's encoder). */
static int is_head(const char *name)
{
    return strncmp(name, "cls.", 4) == 0 || strncmp(name, "classifier.", 11) == 0 ||
           strncmp(name, "generator", 9) == 0 || strncmp(name, "discriminator_predictions.", 26) == 0;
}

/* Read the tensors of the layout (names with `prefix`) into a flat host buffer. `flat` holds
 * the current values, so that skipped head tensors keep them. */
static int read_all(const tupe_st *st, json_t *hashes, const tupe_layout *lay, const char *prefix,
                    float *flat, int flags, tupe_err *e)
{
    const char *path = tupe_st_path(st);
    size_t plen = strlen(prefix);
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        char name[TUPE_PARAM_NAME + 32];
        snprintf(name, sizeof name, "%s%s", prefix, p->name);
        const tupe_st_tensor *t = tupe_st_find(st, name);
        if (!t && (flags & TUPE_CKPT_HEADS_OPTIONAL) && is_head(p->name))
            continue;
        uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
        int rc = tupe_st_read_f32(st, name, p->ndim, shape, flat + p->offset, p->numel, e);
        if (rc)
            return rc;
        if (hashes) {
            const char *want = json_string_value(json_object_get(hashes, name));
            uint64_t h;
            if (!want || tupe_hash_parse(want, &h))
                return tupe_fail_tensor(e, TUPE_EDATA, path, name, "no hash in __metadata__ %s",
                                        HASH_KEY);
            if (tupe_hash64(t->data, t->end - t->begin) != h)
                return tupe_fail_tensor(e, TUPE_EDATA, path, name,
                                        "checksum mismatch: the data is corrupt");
        }
    }
    /* Nothing in the file that the model does not know (a different variant or head). */
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const char *n = tupe_st_at(st, i)->name;
        if (strncmp(n, prefix, plen) != 0 || tupe_layout_find(lay, n + plen) ||
            ((flags & TUPE_CKPT_HEADS_OPTIONAL) && is_head(n + plen)))
            continue;
        return tupe_fail_tensor(e, TUPE_EDATA, path, n, "not a parameter of this model");
    }
    return 0;
}

static int load_optim(const char *file, tupe_model *m, tupe_adamw *o, int flags, tupe_err *e)
{
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_st *st;
    json_t *hashes;
    int rc = open_checked(&st, file, &hashes, e);
    if (rc)
        return rc;
    float *flat = calloc(2 * lay->total, sizeof *flat);
    json_t *oj = NULL;
    if (!flat) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    const char *os = tupe_st_meta(st, "optimizer");
    json_error_t je;
    oj = os ? json_loads(os, 0, &je) : NULL;
    json_t *step = json_object_get(oj, "step");
    if (!json_is_integer(step) || json_integer_value(step) < 0) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: __metadata__ optimizer has no step count", file);
        goto out;
    }
    /* Head moments are skipped with the heads (a new head starts from zero). */
    if ((rc = read_all(st, hashes, lay, "exp_avg.", flat, flags, e)))
        goto out;
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const char *n = tupe_st_at(st, i)->name;
        if (strncmp(n, "exp_avg_sq.", 11) == 0 || strncmp(n, "exp_avg.", 8) == 0)
            continue;
        rc = tupe_fail_tensor(e, TUPE_EDATA, file, n, "not an optimizer tensor");
        goto out;
    }
    if ((rc = read_all(st, hashes, lay, "exp_avg_sq.", flat + lay->total, flags, e)))
        goto out;
    tupe_adamw_moments_put(o, flat, flat + lay->total);
    tupe_adamw_set_steps(o, (int64_t)json_integer_value(step));
out:
    json_decref(oj);
    json_decref(hashes);
    free(flat);
    tupe_st_close(st);
    return rc;
}

int tupe_ckpt_load(const char *path, tupe_model *m, tupe_adamw *opt, char **train_state,
                   int flags, tupe_err *e)
{
    if (train_state)
        *train_state = NULL;
    char file[PATH_MAX];
    file_in(file, sizeof file, path, TUPE_CKPT_MODEL_FILE);
    tupe_st *st;
    json_t *hashes;
    int rc = open_checked(&st, file, &hashes, e);
    if (rc)
        return rc;
    const tupe_layout *lay = tupe_model_layout(m);
    float *flat = NULL;
    tupe_config c;
    char what[64];
    if ((rc = parse_config(st, &c, e)))
        goto out;
    if ((flags & TUPE_CKPT_HEADS_OPTIONAL) && tupe_cfg_pair(&c) &&
        !tupe_cfg_pair(tupe_model_config(m))) {
        /* an ELECTRA pair into one network: its discriminator's encoder */
        tupe_config g, d;
        tupe_electra_configs(&c, &g, &d);
        d.rtd_head = tupe_model_config(m)->rtd_head;
        c = d;
    }
    if (!tupe_config_same_encoder(&c, tupe_model_config(m), what, sizeof what)) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: the checkpoint's %s differs from the model's", file,
                       what);
        goto out;
    }
    flat = malloc(lay->total * sizeof *flat);
    if (!flat) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    /* Start from the current values: head tensors absent from the file keep them. */
    tupe_model_params_get(m, flat);
    if ((rc = read_all(st, hashes, lay, "", flat, flags, e)))
        goto out;
    if (opt) {
        char of[PATH_MAX];
        file_in(of, sizeof of, path, TUPE_CKPT_OPTIM_FILE);
        if (strcmp(of, file) == 0) {
            rc = tupe_fail(e, TUPE_ENOINPUT, "%s: optimizer state needs the checkpoint directory",
                           path);
            goto out;
        }
        if ((rc = load_optim(of, m, opt, flags, e)))
            goto out;
    }
    tupe_model_params_put(m, flat);
    if (train_state) {
        const char *ts = tupe_st_meta(st, "train_state");
        if (ts && !(*train_state = strdup(ts)))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
out:
    free(flat);
    json_decref(hashes);
    tupe_st_close(st);
    return rc;
}
