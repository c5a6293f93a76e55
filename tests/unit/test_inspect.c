/* The inspection modules against the model itself: the positional terms of poscorr.c equal the
 * bias the model adds to its scores (and BERT-Ad's position queries and keys), for every
 * variant with and without the [CLS] reset; the exact decomposition of decomp.c sums to the
 * model's own layer-0 scores (from its Q/K probe) within 1e-4, with token types and with a
 * relative bias; the paper mode and the averaging rule; the attention maps of inspect.c are the
 * model's probabilities. Parameters are random, LayerNorm and biases included, so no term is
 * trivially zero. (The numpy fixtures are compared end to end in tests/cli/attnviz.sh.) */
#include "model/checkpoint.h"
#include "model/params.h"
#include "viz/decomp.h"
#include "viz/inspect.h"
#include "viz/poscorr.h"
#include "unit.h"

enum { NT = 13, SEQ = 16 };

static void cfg_for(tupe_config *c, int position, int untie, int types)
{
    tupe_config_default(c);
    c->position = position;
    c->untie_cls = untie;
    c->vocab_size = 40;
    c->hidden_size = 24;
    c->num_layers = 2;
    c->num_heads = 3;
    c->intermediate_size = 32;
    c->max_position = SEQ;
    c->type_vocab_size = types;
    c->layer_norm_eps = types ? 1e-12 : 1e-5;
    c->hidden_dropout = c->attention_dropout = c->classifier_dropout = 0;
}

/* A checkpoint of a model with random parameters everywhere (LayerNorm and biases included);
 * returns the model (to run) and writes the checkpoint to `dir`. */
static tupe_model *random_ckpt(const tupe_config *c, tupe_backend *be, const char *dir)
{
    tupe_capacity cap = {2, SEQ, 0};
    tupe_model *m;
    tupe_err e;
    if (tupe_model_create(&m, c, be, &cap, &e) || tupe_model_init(m, 3, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    const tupe_layout *lay = tupe_model_layout(m);
    uint64_t s = 12345;
    for (size_t i = 0; i < lay->count; i++) {
        const tupe_param *p = &lay->t[i];
        float *v = malloc(p->numel * sizeof *v);
        tupe_model_get(m, p->name, v, p->numel, &e);
        int ln = strstr(p->name, "LayerNorm.weight") != NULL;
        for (size_t k = 0; k < p->numel; k++) {
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            double u = (double)(s >> 11) / 9007199254740992.0 - 0.5;
            v[k] = ln ? (float)(1 + 0.8 * u) : v[k] * 10 + (float)(0.2 * u);
        }
        tupe_model_set(m, p->name, v, p->numel, &e);
        free(v);
    }
    CHECK_INT(tupe_ckpt_save(dir, m, NULL, NULL, &e), 0);
    return m;
}

static tupe_backend *cpu(void)
{
    tupe_backend *be;
    tupe_err e;
    if (tupe_backend_create(&be, "cpu", 2, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    return be;
}

static void ids_of(int32_t *ids, int n, int k)
{
    for (int i = 0; i < n; i++)
        ids[i] = 4 + (i * 7 + k * 5) % 36;
}

static void forward(tupe_model *m, const int32_t *ids, int len)
{
    int32_t l = len;
    tupe_batch b = {1, len, ids, &l, NULL, 0, NULL, NULL, NULL, NULL, 0, 0, .rtd_label = NULL};
    tupe_fwd_out o;
    tupe_err e;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), 0);
}

static double max_diff(const float *a, const float *b, size_t n)
{
    double w = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        w = d > w || d != d ? d : w;
    }
    return w;
}

static void positional_term_is_the_models_bias(void)
{
    static const struct { int pos, untie; } v[] = {
        {TUPE_POS_TUPE_A, 1}, {TUPE_POS_TUPE_A, 0}, {TUPE_POS_TUPE_R, 1}, {TUPE_POS_TUPE_R, 0},
        {TUPE_POS_BERT_R, 1}};
    tupe_backend *be = cpu();
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        tupe_config c;
        cfg_for(&c, v[k].pos, v[k].untie, 0);
        const char *dir = unit_path("ck");
        tupe_model *m = random_ckpt(&c, be, dir);
        int32_t ids[NT];
        ids_of(ids, NT, 0);
        forward(m, ids, NT);
        size_t n = (size_t)c.num_heads * NT * NT;
        float *bias = malloc(n * sizeof *bias);
        tupe_err e;
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_BIAS, 0, bias, n, &e), 0);
        tupe_inspect in;
        tupe_poscorr pc;
        CHECK_INT(tupe_inspect_open(&in, dir, 1, 1, &e), 0);
        CHECK_INT(tupe_poscorr_compute(&in, NT, &pc, &e), 0);
        double d = max_diff(pc.bias, bias, n);
        CHECK_MSG(d < 1e-4, "%s untie %d: positional term differs from the model's bias by %g",
                  tupe_position_name(v[k].pos), v[k].untie, d);
        CHECK_INT(pc.abs != NULL, tupe_cfg_tupe(&c));
        CHECK_INT(pc.rel != NULL, tupe_cfg_rel(&c));
        if (pc.abs && v[k].untie) {
            /* The [CLS] reset: row 0 one value (θ1), column 0 below it another (θ2). */
            for (int h = 0; h < c.num_heads; h++) {
                const float *a = pc.abs + (size_t)h * NT * NT;
                CHECK(a[NT - 1] == a[0] && a[(size_t)(NT - 1) * NT] == a[NT] && a[0] != a[NT]);
            }
        }
        /* A smaller n is the top-left corner of a larger one. */
        tupe_poscorr p2;
        CHECK_INT(tupe_poscorr_compute(&in, 5, &p2, &e), 0);
        CHECK(fabs(p2.bias[4 * 5 + 3] - pc.bias[4 * NT + 3]) < 1e-6);
        tupe_poscorr_free(&p2);
        tupe_poscorr_free(&pc);
        tupe_inspect_close(&in);
        tupe_model_free(m);
        free(bias);
    }
    tupe_backend_destroy(be);
}

