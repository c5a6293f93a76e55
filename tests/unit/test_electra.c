/* ELECTRA (model/electra.h, train/masking.h):
 *   parity  one step of a BERT-A pair against Hugging Face's ElectraForMaskedLM and
 *           ElectraForPreTraining in float64 (tests/reference/make_electra_fixtures.py): the
 *           generator's logits, its samples (Gumbel-max with tupe's Philox noise, redone in
 *           Python), the labels, the discriminator's logits, both losses, every gradient of
 *           both networks and 5 steps each of tupe's AdamW and of ELECTRA's optimizer and
 *           schedule (--recipe electra), on cpu (fp32, contract tolerances) and cpu64;
 *   gradcheck  central differences of the total loss on cpu64 for a pair of every positional
 *           encoding (dropout on in one case): the shared tables receive both networks'
 *           gradients, nothing flows through the samples;
 *   layout, grad-ready order, the sampler's distribution, ELECTRA's masking. */
#include <jansson.h>

#include "backend/backend.h"
#include "base/rng.h"
#include "formats/safetensors.h"
#include "model/electra.h"
#include "model/model.h"
#include "model/optim.h"
#include "train/masking.h"
#include "modelcase.h"
#include "unit.h"

static int32_t *ints(const tupe_st *st, const char *name, size_t *n)
{
    const tupe_st_tensor *t = tupe_st_find(st, name);
    if (!t || t->dtype != TUPE_I32) {
        CHECK_MSG(0, "%s: missing or not I32", name);
        *n = 0;
        return calloc(1, 4);
    }
    int32_t *v = malloc(t->numel * sizeof *v + 4);
    memcpy(v, t->data, t->numel * sizeof *v);
    *n = (size_t)t->numel;
    return v;
}

static float *floats(const tupe_st *st, const char *name, size_t n)
{
    float *v = calloc(n ? n : 1, sizeof *v);
    tupe_err e;
    int rc = tupe_st_read_f32(st, name, -1, NULL, v, n, &e);
    CHECK_MSG(rc == 0, "%s: %s", name, e.msg);
    return v;
}

/* max |ours - ref| <= tol max(1, |ref|) element-wise, and <= tol (largest |ref|) + 1e-9 */
static void compare(const char *be, const char *what, const float *ours, const float *ref,
                    size_t n, double tol, double *worst)
{
    double big = 0, abs_err = 0, rel = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)ours[i] - ref[i]);
        double r = d / fmax(1.0, fabs((double)ref[i]));
        if (r > rel || r != r) {
            rel = r;
            at = i;
        }
        big = fmax(big, fabs((double)ref[i]));
        abs_err = fmax(abs_err, d);
    }
    if (rel > *worst)
        *worst = rel;
    CHECK_MSG(rel <= tol, "%s: %s: error %.3g at [%zu] (ours %.9g, reference %.9g)", be, what,
              rel, at, n ? ours[at] : 0, n ? ref[at] : 0);
    CHECK_MSG(abs_err <= tol * big + 1e-9, "%s: %s: error %.3g, more than %g of the largest "
              "value %.3g", be, what, abs_err, tol, big);
}

/* The fixture's initial parameters into m. */
static void load_params(tupe_model *m, const tupe_st *st)
{
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_err e;
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        char name[128];
        snprintf(name, sizeof name, "param.%s", p->name);
        float *v = floats(st, name, p->numel);
        tupe_model_set(m, p->name, v, p->numel, &e);
        free(v);
    }
}

/* 5 optimizer steps from the fixture's start against its <prefix>.loss and <prefix>.param.*:
 * tupe's AdamW (adam) or ELECTRA's optimizer and schedule (electra_adam: --recipe electra). */
