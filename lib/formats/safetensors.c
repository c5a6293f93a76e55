#include "formats/safetensors.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/checksum.h"
#include "base/fileio.h"

struct tupe_st {
    char *path;
    const unsigned char *base;   /* whole file */
    uint64_t size, hlen;
    void *map;                   /* mmap'd region, or NULL */
    unsigned char *own;          /* malloc'd copy, or NULL */
    tupe_st_tensor *t;           /* sorted by name */
    size_t nt;
    char **mkey, **mval;
    size_t nm;
};

static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static int cmp_name(const void *a, const void *b)
{
    return strcmp(((const tupe_st_tensor *)a)->name, ((const tupe_st_tensor *)b)->name);
}

static int cmp_offset(const void *a, const void *b)
{
    const tupe_st_tensor *x = *(const tupe_st_tensor *const *)a, *y = *(const tupe_st_tensor *const *)b;
    if (x->begin != y->begin)
        return x->begin < y->begin ? -1 : 1;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return strcmp(x->name, y->name);
}

static void st_free(tupe_st *st)
{
    if (!st)
        return;
    for (size_t i = 0; i < st->nt; i++)
        free((char *)st->t[i].name);
    for (size_t i = 0; i < st->nm; i++)
        free(st->mkey[i]), free(st->mval[i]);
    free(st->t);
    free(st->mkey);
    free(st->mval);
    if (st->map)
        munmap(st->map, st->size);
    free(st->own);
    free(st->path);
    free(st);
}

void tupe_st_close(tupe_st *st) { st_free(st); }

/* Parse one tensor entry; on success fills *t (name not yet set). */
static int parse_tensor(tupe_st *st, const char *name, json_t *v, tupe_st_tensor *t, tupe_err *e)
{
    const char *P = st->path;
    if (!json_is_object(v))
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "header entry is not an object");
    json_t *dt = json_object_get(v, "dtype"), *sh = json_object_get(v, "shape"),
           *off = json_object_get(v, "data_offsets");
    if (!dt)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "missing \"dtype\"");
    if (!sh)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "missing \"shape\"");
    if (!off)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "missing \"data_offsets\"");
    if (!json_is_string(dt))
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "\"dtype\" is not a string");
    t->dtype = tupe_dtype_parse(json_string_value(dt));
    if (t->dtype < 0)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "unknown dtype \"%s\"",
                                json_string_value(dt));
    if (!json_is_array(sh))
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "\"shape\" is not an array");
    size_t nd = json_array_size(sh);
    if (nd > TUPE_ST_MAX_DIM)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "%zu dimensions (at most %d supported)",
                                nd, TUPE_ST_MAX_DIM);
    t->ndim = (int)nd;
    uint64_t numel = 1;
    int overflow = 0;
    for (size_t i = 0; i < nd; i++) {
        json_t *d = json_array_get(sh, i);
        if (!json_is_integer(d) || json_integer_value(d) < 0)
            return tupe_fail_tensor(e, TUPE_EDATA, P, name,
                                    "\"shape\"[%zu] is not a non-negative integer", i);
        t->shape[i] = (uint64_t)json_integer_value(d);
        if (t->shape[i] && numel > UINT64_MAX / t->shape[i])
            overflow = 1;
        numel *= t->shape[i];
    }
    if (!json_is_array(off) || json_array_size(off) != 2)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name,
                                "\"data_offsets\" is not an array of two integers");
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < 0)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name,
                                "\"data_offsets\" are not non-negative integers");
    t->begin = (uint64_t)json_integer_value(b);
    t->end = (uint64_t)json_integer_value(en);
    if (t->end < t->begin)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "data_offsets [%llu, %llu) end before they begin",
                                (unsigned long long)t->begin, (unsigned long long)t->end);
    unsigned bits = tupe_dtype_bits(t->dtype);
    if (overflow || (numel && numel > UINT64_MAX / bits))
        return tupe_fail_tensor(e, TUPE_EDATA, P, name, "shape has too many elements");
    uint64_t nbits = numel * bits;
    if (nbits % 8)
        return tupe_fail_tensor(e, TUPE_EDATA, P, name,
                                "%llu elements of %s do not fill whole bytes",
                                (unsigned long long)numel, tupe_dtype_name(t->dtype));
    t->numel = numel;
    if (t->end - t->begin != nbits / 8) {
        char shp[256];
        size_t k = 0;
        shp[k++] = '[';
        for (int i = 0; i < t->ndim && k < sizeof shp - 24; i++)
            k += (size_t)snprintf(shp + k, sizeof shp - k, "%s%llu", i ? ", " : "",
                                  (unsigned long long)t->shape[i]);
        snprintf(shp + k, sizeof shp - k, "]");
        return tupe_fail_tensor(e, TUPE_EDATA, P, name,
                                "data_offsets [%llu, %llu) hold %llu bytes, but %s %s needs %llu",
                                (unsigned long long)t->begin, (unsigned long long)t->end,
                                (unsigned long long)(t->end - t->begin), tupe_dtype_name(t->dtype),
                                shp, (unsigned long long)(nbits / 8));
    }
    return 0;
}

