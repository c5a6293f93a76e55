/* Parity with the independent PyTorch reference (tests/reference/tupe_ref.py, fixtures from
 * tests/reference/make_model_fixtures.py, computed in float64): for every case of the model
 * contract (§6) the logits, the loss, the positional bias, every parameter gradient, the losses
 * of 5 AdamW steps and the listed parameters after them. Tolerances of the contract: logits,
 * bias, gradients and parameters max |ours - ref| <= 1e-4 max(1, |ref|); losses 1e-5. The rope
 * case has transformers' RoFormerForMaskedLM logits too (hf.logits), held to the same. */
#include <jansson.h>

#include "backend/backend.h"
#include "formats/safetensors.h"
#include "model/model.h"
#include "model/optim.h"
#include "model/posenc.h"
#include "modelcase.h"
#include "unit.h"

static char fixture[4096];
static const char *fix_in(const char *dir, const char *name)
{
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/%s/%s.safetensors", unit_src(), dir,
             name);
    return fixture;
}

static int32_t *ints(const tupe_st *st, const char *name, size_t *n)
{
    const tupe_st_tensor *t = tupe_st_find(st, name);
    if (!t || t->dtype != TUPE_I32) {
        CHECK_MSG(0, "%s: missing or not I32", name);
        *n = 0;
        return NULL;
    }
    int32_t *v = malloc(t->numel * sizeof *v + 4);
    memcpy(v, t->data, t->numel * sizeof *v);
    *n = (size_t)t->numel;
    return v;
}

static float *floats(const tupe_st *st, const char *name, size_t n)
{
    float *v = malloc((n ? n : 1) * sizeof *v);
    tupe_err e;
    int rc = tupe_st_read_f32(st, name, -1, NULL, v, n, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    return v;
}

/* max |a - b| / max(1, |b|) */
static double maxerr(const float *a, const float *b, size_t n, size_t *where)
{
    double m = 0;
    *where = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - b[i]) / fmax(1.0, fabs((double)b[i]));
        if (d > m || d != d) {
            m = d;
            *where = i;
        }
    }
    return m;
}

static void compare(const char *cs, const char *what, const float *ours, const float *ref,
                    size_t n, double tol, double *worst)
{
    size_t at;
    double err = maxerr(ours, ref, n, &at);
    if (err > *worst)
        *worst = err;
    CHECK_MSG(err <= tol, "%s: %s: error %.3g at [%zu] (ours %.9g, reference %.9g)", cs, what,
              err, at, ours[at], ref[at]);
    /* Scaled to the tensor as well: some gradients (the position LayerNorm, key biases) are
     * far below 1, where an absolute 1e-4 would accept even zeros. */
    double big = 0, abs_err = 0;
    for (size_t i = 0; i < n; i++) {
        big = fmax(big, fabs((double)ref[i]));
        abs_err = fmax(abs_err, fabs((double)ours[i] - ref[i]));
    }
    CHECK_MSG(abs_err <= tol * big + 1e-9, "%s: %s: error %.3g, more than %g of the tensor's "
              "largest value %.3g", cs, what, abs_err, tol, big);
}

/* DeBERTa: transformers' attention probabilities of every layer (hf.attn.L), on the rows of
 * valid queries (transformers' padded rows are its own). */
static void compare_attn(const char *cs, tupe_model *m, const tupe_st *st, const int32_t *len,
                         int B, int T, int H, int L, double tol, double *worst)
{
    size_t n = (size_t)B * H * T * T;
    float *ours = malloc(n * sizeof *ours), *ref;
    tupe_err e;
    for (int l = 0; l < L; l++) {
        char name[64];
        snprintf(name, sizeof name, "hf.attn.%d", l);
        CHECK_MSG(tupe_st_find(st, name) != NULL, "%s: no %s", cs, name);
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_ATTN_PROBS, l, ours, n, &e), 0);
        ref = floats(st, name, n);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int i = 0; i < len[b]; i++) {
                    size_t o = (((size_t)b * H + h) * T + i) * T;
                    compare(cs, name, ours + o, ref + o, (size_t)T, tol, worst);
                }
        free(ref);
    }
    free(ours);
}

