#include "viz/poscorr.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

/* abs: the (n+1) x (n+1) (TUPE) or n x n (BERT-Ad) products per head, then the [CLS] layout. */
static int absolute(tupe_inspect *in, int n, float *out, tupe_err *e)
{
    const tupe_config *c = &in->cfg;
    int D = c->hidden_size, H = c->num_heads, dh = D / H;
    int tupe = tupe_cfg_tupe(c), R = tupe ? n + 1 : n;
    double *pos = NULL, *g = NULL, *b = NULL, *wq = NULL, *bq = NULL, *wk = NULL, *bk = NULL;
    int rc;
    if ((rc = tupe_inspect_tensor(in, "position.embeddings.weight", &pos, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "position.LayerNorm.weight", &g, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "position.LayerNorm.bias", &b, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "position.query.weight", &wq, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "position.query.bias", &bq, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "position.key.weight", &wk, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "position.key.bias", &bk, NULL, e)))
        goto out;
    double *p = malloc((size_t)R * D * sizeof *p), *q = malloc((size_t)R * D * sizeof *q),
           *k = malloc((size_t)R * D * sizeof *k), *a = malloc((size_t)R * R * sizeof *a);
    if (!p || !q || !k || !a) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    } else {
        tupe_rows_layernorm(pos, R, D, g, b, c->layer_norm_eps, p);
        tupe_rows_linear(p, R, D, wq, bq, D, q);
        tupe_rows_linear(p, R, D, wk, bk, D, k);
        double s = tupe_cfg_score_scale(c);
        int reset = tupe_cfg_reset(c);
        for (int h = 0; h < H; h++) {
            cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, R, R, dh, s, q + h * dh, D,
                        k + h * dh, D, 0.0, a, R);
            float *v = out + (size_t)h * n * n;
            int o = tupe ? 1 : 0; /* TUPE: token k reads table row k + 1 */
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    v[(size_t)i * n + j] = (float)a[(size_t)(i + o) * R + j + o];
            if (reset) {
                for (int i = 1; i < n; i++)
                    v[(size_t)i * n] = (float)a[R + 1];   /* θ2: others -> [CLS] */
                for (int j = 0; j < n; j++)
                    v[j] = (float)a[0];                   /* θ1: [CLS] -> others */
            }
        }
    }
    free(p), free(q), free(k), free(a);
out:
    free(pos), free(g), free(b), free(wq), free(bq), free(wk), free(bk);
    return rc;
}

static int relative(tupe_inspect *in, int n, float *out, tupe_err *e)
{
    const tupe_config *c = &in->cfg;
    int H = c->num_heads;
    if (tupe_cfg_terms(c) & TUPE_PE_LINEAR_BIAS) {
        double m[1024]; /* num_attention_heads <= 1024 (config.c) */
        tupe_alibi_slopes(H, m);
        for (int h = 0; h < H; h++)
            for (int i = 0; i < n; i++)
                for (int j = 0; j < n; j++)
                    out[((size_t)h * n + i) * n + j] = (float)(0.0 - m[h] * abs(i - j));
        return 0;
    }
    double *rel = NULL;
    int rc = tupe_inspect_tensor(in, "position.relative_bias.weight", &rel, NULL, e);
    if (rc)
        return rc;
    int32_t *bk = malloc((size_t)n * n * sizeof *bk);
    if (!bk) {
        free(rel);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    tupe_rel_buckets(c, n, bk);
    for (int h = 0; h < H; h++)
        for (size_t ij = 0; ij < (size_t)n * n; ij++)
            out[(size_t)h * n * n + ij] = (float)rel[(size_t)bk[ij] * H + h];
    free(bk);
    free(rel);
    return 0;
}

int tupe_poscorr_compute(tupe_inspect *in, int n, tupe_poscorr *pc, tupe_err *e)
{
    memset(pc, 0, sizeof *pc);
    const tupe_config *c = &in->cfg;
    if (!tupe_poscorr_has_abs(c) && !tupe_poscorr_has_rel(c))
        return tupe_fail(e, TUPE_EUSAGE, "%s: a %s model has no content-free positional term",
                         in->path, tupe_position_name(c->position));
    if (n < 1 || n > c->max_position)
        return tupe_fail(e, TUPE_EUSAGE, "%d positions asked, the model has %d", n,
                         c->max_position);
    pc->heads = c->num_heads;
    pc->n = n;
    size_t sz = (size_t)c->num_heads * n * n;
    int rc = 0;
    pc->bias = calloc(sz, sizeof *pc->bias);
    if (tupe_poscorr_has_abs(c))
        pc->abs = malloc(sz * sizeof *pc->abs);
    if (tupe_poscorr_has_rel(c))
        pc->rel = malloc(sz * sizeof *pc->rel);
    if (!pc->bias || (tupe_poscorr_has_abs(c) && !pc->abs) || (tupe_poscorr_has_rel(c) && !pc->rel))
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc && pc->abs)
        rc = absolute(in, n, pc->abs, e);
    if (!rc && pc->rel)
        rc = relative(in, n, pc->rel, e);
    if (rc) {
        tupe_poscorr_free(pc);
        return rc;
    }
    for (size_t i = 0; i < sz; i++)
        pc->bias[i] = (pc->abs ? pc->abs[i] : 0) + (pc->rel ? pc->rel[i] : 0);
    return 0;
}

void tupe_poscorr_free(tupe_poscorr *pc)
{
    free(pc->abs), free(pc->rel), free(pc->bias);
    pc->abs = pc->rel = pc->bias = NULL;
}

void tupe_softmax_rows(const float *in, float *out, size_t rows, int cols)
{
    for (size_t r = 0; r < rows; r++) {
        const float *x = in + r * (size_t)cols;
        float *y = out + r * (size_t)cols;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < cols; j++)
            mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < cols; j++)
            sum += exp((double)x[j] - mx);
        for (int j = 0; j < cols; j++)
            y[j] = (float)(exp((double)x[j] - mx) / sum);
    }
}
