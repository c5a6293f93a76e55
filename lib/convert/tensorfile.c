#include "convert/tensorfile.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checksum.h"
#include "base/dtype.h"
#include "base/fileio.h"
#include "convert/hfbert.h"
#include "convert/import.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"

/* The per-tensor hashes of checkpoint.c. */
#define TENSOR_HASH_KEY "tupe.tensor_xxh3"

static int is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static int is_float(int dt)
{
    return dt == TUPE_F32 || dt == TUPE_F16 || dt == TUPE_BF16 || dt == TUPE_F64;
}

static int open_verified(tupe_tset **s, const char *path, size_t *checked, tupe_err *e)
{
    int rc = tupe_tset_open_path(s, path, e);
    if (rc)
        return rc;
    size_t k;
    if ((rc = tupe_tset_verify(*s, checked ? checked : &k, e))) {
        tupe_tset_close(*s);
        *s = NULL;
    }
    return rc;
}

/* ---- info ------------------------------------------------------------------------------------ */

int tupe_tf_info(const char *path, json_t **out, tupe_err *e)
{
    *out = NULL;
    tupe_tset *s;
    size_t checked;
    int rc = open_verified(&s, path, &checked, e);
    if (rc)
        return rc;
    json_t *root = json_object(), *tensors = json_array(), *dtypes = json_object();
    json_t *meta = json_object();
    uint64_t params = 0;
    json_object_set_new(root, "path", json_string(path));
    json_object_set_new(root, "files", json_integer(tupe_tset_nfiles(s)));
    json_object_set_new(root, "bytes", json_integer((json_int_t)tupe_tset_bytes(s)));
    for (size_t i = 0; i < tupe_tset_count(s); i++) {
        const tupe_st_tensor *t = tupe_tset_tensor(s, i);
        json_t *shape = json_array();
        for (int d = 0; d < t->ndim; d++)
            json_array_append_new(shape, json_integer((json_int_t)t->shape[d]));
        json_array_append_new(tensors, json_pack("{s:s, s:s, s:o, s:I}", "name", t->name, "dtype",
                                                 tupe_dtype_name(t->dtype), "shape", shape,
                                                 "numel", (json_int_t)t->numel));
        const char *dn = tupe_dtype_name(t->dtype);
        json_object_set_new(dtypes, dn, json_integer(json_integer_value(json_object_get(dtypes, dn)) +
                                                     (json_int_t)t->numel));
        if (is_float(t->dtype))
            params += t->numel;
    }
    json_object_set_new(root, "parameters", json_integer((json_int_t)params));
    json_object_set_new(root, "dtypes", dtypes);
    const tupe_st *st = tupe_tset_st(s, 0);
    for (size_t i = 0; i < tupe_st_meta_count(st); i++) {
        const char *k, *v;
        tupe_st_meta_at(st, i, &k, &v);
        if (strcmp(k, TENSOR_HASH_KEY) == 0)
            continue;
        json_error_t je;
        json_t *j = NULL;
        if (strcmp(k, "config") == 0 || strcmp(k, "train_state") == 0 ||
            strcmp(k, "optimizer") == 0 || strcmp(k, "args") == 0)
            j = json_loads(v, 0, &je);
        json_object_set_new(meta, k, j ? j : json_string(v));
    }
    json_object_set_new(root, "metadata", meta);
    json_object_set_new(root, "hashes", json_string(checked ? "verified" : "absent"));
    if (is_dir(path)) {
        char f[PATH_MAX];
        snprintf(f, sizeof f, "%s/optimizer.safetensors", path);
        if (tupe_path_exists(f))
            json_object_set_new(root, "optimizer", json_true());
        snprintf(f, sizeof f, "%s/config.json", path);
        json_error_t je;
        char *txt = NULL;
        size_t tl;
        tupe_err ignored; /* info shows what it can read: a config.json it cannot is left out */
        json_t *hc = tupe_path_exists(f) && tupe_read_text(f, &txt, &tl, 16u << 20, &ignored) == 0
                         ? json_loadb(txt, tl, 0, &je)
                         : NULL;
        free(txt);
        if (hc)
            json_object_set_new(root, "hf_config", hc);
    }
    json_object_set_new(root, "tensors", tensors);
    tupe_tset_close(s);
    *out = root;
    return 0;
}