static int parse_all(tupe_st *st, tupe_err *e)
{
    const char *P = st->path;
    if (st->size < 8)
        return tupe_fail_byte(e, TUPE_EDATA, P, 0,
                              "file of %llu bytes is too short for a safetensors header",
                              (unsigned long long)st->size);
    uint64_t n = le64(st->base);
    if (n > TUPE_ST_MAX_HEADER)
        return tupe_fail_byte(e, TUPE_EDATA, P, 0,
                              "header length %llu exceeds the limit of %u bytes",
                              (unsigned long long)n, TUPE_ST_MAX_HEADER);
    if (n > st->size - 8)
        return tupe_fail_byte(e, TUPE_EDATA, P, 0,
                              "header length %llu runs past the end of the file (%llu bytes)",
                              (unsigned long long)n, (unsigned long long)st->size);
    st->hlen = n;
    const char *h = (const char *)st->base + 8;
    if (n == 0 || h[0] != '{')
        return tupe_fail_byte(e, TUPE_EDATA, P, 8, "header does not start with '{'");
    json_error_t je;
    json_t *root = json_loadb(h, (size_t)n, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tupe_fail_byte(e, TUPE_EDATA, P, 8 + (uint64_t)(je.position > 0 ? je.position : 0),
                              "invalid JSON header: %s", je.text);
    int rc = 0;
    if (!json_is_object(root)) {
        rc = tupe_fail_byte(e, TUPE_EDATA, P, 8, "header is not a JSON object");
        goto out;
    }
    size_t cap = json_object_size(root);
    st->t = calloc(cap ? cap : 1, sizeof *st->t);
    if (!st->t) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    const char *key;
    json_t *val;
    json_object_foreach(root, key, val) {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_is_object(val)) {
                rc = tupe_fail(e, TUPE_EDATA, "%s: __metadata__ is not an object", P);
                goto out;
            }
            size_t m = json_object_size(val);
            st->mkey = calloc(m ? m : 1, sizeof *st->mkey);
            st->mval = calloc(m ? m : 1, sizeof *st->mval);
            if (!st->mkey || !st->mval) {
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                goto out;
            }
            const char *mk;
            json_t *mv;
            json_object_foreach(val, mk, mv) {
                if (!json_is_string(mv)) {
                    rc = tupe_fail(e, TUPE_EDATA, "%s: __metadata__ value of '%s' is not a string",
                                   P, mk);
                    goto out;
                }
                st->mkey[st->nm] = strdup(mk);
                st->mval[st->nm] = strdup(json_string_value(mv));
                if (!st->mkey[st->nm] || !st->mval[st->nm]) {
                    st->nm++;
                    rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                    goto out;
                }
                st->nm++;
            }
            continue;
        }
        tupe_st_tensor t;
        memset(&t, 0, sizeof t);
        rc = parse_tensor(st, key, val, &t, e);
        if (rc)
            goto out;
        t.name = strdup(key);
        if (!t.name) {
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
            goto out;
        }
        st->t[st->nt++] = t;
    }
    /* The tensors must tile the data section exactly. */
    uint64_t dsize = st->size - 8 - n;
    const tupe_st_tensor **ord = malloc((st->nt ? st->nt : 1) * sizeof *ord);
    if (!ord) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < st->nt; i++)
        ord[i] = &st->t[i];
    qsort(ord, st->nt, sizeof *ord, cmp_offset);
    uint64_t at = 0;
    const char *prev = NULL;
    for (size_t i = 0; i < st->nt && !rc; i++) {
        const tupe_st_tensor *t = ord[i];
        if (t->begin > at)
            rc = prev ? tupe_fail_tensor(e, TUPE_EDATA, P, t->name,
                                         "gap of %llu bytes after tensor '%s' (data_offsets begin at %llu, expected %llu)",
                                         (unsigned long long)(t->begin - at), prev,
                                         (unsigned long long)t->begin, (unsigned long long)at)
                      : tupe_fail_tensor(e, TUPE_EDATA, P, t->name,
                                         "the data section starts with %llu bytes that belong to no tensor",
                                         (unsigned long long)t->begin);
        else if (t->begin < at)
            rc = tupe_fail_tensor(e, TUPE_EDATA, P, t->name,
                                  "overlaps tensor '%s' (data_offsets begin at %llu, before %llu)",
                                  prev ? prev : "?", (unsigned long long)t->begin,
                                  (unsigned long long)at);
        else if (t->end > dsize)
            rc = tupe_fail_tensor(e, TUPE_EDATA, P, t->name,
                                  "data_offsets end at %llu, past the end of the data section (%llu bytes; file truncated?)",
                                  (unsigned long long)t->end, (unsigned long long)dsize);
        at = t->end;
        prev = t->name;
    }
    free(ord);
    if (!rc && at != dsize)
        rc = tupe_fail_byte(e, TUPE_EDATA, P, 8 + n + at,
                            "%llu bytes after the last tensor belong to no tensor",
                            (unsigned long long)(dsize - at));
    if (rc)
        goto out;
    for (size_t i = 0; i < st->nt; i++)
        st->t[i].data = st->base + 8 + n + st->t[i].begin;
    qsort(st->t, st->nt, sizeof *st->t, cmp_name);
