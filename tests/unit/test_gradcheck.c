/* Finite-difference gradient check of the whole model, every variant and head, in double
 * precision.
 *
 * The model runs on the cpu64 backend: the same operations as the fp32 backend, compiled from
 * the same source for double. Central differences with step h = 1e-5 have a truncation error
 * of order h^2 |f'''| ~ 1e-10 and a rounding error of order 1e-16 |f| / h ~ 1e-11, so they
 * resolve the analytic gradient to about 1e-9: any wrong term in a backward pass (a missing
 * scale, a transposed product, a dropped [CLS] entry) is orders of magnitude larger. Dropout is
 * on in some cases: its masks are fixed by (seed, step), so the loss stays a smooth function
 * of the parameters and the dropout backward is checked as well.
 *
 * For each tensor we check its largest-gradient elements and random ones (which may have
 * gradient zero, e.g. unused vocabulary rows: then the difference must be zero too). */
#include "backend/backend.h"
#include "base/rng.h"
#include "model/model.h"
#include "modelcase.h"
#include "unit.h"

typedef struct gcase {
    const char *name;
    int position, untie, num_labels, types;
    double dropout;
} gcase;

static const gcase cases[] = {
    {"bert-a", TUPE_POS_BERT_A, 1, 0, 0, 0},
    {"bert-r", TUPE_POS_BERT_R, 1, 0, 0, 0},
    {"bert-ad", TUPE_POS_BERT_AD, 1, 0, 0, 0},
    {"tupe-a", TUPE_POS_TUPE_A, 1, 0, 0, 0},
    {"tupe-a-tie", TUPE_POS_TUPE_A, 0, 0, 0, 0},
    {"tupe-r", TUPE_POS_TUPE_R, 1, 0, 0, 0},
    {"tupe-r-tie", TUPE_POS_TUPE_R, 0, 0, 0, 0},
    {"tupe-r-dropout", TUPE_POS_TUPE_R, 1, 0, 0, 0.2},
    {"bert-a-types-dropout", TUPE_POS_BERT_A, 1, 0, 2, 0.2},
    {"cls-tupe-r-dropout", TUPE_POS_TUPE_R, 1, 3, 0, 0.2},
    {"reg-bert-ad", TUPE_POS_BERT_AD, 1, 1, 0, 0},
    {"rope", TUPE_POS_ROPE, 1, 0, 0, 0},
    {"rope-half-dropout", TUPE_POS_ROPE, 1, 0, 0, 0.2},
    {"alibi", TUPE_POS_ALIBI, 1, 0, 0, 0},
    {"cls-nope", TUPE_POS_NOPE, 1, 3, 0, 0},
    {"deberta", TUPE_POS_DEBERTA, 1, 0, 0, 0},
    {"deberta-types-dropout", TUPE_POS_DEBERTA, 1, 0, 2, 0.2}, /* the table's dropout too */
};

enum { B = 3, T = 9, V = 41 };
static const int32_t lengths[B] = {9, 7, 4};

static void make_config(tupe_config *c, const gcase *k)
{
    tupe_config_default(c);
    c->position = k->position;
    c->untie_cls = k->untie;
    c->vocab_size = V;
    c->hidden_size = 16;
    c->num_layers = 2;
    c->num_heads = 2;
    c->intermediate_size = 24;
    c->max_position = 12;
    c->type_vocab_size = k->types;
    c->hidden_dropout = c->attention_dropout = c->activation_dropout = c->classifier_dropout =
        k->dropout;
    c->rel_pos_buckets = 8;   /* a small table whose log buckets T = 9 reaches (deberta: and
                                 clamps, |i - j| = 8 lying past max_rel_pos) */
    c->max_rel_pos = 6;
    c->num_labels = k->num_labels;
    if (strstr(k->name, "half"))
        c->rope_layout = TUPE_ROPE_HALF;
    c->rope_base = 50; /* angles that turn far within T = 9 */
}