static void adam_steps(const char *bename, tupe_model *m, const tupe_batch *b, const tupe_st *st,
                       const char *aj, int electra, double tol, double ltol, double *worst)
{
    const char *prefix = electra ? "electra_adam" : "adam";
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_err e;
    tupe_fwd_out o;
    load_params(m, st);
    json_t *a = json_loads(aj, 0, NULL);
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    oc.eps = json_number_value(json_object_get(a, "eps"));
    oc.weight_decay = json_number_value(json_object_get(a, "weight_decay"));
    oc.clip = json_number_value(json_object_get(a, "clip"));
    oc.exclude_ln_bias = electra || json_is_true(json_object_get(a, "exclude_ln_bias"));
    oc.electra = electra;
    tupe_schedule sch = {json_number_value(json_object_get(a, "lr")), 0,
                         json_integer_value(json_object_get(a, "warmup")),
                         json_integer_value(json_object_get(a, "total")), 1, electra};
    json_decref(a);
    tupe_adamw *opt;
    CHECK_INT(tupe_adamw_create(&opt, m, &oc, &e), 0);
    char name[160];
    snprintf(name, sizeof name, "%s.loss", prefix);
    float *aloss = floats(st, name, 5);
    for (int t = 1; t <= 5; t++) {
        tupe_model_zero_grad(m);
        CHECK_INT(tupe_model_forward(m, b, NULL, &o, &e), 0);
        CHECK_MSG(fabs(o.loss - aloss[t - 1]) <= ltol * aloss[t - 1], "%s: %s step %d: loss %.9g, "
                  "reference %.9g", bename, prefix, t, o.loss, aloss[t - 1]);
        CHECK_INT(tupe_model_backward(m, &e), 0);
        tupe_adamw_step(opt, tupe_lr_at(&sch, t), -1);
    }
    free(aloss);
    int nadam = 0;
    size_t plen = strlen(prefix) + 7;
    for (size_t i = 0; i < tupe_st_count(st); i++) {
        const char *n = tupe_st_at(st, i)->name;
        if (strncmp(n, prefix, plen - 7) != 0 || strncmp(n + plen - 7, ".param.", 7) != 0)
            continue;
        const tupe_param *q = tupe_layout_find(lay, n + plen);
        CHECK_MSG(q != NULL, "%s is not a parameter", n);
        if (!q)
            continue;
        float *ours = malloc(q->numel * sizeof *ours), *ref = floats(st, n, q->numel);
        tupe_model_get(m, q->name, ours, q->numel, &e);
        compare(bename, n, ours, ref, q->numel, tol, worst);
        free(ours), free(ref);
        nadam++;
    }
    CHECK(nadam >= 5);
    tupe_adamw_free(opt);
}