static void bert_ad_position_term(void)
{
    tupe_backend *be = cpu();
    tupe_config c;
    cfg_for(&c, TUPE_POS_BERT_AD, 1, 0);
    const char *dir = unit_path("ad");
    tupe_model *m = random_ckpt(&c, be, dir);
    int32_t ids[NT];
    ids_of(ids, NT, 1);
    forward(m, ids, NT);
    int D = c.hidden_size, H = c.num_heads, dh = D / H;
    float *qk = malloc(2 * (size_t)NT * D * sizeof *qk);
    tupe_err e;
    CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_QK, 0, qk, 2 * (size_t)NT * D, &e), 0);
    tupe_inspect in;
    tupe_poscorr pc;
    CHECK_INT(tupe_inspect_open(&in, dir, 1, 1, &e), 0);
    CHECK_INT(tupe_poscorr_compute(&in, NT, &pc, &e), 0);
    CHECK(pc.rel == NULL && pc.abs != NULL);
    double worst = 0, s = tupe_cfg_score_scale(&c);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < NT; i++)
            for (int j = 0; j < NT; j++) {
                double v = 0;
                for (int k = 0; k < dh; k++)
                    v += (double)qk[(size_t)i * D + h * dh + k] * qk[(size_t)(NT + j) * D + h * dh + k];
                double d = fabs(s * v - pc.abs[((size_t)h * NT + i) * NT + j]);
                worst = d > worst ? d : worst;
            }
    CHECK_MSG(worst < 1e-4, "BERT-Ad position-position term differs by %g", worst);
    tupe_poscorr_free(&pc);
    /* BERT-A has no such term. */
    tupe_inspect_close(&in);
    tupe_model_free(m);
    cfg_for(&c, TUPE_POS_BERT_A, 1, 0);
    m = random_ckpt(&c, be, dir);
    CHECK_INT(tupe_inspect_open(&in, dir, 1, 1, &e), 0);
    CHECK_INT(tupe_poscorr_compute(&in, NT, &pc, &e), TUPE_EUSAGE);
    tupe_inspect_close(&in);
    tupe_model_free(m);
    free(qk);
    tupe_backend_destroy(be);
}

static void softmax_rows(void)
{
    float x[6] = {0, 1, 2, -1000, 0, 1000}, y[6];
    tupe_softmax_rows(x, y, 2, 3);
    CHECK_NEAR(y[0] + y[1] + y[2], 1, 1e-6);
    CHECK_NEAR(y[2] / y[1], exp(1), 1e-5);
    CHECK_NEAR(y[5], 1, 1e-7);
    CHECK(y[3] == 0);
}

/* The model's own layer-0 scores of one input: s q_h . k_h (+ its bias). */
static void true_scores(tupe_model *m, const tupe_config *c, const int32_t *ids, int len, double *out)
{
    forward(m, ids, len);
    int D = c->hidden_size, H = c->num_heads, dh = D / H;
    float *qkv = malloc((size_t)len * 3 * D * sizeof *qkv), *bias = NULL;
    tupe_err e;
    CHECK_INT(tupe_model_probe(m, TUPE_PROBE_QKV, 0, qkv, (size_t)len * 3 * D, &e), 0);
    if (tupe_cfg_has_bias(c)) {
        bias = malloc((size_t)H * len * len * sizeof *bias);
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_BIAS, 0, bias, (size_t)H * len * len, &e), 0);
    }
    double s = tupe_cfg_score_scale(c);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < len; i++)
            for (int j = 0; j < len; j++) {
                double v = 0;
                for (int k = 0; k < dh; k++)
                    v += (double)qkv[(size_t)i * 3 * D + h * dh + k] * qkv[(size_t)j * 3 * D + D + h * dh + k];
                size_t o = ((size_t)h * len + i) * len + j;
                out[o] = s * v + (bias ? bias[o] : 0);
            }
    free(qkv);
    free(bias);
}

