#include "model/optim.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct tupe_adamw {
    tupe_model *m;
    tupe_adamw_cfg cfg;
    int64_t t;
    tupe_dev *mem, *m1, *m2;
    /* The elements it keeps moments for: [r[2i], r[2i+1]) of the flat layout, moments stored
     * one range after the other; one range [0, total) unless sharded. */
    size_t *r, nr, held;
    double *scale;           /* per tensor of the layout, or NULL (tupe_adamw_set_lr_scale) */
};

void tupe_adamw_defaults(tupe_adamw_cfg *c)
{
    c->beta1 = 0.9;
    c->beta2 = 0.999;
    c->eps = 1e-6;
    c->weight_decay = 0.01;
    c->clip = 1.0;
    c->exclude_ln_bias = 0;
    c->electra = 0;
}

double tupe_lr_at(const tupe_schedule *s, int64_t t)
{
    if (t < 1)
        t = 1;
    if (s->electra) {
        double u = (double)(t - 1), T = s->total > 0 ? (double)s->total : 1;
        double decay = u >= T ? s->end
                              : (s->peak - s->end) * pow(1 - u / T, s->power > 0 ? s->power : 1.0) +
                                    s->end;
        return s->warmup > 0 && u < (double)s->warmup ? decay * u / (double)s->warmup : decay;
    }
    if (s->warmup > 0 && t <= s->warmup)
        return s->peak * (double)t / (double)s->warmup;
    if (t >= s->total)
        return s->end;
    double frac = (double)(s->total - t) / (double)(s->total - s->warmup);
    return (s->peak - s->end) * pow(frac, s->power > 0 ? s->power : 1.0) + s->end;
}