static void run_case_in(const char *dir, const char *cs)
{
    tupe_st *st;
    tupe_err e;
    int rc = tupe_st_open(&st, fix_in(dir, cs), &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        return;
    const char *cj = tupe_st_meta(st, "config"), *aj = tupe_st_meta(st, "adam");
    CHECK(cj && aj);
    tupe_config c;
    rc = tupe_config_parse(&c, cj, strlen(cj), cs, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    size_t nids, nlen, M = 0, nl = 0;
    int32_t *ids = ints(st, "input.ids", &nids), *len = ints(st, "input.lengths", &nlen);
    int B = (int)nlen, T = (int)(nids / nlen);
    CHECK_INT(tupe_st_find(st, "input.ids")->shape[1], T);
    int32_t *mpos = NULL, *mlab = NULL, *labels = NULL;
    float *targets = NULL;
    if (c.num_labels == 0) {
        mpos = ints(st, "input.mask_pos", &M);
        mlab = ints(st, "input.mask_label", &M);
    } else if (c.num_labels == 1) {
        targets = floats(st, "input.labels", (size_t)B);
    } else {
        labels = ints(st, "input.labels", &nl);
    }
    tupe_backend *be;
    CHECK_INT(tupe_backend_create(&be, "cpu", 0, &e), 0);
    tupe_capacity cap = {B, T, (int)M};
    tupe_model *m;
    rc = tupe_model_create(&m, &c, be, &cap, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        tupe_st_close(st);
        return;
    }
    const tupe_layout *lay = tupe_model_layout(m);
    check_fixture_params(st, lay, cs); /* the fixture's parameters are exactly the model's */
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        char name[128];
        snprintf(name, sizeof name, "param.%s", p->name);
        uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
        float *v = malloc(p->numel * sizeof *v);
        rc = tupe_st_read_f32(st, name, p->ndim, shape, v, p->numel, &e);
        CHECK_MSG(rc == 0, "%s", e.msg);
        if (!rc)
            tupe_model_set(m, p->name, v, p->numel, &e);
        free(v);
    }
    tupe_batch b = {B, T, ids, len, NULL, (int)M, mpos, mlab, labels, targets, 0, 0, .rtd_label = NULL};
    tupe_fwd_out o;
    tupe_model_zero_grad(m);
    rc = tupe_model_forward(m, &b, NULL, &o, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    double worst = 0, tol = 1e-4;
    float *ref = floats(st, "out.loss", 1);
    CHECK_MSG(fabs(o.loss - ref[0]) <= 1e-5, "%s: loss %.9g, reference %.9g", cs, o.loss, ref[0]);
    free(ref);
    size_t nlog = tupe_model_probe_size(m, TUPE_PROBE_LOGITS);
    CHECK_INT(tupe_st_find(st, "out.logits")->numel, nlog);
    float *ours = malloc(nlog * sizeof *ours);
    tupe_model_probe(m, TUPE_PROBE_LOGITS, 0, ours, nlog, &e);
    ref = floats(st, "out.logits", nlog);
    compare(cs, "logits", ours, ref, nlog, tol, &worst);
    free(ref);
    if (tupe_st_find(st, "hf.logits")) { /* transformers' own class with the same weights */
        ref = floats(st, "hf.logits", nlog);
        compare(cs, "transformers' logits", ours, ref, nlog, tol, &worst);
        free(ref);
    }
    free(ours);
    if (tupe_st_find(st, "out.pos_bias")) {
        size_t nb = tupe_model_probe_size(m, TUPE_PROBE_POS_BIAS);
        CHECK_INT(tupe_st_find(st, "out.pos_bias")->numel, nb);
        ours = malloc((nb ? nb : 1) * sizeof *ours);
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_BIAS, 0, ours, nb, &e), 0);
        ref = floats(st, "out.pos_bias", nb);
        compare(cs, "pos_bias", ours, ref, nb, tol, &worst);
        free(ours), free(ref);
    } else {
        CHECK_INT(tupe_model_probe_size(m, TUPE_PROBE_POS_BIAS), 0);
    }
    if (tupe_st_find(st, "hf.attn.0"))
        compare_attn(cs, m, st, len, B, T, c.num_heads, c.num_layers, tol, &worst);
    CHECK_INT(tupe_model_backward(m, &e), 0);
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", p->name);
        ours = malloc(p->numel * sizeof *ours);
        tupe_model_get_grad(m, p->name, ours, p->numel, &e);
        ref = floats(st, name, p->numel);
        compare(cs, name, ours, ref, p->numel, tol, &worst);
        free(ours), free(ref);
    }

    /* 5 AdamW steps on the same batch. */
    json_error_t je;
    json_t *a = json_loads(aj, 0, &je);
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    oc.beta1 = json_real_value(json_array_get(json_object_get(a, "betas"), 0));
    oc.beta2 = json_real_value(json_array_get(json_object_get(a, "betas"), 1));
    oc.eps = json_number_value(json_object_get(a, "eps"));
    oc.weight_decay = json_number_value(json_object_get(a, "weight_decay"));
    oc.clip = json_number_value(json_object_get(a, "clip"));
    oc.exclude_ln_bias = json_is_true(json_object_get(a, "exclude_ln_bias"));
    tupe_schedule sch = {json_number_value(json_object_get(a, "lr")), 0,
                         json_integer_value(json_object_get(a, "warmup")),
                         json_integer_value(json_object_get(a, "total")), 1, 0};
    json_decref(a);
    CHECK(oc.beta1 == 0.9 && oc.beta2 == 0.999 && sch.peak > 0 && sch.total >= 5);
    tupe_adamw *opt;
    CHECK_INT(tupe_adamw_create(&opt, m, &oc, &e), 0);
    float *aloss = floats(st, "adam.loss", 5);
    for (int t = 1; t <= 5; t++) {
        tupe_model_zero_grad(m);
        CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), 0);
        CHECK_MSG(fabs(o.loss - aloss[t - 1]) <= 1e-5, "%s: AdamW step %d: loss %.9g, reference "
                  "%.9g", cs, t, o.loss, aloss[t - 1]);
        CHECK_INT(tupe_model_backward(m, &e), 0);
        tupe_adamw_step(opt, tupe_lr_at(&sch, t), -1);
    }
    free(aloss);
    int nadam = 0;
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const char *n = tupe_st_at(st, i)->name;
        if (strncmp(n, "adam.param.", 11) != 0)
            continue;
        const tupe_param *p = tupe_layout_find(lay, n + 11);
        CHECK_MSG(p != NULL, "%s: %s is not a parameter", cs, n);
        if (!p)
            continue;
        ours = malloc(p->numel * sizeof *ours);
        tupe_model_get(m, p->name, ours, p->numel, &e);
        ref = floats(st, n, p->numel);
        compare(cs, n, ours, ref, p->numel, tol, &worst);
        free(ours), free(ref);
        nadam++;
    }
    CHECK(nadam >= 3);
    printf("# %s: %zu tensors, worst relative error %.2g\n", cs, lay->count, worst);
    tupe_adamw_free(opt);
    tupe_model_free(m);
    tupe_backend_destroy(be);
    free(ids), free(len), free(mpos), free(mlab), free(labels), free(targets);
    tupe_st_close(st);
}

