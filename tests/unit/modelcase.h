/* What the model tests share about their cases: perturbed parameters and central differences
 * for gradient checks, and a fixture's parameters matched against the model's layout. */
#ifndef TUPE_TEST_MODELCASE_H
#define TUPE_TEST_MODELCASE_H

#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "unit.h"

/* Every tensor (LayerNorm and biases too) set around its initial kind, 1 or 0, with noise of
 * 0.3, so that no path of the gradient is trivially 0 or 1. */
static inline void perturb_params(tupe_model *m, tupe_rng *r)
{
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_err e;
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        double *v = malloc(p->numel * sizeof *v);
        for (size_t j = 0; j < p->numel; j++)
            v[j] = (p->init == TUPE_INIT_ONE ? 1.0 : 0.0) + 0.3 * tupe_rng_normal(r);
        CHECK_INT(tupe_model_set_f64(m, p->name, v, p->numel, &e), 0);
        free(v);
    }
}

/* The fixture's "param.*" tensors are exactly the layout's parameters (each one of ours, as
 * many as ours); `what` names the case in the messages. */
static inline void check_fixture_params(const tupe_st *st, const tupe_layout *lay, const char *what)
{
    size_t nparam = 0;
    for (size_t i = 0; i < tupe_st_count(st); i++)
        if (strncmp(tupe_st_at(st, i)->name, "param.", 6) == 0) {
            nparam++;
            CHECK_MSG(tupe_layout_find(lay, tupe_st_at(st, i)->name + 6) != NULL,
                      "%s: fixture tensor %s is not a parameter of ours", what,
                      tupe_st_at(st, i)->name);
        }
    CHECK_INT(nparam, lay->count);
}

/* The loss of one forward pass. */
static inline double loss_of(tupe_model *m, const tupe_batch *b, const tupe_step *st)
{
    tupe_fwd_out o;
    tupe_err e;
    int rc = tupe_model_forward(m, b, st, &o, &e);
    CHECK_MSG(rc == 0, "forward: %s", e.msg);
    return o.loss;
}

/* The central difference (L(v_j + h) - L(v_j - h)) / 2h of the loss in element j of parameter
 * `name`, whose n values are v (left as they were, in v and in the model). */
static inline double central_diff(tupe_model *m, const char *name, double *v, size_t n, size_t j,
                                  double h, const tupe_batch *b, const tupe_step *st)
{
    tupe_err e;
    double keep = v[j], lp, lm;
    v[j] = keep + h;
    CHECK_INT(tupe_model_set_f64(m, name, v, n, &e), 0);
    lp = loss_of(m, b, st);
    v[j] = keep - h;
    CHECK_INT(tupe_model_set_f64(m, name, v, n, &e), 0);
    lm = loss_of(m, b, st);
    v[j] = keep;
    CHECK_INT(tupe_model_set_f64(m, name, v, n, &e), 0);
    return (lp - lm) / (2 * h);
}

#endif
