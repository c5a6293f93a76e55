#include "viz/decomp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"

struct tupe_decomp {
    int mode, n, D, H, V, K;
    double s, eps;
    double *word, *g, *b, *wq, *bq, *wk, *bk, *rel;
    /* Per position k < n: W_Q and W_K of the position row (paper: raw; exact: centred and
     * scaled by g, not yet divided by sigma), and the raw rows (exact: for sigma). */
    double *pq, *pk, *pos;
    double *type;            /* token-type row 0 (exact), or NULL */
    double *tq, *tk;         /* exact: W_Q (g * (t - mean t)), W_K ...; zero without types */
    double *cq, *ck;         /* exact: W_Q b + b_Q, W_K b + b_K */
    int32_t *buckets;        /* BERT-R: n x n */
    double *sum;             /* [K, H, n, n] */
    int64_t *count;          /* [n] */
    /* scratch for one input */
    double *x, *qw, *kw, *qp, *kp, *qc, *kc, *t1, *t2, *one;
};

const char *tupe_decomp_term_key(int t)
{
    static const char *k[] = {"ww", "wp", "pw", "pp", "rest"};
    return t >= 0 && t < 5 ? k[t] : "?";
}

const char *tupe_decomp_term_name(int t)
{
    static const char *k[] = {"word-word", "word-position", "position-word", "position-position",
                              "rest (type, biases)"};
    return t >= 0 && t < 5 ? k[t] : "?";
}

void tupe_decomp_free(tupe_decomp *d)
{
    if (!d)
        return;
    free(d->word), free(d->g), free(d->b), free(d->wq), free(d->bq), free(d->wk), free(d->bk);
    free(d->rel), free(d->pq), free(d->pk), free(d->pos), free(d->type), free(d->tq), free(d->tk);
    free(d->cq), free(d->ck), free(d->buckets), free(d->sum), free(d->count);
    free(d->x), free(d->qw), free(d->kw), free(d->qp), free(d->kp), free(d->qc), free(d->kc);
    free(d->t1), free(d->t2), free(d->one);
    free(d);
}

/* g * (x - mean(x)) into y. */
static void centre(const double *x, const double *g, int D, double *y)
{
    double m = 0;
    for (int i = 0; i < D; i++)
        m += x[i];
    m /= D;
    for (int i = 0; i < D; i++)
        y[i] = g[i] * (x[i] - m);
}

