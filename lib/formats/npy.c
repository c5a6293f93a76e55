#include "formats/npy.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

static size_t item_size(const char *d)
{
    static const struct { const char *d; size_t s; } t[] = {
        {"<f4", 4}, {"<f2", 2}, {"<u2", 2}, {"<i2", 2}, {"<i4", 4}, {"<u4", 4}, {"<i8", 8},
        {"<u8", 8}, {"<f8", 8}, {"|u1", 1}, {"|i1", 1}, {"|b1", 1}};
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        if (strcmp(t[i].d, d) == 0)
            return t[i].s;
    return 0;
}

int tupe_npy_write(const char *path, const char *descr, int ndim, const uint64_t *shape,
                   const void *data, tupe_err *e)
{
    size_t isz = item_size(descr);
    if (!isz || ndim < 0 || ndim > TUPE_NPY_MAX_DIM)
        return tupe_fail(e, TUPE_EFAIL, "%s: cannot write dtype '%s' with %d dimensions", path,
                         descr, ndim);
    char hdr[1024];
    int n = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    uint64_t numel = 1;
    for (int i = 0; i < ndim; i++) {
        n += snprintf(hdr + n, sizeof hdr - (size_t)n, "%llu%s", (unsigned long long)shape[i],
                      ndim == 1 ? "," : i + 1 < ndim ? ", " : "");
        numel *= shape[i];
    }
    n += snprintf(hdr + n, sizeof hdr - (size_t)n, "), }");
    /* As numpy writes it, byte for byte: room for the first dimension to grow to 21 digits,
     * then spaces so that magic(6) + version(2) + length(2) + header + '\n' is a multiple of
     * 64 (a whole 64 more when it already is). */
    if (ndim > 0) {
        char d0[24];
        int l0 = snprintf(d0, sizeof d0, "%llu", (unsigned long long)shape[0]);
        for (int k = l0; k < 21; k++)
            hdr[n++] = ' ';
    }
    size_t pad = 64 - (10 + (size_t)n + 1) % 64;
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, 0, 0};
    size_t hlen = (size_t)n + pad + 1;
    pre[8] = (unsigned char)(hlen & 0xff);
    pre[9] = (unsigned char)(hlen >> 8);
    memset(hdr + n, ' ', pad);
    hdr[(size_t)n + pad] = '\n';
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (rc)
        return rc;
    rc = tupe_out_write(o, pre, sizeof pre, e);
    if (!rc)
        rc = tupe_out_write(o, hdr, hlen, e);
    if (!rc)
        rc = tupe_out_write(o, data, (size_t)numel * isz, e);
    if (rc) {
        tupe_out_abort(o);
        return rc;
    }
    return tupe_out_commit(o, e);
}

void tupe_npy_free(tupe_npy *a)
{
    if (a) {
        free(a->data);
        a->data = NULL;
    }
}

/* Find 'key': and return a pointer after the colon and spaces. */
static const char *field(const char *h, const char *key)
{
    char pat[32];
    snprintf(pat, sizeof pat, "'%s'", key);
    const char *p = strstr(h, pat);
    if (!p)
        return NULL;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    if (*p != ':')
        return NULL;
    p++;
    while (*p == ' ')
        p++;
    return p;
}