static void parity_on(const char *bename, double tol, double ltol)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/electra/bert-a.safetensors", unit_src());
    tupe_st *st;
    tupe_err e;
    int rc = tupe_st_open(&st, path, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        return;
    const char *cj = tupe_st_meta(st, "config"), *nj = tupe_st_meta(st, "noise"),
               *aj = tupe_st_meta(st, "adam");
    CHECK(cj && nj && aj);
    tupe_config c;
    CHECK_INT(tupe_config_parse(&c, cj, strlen(cj), "fixture", &e), 0);
    CHECK(tupe_cfg_pair(&c));
    size_t nids, nlen, M;
    int32_t *ids = ints(st, "input.ids", &nids), *len = ints(st, "input.lengths", &nlen);
    int32_t *mpos = ints(st, "input.mask_pos", &M), *mlab = ints(st, "input.mask_label", &M);
    int B = (int)nlen, T = (int)(nids / nlen);
    tupe_backend *be;
    CHECK_INT(tupe_backend_create(&be, bename, 1, &e), 0);
    tupe_capacity cap = {B, T, (int)M};
    tupe_model *m;
    rc = tupe_model_create(&m, &c, be, &cap, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        tupe_backend_destroy(be);
        tupe_st_close(st);
        return;
    }
    const tupe_layout *lay = tupe_model_layout(m);
    check_fixture_params(st, lay, "the ELECTRA fixture");
    load_params(m, st);
    json_t *nz = json_loads(nj, 0, NULL);
    tupe_batch b;
    memset(&b, 0, sizeof b);
    b.B = B;
    b.T = T;
    b.ids = ids;
    b.lengths = len;
    b.M = (int)M;
    b.mask_pos = mpos;
    b.mask_label = mlab;
    b.noise_seed = (uint64_t)json_integer_value(json_object_get(nz, "seed"));
    b.noise_step = (uint32_t)json_integer_value(json_object_get(nz, "step"));
    json_decref(nz);

    tupe_fwd_out o;
    tupe_model_zero_grad(m);
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), 0);
    double worst = 0;
    float *r1 = floats(st, "out.loss", 1), *r2 = floats(st, "out.mlm_loss", 1),
          *r3 = floats(st, "out.rtd_loss", 1);
    CHECK_MSG(fabs(o.loss - r1[0]) <= ltol * r1[0], "%s: loss %.9g, reference %.9g", bename, o.loss, r1[0]);
    CHECK_MSG(fabs(o.loss_sum / (double)o.count - r2[0]) <= ltol * r2[0], "%s: MLM loss %.9g, "
              "reference %.9g", bename, o.loss_sum / (double)o.count, r2[0]);
    CHECK_MSG(fabs(o.rtd_loss_sum / (double)o.rtd_count - r3[0]) <= ltol * r3[0],
              "%s: RTD loss %.9g, reference %.9g", bename, o.rtd_loss_sum / (double)o.rtd_count, r3[0]);
    free(r1), free(r2), free(r3);
    tupe_electra *p = tupe_model_pair(m);
    CHECK(p != NULL);
    size_t V = (size_t)c.vocab_size, N = (size_t)B * T;
    float *ours = malloc(M * V * sizeof *ours), *ref = floats(st, "out.gen_logits", M * V);
    CHECK_INT(tupe_model_probe(tupe_electra_generator(p), TUPE_PROBE_LOGITS, 0, ours, M * V, &e), 0);
    compare(bename, "generator logits", ours, ref, M * V, tol, &worst);
    free(ours), free(ref);
    size_t ns, nl;
    int32_t *samples = ints(st, "out.samples", &ns), *labels = ints(st, "out.labels", &nl);
    CHECK_INT(ns, M);
    CHECK_INT(nl, N);
    int64_t replaced = 0;
    for (size_t k = 0; k < M; k++)
        CHECK_MSG(tupe_electra_corrupted(p)[mpos[k]] == samples[k], "%s: sample %zu: %d, reference %d",
                  bename, k, tupe_electra_corrupted(p)[mpos[k]], samples[k]);
    for (size_t i = 0; i < N; i++) {
        CHECK_INT(tupe_electra_labels(p)[i], labels[i]);
        replaced += labels[i];
    }
    CHECK_INT(o.rtd_replaced, replaced);
    CHECK(replaced > 0 && replaced < (int64_t)M); /* a sample equal to the original is real */
    free(samples), free(labels);
    ours = malloc(N * sizeof *ours);
    ref = floats(st, "out.disc_logits", N);
    CHECK_INT(tupe_electra_scores(p, ours, N, &e), 0);
    compare(bename, "discriminator logits", ours, ref, N, tol, &worst);
    free(ours), free(ref);
    CHECK_INT(tupe_model_backward(m, &e), 0);
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *q = &lay->t[i];
        char name[128];
        snprintf(name, sizeof name, "grad.%s", q->name);
        ours = malloc(q->numel * sizeof *ours);
        tupe_model_get_grad(m, q->name, ours, q->numel, &e);
        ref = floats(st, name, q->numel);
        compare(bename, name, ours, ref, q->numel, tol, &worst);
        free(ours), free(ref);
    }

    adam_steps(bename, m, &b, st, aj, 0, tol, ltol, &worst);
    /* ELECTRA's first steps, without bias correction, are about 3x larger (m / sqrt(v) is
     * 0.1 / sqrt(0.001) of the gradient's sign at step 2): so are fp32's rounding errors */
    adam_steps(bename, m, &b, st, aj, 1, tol, 3 * ltol, &worst);
    printf("# %s: %zu tensors of both networks, worst relative error %.2g\n", bename, lay->count,
           worst);
    tupe_model_free(m);
    tupe_backend_destroy(be);
    free(ids), free(len), free(mpos), free(mlab);
    tupe_st_close(st);
}