int tupe_decomp_new(tupe_decomp **out, tupe_inspect *in, int mode, int n, tupe_err *e)
{
    *out = NULL;
    const tupe_config *c = &in->cfg;
    if (!tupe_cfg_abs_input(c))
        return tupe_fail(e, TUPE_EUSAGE, "%s: a %s model has no position embeddings in its "
                         "input to separate from the words",
                         in->path, tupe_position_name(c->position));
    if (n < 1 || n > c->max_position)
        return tupe_fail(e, TUPE_EUSAGE, "%d positions asked, the model has %d", n,
                         c->max_position);
    tupe_decomp *d = calloc(1, sizeof *d);
    if (!d)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int D = c->hidden_size, H = c->num_heads;
    d->mode = mode, d->n = n, d->D = D, d->H = H, d->V = c->vocab_size;
    d->K = tupe_decomp_nterms(mode);
    d->s = tupe_cfg_score_scale(c);
    d->eps = c->layer_norm_eps;
    double *ptab = NULL;
    int rc;
    if ((rc = tupe_inspect_tensor(in, "embeddings.word_embeddings.weight", &d->word, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "embeddings.position_embeddings.weight", &ptab, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "embeddings.LayerNorm.weight", &d->g, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "embeddings.LayerNorm.bias", &d->b, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "encoder.layer.0.attention.self.query.weight", &d->wq, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "encoder.layer.0.attention.self.query.bias", &d->bq, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "encoder.layer.0.attention.self.key.weight", &d->wk, NULL, e)) ||
        (rc = tupe_inspect_tensor(in, "encoder.layer.0.attention.self.key.bias", &d->bk, NULL, e)) ||
        (c->type_vocab_size > 0 &&
         (rc = tupe_inspect_tensor(in, "embeddings.token_type_embeddings.weight", &d->type, NULL, e))) ||
        (tupe_cfg_rel(c) && (rc = tupe_inspect_tensor(in, "position.relative_bias.weight", &d->rel, NULL, e))))
        goto fail;
    size_t nD = (size_t)n * D, nn = (size_t)n * n;
    d->pos = malloc(nD * sizeof *d->pos);
    d->pq = malloc(nD * sizeof *d->pq);
    d->pk = malloc(nD * sizeof *d->pk);
    d->tq = calloc((size_t)D, sizeof *d->tq);
    d->tk = calloc((size_t)D, sizeof *d->tk);
    d->cq = malloc((size_t)D * sizeof *d->cq);
    d->ck = malloc((size_t)D * sizeof *d->ck);
    d->sum = calloc((size_t)d->K * H * nn, sizeof *d->sum);
    d->count = calloc((size_t)n, sizeof *d->count);
    d->x = malloc(nD * sizeof *d->x);
    d->qw = malloc(nD * sizeof *d->qw), d->kw = malloc(nD * sizeof *d->kw);
    d->qp = malloc(nD * sizeof *d->qp), d->kp = malloc(nD * sizeof *d->kp);
    d->qc = malloc(nD * sizeof *d->qc), d->kc = malloc(nD * sizeof *d->kc);
    d->t1 = malloc(nD * sizeof *d->t1), d->t2 = malloc(nD * sizeof *d->t2);
    d->one = malloc((size_t)d->K * H * nn * sizeof *d->one);
    if (tupe_cfg_rel(c))
        d->buckets = malloc(nn * sizeof *d->buckets);
    if (!d->pos || !d->pq || !d->pk || !d->tq || !d->tk || !d->cq || !d->ck || !d->sum ||
        !d->count || !d->x || !d->qw || !d->kw || !d->qp || !d->kp || !d->qc || !d->kc ||
        !d->t1 || !d->t2 || !d->one || (tupe_cfg_rel(c) && !d->buckets)) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto fail;
    }
    memcpy(d->pos, ptab, nD * sizeof *d->pos);
    if (d->buckets)
        tupe_rel_buckets(c, n, d->buckets);
    if (mode == TUPE_DECOMP_PAPER) {
        tupe_rows_linear(d->pos, n, D, d->wq, NULL, D, d->pq);
        tupe_rows_linear(d->pos, n, D, d->wk, NULL, D, d->pk);
    } else {
        for (int k = 0; k < n; k++)
            centre(d->pos + (size_t)k * D, d->g, D, d->x + (size_t)k * D);
        tupe_rows_linear(d->x, n, D, d->wq, NULL, D, d->pq);
        tupe_rows_linear(d->x, n, D, d->wk, NULL, D, d->pk);
        if (d->type) {
            centre(d->type, d->g, D, d->x);
            tupe_rows_linear(d->x, 1, D, d->wq, NULL, D, d->tq);
            tupe_rows_linear(d->x, 1, D, d->wk, NULL, D, d->tk);
        }
        tupe_rows_linear(d->b, 1, D, d->wq, d->bq, D, d->cq);
        tupe_rows_linear(d->b, 1, D, d->wk, d->bk, D, d->ck);
    }
    free(ptab);
    *out = d;
    return 0;
fail:
    free(ptab);
    tupe_decomp_free(d);
    return rc;
}

/* C (len x len) = s A_h B_h^T (+= when acc) for the head's columns of A and B (ld D). */
static void head_product(const tupe_decomp *d, int h, int len, const double *a, const double *b,
                         int acc, double *out)
{
    int dh = d->D / d->H;
    cblas_dgemm(CblasRowMajor, CblasNoTrans, CblasTrans, len, len, dh, d->s, a + h * dh, d->D,
                b + h * dh, d->D, acc ? 1.0 : 0.0, out, len);
}