/* ---- cast ------------------------------------------------------------------------------------ */

typedef struct cast_priv {
    tupe_tset *s;
    void **bufs;
    size_t nbufs;
} cast_priv;

void tupe_cast_free(tupe_cast_report *r)
{
    if (!r)
        return;
    cast_priv *p = r->priv;
    if (p) {
        for (size_t i = 0; i < p->nbufs; i++)
            free(p->bufs[i]);
        free(p->bufs);
        tupe_tset_close(p->s);
        free(p);
    }
    free(r->t);
    memset(r, 0, sizeof *r);
}

#define CHUNK 65536

/* Convert one float tensor into dst (numel elements of `to`) and measure what it lost. */
static void cast_tensor(const tupe_st_tensor *t, int to, void *dst, tupe_cast_stat *st, float *x,
                        float *y)
{
    unsigned ob = tupe_dtype_bits(to) / 8, ib = tupe_dtype_bits(t->dtype) / 8;
    const unsigned char *src = t->data;
    for (uint64_t i0 = 0; i0 < t->numel; i0 += CHUNK) {
        size_t n = (size_t)(t->numel - i0 < CHUNK ? t->numel - i0 : CHUNK);
        tupe_to_f32(t->dtype, src + i0 * ib, x, n);
        unsigned char *d = (unsigned char *)dst + i0 * ob;
        if (t->dtype == TUPE_F64 && to == TUPE_F32) {
            memcpy(d, x, n * 4);
        } else {
            tupe_from_f32(to, x, d, n);
        }
        tupe_to_f32(to, d, y, n);
        for (size_t k = 0; k < n; k++) {
            double a = x[k];
            if (t->dtype == TUPE_F64)
                memcpy(&a, src + (i0 + k) * 8, 8);
            double b = y[k];
            if (!isfinite(a))
                continue;
            if (!isfinite(b)) {
                st->overflow++;
                continue;
            }
            double err = fabs(b - a);
            if (err > st->max_abs)
                st->max_abs = err;
            if (a != 0) {
                if (err / fabs(a) > st->max_rel)
                    st->max_rel = err / fabs(a);
                if (b == 0)
                    st->underflow++;
            }
        }
    }
}

static int copy_other_files(const char *in, tupe_dirtx *tx, tupe_err *e)
{
    DIR *d = opendir(in);
    if (!d)
        return tupe_fail_errno(e, TUPE_ENOINPUT, errno, "%s", in);
    struct dirent *de;
    int rc = 0;
    while (!rc && (de = readdir(d))) {
        const char *n = de->d_name;
        if (n[0] == '.' || strcmp(n, "model.safetensors") == 0 ||
            strcmp(n, "optimizer.safetensors") == 0)
            continue;
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, "%s/%s", in, n);
        struct stat sb;
        if (stat(from, &sb) != 0 || !S_ISREG(sb.st_mode))
            continue;
        snprintf(to, sizeof to, "%s", tupe_dirtx_file(tx, n));
        char *buf;
        size_t len;
        if (!(rc = tupe_read_file(from, &buf, &len, (size_t)1 << 31, e))) {
            rc = tupe_write_file(to, buf, len, e);
            free(buf);
        }
    }
    closedir(d);
    return rc;
}

