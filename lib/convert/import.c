#include "convert/import.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backend/backend.h"
#include "base/checksum.h"
#include "base/fileio.h"
#include "model/checkpoint.h"
#include "model/electra.h"

typedef struct entry {
    char *name;                 /* current name */
    const tupe_st_tensor *t;    /* its name is the original */
    int file;                   /* index into files */
    int used;
} entry;

struct tupe_tset {
    tupe_st **files;
    int nfiles;
    entry *ent;
    size_t n, cap;
    char *expect;               /* appended to shape errors */
    char *origin;               /* the file or index opened, for tensors that are missing */
};

const char *tupe_shape_str(char *buf, size_t cap, int ndim, const uint64_t *shape)
{
    size_t k = (size_t)snprintf(buf, cap, "[");
    for (int i = 0; i < ndim && k + 24 < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%llu", i ? ", " : "",
                              (unsigned long long)shape[i]);
    snprintf(buf + k, cap - k, "]");
    return buf;
}

static int add_file(tupe_tset *s, tupe_st *st, tupe_err *e)
{
    tupe_st **f = realloc(s->files, (size_t)(s->nfiles + 1) * sizeof *f);
    if (!f) {
        tupe_st_close(st);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    s->files = f;
    s->files[s->nfiles++] = st;
    return 0;
}

static int add_entry(tupe_tset *s, const tupe_st_tensor *t, int file, tupe_err *e)
{
    if (s->n == s->cap) {
        size_t nc = s->cap ? 2 * s->cap : 256;
        entry *p = realloc(s->ent, nc * sizeof *p);
        if (!p)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        s->ent = p;
        s->cap = nc;
    }
    entry *x = &s->ent[s->n];
    if (!(x->name = strdup(t->name)))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    x->t = t;
    x->file = file;
    x->used = 0;
    s->n++;
    return 0;
}

int tupe_tset_open(tupe_tset **sp, const char *path, tupe_err *e)
{
    *sp = NULL;
    tupe_tset *s = calloc(1, sizeof *s);
    if (!s)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_st *st;
    int rc = (s->origin = strdup(path)) ? tupe_st_open(&st, path, e)
                                        : tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc)
        rc = add_file(s, st, e);
    for (size_t i = 0; !rc && i < tupe_st_count(st); i++)
        rc = add_entry(s, tupe_st_at(st, i), 0, e);
    if (rc) {
        tupe_tset_close(s);
        return rc;
    }
    *sp = s;
    return 0;
}