static void exact_terms_sum_to_the_scores(void)
{
    static const struct { int pos, types; } v[] = {
        {TUPE_POS_BERT_A, 0}, {TUPE_POS_BERT_A, 2}, {TUPE_POS_BERT_R, 1}};
    tupe_backend *be = cpu();
    for (size_t k = 0; k < sizeof v / sizeof v[0]; k++) {
        tupe_config c;
        cfg_for(&c, v[k].pos, 1, v[k].types);
        const char *dir = unit_path("ba");
        tupe_model *m = random_ckpt(&c, be, dir);
        tupe_inspect in;
        tupe_decomp *d;
        tupe_err e;
        CHECK_INT(tupe_inspect_open(&in, dir, 1, 1, &e), 0);
        CHECK_INT(tupe_decomp_new(&d, &in, TUPE_DECOMP_EXACT, SEQ, &e), 0);
        int H = c.num_heads;
        for (int len = 3; len <= SEQ; len += 6) {
            int32_t ids[SEQ];
            ids_of(ids, len, len);
            size_t ll = (size_t)len * len;
            double *terms = malloc(5 * (size_t)H * ll * sizeof *terms), *want = malloc((size_t)H * ll * sizeof *want);
            CHECK_INT(tupe_decomp_one(d, ids, len, terms, &e), 0);
            true_scores(m, &c, ids, len, want);
            double worst = 0, scale = 0, small = INFINITY;
            for (size_t o = 0; o < (size_t)H * ll; o++) {
                double sum = 0;
                for (int t = 0; t < 5; t++)
                    sum += terms[(size_t)t * H * ll + o];
                worst = fabs(sum - want[o]) > worst ? fabs(sum - want[o]) : worst;
                scale = fabs(want[o]) > scale ? fabs(want[o]) : scale;
            }
            for (int t = 0; t < 5; t++) {
                double mx = 0;
                for (size_t o = 0; o < (size_t)H * ll; o++)
                    mx = fabs(terms[(size_t)t * H * ll + o]) > mx ? fabs(terms[(size_t)t * H * ll + o]) : mx;
                small = mx < small ? mx : small;
            }
            CHECK_MSG(worst < 1e-4, "%s types %d len %d: the five terms miss the scores by %g",
                      tupe_position_name(v[k].pos), v[k].types, len, worst);
            CHECK_MSG(small > 1e-3 && scale > 0.1, "a term is trivially zero (%g) or the scores are (%g)", small, scale);
            free(terms), free(want);
        }
        tupe_decomp_free(d);
        tupe_inspect_close(&in);
        tupe_model_free(m);
    }
    tupe_backend_destroy(be);
}