/* The fixture stores fp32 values: on cpu64 the tolerances are their rounding (2^-24). */
static void parity_cpu(void) { parity_on("cpu", 1e-4, 1e-6); }
static void parity_cpu64(void) { parity_on("cpu64", 1e-7, 1e-7); }

/* ---- finite differences on a pair of every variant ---------------------------------------- */

enum { GB = 3, GT = 9, GV = 41 };
static const int32_t glen[GB] = {9, 7, 4};

static void pair_config(tupe_config *c, int position, int untie, double dropout)
{
    tupe_config_default(c);
    c->position = position;
    c->untie_cls = untie;
    c->vocab_size = GV;
    c->hidden_size = 16;
    c->num_layers = 2;
    c->num_heads = 2;
    c->intermediate_size = 24;
    c->max_position = 12;
    c->embedding_size = 12;
    c->generator_hidden_size = 0.5;
    c->hidden_dropout = c->attention_dropout = c->activation_dropout = dropout;
    c->rel_pos_buckets = 8;
    c->max_rel_pos = 6;
}

static void gradcheck(int position, int untie, double dropout)
{
    tupe_backend *be;
    tupe_err e;
    CHECK_INT(tupe_backend_create(&be, "cpu64", 1, &e), 0);
    tupe_config c;
    pair_config(&c, position, untie, dropout);
    tupe_capacity cap = {GB, GT, 8};
    tupe_model *m;
    int rc = tupe_model_create(&m, &c, be, &cap, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc) {
        tupe_backend_destroy(be);
        return;
    }
    CHECK_INT(tupe_model_init(m, 7, &e), 0);
    const tupe_layout *lay = tupe_model_layout(m);
    tupe_rng r;
    tupe_rng_init(&r, 99, 0, 0, TUPE_RNG_USER);
    perturb_params(m, &r);
    int32_t ids[GB * GT], mpos[8], mlab[8];
    for (int i = 0; i < GB * GT; i++)
        ids[i] = 5 + (int32_t)tupe_rng_below(&r, GV - 5);
    int M = 0;
    const int mp[] = {1, 3, 8, GT + 2, GT + 5, 2 * GT + 1, 2 * GT + 3};
    for (size_t i = 0; i < sizeof mp / sizeof mp[0]; i++) {
        mpos[M] = mp[i];
        mlab[M] = ids[mp[i]];
        if (i % 3 != 2)
            ids[mp[i]] = 4; /* [MASK]; every third stays */
        M++;
    }
    tupe_batch b;
    memset(&b, 0, sizeof b);
    b.B = GB;
    b.T = GT;
    b.ids = ids;
    b.lengths = glen;
    b.M = M;
    b.mask_pos = mpos;
    b.mask_label = mlab;
    b.sample_offset = 5;
    b.noise_seed = 11;
    b.noise_step = 2;
    tupe_step st = {.seed = 1234, .step = 3};
    const tupe_step *sp = dropout > 0 ? &st : NULL;
    tupe_model_zero_grad(m);
    tupe_fwd_out o0;
    CHECK_INT(tupe_model_forward(m, &b, sp, &o0, &e), 0);
    CHECK(o0.rtd_replaced > 0);
    CHECK_INT(tupe_model_backward(m, &e), 0);
    int checked = 0;
    const double h = 1e-5;
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        double *g = malloc(p->numel * sizeof *g), *v = malloc(p->numel * sizeof *v);
        tupe_model_get_grad_f64(m, p->name, g, p->numel, &e);
        be->download(be, v, tupe_dev_at(be, tupe_model_params(m), p->offset), p->numel, TUPE_F64);
        size_t pick[4];
        size_t best = 0;
        for (size_t j = 0; j < p->numel; j++)
            if (fabs(g[j]) > fabs(g[best]))
                best = j;
        pick[0] = best;
        for (int t = 1; t < 4; t++)
            pick[t] = (size_t)tupe_rng_below64(&r, p->numel);
        for (int q = 0; q < 4; q++) {
            size_t j = pick[q];
            double fd = central_diff(m, p->name, v, p->numel, j, h, &b, sp);
            checked++;
            CHECK_MSG(fabs(fd - g[j]) <= 1e-7 + 1e-6 * fabs(fd), "%s: %s[%zu]: analytic %.10g, "
                      "finite difference %.10g", tupe_position_name(position), p->name, j, g[j], fd);
        }
        free(g);
        free(v);
    }
    CHECK_NEAR(loss_of(m, &b, sp), o0.loss, 1e-12);
    printf("# %s%s: %d elements over %zu tensors of both networks, loss %.6f (%lld of %d "
           "replaced)\n", tupe_position_name(position), dropout > 0 ? " with dropout" : "",
           checked, lay->count, o0.loss, (long long)o0.rtd_replaced, M);
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

