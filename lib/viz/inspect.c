#include "viz/inspect.h"

#include <cblas.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/checksum.h"
#include "model/checkpoint.h"
#include "model/params.h"

int tupe_inspect_open(tupe_inspect *in, const char *path, int threads, int seq, tupe_err *e)
{
    memset(in, 0, sizeof *in);
    in->path = path;
    int rc = tupe_ckpt_config(path, &in->cfg, e);
    if (rc)
        return rc;
    /* The MLM head's place, whatever head the file has: no head is ever run here (a forward
     * pass with no masked positions), and fine-tuned checkpoints load the same way. */
    in->cfg.num_labels = 0;
    if (seq <= 0)
        seq = in->cfg.max_position;
    if (seq > in->cfg.max_position)
        return tupe_fail(e, TUPE_EUSAGE, "%d positions asked, the model has %d", seq,
                         in->cfg.max_position);
    if ((rc = tupe_backend_create(&in->be, "cpu", threads, e)))
        return rc;
    tupe_capacity cap = {1, seq, 1};
    if ((rc = tupe_model_create(&in->m, &in->cfg, in->be, &cap, e)) ||
        (rc = tupe_ckpt_load(path, in->m, NULL, &in->train_state, TUPE_CKPT_HEADS_OPTIONAL, e))) {
        tupe_inspect_close(in);
        return rc;
    }
    return 0;
}

void tupe_inspect_close(tupe_inspect *in)
{
    tupe_model_free(in->m);
    if (in->be)
        tupe_backend_destroy(in->be);
    free(in->train_state);
    in->m = NULL;
    in->be = NULL;
    in->train_state = NULL;
}

int tupe_inspect_check_vocab(const tupe_inspect *in, uint32_t size, uint64_t hash,
                             const char *what, tupe_err *e)
{
    if ((uint32_t)in->cfg.vocab_size != size)
        return tupe_fail(e, TUPE_EDATA, "%s: the model has a vocabulary of %d tokens, %s has %u",
                         in->path, in->cfg.vocab_size, what, size);
    if (!in->train_state)
        return 0;
    json_error_t je;
    json_t *st = json_loads(in->train_state, 0, &je);
    const char *want = st ? json_string_value(json_object_get(st, "vocab_hash")) : NULL;
    uint64_t h;
    int rc = 0;
    if (want && tupe_hash_parse(want, &h) == 0 && h != 0 && h != hash) {
        char have[22];
        tupe_hash_hex(hash, have);
        rc = tupe_fail(e, TUPE_EDATA, "%s: the model was trained with another vocabulary (%s); "
                       "%s has %s", in->path, want, what, have);
    }
    json_decref(st);
    return rc;
}

/* Nothing non-finite is drawn: a NaN or infinity in a tensor would give a picture with made-up
 * colour limits, so it is an error that names the tensor and the first bad element. */
static int check_finite(const tupe_inspect *in, const char *name, const float *v, size_t n,
                        tupe_err *e)
{
    for (size_t i = 0; i < n; i++)
        if (!isfinite(v[i]))
            return tupe_fail_tensor(e, TUPE_EDATA, in->path, name, "element %zu is %s: nothing "
                                    "non-finite can be drawn (a diverged training?)", i,
                                    isnan(v[i]) ? "NaN" : v[i] > 0 ? "+inf" : "-inf");
    return 0;
}

/* The first parameter with a non-finite value, as an error (0 when all are finite). */
static int check_params(tupe_inspect *in, tupe_err *e)
{
    const tupe_layout *lay = tupe_model_layout(in->m);
    int rc = 0;
    for (size_t k = 0; k < lay->count && !rc; k++) {
        const tupe_param *p = &lay->t[k];
        float *f = malloc(p->numel * sizeof *f);
        if (!f)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        if (!(rc = tupe_model_get(in->m, p->name, f, p->numel, e)))
            rc = check_finite(in, p->name, f, p->numel, e);
        free(f);
    }
    return rc;
}

int tupe_inspect_tensor(tupe_inspect *in, const char *name, double **out, size_t *n, tupe_err *e)
{
    *out = NULL;
    const tupe_param *p = tupe_layout_find(tupe_model_layout(in->m), name);
    if (!p)
        return tupe_fail(e, TUPE_EDATA, "%s: the model has no tensor '%s'", in->path, name);
    float *f = malloc(p->numel * sizeof *f);
    double *d = malloc(p->numel * sizeof *d);
    if (!f || !d) {
        free(f), free(d);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    int rc = tupe_model_get(in->m, name, f, p->numel, e);
    if (!rc)
        rc = check_finite(in, name, f, p->numel, e);
    for (size_t i = 0; !rc && i < p->numel; i++)
        d[i] = f[i];
    free(f);
    if (rc) {
        free(d);
        return rc;
    }
    *out = d;
    if (n)
        *n = p->numel;
    return 0;
}

int tupe_inspect_attn(tupe_inspect *in, const int32_t *ids, int len, float *probs, tupe_err *e)
{
    int32_t length = len;
    tupe_batch b;
    memset(&b, 0, sizeof b);
    b.B = 1;
    b.T = len;
    b.ids = ids;
    b.lengths = &length;
    tupe_fwd_out out;
    int rc = tupe_model_forward(in->m, &b, NULL, &out, e);
    size_t per = (size_t)in->cfg.num_heads * (size_t)len * (size_t)len;
    for (int l = 0; !rc && l < in->cfg.num_layers; l++)
        rc = tupe_model_probe(in->m, TUPE_PROBE_ATTN_PROBS, l, probs + (size_t)l * per, per, e);
    for (size_t i = 0; !rc && i < per * (size_t)in->cfg.num_layers; i++)
        if (!isfinite(probs[i])) {
            /* name the parameter it comes from, else the layer */
            if (!(rc = check_params(in, e)))
                rc = tupe_fail(e, TUPE_EDATA, "%s: layer %zu: the attention probabilities are "
                               "not finite: nothing non-finite can be drawn", in->path, i / per);
        }
    return rc;
}

void tupe_rows_linear(const double *x, int rows, int nin, const double *w, const double *b,
                      int nout, double *y)
{
    for (int r = 0; r < rows; r++)
        for (int o = 0; o < nout; o++)
            y[(size_t)r * nout + o] = b ? b[o] : 0;
    if (rows > 0)
        cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, rows, nout, nin, 1.0, x, nin, w, nin,
                    1.0, y, nout);
}

void tupe_rows_layernorm(const double *x, int rows, int n, const double *g, const double *b,
                         double eps, double *y)
{
    for (int r = 0; r < rows; r++) {
        const double *xr = x + (size_t)r * n;
        double *yr = y + (size_t)r * n, mean = 0, var = 0;
        for (int i = 0; i < n; i++)
            mean += xr[i];
        mean /= n;
        for (int i = 0; i < n; i++)
            var += (xr[i] - mean) * (xr[i] - mean);
        double rs = 1.0 / sqrt(var / n + eps);
        for (int i = 0; i < n; i++)
            yr[i] = g[i] * (xr[i] - mean) * rs + b[i];
    }
}