int tupe_tset_open_index(tupe_tset **sp, const char *index, tupe_err *e)
{
    *sp = NULL;
    char *buf;
    size_t len;
    int rc = tupe_read_text(index, &buf, &len, 64u << 20, e);
    if (rc)
        return rc;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!root)
        return tupe_fail_linecol(e, TUPE_EDATA, index, je.line > 0 ? je.line : 1,
                                 je.column > 0 ? je.column : 1, "%s", je.text);
    json_t *map = json_object_get(root, "weight_map");
    if (!json_is_object(map) || json_object_size(map) == 0) {
        json_decref(root);
        return tupe_fail(e, TUPE_EDATA, "%s: expected a non-empty \"weight_map\" object", index);
    }
    tupe_tset *s = calloc(1, sizeof *s);
    if (!s || !(s->origin = strdup(index))) {
        free(s);
        json_decref(root);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    /* The shards lie beside the index. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", index);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[1] = 0;
    else
        dir[0] = 0;
    const char *key;
    json_t *v;
    json_object_foreach(map, key, v) {
        const char *shard = json_string_value(v);
        if (!shard || !*shard || strchr(shard, '/')) {
            rc = tupe_fail(e, TUPE_EDATA, "%s: weight_map[\"%s\"]: expected a shard file name",
                           index, key);
            goto out;
        }
        int f = -1;
        char path[PATH_MAX];
        snprintf(path, sizeof path, "%s%s", dir, shard);
        for (int i = 0; i < s->nfiles && f < 0; i++)
            if (strcmp(tupe_st_path(s->files[i]), path) == 0)
                f = i;
        if (f < 0) {
            tupe_st *st;
            if ((rc = tupe_st_open(&st, path, e))) {
                tupe_err_wrap(e, "%s: shard of \"%s\"", index, key);
                goto out;
            }
            if ((rc = add_file(s, st, e)))
                goto out;
            f = s->nfiles - 1;
        }
        const tupe_st_tensor *t = tupe_st_find(s->files[f], key);
        if (!t) {
            rc = tupe_fail_tensor(e, TUPE_EDATA, path, key, "missing (%s lists it in this shard)",
                                  index);
            goto out;
        }
        if ((rc = add_entry(s, t, f, e)))
            goto out;
    }
    for (int f = 0; f < s->nfiles; f++)
        for (size_t i = 0; i < tupe_st_count(s->files[f]); i++) {
            const char *n = tupe_st_at(s->files[f], i)->name;
            const char *want = json_string_value(json_object_get(map, n));
            const char *base = strrchr(tupe_st_path(s->files[f]), '/');
            base = base ? base + 1 : tupe_st_path(s->files[f]);
            if (!want || strcmp(want, base) != 0) {
                rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_st_path(s->files[f]), n,
                                      "not listed for this shard in %s", index);
                goto out;
            }
        }
out:
    json_decref(root);
    if (rc) {
        tupe_tset_close(s);
        return rc;
    }
    *sp = s;
    return 0;
}

int tupe_tset_open_path(tupe_tset **s, const char *path, tupe_err *e)
{
    struct stat sb;
    size_t n = strlen(path);
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        char f[PATH_MAX];
        snprintf(f, sizeof f, "%s/model.safetensors", path);
        if (tupe_path_exists(f))
            return tupe_tset_open(s, f, e);
        snprintf(f, sizeof f, "%s/model.safetensors.index.json", path);
        if (tupe_path_exists(f))
            return tupe_tset_open_index(s, f, e);
        *s = NULL;
        return tupe_fail(e, TUPE_ENOINPUT, "%s: no model.safetensors or "
                         "model.safetensors.index.json in this directory", path);
    }
    if (n > 5 && strcmp(path + n - 5, ".json") == 0)
        return tupe_tset_open_index(s, path, e);
    return tupe_tset_open(s, path, e);
}

void tupe_tset_close(tupe_tset *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        free(s->ent[i].name);
    free(s->ent);
    for (int f = 0; f < s->nfiles; f++)
        tupe_st_close(s->files[f]);
    free(s->files);
    free(s->expect);
    free(s->origin);
    free(s);
}

size_t tupe_tset_count(const tupe_tset *s) { return s->n; }
const char *tupe_tset_name(const tupe_tset *s, size_t i) { return s->ent[i].name; }
const char *tupe_tset_orig(const tupe_tset *s, size_t i) { return s->ent[i].t->name; }
const char *tupe_tset_file(const tupe_tset *s, size_t i)
{
    return tupe_st_path(s->files[s->ent[i].file]);
}
const tupe_st_tensor *tupe_tset_tensor(const tupe_tset *s, size_t i) { return s->ent[i].t; }

int tupe_tset_nfiles(const tupe_tset *s) { return s->nfiles; }
const tupe_st *tupe_tset_st(const tupe_tset *s, int f) { return s->files[f]; }

const char *tupe_tset_meta(const tupe_tset *s, const char *key)
{
    return s->nfiles ? tupe_st_meta(s->files[0], key) : NULL;
}

/* The per-tensor hashes of checkpoint.c. */
#define TENSOR_HASH_KEY "tupe.tensor_xxh3"

int tupe_tset_verify(const tupe_tset *s, size_t *checked, tupe_err *e)
{
    *checked = 0;
    for (int f = 0; f < s->nfiles; f++) {
        const tupe_st *st = s->files[f];
        int rc = tupe_st_verify(st, e);
        if (rc)
            return rc;
        const char *h = tupe_st_meta(st, TENSOR_HASH_KEY);
        if (!h)
            continue;
        json_error_t je;
        json_t *map = json_loads(h, 0, &je);
        if (!json_is_object(map)) {
            json_decref(map);
            return tupe_fail(e, TUPE_EDATA, "%s: __metadata__ %s is not a JSON object",
                             tupe_st_path(st), TENSOR_HASH_KEY);
        }
        for (size_t i = 0; i < tupe_st_count(st) && !rc; i++) {
            const tupe_st_tensor *t = tupe_st_at(st, i);
            const char *want = json_string_value(json_object_get(map, t->name));
            uint64_t v;
            if (!want || tupe_hash_parse(want, &v))
                rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_st_path(st), t->name,
                                      "no hash in __metadata__ %s", TENSOR_HASH_KEY);
            else if (tupe_hash64(t->data, t->end - t->begin) != v)
                rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_st_path(st), t->name,
                                      "checksum mismatch: the data is corrupt");
            else
                (*checked)++;
        }
        json_decref(map);
        if (rc)
            return rc;
    }
    return 0;
}

uint64_t tupe_tset_bytes(const tupe_tset *s)
{
    uint64_t b = 0;
    for (int f = 0; f < s->nfiles; f++)
        b += tupe_st_file_size(s->files[f]);
    return b;
}

long tupe_tset_find(const tupe_tset *s, const char *name)
{
    for (size_t i = 0; i < s->n; i++)
        if (strcmp(s->ent[i].name, name) == 0)
            return (long)i;
    return -1;
}