static void grad_bert_a(void) { gradcheck(TUPE_POS_BERT_A, 1, 0); }
static void grad_bert_r(void) { gradcheck(TUPE_POS_BERT_R, 1, 0); }
static void grad_bert_ad(void) { gradcheck(TUPE_POS_BERT_AD, 1, 0); }
static void grad_tupe_a(void) { gradcheck(TUPE_POS_TUPE_A, 1, 0); }
static void grad_tupe_r(void) { gradcheck(TUPE_POS_TUPE_R, 1, 0); }
static void grad_tupe_r_dropout(void) { gradcheck(TUPE_POS_TUPE_R, 1, 0.2); }
/* issue 30's encodings in both networks (the generator one head of 8, the discriminator two) */
static void grad_rope(void) { gradcheck(TUPE_POS_ROPE, 1, 0); }
static void grad_alibi(void) { gradcheck(TUPE_POS_ALIBI, 1, 0); }
static void grad_nope(void) { gradcheck(TUPE_POS_NOPE, 1, 0); }
static void grad_deberta(void) { gradcheck(TUPE_POS_DEBERTA, 1, 0); }

/* ---- layout and the order of the gradients --------------------------------------------------- */

typedef struct calls {
    size_t lo[64];
    int n;
} calls;
static void on_ready(void *ctx, size_t lo)
{
    calls *c = ctx;
    if (c->n < 64)
        c->lo[c->n++] = lo;
}