out:
    json_decref(root);
    return rc;
}

int tupe_st_parse(tupe_st **stp, const void *buf, size_t len, const char *name, tupe_err *e)
{
    tupe_st *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(name ? name : "(buffer)")) || !(st->own = malloc(len ? len : 1))) {
        st_free(st);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    if (len)
        memcpy(st->own, buf, len);
    st->base = st->own;
    st->size = len;
    int rc = parse_all(st, e);
    if (rc) {
        st_free(st);
        return rc;
    }
    *stp = st;
    return 0;
}

/* The size of the data section a header declares: the largest end of its data_offsets (0 when
 * the header does not parse: parse_all then says what is wrong with it). */
static uint64_t declared_data(const unsigned char *h, size_t n)
{
    json_t *root = json_loadb((const char *)h, n, 0, NULL);
    uint64_t end = 0;
    const char *key;
    json_t *v;
    json_object_foreach(root, key, v) {
        json_t *en = json_array_get(json_object_get(v, "data_offsets"), 1);
        if (json_is_integer(en) && json_integer_value(en) > 0 &&
            (uint64_t)json_integer_value(en) > end)
            end = (uint64_t)json_integer_value(en);
    }
    json_decref(root);
    return end;
}

/* A pipe or other stream (not mapped): read no more than its header declares, each part only
 * after the one before has been checked, so that a device such as /dev/zero or a stream that
 * does not end is refused at once instead of being read into memory without bound. */