int tupe_tf_cast(const char *in, const char *out, int dtype, tupe_cast_report *r, tupe_err *e)
{
    memset(r, 0, sizeof *r);
    if (dtype != TUPE_F32 && dtype != TUPE_BF16 && dtype != TUPE_F16)
        return tupe_fail(e, TUPE_EUSAGE, "cast: the target must be F32, BF16 or F16");
    int dir = is_dir(in);
    char file[PATH_MAX];
    if (dir && strcmp(out, "-") == 0)
        return tupe_fail(e, TUPE_EUSAGE, "%s is a directory: its cast is a directory, not '-'", in);
    if (dir) {
        snprintf(file, sizeof file, "%s/model.safetensors", in);
        if (!tupe_path_exists(file))
            return tupe_fail(e, TUPE_ENOINPUT, "%s: no model.safetensors in this directory (cast "
                             "the shards of a sharded model one by one)", in);
    } else {
        snprintf(file, sizeof file, "%s", in);
    }
    cast_priv *p = calloc(1, sizeof *p);
    if (!p)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    r->priv = p;
    tupe_stw *w = NULL;
    json_t *hashes = NULL;
    tupe_dirtx *tx = NULL;
    float *x = NULL;
    int rc = open_verified(&p->s, file, NULL, e);
    if (rc)
        goto out;
    const tupe_st *st = tupe_tset_st(p->s, 0);
    size_t n = tupe_st_count(st);
    r->t = calloc(n ? n : 1, sizeof *r->t);
    p->bufs = calloc(n ? n : 1, sizeof *p->bufs);
    w = tupe_stw_new();
    hashes = tupe_st_meta(st, TENSOR_HASH_KEY) ? json_object() : NULL;
    x = malloc(2 * CHUNK * sizeof *x);
    if (!r->t || !p->bufs || !w || !x) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n && !rc; i++) {
        const tupe_st_tensor *t = tupe_st_at(st, i);
        tupe_cast_stat *cs = &r->t[r->n++];
        cs->name = t->name;
        cs->from = t->dtype;
        cs->numel = t->numel;
        cs->to = is_float(t->dtype) ? dtype : t->dtype;
        const void *data = t->data;
        size_t bytes = (size_t)(t->end - t->begin);
        if (is_float(t->dtype) && t->dtype != dtype) {
            bytes = (size_t)t->numel * (tupe_dtype_bits(dtype) / 8);
            void *b = malloc(bytes ? bytes : 1);
            if (!b) {
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                break;
            }
            p->bufs[p->nbufs++] = b;
            cast_tensor(t, dtype, b, cs, x, x + CHUNK);
            data = b;
        }
        rc = tupe_stw_add(w, t->name, cs->to, t->ndim, t->shape, data, e);
        if (!rc && hashes) {
            char hex[22];
            tupe_hash_hex(tupe_hash64(data, bytes), hex);
            json_object_set_new(hashes, t->name, json_string(hex));
        }
    }
    for (size_t i = 0; !rc && i < tupe_st_meta_count(st); i++) {
        const char *k, *v;
        tupe_st_meta_at(st, i, &k, &v);
        if (strcmp(k, TUPE_ST_CHECK_KEY) == 0) {
            tupe_stw_set_checksum(w, 1);
        } else if (strcmp(k, TENSOR_HASH_KEY) == 0) {
            char *hs = json_dumps(hashes, JSON_COMPACT | JSON_SORT_KEYS);
            rc = hs ? tupe_stw_meta(w, k, hs, e) : tupe_fail(e, TUPE_EFAIL, "out of memory");
            free(hs);
        } else {
            rc = tupe_stw_meta(w, k, v, e);
        }
    }
    if (rc)
        goto out;
    if (!dir) {
        rc = tupe_stw_write(w, out, e);
        goto out;
    }
    char opt[PATH_MAX], path[PATH_MAX];
    snprintf(opt, sizeof opt, "%s/optimizer.safetensors", in);
    r->optimizer_left = tupe_path_exists(opt);
    /* The cast of a directory is the same kind of directory. */
    snprintf(path, sizeof path, "%s/config.json", in);
    if ((rc = tupe_dirtx_begin(&tx, out, tupe_path_exists(path) ? TUPE_HF_KIND : TUPE_CKPT_KIND, e)))
        goto out;
    snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, "model.safetensors"));
    if ((rc = tupe_stw_write(w, path, e)) || (rc = copy_other_files(in, tx, e)))
        goto out;
    rc = tupe_dirtx_commit(tx, e);
    tx = NULL;