static void layout(void)
{
    tupe_config c;
    pair_config(&c, TUPE_POS_TUPE_R, 1, 0);
    tupe_backend *be;
    tupe_err e;
    CHECK_INT(tupe_backend_create(&be, "cpu", 1, &e), 0);
    tupe_capacity cap = {GB, GT, 8};
    tupe_model *m;
    CHECK_INT(tupe_model_create(&m, &c, be, &cap, &e), 0);
    const tupe_layout *lay = tupe_model_layout(m);
    /* shared once, each network's own positional terms and projection */
    const char *want[] = {"embeddings.word_embeddings.weight", "embeddings.LayerNorm.weight",
                          "embeddings_project.weight", "generator.embeddings_project.weight",
                          "position.embeddings.weight", "generator.position.embeddings.weight",
                          "generator.position.relative_bias.weight",
                          "discriminator_predictions.dense_prediction.weight",
                          "generator_predictions.dense.weight", "generator_predictions.LayerNorm.bias",
                          "generator_lm_head.bias", "generator.encoder.layer.1.output.dense.weight"};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        CHECK_MSG(tupe_layout_find(lay, want[i]) != NULL, "no %s", want[i]);
    CHECK(tupe_layout_find(lay, "generator.embeddings.word_embeddings.weight") == NULL);
    CHECK(tupe_layout_find(lay, "cls.predictions.bias") == NULL);
    const tupe_param *gw = tupe_layout_find(lay, "generator_predictions.dense.weight");
    CHECK(gw && gw->shape[0] == 12 && gw->shape[1] == 8); /* E x generator width */
    const tupe_param *gq = tupe_layout_find(lay, "generator.encoder.layer.0.attention.self.query.weight");
    CHECK(gq && gq->shape[0] == 8);
    const tupe_param *rb = tupe_layout_find(lay, "generator.position.relative_bias.weight");
    CHECK(rb && rb->shape[1] == 1); /* 8 / 64 -> one head */
    /* every element in one tensor at most, all within the flat buffer */
    unsigned char *used = calloc(lay->total, 1);
    size_t sum = 0;
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        CHECK(p->offset + p->numel <= lay->total);
        for (size_t j = 0; j < p->numel && p->offset + j < lay->total; j++) {
            CHECK(!used[p->offset + j]);
            used[p->offset + j] = 1;
        }
        sum += p->numel;
    }
    CHECK_INT(sum, lay->nparams);
    free(used);
    /* the gradient groups: descending, and each call's elements final when it is made */
    size_t lo[64];
    size_t ng = tupe_model_grad_groups(m, lo, 64);
    CHECK_INT(ng, 2 * (c.num_layers + 2));
    for (size_t i = 1; i < ng; i++)
        CHECK(lo[i] < lo[i - 1]);
    CHECK_INT(lo[ng - 1], 0);
    calls k = {{0}, 0};
    tupe_model_on_grad_ready(m, on_ready, &k);
    CHECK_INT(tupe_model_init(m, 3, &e), 0);
    int32_t ids[GB * GT] = {0}, mpos[2] = {1, GT + 1}, mlab[2] = {7, 8};
    for (int i = 0; i < GB * GT; i++)
        ids[i] = 5 + i % 30;
    tupe_batch b;
    memset(&b, 0, sizeof b);
    b.B = GB, b.T = GT, b.ids = ids, b.lengths = glen, b.M = 2, b.mask_pos = mpos,
    b.mask_label = mlab;
    tupe_model_zero_grad(m);
    CHECK_INT(tupe_model_forward(m, &b, NULL, NULL, &e), 0);
    CHECK_INT(tupe_model_backward(m, &e), 0);
    CHECK_INT(k.n, (int)ng);
    for (int i = 0; i < k.n && i < (int)ng; i++)
        CHECK_INT(k.lo[i], lo[i]);
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

/* ---- the sampler: Gumbel-max draws from the softmax -------------------------------------------- */

static void sampler(void)
{
    float logits[5] = {1.0f, 0.0f, -1.0f, 2.0f, 0.5f};
    double z = 0, p[5];
    for (int i = 0; i < 5; i++)
        z += exp(logits[i]);
    for (int i = 0; i < 5; i++)
        p[i] = exp(logits[i]) / z;
    int count[5] = {0}, n = 40000;
    for (int k = 0; k < n; k++)
        count[tupe_electra_sample(logits, 5, 1, 2, (uint64_t)k, k % 128)]++;
    for (int i = 0; i < 5; i++) {
        double f = (double)count[i] / n, sd = sqrt(p[i] * (1 - p[i]) / n);
        CHECK_MSG(fabs(f - p[i]) < 5 * sd, "token %d: frequency %.4f, softmax %.4f", i, f, p[i]);
    }
    /* reproducible, and every coordinate of the stream matters */
    float flat[200] = {0};
    int a = tupe_electra_sample(flat, 200, 1, 2, 3, 4);
    CHECK_INT(tupe_electra_sample(flat, 200, 1, 2, 3, 4), a);
    int differ = 0;
    for (int k = 0; k < 8; k++)
        differ += tupe_electra_sample(flat, 200, 1 + k, 2, 3, 4) != a ||
                  tupe_electra_sample(flat, 200, 1, 2 + k, 3, 4) != a ||
                  tupe_electra_sample(flat, 200, 1, 2, 3 + k, 4) != a ||
                  tupe_electra_sample(flat, 200, 1, 2, 3, 4 + k) != a;
    CHECK(differ >= 6);
}