static int read_stream(tupe_st *st, tupe_in *in, const char *path, tupe_err *e)
{
    size_t len = 0, cap = 0, got;
    int rc = tupe_in_append(in, &st->own, &len, &cap, 8, &got, e);
    uint64_t n = !rc && len == 8 ? le64(st->own) : 0;
    if (!rc && n > 0 && n <= TUPE_ST_MAX_HEADER)
        rc = tupe_in_append(in, &st->own, &len, &cap, (size_t)n, &got, e);
    if (!rc && n > 0 && len == 8 + n && st->own[8] == '{') {
        uint64_t data = declared_data(st->own + 8, (size_t)n);
        if (data > SIZE_MAX - len - 1)
            rc = tupe_fail_byte(e, TUPE_EDATA, path, 8, "header declares %llu bytes of tensors",
                                (unsigned long long)data);
        else if (!(rc = tupe_in_append(in, &st->own, &len, &cap, (size_t)data, &got, e)) &&
                 got == data) {
            /* Nothing may follow what the header declares. */
            unsigned char extra;
            size_t more;
            if (!(rc = tupe_in_read(in, &extra, 1, &more, e)) && more)
                rc = tupe_fail_byte(e, TUPE_EDATA, path, len, "more bytes after the %llu that "
                                    "its header declares (not a safetensors file?)",
                                    (unsigned long long)len);
        }
    }
    if (rc)
        return rc;
    if (!st->own && !(st->own = malloc(1)))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    st->base = st->own;
    st->size = len;
    return 0;
}

int tupe_st_open(tupe_st **stp, const char *path, tupe_err *e)
{
    tupe_st *st = calloc(1, sizeof *st);
    if (!st || !(st->path = strdup(path))) {
        free(st);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    /* Opened as any input (tupe_in_open_whole), so that a FIFO without a writer is refused
     * after a while instead of blocking in open(); a regular file is then mapped. */
    tupe_in *in;
    int rc = strcmp(path, "-") == 0 ? tupe_in_open(&in, path, e) : tupe_in_open_whole(&in, path, e);
    if (rc) {
        st_free(st);
        return rc;
    }
    struct stat sb;
    int fd = tupe_in_fileno(in);
    if (strcmp(path, "-") != 0 && fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode)) {
        st->size = (uint64_t)sb.st_size;
        if (st->size > 0) {
            st->map = mmap(NULL, st->size, PROT_READ, MAP_PRIVATE, fd, 0);
            if (st->map == MAP_FAILED) {
                int err = errno;
                tupe_in_close(in);
                st->map = NULL;
                st_free(st);
                return tupe_fail_errno(e, TUPE_EIO, err, "%s: cannot map", path);
            }
            st->base = st->map;
        } else {
            st->base = (const unsigned char *)"";
        }
    } else {
        rc = read_stream(st, in, path, e);
    }
    tupe_in_close(in);
    if (rc) {
        st_free(st);
        return rc;
    }
    rc = parse_all(st, e);
    if (rc) {
        st_free(st);
        return rc;
    }
    *stp = st;
    return 0;
}

const char *tupe_st_path(const tupe_st *st) { return st->path; }
size_t tupe_st_count(const tupe_st *st) { return st->nt; }
const tupe_st_tensor *tupe_st_at(const tupe_st *st, size_t i) { return i < st->nt ? &st->t[i] : NULL; }
uint64_t tupe_st_file_size(const tupe_st *st) { return st->size; }
uint64_t tupe_st_header_size(const tupe_st *st) { return st->hlen; }

