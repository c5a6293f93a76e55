/* AdamW, the schedule and clipping against the model contract's formulas (§5), computed here
 * in double precision on the host for every parameter of a small model. */
#include "backend/backend.h"
#include "model/model.h"
#include "model/optim.h"
#include "unit.h"

static void schedule(void)
{
    tupe_schedule s = {1e-3, 0, 2, 5, 1, 0};
    CHECK_NEAR(tupe_lr_at(&s, 1), 5e-4, 1e-15);
    CHECK_NEAR(tupe_lr_at(&s, 2), 1e-3, 1e-15);
    CHECK_NEAR(tupe_lr_at(&s, 3), 1e-3 * 2 / 3, 1e-15);
    CHECK_NEAR(tupe_lr_at(&s, 4), 1e-3 / 3, 1e-15);
    CHECK_NEAR(tupe_lr_at(&s, 5), 0, 1e-15);
    CHECK_NEAR(tupe_lr_at(&s, 9), 0, 1e-15);
    /* The paper's: 10k warmup, linear decay to 0 at 1M. */
    tupe_schedule p = {1e-4, 0, 10000, 1000000, 1, 0};
    CHECK_NEAR(tupe_lr_at(&p, 5000), 5e-5, 1e-18);
    CHECK_NEAR(tupe_lr_at(&p, 505000), 5e-5, 1e-18);
    /* Polynomial decay to an end value. */
    tupe_schedule q = {1.0, 0.1, 0, 10, 2, 0};
    CHECK_NEAR(tupe_lr_at(&q, 5), 0.9 * 0.25 + 0.1, 1e-15);
    /* ELECTRA's (model/optimization.py): u = t - 1, lr (1 - u/T) min(1, u/W); by hand for
     * peak 1e-3, W = 2, T = 5: 0, 0.4, 0.6, 0.4, 0.2, 0 (x 1e-3) */
    tupe_schedule el = {1e-3, 0, 2, 5, 1, 1};
    const double want[] = {0, 0.4e-3, 0.6e-3, 0.4e-3, 0.2e-3, 0, 0};
    for (int t = 1; t <= 7; t++)
        CHECK_NEAR(tupe_lr_at(&el, t), want[t - 1], 1e-15);
}

/* One layer, no dropout. */
static void small_config(tupe_config *c)
{
    tupe_config_default(c);
    c->vocab_size = 30;
    c->hidden_size = 16;
    c->num_layers = 1;
    c->num_heads = 2;
    c->intermediate_size = 32;
    c->max_position = 8;
    c->hidden_dropout = c->attention_dropout = 0;
}