int tupe_decomp_one(tupe_decomp *d, const int32_t *ids, int len, double *out, tupe_err *e)
{
    if (len < 1 || len > d->n)
        return tupe_fail(e, TUPE_EUSAGE, "an input of %d tokens (1 to %d here)", len, d->n);
    int D = d->D, H = d->H;
    for (int i = 0; i < len; i++)
        if (ids[i] < 0 || ids[i] >= d->V)
            return tupe_fail(e, TUPE_EDATA, "position %d: token id %d outside the vocabulary "
                             "(size %d)", i, ids[i], d->V);
    size_t lD = (size_t)len * D;
    if (d->mode == TUPE_DECOMP_PAPER) {
        for (int i = 0; i < len; i++)
            memcpy(d->x + (size_t)i * D, d->word + (size_t)ids[i] * D, (size_t)D * sizeof *d->x);
        tupe_rows_linear(d->x, len, D, d->wq, NULL, D, d->qw);
        tupe_rows_linear(d->x, len, D, d->wk, NULL, D, d->kw);
        memcpy(d->qp, d->pq, lD * sizeof *d->qp);
        memcpy(d->kp, d->pk, lD * sizeof *d->kp);
    } else {
        /* sigma_i from the true sum w + p + t; the centred parts are linear in their rows. */
        double *rs = d->t1;
        for (int i = 0; i < len; i++) {
            const double *w = d->word + (size_t)ids[i] * D, *p = d->pos + (size_t)i * D;
            double m = 0, v = 0;
            for (int k = 0; k < D; k++)
                m += w[k] + p[k] + (d->type ? d->type[k] : 0);
            m /= D;
            for (int k = 0; k < D; k++) {
                double x = w[k] + p[k] + (d->type ? d->type[k] : 0) - m;
                v += x * x;
            }
            rs[i] = 1.0 / sqrt(v / D + d->eps);
            centre(w, d->g, D, d->x + (size_t)i * D);
        }
        tupe_rows_linear(d->x, len, D, d->wq, NULL, D, d->qw);
        tupe_rows_linear(d->x, len, D, d->wk, NULL, D, d->kw);
        for (int i = 0; i < len; i++) {
            size_t o = (size_t)i * D;
            for (int k = 0; k < D; k++) {
                d->qw[o + k] *= rs[i];
                d->kw[o + k] *= rs[i];
                d->qp[o + k] = d->pq[o + k] * rs[i];
                d->kp[o + k] = d->pk[o + k] * rs[i];
                d->qc[o + k] = d->tq[k] * rs[i] + d->cq[k];
                d->kc[o + k] = d->tk[k] * rs[i] + d->ck[k];
            }
        }
    }
    size_t ll = (size_t)len * len;
    for (int h = 0; h < H; h++) {
        head_product(d, h, len, d->qw, d->kw, 0, out + ((size_t)TUPE_TERM_WW * H + h) * ll);
        head_product(d, h, len, d->qw, d->kp, 0, out + ((size_t)TUPE_TERM_WP * H + h) * ll);
        head_product(d, h, len, d->qp, d->kw, 0, out + ((size_t)TUPE_TERM_PW * H + h) * ll);
        head_product(d, h, len, d->qp, d->kp, 0, out + ((size_t)TUPE_TERM_PP * H + h) * ll);
    }
    if (d->mode == TUPE_DECOMP_EXACT) {
        /* rest = s (q^w + q^p).k^c + s q^c.(k^w + k^p + k^c) (+ R) */
        double *qwp = d->t1, *kall = d->t2;
        for (size_t k = 0; k < lD; k++) {
            qwp[k] = d->qw[k] + d->qp[k];
            kall[k] = d->kw[k] + d->kp[k] + d->kc[k];
        }
        for (int h = 0; h < H; h++) {
            double *r = out + ((size_t)TUPE_TERM_REST * H + h) * ll;
            head_product(d, h, len, qwp, d->kc, 0, r);
            head_product(d, h, len, d->qc, kall, 1, r);
            if (d->rel)
                for (int i = 0; i < len; i++)
                    for (int j = 0; j < len; j++)
                        r[(size_t)i * len + j] += d->rel[(size_t)d->buckets[(size_t)i * d->n + j] * H + h];
        }
    }
    return 0;
}

int tupe_decomp_add(tupe_decomp *d, const int32_t *ids, int len, tupe_err *e)
{
    int rc = tupe_decomp_one(d, ids, len, d->one, e);
    if (rc)
        return rc;
    size_t ll = (size_t)len * len, nn = (size_t)d->n * d->n;
    for (int t = 0; t < d->K * d->H; t++)
        for (int i = 0; i < len; i++)
            for (int j = 0; j < len; j++)
                d->sum[t * nn + (size_t)i * d->n + j] += d->one[t * ll + (size_t)i * len + j];
    for (int k = 0; k < len; k++)
        d->count[k]++;
    return 0;
}

void tupe_decomp_mean(const tupe_decomp *d, float *mean, int64_t *count)
{
    size_t nn = (size_t)d->n * d->n;
    for (int t = 0; t < d->K * d->H; t++)
        for (int i = 0; i < d->n; i++)
            for (int j = 0; j < d->n; j++) {
                int64_t c = d->count[i > j ? i : j];
                size_t o = t * nn + (size_t)i * d->n + j;
                mean[o] = c ? (float)(d->sum[o] / (double)c) : NAN;
            }
    if (count)
        memcpy(count, d->count, (size_t)d->n * sizeof *count);
}