int tupe_npy_read(const char *path, tupe_npy *out, tupe_err *e)
{
    memset(out, 0, sizeof *out);
    /* Read part by part, each bounded by what the part before declares: the magic, the
     * header, then the data its shape and dtype need and nothing more. */
    tupe_in *in;
    int rc = tupe_in_open(&in, path, e);
    if (rc)
        return rc;
    unsigned char *buf = NULL;
    size_t len = 0, cap = 0, got;
    if ((rc = tupe_in_append(in, &buf, &len, &cap, 12, &got, e))) {
        free(buf);
        tupe_in_close(in);
        return rc;
    }
    const unsigned char *b = buf;
    if (len < 10 || memcmp(b, "\x93NUMPY", 6) != 0) {
        free(buf);
        tupe_in_close(in);
        return tupe_fail_byte(e, TUPE_EDATA, path, 0, "not a .npy file (bad magic)");
    }
    size_t hlen, off;
    if (b[6] == 1) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8;
        off = 10;
    } else if ((b[6] == 2 || b[6] == 3) && len >= 12) {
        hlen = (size_t)b[8] | (size_t)b[9] << 8 | (size_t)b[10] << 16 | (size_t)b[11] << 24;
        off = 12;
    } else {
        unsigned major = b[6], minor = b[7];
        free(buf);
        tupe_in_close(in);
        return tupe_fail_byte(e, TUPE_EDATA, path, 6, "unsupported .npy version %u.%u", major, minor);
    }
    if (hlen <= 1000000 && off + hlen > len &&
        (rc = tupe_in_append(in, &buf, &len, &cap, off + hlen - len, &got, e))) {
        free(buf);
        tupe_in_close(in);
        return rc;
    }
    b = buf;
    if (hlen > len - off || hlen > 1000000) {
        free(buf);
        tupe_in_close(in);
        return tupe_fail_byte(e, TUPE_EDATA, path, 8, "header length %zu runs past the end", hlen);
    }
    char *h = malloc(hlen + 1);
    if (!h) {
        free(buf);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    memcpy(h, buf + off, hlen);
    h[hlen] = 0;
    const char *d = field(h, "descr"), *fo = field(h, "fortran_order"), *sh = field(h, "shape");
    rc = 0;
    if (!d || *d != '\'' || !fo || !sh || *sh != '(') {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "malformed header: %.80s", h);
        goto done;
    }
    size_t dl = strcspn(d + 1, "'");
    if (dl >= sizeof out->descr) {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "unsupported dtype %.*s", (int)dl, d + 1);
        goto done;
    }
    memcpy(out->descr, d + 1, dl);
    out->descr[dl] = 0;
    /* numpy writes '=' or '|' for single bytes and native order; accept '=' as little-endian
     * on this little-endian host. */
    if (out->descr[0] == '=')
        out->descr[0] = '<';
    out->itemsize = item_size(out->descr);
    if (!out->itemsize) {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "unsupported dtype '%s' (big-endian or exotic)", out->descr);
        goto done;
    }
    if (strncmp(fo, "False", 5) != 0) {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "Fortran-order arrays are not supported");
        goto done;
    }
    out->numel = 1;
    for (const char *p = sh + 1; *p && *p != ')';) {
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == ')')
            break;
        if (!isdigit((unsigned char)*p) || out->ndim == TUPE_NPY_MAX_DIM) {
            rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "malformed shape in header: %.80s", sh);
            goto done;
        }
        char *end;
        unsigned long long v = strtoull(p, &end, 10);
        out->shape[out->ndim++] = v;
        if (v && out->numel > UINT64_MAX / v) {
            rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "shape too large");
            goto done;
        }
        out->numel *= v;
        p = end;
    }
    size_t data_off = off + hlen;
    uint64_t need = out->numel * out->itemsize;
    if (out->numel && need / out->numel != out->itemsize) {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "shape too large");
        goto done;
    }
    /* The data, and one byte more to see that nothing follows it. */
    if (need > SIZE_MAX - len - 2) {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, off, "shape too large");
        goto done;
    }
    if (len - data_off <= need &&
        (rc = tupe_in_append(in, &buf, &len, &cap, (size_t)need + 1 - (len - data_off), &got, e)))
        goto done;
    if (len - data_off != need) {
        rc = tupe_fail_byte(e, TUPE_EDATA, path, data_off, "data is %zu bytes, shape and dtype need %llu",
                            len - data_off, (unsigned long long)need);
        goto done;
    }
    out->data = malloc(need ? need : 1);
    if (!out->data) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto done;
    }
    memcpy(out->data, buf + data_off, need);
done:
    free(h);
    free(buf);
    tupe_in_close(in);
    return rc;
}