const tupe_st_tensor *tupe_st_find(const tupe_st *st, const char *name)
{
    size_t lo = 0, hi = st->nt;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = strcmp(st->t[mid].name, name);
        if (c == 0)
            return &st->t[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

size_t tupe_st_meta_count(const tupe_st *st) { return st->nm; }

void tupe_st_meta_at(const tupe_st *st, size_t i, const char **key, const char **value)
{
    *key = st->mkey[i];
    *value = st->mval[i];
}

const char *tupe_st_meta(const tupe_st *st, const char *key)
{
    for (size_t i = 0; i < st->nm; i++)
        if (strcmp(st->mkey[i], key) == 0)
            return st->mval[i];
    return NULL;
}

int tupe_st_verify(const tupe_st *st, tupe_err *e)
{
    const char *want = tupe_st_meta(st, TUPE_ST_CHECK_KEY);
    if (!want)
        return 0;
    uint64_t h;
    if (tupe_hash_parse(want, &h))
        return tupe_fail(e, TUPE_EDATA, "%s: __metadata__ %s is malformed: '%s'", st->path,
                         TUPE_ST_CHECK_KEY, want);
    const unsigned char *data = st->base + 8 + st->hlen;
    uint64_t got = tupe_hash64(data, st->size - 8 - st->hlen);
    if (got != h) {
        /* Name the first tensor whose bytes no longer match, when we can tell: we cannot
         * (one hash for all), so name the file. */
        return tupe_fail(e, TUPE_EDATA,
                         "%s: data checksum mismatch (file corrupt: expected %016llx, got %016llx)",
                         st->path, (unsigned long long)h, (unsigned long long)got);
    }
    return 0;
}

int tupe_st_read_f32(const tupe_st *st, const char *name, int ndim, const uint64_t *shape,
                     float *out, uint64_t n, tupe_err *e)
{
    const tupe_st_tensor *t = tupe_st_find(st, name);
    if (!t)
        return tupe_fail_tensor(e, TUPE_EDATA, st->path, name, "missing");
    if (ndim >= 0) {
        int ok = t->ndim == ndim;
        for (int i = 0; ok && i < ndim; i++)
            ok = t->shape[i] == shape[i];
        if (!ok) {
            char want[160], got[160];
            size_t a = 0, b = 0;
            for (int i = 0; i < ndim && a < sizeof want - 24; i++)
                a += (size_t)snprintf(want + a, sizeof want - a, "%s%llu", i ? ", " : "",
                                      (unsigned long long)shape[i]);
            want[a] = 0;
            for (int i = 0; i < t->ndim && b < sizeof got - 24; i++)
                b += (size_t)snprintf(got + b, sizeof got - b, "%s%llu", i ? ", " : "",
                                      (unsigned long long)t->shape[i]);
            got[b] = 0;
            return tupe_fail_tensor(e, TUPE_EDATA, st->path, name,
                                    "shape [%s], expected [%s]", got, want);
        }
    }
    if (t->numel != n)
        return tupe_fail_tensor(e, TUPE_EDATA, st->path, name, "%llu elements, expected %llu",
                                (unsigned long long)t->numel, (unsigned long long)n);
    if (tupe_to_f32(t->dtype, t->data, out, (size_t)n))
        return tupe_fail_tensor(e, TUPE_EDATA, st->path, name,
                                "dtype %s is not a floating-point type",
                                tupe_dtype_name(t->dtype));
    return 0;
}

/* ---- writing ---------------------------------------------------------------------------- */

typedef struct wt {
    char *name;
    int dtype, ndim;
    uint64_t shape[TUPE_ST_MAX_DIM];
    const void *data;
    void *own;
    uint64_t bytes;
} wt;

struct tupe_stw {
    wt *t;
    size_t nt, cap;
    char **mk, **mv;
    size_t nm;
    int checksum;
};

tupe_stw *tupe_stw_new(void) { return calloc(1, sizeof(tupe_stw)); }

void tupe_stw_free(tupe_stw *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nt; i++)
        free(w->t[i].name), free(w->t[i].own);
    for (size_t i = 0; i < w->nm; i++)
        free(w->mk[i]), free(w->mv[i]);
    free(w->t);
    free(w->mk);
    free(w->mv);
    free(w);
}

void tupe_stw_set_checksum(tupe_stw *w, int on) { w->checksum = on; }

int tupe_stw_meta(tupe_stw *w, const char *key, const char *value, tupe_err *e)
{
    for (size_t i = 0; i < w->nm; i++)
        if (strcmp(w->mk[i], key) == 0) {
            char *v = strdup(value);
            if (!v)
                return tupe_fail(e, TUPE_EFAIL, "out of memory");
            free(w->mv[i]);
            w->mv[i] = v;
            return 0;
        }
    char **nk = realloc(w->mk, (w->nm + 1) * sizeof *nk);
    if (!nk)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    w->mk = nk;
    char **nv = realloc(w->mv, (w->nm + 1) * sizeof *nv);
    if (!nv)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    w->mv = nv;
    w->mk[w->nm] = strdup(key);
    w->mv[w->nm] = strdup(value);
    if (!w->mk[w->nm] || !w->mv[w->nm]) {
        free(w->mk[w->nm]), free(w->mv[w->nm]);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    w->nm++;
    return 0;
}

static int add(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
               const void *data, int copy, tupe_err *e)
{
    if (!tupe_dtype_name(dtype))
        return tupe_fail_tensor(e, TUPE_EFAIL, "safetensors writer", name, "invalid dtype %d", dtype);
    if (ndim < 0 || ndim > TUPE_ST_MAX_DIM)
        return tupe_fail_tensor(e, TUPE_EFAIL, "safetensors writer", name, "bad rank %d", ndim);
    if (strcmp(name, "__metadata__") == 0)
        return tupe_fail_tensor(e, TUPE_EFAIL, "safetensors writer", name, "reserved name");
    for (size_t i = 0; i < w->nt; i++)
        if (strcmp(w->t[i].name, name) == 0)
            return tupe_fail_tensor(e, TUPE_EFAIL, "safetensors writer", name, "added twice");
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++)
        numel *= shape[i];
    uint64_t nbits = numel * tupe_dtype_bits(dtype);
    if (nbits % 8)
        return tupe_fail_tensor(e, TUPE_EFAIL, "safetensors writer", name,
                                "elements do not fill whole bytes");
    if (w->nt == w->cap) {
        size_t nc = w->cap ? w->cap * 2 : 64;
        wt *nt = realloc(w->t, nc * sizeof *nt);
        if (!nt)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        w->t = nt;
        w->cap = nc;
    }
    wt *t = &w->t[w->nt];
    memset(t, 0, sizeof *t);
    t->name = strdup(name);
    if (!t->name)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    t->dtype = dtype;
    t->ndim = ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    t->bytes = nbits / 8;
    if (copy && t->bytes) {
        t->own = malloc(t->bytes);
        if (!t->own) {
            free(t->name);
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        }
        memcpy(t->own, data, t->bytes);
        t->data = t->own;
    } else {
        t->data = data;
    }
    w->nt++;
    return 0;
}

int tupe_stw_add(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                 const void *data, tupe_err *e)
{
    return add(w, name, dtype, ndim, shape, data, 0, e);
}

int tupe_stw_add_copy(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                      const void *data, tupe_err *e)
{
    return add(w, name, dtype, ndim, shape, data, 1, e);
}

int tupe_stw_add_f32(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                     const float *data, tupe_err *e)
{
    if (dtype == TUPE_F32)
        return add(w, name, dtype, ndim, shape, data, 0, e);
    if (dtype != TUPE_F16 && dtype != TUPE_BF16 && dtype != TUPE_F64)
        return tupe_fail_tensor(e, TUPE_EFAIL, "safetensors writer", name,
                                "cannot store fp32 values as %s", tupe_dtype_name(dtype));
    int rc = add(w, name, dtype, ndim, shape, NULL, 0, e);
    if (rc)
        return rc;
    wt *t = &w->t[w->nt - 1];
    t->own = malloc(t->bytes ? t->bytes : 1);
    if (!t->own)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_from_f32(dtype, data, t->own, (size_t)(t->bytes / (tupe_dtype_bits(dtype) / 8)));
    t->data = t->own;
    return 0;
}

static int cmp_write(const void *a, const void *b)
{
    const wt *x = a, *y = b;
    if (x->dtype != y->dtype)
        return x->dtype > y->dtype ? -1 : 1;
    return strcmp(x->name, y->name);
}

char *tupe_stw_header(tupe_stw *w, size_t *len, tupe_err *e)
{
    qsort(w->t, w->nt, sizeof *w->t, cmp_write);
    json_t *root = json_object();
    if (!root) {
        tupe_fail(e, TUPE_EFAIL, "out of memory");
        return NULL;
    }
    int bad = 0;
    if (w->checksum) {
        tupe_hasher *h = tupe_hasher_new();
        if (!h) {
            json_decref(root);
            tupe_fail(e, TUPE_EFAIL, "out of memory");
            return NULL;
        }
        for (size_t i = 0; i < w->nt; i++)
            tupe_hasher_update(h, w->t[i].data, w->t[i].bytes);
        char hex[22];
        tupe_hash_hex(tupe_hasher_digest(h), hex);
        tupe_hasher_free(h);
        if (tupe_stw_meta(w, TUPE_ST_CHECK_KEY, hex, e)) {
            json_decref(root);
            return NULL;
        }
    }
    if (w->nm) {
        json_t *m = json_object();
        bad |= !m || json_object_set_new(root, "__metadata__", m);
        for (size_t i = 0; m && i < w->nm; i++)
            bad |= json_object_set_new(m, w->mk[i], json_string(w->mv[i]));
    }
    uint64_t off = 0;
    for (size_t i = 0; i < w->nt; i++) {
        wt *t = &w->t[i];
        json_t *o = json_object(), *sh = json_array(), *of = json_array();
        bad |= !o || !sh || !of;
        if (bad) {
            json_decref(o), json_decref(sh), json_decref(of);
            break;
        }
        bad |= json_object_set_new(o, "dtype", json_string(tupe_dtype_name(t->dtype)));
        for (int d = 0; d < t->ndim; d++)
            bad |= json_array_append_new(sh, json_integer((json_int_t)t->shape[d]));
        bad |= json_object_set_new(o, "shape", sh);
        bad |= json_array_append_new(of, json_integer((json_int_t)off));
        bad |= json_array_append_new(of, json_integer((json_int_t)(off + t->bytes)));
        bad |= json_object_set_new(o, "data_offsets", of);
        bad |= json_object_set_new(root, t->name, o);
        off += t->bytes;
    }
    char *s = bad ? NULL : json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (!s) {
        tupe_fail(e, TUPE_EFAIL, "safetensors writer: cannot encode header (invalid UTF-8 in a name?)");
        return NULL;
    }
    size_t n = strlen(s), padded = (n + 7) & ~(size_t)7;
    char *p = realloc(s, padded + 1);
    if (!p) {
        free(s);
        tupe_fail(e, TUPE_EFAIL, "out of memory");
        return NULL;
    }
    memset(p + n, ' ', padded - n);
    p[padded] = 0;
    *len = padded;
    return p;
}

int tupe_stw_write(tupe_stw *w, const char *path, tupe_err *e)
{
    size_t n;
    char *hdr = tupe_stw_header(w, &n, e);
    if (!hdr)
        return e ? e->code : TUPE_EFAIL;
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (rc) {
        free(hdr);
        return rc;
    }
    unsigned char len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (unsigned char)((uint64_t)n >> (8 * i));
    rc = tupe_out_write(o, len8, 8, e);
    if (!rc)
        rc = tupe_out_write(o, hdr, n, e);
    for (size_t i = 0; !rc && i < w->nt; i++)
        rc = tupe_out_write(o, w->t[i].data, w->t[i].bytes, e);
    free(hdr);
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}