static void run_case(const char *cs) { run_case_in("model", cs); }

static void bert_a(void) { run_case("bert-a"); }
static void bert_r(void) { run_case("bert-r"); }
static void bert_ad(void) { run_case("bert-ad"); }
static void tupe_a(void) { run_case("tupe-a"); }
static void tupe_a_tie(void) { run_case("tupe-a-tie"); }
static void tupe_r(void) { run_case("tupe-r"); }
static void cls_tupe_r(void) { run_case("cls-tupe-r"); }
static void reg_bert_a(void) { run_case("reg-bert-a"); }
static void rope(void) { run_case("rope"); }
static void rope_half(void) { run_case("rope-half"); }
static void alibi(void) { run_case("alibi"); }
static void nope(void) { run_case("nope"); }
/* DeBERTa v3's attention, against transformers' DebertaV2ForMaskedLM itself
 * (tests/reference/make_deberta_fixtures.py): logits, gradients, AdamW steps, attention maps. */
static void deberta(void) { run_case_in("deberta", "deberta"); }

/* The log buckets equal transformers' make_log_bucket_position for every r in [-1100, 1100]
 * at the fixture's (k, m), including DeBERTa v3 base's 256 / 512. */
static void deberta_buckets(void)
{
    tupe_st *st;
    tupe_err e;
    int rc = tupe_st_open(&st, fix_in("deberta", "buckets"), &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        return;
    int sets = 0;
    for (size_t t = 0; t < tupe_st_count(st); t++) {
        const char *name = tupe_st_at(st, t)->name;
        int k, mx;
        CHECK_INT(sscanf(name, "b.%d.%d", &k, &mx), 2);
        size_t n;
        int32_t *ref = ints(st, name, &n);
        CHECK_INT(n, 2201);
        int bad = 0;
        for (int r = -1100; r <= 1100 && ref; r++)
            if (tupe_deberta_bucket(r, k, mx) != ref[r + 1100] && bad++ < 3)
                CHECK_MSG(0, "bucket(%d; %d, %d) = %d, transformers' %d", r, k, mx,
                          tupe_deberta_bucket(r, k, mx), ref[r + 1100]);
        free(ref);
        sets++;
    }
    CHECK_INT(sets, 4);
    tupe_st_close(st);
}

UNIT_MAIN(T(bert_a), T(bert_r), T(bert_ad), T(tupe_a), T(tupe_a_tie), T(tupe_r), T(cls_tupe_r),
          T(reg_bert_a), T(rope), T(rope_half), T(alibi), T(nope), T(deberta),
          T(deberta_buckets))