int tupe_tset_rename(tupe_tset *s, size_t i, const char *name, tupe_err *e)
{
    if (strcmp(s->ent[i].name, name) == 0)
        return 0;
    long j = tupe_tset_find(s, name);
    if (j >= 0)
        return tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(s, i), tupe_tset_orig(s, i),
                                "means the same as '%s', which is also there", tupe_tset_orig(s, (size_t)j));
    char *n = strdup(name);
    if (!n)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    free(s->ent[i].name);
    s->ent[i].name = n;
    return 0;
}

void tupe_tset_expect_source(tupe_tset *s, const char *what)
{
    free(s->expect);
    s->expect = what ? strdup(what) : NULL;
}

const void *tupe_tset_raw(tupe_tset *s, const char *name, int ndim, const uint64_t *shape,
                          int *dtype, tupe_err *e)
{
    char want[160], got[160];
    long i = tupe_tset_find(s, name);
    const char *src = s->expect ? s->expect : "";
    const char *sep = s->expect ? " " : "";
    if (i < 0) {
        tupe_fail_tensor(e, TUPE_EDATA, s->origin, name, "missing: expected a tensor of shape %s%s%s",
                         tupe_shape_str(want, sizeof want, ndim, shape), sep, src);
        return NULL;
    }
    const tupe_st_tensor *t = s->ent[i].t;
    const char *path = tupe_tset_file(s, (size_t)i);
    int ok = t->ndim == ndim;
    for (int d = 0; ok && d < ndim; d++)
        ok = t->shape[d] == shape[d];
    if (!ok) {
        tupe_fail_tensor(e, TUPE_EDATA, path, t->name, "shape %s, expected %s%s%s",
                         tupe_shape_str(got, sizeof got, t->ndim, t->shape),
                         tupe_shape_str(want, sizeof want, ndim, shape), sep, src);
        return NULL;
    }
    if (t->dtype != TUPE_F32 && t->dtype != TUPE_F16 && t->dtype != TUPE_BF16 &&
        t->dtype != TUPE_F64) {
        tupe_fail_tensor(e, TUPE_EDATA, path, t->name,
                         "dtype %s, expected a floating-point type (F32, F16, BF16)",
                         tupe_dtype_name(t->dtype));
        return NULL;
    }
    s->ent[i].used = 1;
    *dtype = t->dtype;
    /* A tensor of no elements may have no bytes to point at. */
    return t->data ? t->data : (const void *)"";
}

int tupe_tset_read(tupe_tset *s, const char *name, int ndim, const uint64_t *shape, float *out,
                   tupe_err *e)
{
    int dt;
    const void *data = tupe_tset_raw(s, name, ndim, shape, &dt, e);
    if (!data)
        return e ? e->code : TUPE_EDATA;
    uint64_t n = 1;
    for (int d = 0; d < ndim; d++)
        n *= shape[d];
    if (out) /* NULL: only whether it is there, with that shape */
        tupe_to_f32(dt, data, out, (size_t)n);
    return 0;
}

void tupe_tset_use(tupe_tset *s, size_t i) { s->ent[i].used = 1; }
int tupe_tset_used(const tupe_tset *s, size_t i) { return s->ent[i].used; }

int tupe_tset_has_prefix(const tupe_tset *s, const char *prefix)
{
    size_t n = strlen(prefix);
    for (size_t i = 0; i < s->n; i++)
        if (strncmp(s->ent[i].name, prefix, n) == 0)
            return 1;
    return 0;
}

size_t tupe_tset_drop(tupe_tset *s, const char *prefix, const char *why, tupe_note_fn note,
                      void *ctx)
{
    size_t n = strlen(prefix), k = 0;
    for (size_t i = 0; i < s->n; i++)
        if (!s->ent[i].used && strncmp(s->ent[i].name, prefix, n) == 0) {
            s->ent[i].used = 1;
            tupe_note(note, ctx, TUPE_NOTE_DETAIL, "%s: '%s' dropped: %s", tupe_tset_file(s, i),
                      s->ent[i].t->name, why);
            k++;
        }
    return k;
}

long tupe_tset_unused(const tupe_tset *s)
{
    for (size_t i = 0; i < s->n; i++)
        if (!s->ent[i].used)
            return (long)i;
    return -1;
}

/* ---- models ---------------------------------------------------------------------------------- */

static int make_model(tupe_model **m, const tupe_config *c, tupe_err *e)
{
    tupe_backend *be;
    int rc = tupe_backend_create(&be, "cpu", 0, e);
    if (rc)
        return rc;
    /* Nothing runs forward: parameters only. */
    tupe_capacity cap = {0, 0, 0};
    if ((rc = tupe_model_create(m, c, be, &cap, e))) {
        tupe_backend_destroy(be);
        return rc;
    }
    return 0;
}