/* A small initialized model on the cpu backend (created on first use). */
static tupe_backend *be;
static tupe_model *small_model(void)
{
    tupe_err e;
    if (!be && tupe_backend_create(&be, "cpu", 0, &e) != 0)
        exit(1);
    tupe_config c;
    small_config(&c);
    tupe_capacity cap = {2, 8, 0};
    tupe_model *m;
    if (tupe_model_create(&m, &c, be, &cap, &e) || tupe_model_init(m, 3, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    return m;
}

static int32_t ids[16] = {2, 5, 6, 7, 8, 9, 10, 11, 2, 12, 13, 14, 0, 0, 0, 0}, len[2] = {8, 5};
static int32_t mpos[3] = {0, 3, 9}, mlab[3] = {4, 5, 6};

/* scaled: per-tensor learning rates (tupe_adamw_set_lr_scale: tensor i at 0.8^(i % 4)), as
 * tupe-glue's layer-wise decay sets them */
static void run(int exclude, double clip, int scaled)
{
    tupe_err e;
    tupe_model *m = small_model();
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    oc.exclude_ln_bias = exclude;
    oc.clip = clip;
    oc.weight_decay = 0.1;
    tupe_adamw *o;
    CHECK_INT(tupe_adamw_create(&o, m, &oc, &e), 0);
    const tupe_layout *lay = tupe_model_layout(m);
    double *sc = malloc(lay->count * sizeof *sc);
    for (size_t t = 0; t < lay->count; t++)
        sc[t] = scaled ? pow(0.8, (double)(t % 4)) : 1.0;
    CHECK_INT(tupe_adamw_set_lr_scale(o, scaled ? sc : NULL, &e), 0);
    size_t n = lay->total;
    double *p = calloc(n, sizeof *p), *mm = calloc(n, sizeof *mm), *vv = calloc(n, sizeof *vv);
    float *pf = malloc(n * sizeof *pf), *gf = malloc(n * sizeof *gf);
    be->download(be, pf, tupe_model_params(m), n, TUPE_F32);
    for (size_t i = 0; i < n; i++)
        p[i] = pf[i];
    tupe_batch b = {2, 8, ids, len, NULL, 3, mpos, mlab, NULL, NULL, 0, 0, .rtd_label = NULL};
    tupe_schedule s = {1e-2, 0, 1, 4, 1, 0};
    for (int step = 1; step <= 3; step++) {
        tupe_fwd_out fo;
        tupe_model_zero_grad(m);
        CHECK_INT(tupe_model_forward(m, &b, NULL, &fo, &e), 0);
        CHECK_INT(tupe_model_backward(m, &e), 0);
        be->download(be, gf, tupe_model_grads(m), n, TUPE_F32);
        double norm = 0;
        for (size_t i = 0; i < n; i++)
            norm += (double)gf[i] * gf[i];
        norm = sqrt(norm);
        double lr = tupe_lr_at(&s, step);
        double got = tupe_adamw_step(o, lr, -1);
        CHECK_NEAR(got, norm, 1e-6 * norm);
        double gs = clip > 0 ? fmin(1.0, clip / (norm + 1e-6)) : 1.0;
        if (clip > 0 && clip < 1)
            CHECK(gs < 1);
        double ss = lr * sqrt(1 - pow(0.999, step)) / (1 - pow(0.9, step));
        for (size_t t = 0; t < lay->count; t++) {
            const tupe_param *q = &lay->t[t];
            double wd = exclude && q->no_decay ? 0 : 0.1, lt = lr * sc[t], st = ss * sc[t];
            for (size_t i = q->offset; i < q->offset + q->numel; i++) {
                double g = gf[i] * gs;
                mm[i] = 0.9 * mm[i] + 0.1 * g;
                vv[i] = 0.999 * vv[i] + 0.001 * g * g;
                p[i] -= lt * wd * p[i];
                p[i] -= st * mm[i] / (sqrt(vv[i]) + 1e-6);
            }
        }
        be->download(be, pf, tupe_model_params(m), n, TUPE_F32);
        double maxerr = 0;
        for (size_t i = 0; i < n; i++)
            maxerr = fmax(maxerr, fabs(pf[i] - p[i]));
        CHECK_MSG(maxerr < 2e-6, "step %d: max error %g", step, maxerr);
    }
    CHECK_INT(tupe_adamw_steps(o), 3);
    /* Excluded tensors: LayerNorm and biases. */
    const tupe_param *lnw = tupe_layout_find(lay, "embeddings.LayerNorm.weight");
    const tupe_param *qb = tupe_layout_find(lay, "encoder.layer.0.attention.self.query.bias");
    const tupe_param *qw = tupe_layout_find(lay, "encoder.layer.0.attention.self.query.weight");
    CHECK(lnw && lnw->no_decay && qb && qb->no_decay && qw && !qw->no_decay);
    free(p), free(mm), free(vv), free(pf), free(gf), free(sc);
    tupe_adamw_free(o);
    tupe_model_free(m);
}

static void adamw_decay_all(void) { run(0, 1.0, 0); }
static void adamw_exclude_ln_bias_and_clip(void) { run(1, 0.05, 0); }
static void adamw_no_clip(void) { run(0, 0, 0); }
static void adamw_lr_scale(void) { run(1, 1.0, 1); }

static void bad_settings(void)
{
    tupe_err e;
    tupe_model *m = small_model();
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    oc.beta2 = 1.0;
    tupe_adamw *o;
    CHECK_INT(tupe_adamw_create(&o, m, &oc, &e), TUPE_EUSAGE);
    tupe_model_free(m);
}

/* Two shards updated separately equal one full update (ZeRO-1 style optimizer sharding). */
static void adamw_range_shards(void)
{
    tupe_err e;
    tupe_model *m[2];
    tupe_adamw *o[2];
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    oc.exclude_ln_bias = 1;
    tupe_batch b = {2, 8, ids, len, NULL, 3, mpos, mlab, NULL, NULL, 0, 0, .rtd_label = NULL};
    for (int k = 0; k < 2; k++) {
        m[k] = small_model();
        CHECK_INT(tupe_adamw_create(&o[k], m[k], &oc, &e), 0);
    }
    size_t n = tupe_model_layout(m[0])->total, cut = n / 3 + 5;
    for (int step = 1; step <= 2; step++) {
        for (int k = 0; k < 2; k++) {
            tupe_model_zero_grad(m[k]);
            CHECK_INT(tupe_model_forward(m[k], &b, NULL, NULL, &e), 0);
            CHECK_INT(tupe_model_backward(m[k], &e), 0);
        }
        double gn = tupe_grad_norm(m[1]);
        tupe_adamw_step(o[0], 1e-2, -1);
        tupe_adamw_step_range(o[1], 1e-2, gn, 0, cut);
        tupe_adamw_set_steps(o[1], tupe_adamw_steps(o[1]) - 1);
        tupe_adamw_step_range(o[1], 1e-2, gn, cut, n);
    }
    float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
    be->download(be, x, tupe_model_params(m[0]), n, TUPE_F32);
    be->download(be, y, tupe_model_params(m[1]), n, TUPE_F32);
    CHECK(memcmp(x, y, n * sizeof *x) == 0);
    free(x), free(y);
    for (int k = 0; k < 2; k++) {
        tupe_adamw_free(o[k]);
        tupe_model_free(m[k]);
    }
}

/* The clipping factor computed on the device from a sum of squares held there (the trainer's
 * way: no host wait) updates the weights bit for bit as the host's factor from its root, for
 * fairseq's rule and TensorFlow's (ELECTRA), clipping and not. */
static void adamw_device_clip(void)
{
    tupe_err e;
    tupe_batch b = {2, 8, ids, len, NULL, 3, mpos, mlab, NULL, NULL, 0, 0, .rtd_label = NULL};
    const double clips[3] = {0.05, 0.05, 100};
    for (int c = 0; c < 3; c++) {
        tupe_model *m[2];
        tupe_adamw *o[2];
        tupe_adamw_cfg oc;
        tupe_adamw_defaults(&oc);
        oc.clip = clips[c];
        oc.electra = c == 1;
        for (int k = 0; k < 2; k++) {
            m[k] = small_model();
            CHECK_INT(tupe_adamw_create(&o[k], m[k], &oc, &e), 0);
        }
        tupe_dev *dss = be->alloc(be, sizeof(double));
        CHECK(dss != NULL);
        size_t n = tupe_model_layout(m[0])->total;
        for (int step = 1; step <= 2; step++) {
            double ss[2];
            for (int k = 0; k < 2; k++) {
                tupe_model_zero_grad(m[k]);
                CHECK_INT(tupe_model_forward(m[k], &b, NULL, NULL, &e), 0);
                CHECK_INT(tupe_model_backward(m[k], &e), 0);
                ss[k] = be->sumsq(be, tupe_model_grads(m[k]), n);
            }
            CHECK(ss[0] == ss[1]);
            be->upload(be, dss, &ss[1], 1, TUPE_DBL);
            tupe_adamw_step(o[0], 1e-2, sqrt(ss[0]));
            tupe_adamw_step_dev(o[1], 1e-2, dss, NULL);
        }
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        be->download(be, x, tupe_model_params(m[0]), n, TUPE_F32);
        be->download(be, y, tupe_model_params(m[1]), n, TUPE_F32);
        CHECK_MSG(memcmp(x, y, n * sizeof *x) == 0, "clip %g%s: the device's factor differs",
                  clips[c], c == 1 ? " (ELECTRA's rule)" : "");
        CHECK_INT(tupe_adamw_steps(o[1]), 2);
        free(x), free(y);
        be->free(be, dss);
        for (int k = 0; k < 2; k++) {
            tupe_adamw_free(o[k]);
            tupe_model_free(m[k]);
        }
    }
}

UNIT_MAIN(T(schedule), T(adamw_range_shards), T(adamw_device_clip), T(adamw_decay_all), T(adamw_exclude_ln_bias_and_clip), T(adamw_no_clip),
          T(adamw_lr_scale), T(bad_settings))
