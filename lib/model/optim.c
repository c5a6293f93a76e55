#include "model/optim.h"

#include <math.h>
#include <stdlib.h>

struct tupe_adamw {
    tupe_model *m;
    tupe_adamw_cfg cfg;
    int64_t t;
    tupe_dev *mem, *m1, *m2;
};

void tupe_adamw_defaults(tupe_adamw_cfg *c)
{
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-6;
    c->weight_decay = 0.01;
    c->clip = 1.0;
    c->exclude_ln_bias = 0;
}

double tupe_lr_at(const tupe_schedule *s, int64_t t)
{
    if (t < 1)
        t = 1;
    if (s->warmup > 0 && t <= s->warmup)
        return s->peak * (double)t / (double)s->warmup;
    if (t >= s->total)
        return s->end;
    double frac = (double)(s->total - t) / (double)(s->total - s->warmup);
    return (s->peak - s->end) * pow(frac, s->power > 0 ? s->power : 1.0) + s->end;
}

int tupe_adamw_create(tupe_adamw **out, tupe_model *m, const tupe_adamw_cfg *c, tupe_err *e)
{
    *out = NULL;
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps > 0 &&
          c->weight_decay >= 0 && c->clip >= 0))
        return tupe_fail(e, TUPE_EUSAGE, "AdamW: betas must be in [0, 1), eps > 0, weight decay "
                         "and clip >= 0");
    tupe_adamw *o = calloc(1, sizeof *o);
    if (!o)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_backend *be = tupe_model_backend(m);
    size_t n = tupe_model_layout(m)->total;
    o->m = m;
    o->cfg = *c;
    o->mem = be->alloc(be, 2 * n * (size_t)be->wsize);
    if (!o->mem) {
        free(o);
        return tupe_fail(e, TUPE_EFAIL, "out of memory for the optimizer state (%.1f MiB)",
                         2.0 * (double)n * be->wsize / (1 << 20));
    }
    o->m1 = o->mem;
    o->m2 = tupe_dev_wat(be, o->mem, n);
    *out = o;
    return 0;
}

void tupe_adamw_free(tupe_adamw *o)
{
    if (!o)
        return;
    tupe_backend *be = tupe_model_backend(o->m);
    be->free(be, o->mem);
    free(o);
}

const tupe_adamw_cfg *tupe_adamw_config(const tupe_adamw *o) { return &o->cfg; }
int64_t tupe_adamw_steps(const tupe_adamw *o) { return o->t; }
void tupe_adamw_set_steps(tupe_adamw *o, int64_t t) { o->t = t; }
tupe_dev *tupe_adamw_exp_avg(tupe_adamw *o) { return o->m1; }
tupe_dev *tupe_adamw_exp_avg_sq(tupe_adamw *o) { return o->m2; }

double tupe_grad_norm(tupe_model *m)
{
    tupe_backend *be = tupe_model_backend(m);
    return sqrt(be->sumsq(be, tupe_model_grads(m), tupe_model_layout(m)->total));
}

void tupe_adamw_step_range(tupe_adamw *o, double lr, double grad_norm, size_t lo, size_t hi)
{
    tupe_model *m = o->m;
    tupe_backend *be = tupe_model_backend(m);
    const tupe_layout *lay = tupe_model_layout(m);
    o->t++;
    double t = (double)o->t;
    tupe_adamw_args a;
    a.lr = lr;
    a.beta1 = o->cfg.beta1;
    a.beta2 = o->cfg.beta2;
    a.eps = o->cfg.eps;
    a.step_size = lr * sqrt(1.0 - pow(o->cfg.beta2, t)) / (1.0 - pow(o->cfg.beta1, t));
    a.gscale = 1.0;
    if (o->cfg.clip > 0 && isfinite(grad_norm))
        a.gscale = fmin(1.0, o->cfg.clip / (grad_norm + 1e-6));
    if (hi > lay->total)
        hi = lay->total;
    /* Runs of tensors with the same decay, over the flat buffers (the alignment gaps between
     * tensors hold zeros and stay zero), cut to [lo, hi). */
    tupe_dev *p = tupe_model_params(m), *g = tupe_model_grads(m), *w = tupe_model_master(m);
    size_t i = 0;
    while (i < lay->count) {
        int nd = o->cfg.exclude_ln_bias && lay->t[i].no_decay;
        size_t j = i + 1;
        while (j < lay->count && (o->cfg.exclude_ln_bias && lay->t[j].no_decay) == nd)
            j++;
        size_t a0 = lay->t[i].offset, a1 = j < lay->count ? lay->t[j].offset : lay->total;
        a0 = a0 > lo ? a0 : lo;
        a1 = a1 < hi ? a1 : hi;
        if (a1 > a0) {
            a.wd = nd ? 0.0 : o->cfg.weight_decay;
            be->adamw(be, tupe_dev_at(be, p, a0), tupe_dev_at(be, g, a0),
                      tupe_dev_wat(be, o->m1, a0), tupe_dev_wat(be, o->m2, a0),
                      tupe_dev_wat(be, w, a0), a1 - a0, &a);
        }
        i = j;
    }
}

double tupe_adamw_step(tupe_adamw *o, double lr, double grad_norm)
{
    tupe_model *m = o->m;
    if (grad_norm < 0)
        grad_norm = tupe_grad_norm(m);
    tupe_adamw_step_range(o, lr, grad_norm, 0, tupe_model_layout(m)->total);
    return grad_norm;
}