/* ---- ELECTRA's masking --------------------------------------------------------------------- */

static void masking(void)
{
    enum { CLS = 2, SEP = 3, MASK = 4, PAD = 0 };
    const int32_t sp[4] = {CLS, SEP, MASK, PAD};
    tupe_mask_cfg cfg = {77, 0.15, 0.85, 0, MASK, NULL, 0};
    long chosen = 0, masked = 0, total = 0;
    int32_t ids[128], orig[128], pos[128], lab[128];
    for (uint64_t s = 0; s < 3000; s++) {
        int len = 8 + (int)(s % 121);
        for (int i = 0; i < len; i++)
            ids[i] = orig[i] = 5 + (int32_t)((s * 7 + (uint64_t)i * 13) % 90);
        ids[0] = orig[0] = CLS;
        ids[len - 1] = orig[len - 1] = SEP;
        if (len > 20)
            ids[len / 2] = orig[len / 2] = SEP;
        int n = tupe_mask_electra(&cfg, sp, 4, 19, 0, s, ids, len, pos, lab);
        int want = (int)nearbyint(0.15 * len);
        want = want < 1 ? 1 : want > 19 ? 19 : want;
        CHECK_INT(n, want);
        for (int k = 0; k < n; k++) {
            CHECK(k == 0 || pos[k] > pos[k - 1]);
            CHECK(orig[pos[k]] != CLS && orig[pos[k]] != SEP);
            CHECK_INT(lab[k], orig[pos[k]]);
            CHECK(ids[pos[k]] == MASK || ids[pos[k]] == orig[pos[k]]); /* no random token */
            masked += ids[pos[k]] == MASK;
        }
        int changed = 0;
        for (int i = 0; i < len; i++)
            changed += ids[i] != orig[i];
        CHECK(changed <= n);
        chosen += n;
        total += len;
        /* the same sample in the same epoch: the same masks */
        int32_t again[128], p2[128], l2[128];
        memcpy(again, orig, (size_t)len * sizeof *again);
        CHECK_INT(tupe_mask_electra(&cfg, sp, 4, 19, 0, s, again, len, p2, l2), n);
        CHECK(memcmp(again, ids, (size_t)len * sizeof *ids) == 0);
    }
    double frac = (double)masked / (double)chosen;
    CHECK_MSG(fabs(frac - 0.85) < 0.02, "[MASK] at %.3f of the chosen positions", frac);
    printf("# %ld positions chosen of %ld (%.2f%%), %.1f%% of them [MASK]\n", chosen, total,
           100.0 * chosen / total, 100 * frac);
    /* only specials: nothing to choose */
    int32_t s3[3] = {CLS, SEP, SEP};
    CHECK_INT(tupe_mask_electra(&cfg, sp, 4, 19, 0, 1, s3, 3, pos, lab), 0);
}

UNIT_MAIN(T(parity_cpu), T(parity_cpu64), T(grad_bert_a), T(grad_bert_r), T(grad_bert_ad),
          T(grad_tupe_a), T(grad_tupe_r), T(grad_tupe_r_dropout), T(grad_rope), T(grad_alibi),
          T(grad_nope), T(grad_deberta), T(layout), T(sampler),
          T(masking))