void tupe_import_free(tupe_model *m)
{
    if (!m)
        return;
    tupe_backend *be = tupe_model_backend(m);
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

int tupe_import_build(tupe_model **mp, const tupe_config *c, uint64_t seed, tupe_import_fill fill,
                      void *ctx, tupe_err *e)
{
    *mp = NULL;
    /* Bound before allocating: every tensor the configuration implies is first asked of the
     * source (fill without a destination), so that a config.json that says 100000 layers or a
     * vocabulary of 20 million costs a list of names, not the model's memory, before it is
     * refused for the tensor it lacks or the shape it disagrees with. */
    tupe_layout lay0;
    int rc = tupe_cfg_pair(c) ? tupe_electra_layout(&lay0, c, e) : tupe_layout_build(&lay0, c, e);
    if (rc)
        return rc;
    for (size_t i = 0; i < lay0.count && !rc; i++) {
        int r = fill(ctx, &lay0.t[i], NULL, e);
        if (r && r != TUPE_IMPORT_KEEP)
            rc = r;
    }
    tupe_layout_free(&lay0);
    if (rc)
        return rc;
    tupe_model *m;
    if ((rc = make_model(&m, c, e)))
        return rc;
    const tupe_layout *lay = tupe_model_layout(m);
    size_t most = 0;
    for (size_t i = 0; i < lay->count; i++)
        most = lay->t[i].numel > most ? lay->t[i].numel : most;
    float *buf = malloc((most ? most : 1) * sizeof *buf);
    if (!buf) {
        tupe_import_free(m);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (size_t i = 0; i < lay->count && !rc; i++) {
        const tupe_param *p = &lay->t[i];
        int r = fill(ctx, p, buf, e);
        /* Drawing 100M normal values takes seconds: only for what the source lacks. */
        if (r == TUPE_IMPORT_KEEP)
            tupe_param_init_values(p, c->initializer_range, seed, buf);
        else if (r)
            rc = r;
        if (!rc)
            rc = tupe_model_set(m, p->name, buf, p->numel, e);
    }
    free(buf);
    if (rc) {
        tupe_import_free(m);
        return rc;
    }
    *mp = m;
    return 0;
}

int tupe_import_same(tupe_tset *s, const char *name, tupe_model *m, const char *param, int *equal,
                     tupe_err *e)
{
    *equal = 0;
    const tupe_param *p = tupe_layout_find(tupe_model_layout(m), param);
    if (!p)
        return tupe_fail(e, TUPE_EFAIL, "the model has no parameter '%s'", param);
    float *a = malloc(p->numel * sizeof *a), *b = malloc(p->numel * sizeof *b);
    uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
    int rc = !a || !b ? tupe_fail(e, TUPE_EFAIL, "out of memory") : 0;
    if (!rc)
        rc = tupe_tset_read(s, name, p->ndim, shape, a, e);
    if (!rc)
        rc = tupe_model_get(m, param, b, p->numel, e);
    if (!rc)
        *equal = memcmp(a, b, p->numel * sizeof *a) == 0;
    free(a);
    free(b);
    return rc;
}

int tupe_import_open_ckpt(tupe_tset **sp, const char *ckpt, tupe_config *c, tupe_layout *lay,
                          tupe_err *e)
{
    *sp = NULL;
    memset(lay, 0, sizeof *lay);
    tupe_tset *s;
    size_t k;
    int rc = tupe_tset_open_path(&s, ckpt, e);
    if (rc)
        return rc;
    const char *js = tupe_tset_meta(s, "config");
    const char *path = tupe_st_path(s->files[0]);
    char name[PATH_MAX + 32];
    snprintf(name, sizeof name, "%s: __metadata__ config", path);
    if (!js)
        rc = tupe_fail(e, TUPE_EDATA, "%s: no model configuration in __metadata__ (not a tupe "
                       "checkpoint?)", path);
    else if (!(rc = tupe_config_parse(c, js, strlen(js), name, e)) &&
             (rc = tupe_config_check(c, 1, e)))
        tupe_err_wrap(e, "%s", name);
    if (!rc)
        rc = tupe_tset_verify(s, &k, e);
    if (!rc) /* an ELECTRA pair: both networks' tensors */
        rc = tupe_cfg_pair(c) ? tupe_electra_layout(lay, c, e) : tupe_layout_build(lay, c, e);
    for (size_t i = 0; !rc && i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
        int dt;
        if (!tupe_tset_raw(s, p->name, p->ndim, shape, &dt, e))
            rc = e->code;
    }
    long u = rc ? -1 : tupe_tset_unused(s);
    if (u >= 0)
        rc = tupe_fail_tensor(e, TUPE_EDATA, path, s->ent[u].name, "not a parameter of this model");
    if (rc) {
        tupe_layout_free(lay);
        memset(lay, 0, sizeof *lay);
        tupe_tset_close(s);
        return rc;
    }
    *sp = s;
    return 0;
}