out:
    tupe_dirtx_abort(tx);
    json_decref(hashes);
    tupe_stw_free(w);
    free(x);
    if (rc)
        tupe_cast_free(r);
    return rc;
}

/* ---- npy ------------------------------------------------------------------------------------- */

static const char *npy_descr(int dt, int raw_bf16)
{
    switch (dt) {
    case TUPE_F32: case TUPE_F16: return "<f4";
    case TUPE_BF16: return raw_bf16 ? "<u2" : "<f4";
    case TUPE_F64: return "<f8";
    case TUPE_I64: return "<i8";
    case TUPE_U64: return "<u8";
    case TUPE_I32: return "<i4";
    case TUPE_U32: return "<u4";
    case TUPE_I16: return "<i2";
    case TUPE_U16: return "<u2";
    case TUPE_I8: return "|i1";
    case TUPE_U8: return "|u1";
    case TUPE_BOOL: return "|b1";
    default: return NULL;
    }
}

static int npy_one(const tupe_tset *s, size_t i, const char *path, int raw_bf16, tupe_err *e)
{
    const tupe_st_tensor *t = tupe_tset_tensor(s, i);
    const char *descr = npy_descr(t->dtype, raw_bf16);
    if (!descr)
        return tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(s, i), t->name,
                                "dtype %s has no .npy form", tupe_dtype_name(t->dtype));
    float *buf = NULL;
    const void *data = t->data;
    if (t->dtype == TUPE_F16 || (t->dtype == TUPE_BF16 && !raw_bf16)) {
        buf = malloc(t->numel ? (size_t)t->numel * sizeof *buf : 1);
        if (!buf)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        tupe_to_f32(t->dtype, t->data, buf, (size_t)t->numel);
        data = buf;
    }
    int rc = tupe_npy_write(path, descr, t->ndim, t->shape, data, e);
    free(buf);
    return rc;
}

int tupe_tf_npy(const char *in, const char *name, const char *out, int raw_bf16, size_t *count,
                tupe_err *e)
{
    *count = 0;
    if (!name && strcmp(out, "-") == 0)
        return tupe_fail(e, TUPE_EUSAGE, "every tensor goes into a directory, not '-' (one tensor "
                         "goes to '-' with --tensor)");
    tupe_tset *s;
    int rc = open_verified(&s, in, NULL, e);
    if (rc)
        return rc;
    if (name) {
        long i = tupe_tset_find(s, name);
        if (i < 0)
            rc = tupe_fail_tensor(e, TUPE_EDATA, in, name, "not in this file (it has %zu tensors; "
                                  "'tupe-convert info' lists them)", tupe_tset_count(s));
        else if (!(rc = npy_one(s, (size_t)i, out, raw_bf16, e)))
            *count = 1;
        tupe_tset_close(s);
        return rc;
    }
    tupe_dirtx *tx;
    if ((rc = tupe_dirtx_begin(&tx, out, TUPE_NPY_KIND, e))) {
        tupe_tset_close(s);
        return rc;
    }
    for (size_t i = 0; i < tupe_tset_count(s) && !rc; i++) {
        const char *n = tupe_tset_name(s, i);
        if (!*n || n[0] == '.' || strchr(n, '/') || strlen(n) > 240) {
            rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(s, i), n,
                                  "cannot be a file name (write it alone with --tensor)");
            break;
        }
        char fn[256], path[PATH_MAX];
        snprintf(fn, sizeof fn, "%s.npy", n);
        snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, fn));
        if (!(rc = npy_one(s, i, path, raw_bf16, e)))
            (*count)++;
    }
    tupe_tset_close(s);
    if (rc) {
        tupe_dirtx_abort(tx);
        return rc;
    }
    return tupe_dirtx_commit(tx, e);
}