static void paper_mode_and_averaging(void)
{
    tupe_backend *be = cpu();
    tupe_config c;
    cfg_for(&c, TUPE_POS_BERT_A, 1, 0);
    const char *dir = unit_path("bp");
    tupe_model *m = random_ckpt(&c, be, dir);
    tupe_inspect in;
    tupe_decomp *d;
    tupe_err e;
    CHECK_INT(tupe_inspect_open(&in, dir, 1, 1, &e), 0);
    CHECK_INT(tupe_decomp_new(&d, &in, TUPE_DECOMP_PAPER, 5, &e), 0);
    int H = c.num_heads, D = c.hidden_size, dh = D / H;
    int32_t a[3] = {7, 9, 11}, b[5] = {12, 9, 30, 2, 5};
    double ta[4 * 3 * 9], tb[4 * 3 * 25];
    CHECK_INT(tupe_decomp_one(d, a, 3, ta, &e), 0);
    CHECK_INT(tupe_decomp_one(d, b, 5, tb, &e), 0);
    /* ww[h=1][i=2][j=0] of input a by hand: s (W_Q w_11)_1 . (W_K w_7)_1 */
    float *E = malloc((size_t)c.vocab_size * D * sizeof *E), *Wq = malloc((size_t)D * D * sizeof *Wq),
          *Wk = malloc((size_t)D * D * sizeof *Wk);
    tupe_model_get(m, "embeddings.word_embeddings.weight", E, (size_t)c.vocab_size * D, &e);
    tupe_model_get(m, "encoder.layer.0.attention.self.query.weight", Wq, (size_t)D * D, &e);
    tupe_model_get(m, "encoder.layer.0.attention.self.key.weight", Wk, (size_t)D * D, &e);
    double v = 0;
    for (int r = dh; r < 2 * dh; r++) {
        double q = 0, k = 0;
        for (int x = 0; x < D; x++) {
            q += (double)Wq[(size_t)r * D + x] * E[11 * D + x];
            k += (double)Wk[(size_t)r * D + x] * E[7 * D + x];
        }
        v += q * k;
    }
    CHECK_NEAR(ta[(0 * H + 1) * 9 + 2 * 3 + 0], v / sqrt(dh), 1e-9);
    /* pp does not depend on the words. */
    CHECK_NEAR(ta[(3 * H + 2) * 9 + 1 * 3 + 2], tb[(3 * H + 2) * 25 + 1 * 5 + 2], 1e-12);
    /* Averages: cells reached by both inputs are their mean; the others the longer one's. */
    CHECK_INT(tupe_decomp_add(d, a, 3, &e), 0);
    CHECK_INT(tupe_decomp_add(d, b, 5, &e), 0);
    float mean[4 * 3 * 25];
    int64_t count[5];
    tupe_decomp_mean(d, mean, count);
    CHECK(count[0] == 2 && count[2] == 2 && count[3] == 1 && count[4] == 1);
    CHECK_NEAR(mean[(1 * H + 0) * 25 + 1 * 5 + 2], (ta[(1 * H + 0) * 9 + 1 * 3 + 2] + tb[(1 * H + 0) * 25 + 1 * 5 + 2]) / 2, 1e-6);
    CHECK_NEAR(mean[(2 * H + 1) * 25 + 0 * 5 + 4], tb[(2 * H + 1) * 25 + 0 * 5 + 4], 1e-6);
    /* Bad inputs. */
    int32_t bad[2] = {2, 40};
    CHECK_INT(tupe_decomp_one(d, bad, 2, ta, &e), TUPE_EDATA);
    CHECK_INT(tupe_decomp_one(d, b, 6, tb, &e), TUPE_EUSAGE);
    tupe_decomp_free(d);
    tupe_inspect_close(&in);
    tupe_model_free(m);
    /* TUPE models have no word-position terms. */
    cfg_for(&c, TUPE_POS_TUPE_R, 1, 0);
    m = random_ckpt(&c, be, dir);
    CHECK_INT(tupe_inspect_open(&in, dir, 1, 1, &e), 0);
    CHECK_INT(tupe_decomp_new(&d, &in, TUPE_DECOMP_PAPER, 5, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "no position embeddings in its input");
    tupe_inspect_close(&in);
    tupe_model_free(m);
    free(E), free(Wq), free(Wk);
    tupe_backend_destroy(be);
}

static void attention_maps_and_vocabulary(void)
{
    tupe_backend *be = cpu();
    tupe_config c;
    cfg_for(&c, TUPE_POS_TUPE_R, 1, 0);
    const char *dir = unit_path("at");
    tupe_model *m = random_ckpt(&c, be, dir);
    int32_t ids[NT];
    ids_of(ids, NT, 2);
    forward(m, ids, NT);
    size_t per = (size_t)c.num_heads * NT * NT;
    float *want = malloc(2 * per * sizeof *want), *got = malloc(2 * per * sizeof *got);
    tupe_err e;
    CHECK_INT(tupe_model_probe(m, TUPE_PROBE_ATTN_PROBS, 1, want + per, per, &e), 0);
    tupe_inspect in;
    CHECK_INT(tupe_inspect_open(&in, dir, 1, 0, &e), 0);
    CHECK_INT(tupe_inspect_attn(&in, ids, NT, got, &e), 0);
    CHECK(max_diff(got + per, want + per, per) < 1e-6);
    double rowsum = 0;
    for (int j = 0; j < NT; j++)
        rowsum += got[3 * NT + j];
    CHECK_NEAR(rowsum, 1, 1e-5);
    CHECK_INT(tupe_inspect_check_vocab(&in, 40, 0, "v", &e), 0);
    CHECK_INT(tupe_inspect_check_vocab(&in, 41, 0, "v", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "v has 41");
    tupe_inspect_close(&in);
    CHECK_INT(tupe_inspect_open(&in, dir, 1, SEQ + 1, &e), TUPE_EUSAGE);
    CHECK_INT(tupe_inspect_open(&in, unit_path("none"), 1, 1, &e), TUPE_ENOINPUT);
    tupe_model_free(m);
    free(want), free(got);
    tupe_backend_destroy(be);
}

UNIT_MAIN(T(positional_term_is_the_models_bias), T(bert_ad_position_term), T(softmax_rows),
          T(exact_terms_sum_to_the_scores), T(paper_mode_and_averaging),
          T(attention_maps_and_vocabulary))