static void check_case(const gcase *k)
{
    tupe_backend *be;
    tupe_err e;
    CHECK_INT(tupe_backend_create(&be, "cpu64", 0, &e), 0);
    tupe_config c;
    make_config(&c, k);
    tupe_capacity cap = {B, T, 0};
    tupe_model *m;
    int rc = tupe_model_create(&m, &c, be, &cap, &e);
    CHECK_MSG(rc == 0, "%s: %s", k->name, e.msg);
    if (rc) {
        tupe_backend_destroy(be);
        return;
    }
    CHECK_INT(tupe_model_init(m, 7, &e), 0);
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_rng r;
    tupe_rng_init(&r, 99, 0, 0, TUPE_RNG_USER);
    perturb_params(m, &r);
    int32_t ids[B * T], types[B * T], mpos[8], mlab[8], labels[B];
    float targets[B];
    for (int i = 0; i < B * T; i++) {
        ids[i] = 3 + (int32_t)tupe_rng_below(&r, V - 3);
        types[i] = (int32_t)tupe_rng_below(&r, 2);
    }
    /* Masked: position 0 of sequence 0 ([CLS]), and some of every sequence. */
    int M = 0;
    const int mp[] = {0, 3, 8, T + 0, T + 5, 2 * T + 1, 2 * T + 3};
    for (size_t i = 0; i < sizeof mp / sizeof mp[0]; i++) {
        mpos[M] = mp[i];
        mlab[M] = (int32_t)tupe_rng_below(&r, V);
        M++;
    }
    for (int i = 0; i < B; i++) {
        labels[i] = (int32_t)tupe_rng_below(&r, 3);
        targets[i] = (float)tupe_rng_normal(&r);
    }
    tupe_batch b = {B, T, ids, lengths, k->types ? types : NULL, M, mpos, mlab, labels, targets,
                    0, 5, .rtd_label = NULL};
    tupe_step st = {.seed = 1234, .step = 3};
    const tupe_step *sp = k->dropout > 0 ? &st : NULL;

    tupe_model_zero_grad(m);
    double L0 = loss_of(m, &b, sp);
    CHECK_INT(tupe_model_backward(m, &e), 0);
    int checked = 0, bad = 0;
    const double h = 1e-5;
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        double *g = malloc(p->numel * sizeof *g), *v = malloc(p->numel * sizeof *v);
        tupe_model_get_grad_f64(m, p->name, g, p->numel, &e);
        /* Current values (through the fp64 path: download the flat buffer slice). */
        be->download(be, v, tupe_dev_at(be, tupe_model_params(m), p->offset), p->numel, TUPE_F64);
        size_t pick[6];
        int np = 0;
        /* the two largest |g| */
        for (int t = 0; t < 2; t++) {
            size_t best = 0;
            double bv = -1;
            for (size_t j = 0; j < p->numel; j++) {
                int dup = 0;
                for (int q = 0; q < np; q++)
                    dup |= pick[q] == j;
                if (!dup && fabs(g[j]) > bv) {
                    bv = fabs(g[j]);
                    best = j;
                }
            }
            pick[np++] = best;
        }
        for (int t = 0; t < 3; t++)
            pick[np++] = (size_t)tupe_rng_below64(&r, p->numel);
        for (int q = 0; q < np; q++) {
            size_t j = pick[q];
            double fd = central_diff(m, p->name, v, p->numel, j, h, &b, sp);
            double err = fabs(fd - g[j]);
            checked++;
            if (err > 1e-7 + 1e-6 * fabs(fd)) {
                bad++;
                CHECK_MSG(0, "%s: %s[%zu]: analytic %.10g, finite difference %.10g", k->name,
                          p->name, j, g[j], fd);
            }
        }
        free(g);
        free(v);
    }
    /* The loss is unchanged after all the perturbations were undone. */
    CHECK_NEAR(loss_of(m, &b, sp), L0, 1e-12);
    printf("# %s: %d gradient elements checked over %zu tensors, loss %.6f\n", k->name, checked,
           lay->count, L0);
    (void)bad;
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

#define CASE(fn, i) static void fn(void) { check_case(&cases[i]); }
CASE(grad_bert_a, 0)
CASE(grad_bert_r, 1)
CASE(grad_bert_ad, 2)
CASE(grad_tupe_a, 3)
CASE(grad_tupe_a_tie, 4)
CASE(grad_tupe_r, 5)
CASE(grad_tupe_r_tie, 6)
CASE(grad_tupe_r_dropout, 7)
CASE(grad_bert_a_types_dropout, 8)
CASE(grad_cls_tupe_r_dropout, 9)
CASE(grad_reg_bert_ad, 10)
CASE(grad_rope, 11)
CASE(grad_rope_half_dropout, 12)
CASE(grad_alibi, 13)
CASE(grad_cls_nope, 14)
CASE(grad_deberta, 15)
CASE(grad_deberta_types_dropout, 16)

UNIT_MAIN(T(grad_bert_a), T(grad_bert_r), T(grad_bert_ad), T(grad_tupe_a), T(grad_tupe_a_tie),
          T(grad_tupe_r), T(grad_tupe_r_tie), T(grad_tupe_r_dropout),
          T(grad_bert_a_types_dropout), T(grad_cls_tupe_r_dropout), T(grad_reg_bert_ad),
          T(grad_rope), T(grad_rope_half_dropout), T(grad_alibi), T(grad_cls_nope),
          T(grad_deberta), T(grad_deberta_types_dropout))