int tupe_adamw_create_ranges(tupe_adamw **out, tupe_model *m, const tupe_adamw_cfg *c,
                             const size_t *ranges, size_t nranges, tupe_err *e)
{
    *out = NULL;
    if (!(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1 && c->eps > 0 &&
          c->weight_decay >= 0 && c->clip >= 0))
        return tupe_fail(e, TUPE_EUSAGE, "AdamW: betas must be in [0, 1), eps > 0, weight decay "
                         "and clip >= 0");
    size_t total = tupe_model_layout(m)->total, full[2] = {0, total};
    if (!ranges) {
        ranges = full;
        nranges = 1;
    }
    tupe_adamw *o = calloc(1, sizeof *o);
    size_t *r = malloc((nranges ? 2 * nranges : 1) * sizeof *r);
    if (!o || !r) {
        free(o);
        free(r);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    /* cut to the layout, empty ranges dropped */
    for (size_t i = 0; i < nranges; i++) {
        size_t lo = ranges[2 * i] < total ? ranges[2 * i] : total;
        size_t hi = ranges[2 * i + 1] < total ? ranges[2 * i + 1] : total;
        if (hi <= lo)
            continue;
        if (o->nr && lo < r[2 * o->nr - 1]) {
            free(o);
            free(r);
            return tupe_fail(e, TUPE_EFAIL, "AdamW: optimizer ranges not sorted and apart");
        }
        r[2 * o->nr] = lo;
        r[2 * o->nr + 1] = hi;
        o->nr++;
        o->held += hi - lo;
    }
    tupe_backend *be = tupe_model_backend(m);
    o->m = m;
    o->cfg = *c;
    o->r = r;
    o->mem = be->alloc(be, 2 * (o->held ? o->held : 1) * (size_t)be->wsize);
    if (!o->mem) {
        double mib = 2.0 * (double)o->held * be->wsize / (1 << 20);
        free(o->r);
        free(o);
        return tupe_fail(e, TUPE_EFAIL, "out of memory for the optimizer state (%.1f MiB)", mib);
    }
    o->m1 = o->mem;
    o->m2 = tupe_dev_wat(be, o->mem, o->held);
    *out = o;
    return 0;
}

int tupe_adamw_create(tupe_adamw **out, tupe_model *m, const tupe_adamw_cfg *c, tupe_err *e)
{
    return tupe_adamw_create_ranges(out, m, c, NULL, 0, e);
}

void tupe_adamw_free(tupe_adamw *o)
{
    if (!o)
        return;
    tupe_backend *be = tupe_model_backend(o->m);
    be->free(be, o->mem);
    free(o->r);
    free(o->scale);
    free(o);
}

int tupe_adamw_set_lr_scale(tupe_adamw *o, const double *scale, tupe_err *e)
{
    free(o->scale);
    o->scale = NULL;
    if (!scale)
        return 0;
    size_t n = tupe_model_layout(o->m)->count;
    if (!(o->scale = malloc(n * sizeof *o->scale)))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    memcpy(o->scale, scale, n * sizeof *o->scale);
    return 0;
}

size_t tupe_adamw_held(const tupe_adamw *o) { return o->held; }

/* Each range's moments to or from their places in host arrays of the whole layout. */
static void moments_move(tupe_adamw *o, float *m1, float *m2, int up)
{
    tupe_backend *be = tupe_model_backend(o->m);
    size_t at = 0;
    for (size_t i = 0; i < o->nr; i++) {
        size_t lo = o->r[2 * i], n = o->r[2 * i + 1] - lo;
        float *h[2] = {m1 + lo, m2 + lo};
        tupe_dev *d[2] = {tupe_dev_wat(be, o->m1, at), tupe_dev_wat(be, o->m2, at)};
        for (int k = 0; k < 2; k++) {
            if (up)
                be->upload(be, d[k], h[k], n, TUPE_F32 | TUPE_WIDE);
            else
                be->download(be, h[k], d[k], n, TUPE_F32 | TUPE_WIDE);
        }
        at += n;
    }
}

void tupe_adamw_moments_get(tupe_adamw *o, float *exp_avg, float *exp_avg_sq)
{
    moments_move(o, exp_avg, exp_avg_sq, 0);
}

void tupe_adamw_moments_put(tupe_adamw *o, const float *exp_avg, const float *exp_avg_sq)
{
    moments_move(o, (float *)exp_avg, (float *)exp_avg_sq, 1);
}

const tupe_adamw_cfg *tupe_adamw_config(const tupe_adamw *o) { return &o->cfg; }
int64_t tupe_adamw_steps(const tupe_adamw *o) { return o->t; }
void tupe_adamw_set_steps(tupe_adamw *o, int64_t t) { o->t = t; }

double tupe_grad_norm(tupe_model *m)
{
    tupe_backend *be = tupe_model_backend(m);
    return sqrt(be->sumsq(be, tupe_model_grads(m), tupe_model_layout(m)->total));
}

/* The update of elements [lo, hi) of the flat buffers, whose moments start at moment
 * element `mo`: runs of tensors with the same decay and learning rate (the alignment gaps
 * between tensors hold zeros and stay zero). */
static void update(tupe_adamw *o, const tupe_adamw_args *base, const tupe_dev *sumsq, size_t lo,
                   size_t hi, size_t mo)
{
    tupe_model *m = o->m;
    tupe_backend *be = tupe_model_backend(m);
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_dev *p = tupe_model_params(m), *g = tupe_model_grads(m), *w = tupe_model_master(m);
    tupe_adamw_args args = *base, *a = &args;
    size_t i = 0;
    while (i < lay->count) {
        int nd = o->cfg.exclude_ln_bias && lay->t[i].no_decay;
        double sc = o->scale ? o->scale[i] : 1.0;
        size_t j = i + 1;
        while (j < lay->count && (o->cfg.exclude_ln_bias && lay->t[j].no_decay) == nd &&
               (o->scale ? o->scale[j] : 1.0) == sc)
            j++;
        a->lr = base->lr * sc;
        a->step_size = base->step_size * sc;
        a->sc = sc;
        size_t a0 = lay->t[i].offset, a1 = j < lay->count ? lay->t[j].offset : lay->total;
        a0 = a0 > lo ? a0 : lo;
        a1 = a1 < hi ? a1 : hi;
        if (a1 > a0) {
            a->wd = nd ? 0.0 : o->cfg.weight_decay;
            size_t k = mo + (a0 - lo);
            be->adamw(be, tupe_dev_at(be, p, a0), tupe_dev_at(be, g, a0),
                      tupe_dev_wat(be, o->m1, k), tupe_dev_wat(be, o->m2, k),
                      tupe_dev_wat(be, w, a0), a1 - a0, a, sumsq);
        }
        i = j;
    }
}

/* The step size of update number t at learning rate lr (the bias corrections in). */
static double step_size_at(const tupe_adamw *o, double lr, int64_t t_)
{
    double t = (double)t_;
    return o->cfg.electra ? lr : lr * sqrt(1.0 - pow(o->cfg.beta2, t)) / (1.0 - pow(o->cfg.beta1, t));
}

double tupe_adamw_next_step_size(const tupe_adamw *o, double lr) { return step_size_at(o, lr, o->t + 1); }

static void step_args(tupe_adamw *o, double lr, double grad_norm, const tupe_dev *par,
                      tupe_adamw_args *a)
{
    o->t++;
    a->lr = lr;
    a->beta1 = o->cfg.beta1;
    a->beta2 = o->cfg.beta2;
    a->eps = o->cfg.eps;
    a->step_size = step_size_at(o, lr, o->t);
    a->par = par;
    a->sc = 1.0;
    a->clip = o->cfg.clip;
    a->clip_tf = o->cfg.electra;
    a->gscale = tupe_clip_scale(grad_norm, a->clip, a->clip_tf);
}

/* Elements [lo, hi) of the ranges kept, the clipping factor the host's (sumsq NULL) or the
 * device's. */
static void step_range(tupe_adamw *o, double lr, double grad_norm, const tupe_dev *sumsq,
                       const tupe_dev *par, size_t lo, size_t hi)
{
    tupe_adamw_args a;
    step_args(o, lr, grad_norm, par, &a);
    size_t at = 0;
    for (size_t i = 0; i < o->nr; i++) {
        size_t r0 = o->r[2 * i], r1 = o->r[2 * i + 1];
        size_t a0 = r0 > lo ? r0 : lo, a1 = r1 < hi ? r1 : hi;
        if (a1 > a0)
            update(o, &a, sumsq, a0, a1, at + (a0 - r0));
        at += r1 - r0;
    }
}

void tupe_adamw_step_range(tupe_adamw *o, double lr, double grad_norm, size_t lo, size_t hi)
{
    step_range(o, lr, grad_norm, NULL, NULL, lo, hi);
}

void tupe_adamw_step_dev(tupe_adamw *o, double lr, const tupe_dev *sumsq, const tupe_dev *par)
{
    step_range(o, lr, 0, sumsq, par, 0, tupe_model_layout(o->m)->total);
}

double tupe_adamw_step(tupe_adamw *o, double lr, double grad_norm)
{
    tupe_model *m = o->m;
    if (grad_norm < 0)
        grad_norm = tupe_grad_norm(m);
    tupe_adamw_step_range(o, lr, grad_norm, 0, tupe_model_layout(m)->total);
    return grad_norm;
}
