/* A test helper built on the shared CLI conventions (not installed): lets the shell tests
 * exercise option parsing, --help/--version, completion data, exit codes and error messages
 * end to end, and converts token streams to and from text for other tests. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "base/progress.h"
#include "cli/cli.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "text/tokstream.h"

enum { O_OUT = 1, O_VOCAB, O_HASH, O_MODE, O_SIZE, O_COUNT };

static const tupe_opt write_opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "write the token stream here (default: -)", "out:file"},
    {O_VOCAB, "vocab-size", 0, TUPE_REQARG, "N", "vocabulary size (default: 30522)", NULL},
    {O_HASH, "vocab-hash", 0, TUPE_REQARG, "HEX", "vocabulary hash (default: 0)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt cat_opts[] = {
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "write ids here (default: -)", "out:file"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt progress_opts[] = {
    {O_MODE, "mode", 0, TUPE_REQARG, "MODE", "unit of the counter: bytes|items", "list:bytes items"},
    {O_COUNT, "count", 'n', TUPE_REQARG, "N", "number of steps (default: 5)", NULL},
    {O_SIZE, "memory", 0, TUPE_REQARG, "SIZE", "a size option, echoed in bytes", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int run_tok_write(tupe_cli *c, void *opts);
static int run_tok_cat(tupe_cli *c, void *opts);
static int run_st_info(tupe_cli *c, void *opts);
static int run_progress(tupe_cli *c, void *opts);
static int run_st_diff(tupe_cli *c, void *opts);
static int run_npy_diff(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"tok-write", "[FILE]...", "write a token stream from text ids",
     "Each input line is one document: ids separated by spaces.", write_opts, "file", run_tok_write},
    {"tok-cat", "[FILE]...", "print token streams as text ids",
     "One document per line, ids separated by spaces.", cat_opts, "file", run_tok_cat},
    {"st-info", "FILE", "list the tensors of a safetensors file", NULL, NULL, "file", run_st_info},
    {"progress", NULL, "report progress on stderr", NULL, progress_opts, NULL, run_progress},
    {"st-diff", "A B", "largest difference between the float tensors of two safetensors files",
     "Prints \"max_abs_diff X\" over the tensors of A (which B must also have) and exits 1 when\n"
     "their names or shapes differ.", NULL, "file", run_st_diff},
    {"npy-diff", "A B", "largest difference between two .npy arrays",
     "Prints \"max_abs_diff X max_rel_diff Y\" (Y: X divided by the largest |value| of B; NaN\n"
     "cells must be NaN in both) and exits 1 when their shapes differ. A may be several files\n"
     "joined by '+': their sum is compared.", NULL, "file", run_npy_diff},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-testtool", "test helper for the tupe test suite", cmds, NULL};

static int tok_write(tupe_cli *c, const char *out, uint32_t vocab, uint64_t hash)
{
    tupe_err e;
    tupe_tok_header h;
    tupe_tok_header_init(&h, vocab, hash);
    tupe_tokw *w;
    if (tupe_tokw_open(&w, out, &h, &e))
        return tupe_cli_error(c, &e);
    int n = c->nargs ? c->nargs : 1;
    uint32_t *ids = NULL;
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        tupe_in *in;
        if (tupe_in_open(&in, c->nargs ? c->args[i] : "-", &e))
            goto fail;
        char *line;
        size_t len;
        int r;
        while ((r = tupe_in_getline(in, &line, &len, &e)) == 1) {
            size_t k = 0;
            for (char *p = line; *p;) {
                while (*p == ' ')
                    p++;
                if (!*p)
                    break;
                char *end;
                unsigned long v = strtoul(p, &end, 10);
                if (end == p || v >= vocab) {
                    tupe_fail_line(&e, TUPE_EDATA, tupe_in_path(in), tupe_in_lineno(in),
                                   "expected an id below %u", vocab);
                    tupe_in_close(in);
                    goto fail;
                }
                if (k == cap) {
                    cap = cap ? cap * 2 : 256;
                    ids = realloc(ids, cap * sizeof *ids);
                }
                ids[k++] = (uint32_t)v;
                p = end;
            }
            if (tupe_tokw_doc(w, ids, k, &e)) {
                tupe_in_close(in);
                goto fail;
            }
        }
        tupe_in_close(in);
        if (r < 0)
            goto fail;
    }
    free(ids);
    if (tupe_tokw_close(w, &e))
        return tupe_cli_error(c, &e);
    return 0;
fail:
    free(ids);
    tupe_tokw_abort(w);
    return tupe_cli_error(c, &e);
}

static int tok_cat(tupe_cli *c, const char *out)
{
    tupe_err e;
    tupe_out *o;
    if (tupe_out_open(&o, out, &e))
        return tupe_cli_error(c, &e);
    int n = c->nargs ? c->nargs : 1;
    for (int i = 0; i < n; i++) {
        tupe_tokr *r;
        if (tupe_tokr_open(&r, c->nargs ? c->args[i] : "-", &e))
            goto fail;
        const uint32_t *ids;
        size_t k;
        int got;
        while ((got = tupe_tokr_next(r, &ids, &k, &e)) == 1) {
            for (size_t j = 0; j < k; j++)
                tupe_out_printf(o, &e, j ? " %u" : "%u", ids[j]);
            if (tupe_out_write(o, "\n", 1, &e)) {
                tupe_tokr_close(r);
                goto fail;
            }
        }
        tupe_tokr_close(r);
        if (got < 0)
            goto fail;
    }
    if (tupe_out_commit(o, &e))
        return tupe_cli_error(c, &e);
    return 0;
fail:
    tupe_out_abort(o);
    return tupe_cli_error(c, &e);
}

static int st_info(tupe_cli *c)
{
    if (c->nargs != 1)
        return tupe_cli_usage(c, "expected one FILE");
    tupe_err e;
    tupe_st *st;
    if (tupe_st_open(&st, c->args[0], &e))
        return tupe_cli_error(c, &e);
    for (size_t i = 0; i < tupe_st_meta_count(st); i++) {
        const char *k, *v;
        tupe_st_meta_at(st, i, &k, &v);
        printf("meta %s=%s\n", k, v);
    }
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const tupe_st_tensor *t = tupe_st_at(st, i);
        printf("%s %s [", t->name, tupe_dtype_name(t->dtype));
        for (int d = 0; d < t->ndim; d++)
            printf("%s%llu", d ? ", " : "", (unsigned long long)t->shape[d]);
        printf("]\n");
    }
    int rc = tupe_st_verify(st, &e);
    tupe_st_close(st);
    return rc ? tupe_cli_error(c, &e) : 0;
}

static int st_diff(tupe_cli *c)
{
    if (c->nargs != 2)
        return tupe_cli_usage(c, "expected two files");
    tupe_err e;
    tupe_st *a, *b;
    if (tupe_st_open(&a, c->args[0], &e))
        return tupe_cli_error(c, &e);
    if (tupe_st_open(&b, c->args[1], &e)) {
        tupe_st_close(a);
        return tupe_cli_error(c, &e);
    }
    double worst = 0;
    const char *where = "";
    int rc = 0;
    for (size_t i = 0; i < tupe_st_count(a) && !rc; i++) {
        const tupe_st_tensor *t = tupe_st_at(a, i), *u = tupe_st_find(b, t->name);
        if (!u || u->numel != t->numel) {
            fprintf(stderr, "tupe-testtool: tensor '%s' missing or of another size in %s\n", t->name, c->args[1]);
            rc = 1;
            break;
        }
        float *x = malloc((t->numel ? t->numel : 1) * sizeof *x), *y = malloc((t->numel ? t->numel : 1) * sizeof *y);
        if (tupe_to_f32(t->dtype, t->data, x, t->numel) == 0 && tupe_to_f32(u->dtype, u->data, y, u->numel) == 0)
            for (uint64_t k = 0; k < t->numel; k++) {
                double d = fabs((double)x[k] - (double)y[k]);
                if (d > worst || d != d) {
                    worst = d;
                    where = t->name;
                }
            }
        free(x), free(y);
    }
    if (!rc)
        printf("max_abs_diff %.9g %s\n", worst, where);
    tupe_st_close(a);
    tupe_st_close(b);
    return rc;
}

static double npy_at(const tupe_npy *a, uint64_t i)
{
    const char *d = a->descr;
    return strcmp(d, "<f4") == 0 ? ((const float *)a->data)[i]
         : strcmp(d, "<f8") == 0 ? ((const double *)a->data)[i]
         : strcmp(d, "<i4") == 0 ? ((const int32_t *)a->data)[i]
         : strcmp(d, "<i8") == 0 ? (double)((const int64_t *)a->data)[i]
                                 : NAN;
}

static int npy_diff(tupe_cli *c)
{
    if (c->nargs != 2)
        return tupe_cli_usage(c, "expected two files");
    tupe_err e;
    tupe_npy b;
    if (tupe_npy_read(c->args[1], &b, &e))
        return tupe_cli_error(c, &e);
    double *sum = calloc(b.numel ? b.numel : 1, sizeof *sum);
    char *list = strdup(c->args[0]), *save = NULL;
    int rc = 0;
    for (char *f = strtok_r(list, "+", &save); f && !rc; f = strtok_r(NULL, "+", &save)) {
        tupe_npy a;
        if (tupe_npy_read(f, &a, &e)) {
            rc = tupe_cli_error(c, &e);
            break;
        }
        rc = a.ndim != b.ndim;
        for (int i = 0; !rc && i < a.ndim; i++)
            rc = a.shape[i] != b.shape[i];
        if (rc)
            fprintf(stderr, "tupe-testtool: %s and %s have different shapes\n", f, c->args[1]);
        for (uint64_t i = 0; !rc && i < a.numel; i++)
            sum[i] += npy_at(&a, i);
        tupe_npy_free(&a);
    }
    double worst = 0, scale = 0;
    for (uint64_t i = 0; !rc && i < b.numel; i++) {
        double x = sum[i], y = npy_at(&b, i);
        if (isnan(x) && isnan(y))
            continue;
        double d = fabs(x - y);
        worst = d > worst || d != d ? d : worst;
        scale = fabs(y) > scale ? fabs(y) : scale;
    }
    if (!rc)
        printf("max_abs_diff %.9g max_rel_diff %.9g\n", worst, scale > 0 ? worst / scale : worst);
    free(list);
    free(sum);
    tupe_npy_free(&b);
    return rc;
}

typedef struct args {
    const char *out;
    long vocab, count;
    uint64_t hash, mem;
    int mode;
} args;

static int run_tok_write(tupe_cli *c, void *opts)
{
    const args *a = opts;
    return tok_write(c, a->out, (uint32_t)a->vocab, a->hash);
}
static int run_tok_cat(tupe_cli *c, void *opts) { return tok_cat(c, ((const args *)opts)->out); }
static int run_st_info(tupe_cli *c, void *opts) { return (void)opts, st_info(c); }
static int run_st_diff(tupe_cli *c, void *opts) { return (void)opts, st_diff(c); }
static int run_npy_diff(tupe_cli *c, void *opts) { return (void)opts, npy_diff(c); }

static int run_progress(tupe_cli *c, void *opts)
{
    const args *a = opts;
    if (a->mem)
        printf("memory %llu\n", (unsigned long long)a->mem);
    tupe_progress p;
    tupe_progress_start(&p, "steps", (uint64_t)a->count * 1000, a->mode ? "items" : "B", c->quiet);
    for (long i = 1; i <= a->count; i++)
        tupe_progress_set(&p, (uint64_t)i * 1000);
    tupe_progress_finish(&p);
    return 0;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a = {.out = "-", .vocab = 30522, .count = 5};
    const char *arg;
    int id;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_OUT: a.out = arg; break;
        case O_VOCAB: if (tupe_cli_long(&c, arg, 1, 1L << 31, &a.vocab)) id = -1; break;
        case O_HASH: a.hash = strtoull(arg, NULL, 16); break;
        case O_MODE: if (tupe_cli_choice(&c, arg, "bytes|items", &a.mode)) id = -1; break;
        case O_COUNT: if (tupe_cli_long(&c, arg, 0, 1000000, &a.count)) id = -1; break;
        case O_SIZE: if (tupe_cli_size(&c, arg, &a.mem)) id = -1; break;
        }
        if (id < 0)
            break;
    }
    if (id < 0) {
        tupe_cli_end(&c);
        return c.exit_code;
    }
    tupe_threads_apply(c.threads);
    int rc = tupe_cli_run(&c, &a);
    tupe_cli_end(&c);
    return rc;
}
