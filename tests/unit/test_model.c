/* The TUPE-specific pieces, tested directly: the [CLS] reset, the relative buckets against the
 * spec's table, what each variant adds to the input and to the scores; parameter counts of
 * bert-base against the spec's arithmetic; dropout's rate and its independence from the thread
 * count; batch validation. */
#include "backend/backend.h"
#include "backend/blas.h"
#include "base/rng.h"
#include "model/model.h"
#include "model/optim.h"
#include "unit.h"

static tupe_backend *backend(int threads)
{
    tupe_backend *be;
    tupe_err e;
    if (tupe_backend_create(&be, "cpu", threads, &e) != 0) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    return be;
}

static void tiny(tupe_config *c, int position, int untie)
{
    tupe_config_default(c);
    c->position = position;
    c->untie_cls = untie;
    c->vocab_size = 50;
    c->hidden_size = 32;
    c->num_layers = 2;
    c->num_heads = 4;
    c->intermediate_size = 64;
    c->max_position = 64;
    c->hidden_dropout = c->attention_dropout = c->classifier_dropout = 0;
}

enum { NB = 2, NT = 12 };
static const int32_t lens[NB] = {12, 9};

static tupe_model *model(tupe_backend *be, const tupe_config *c, uint64_t seed)
{
    tupe_capacity cap = {NB, NT, 0};
    tupe_model *m;
    tupe_err e;
    if (tupe_model_create(&m, c, be, &cap, &e) != 0 || tupe_model_init(m, seed, &e) != 0) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    return m;
}

static void batch(tupe_batch *b, int32_t *ids, int32_t *mpos, int32_t *mlab)
{
    for (int i = 0; i < NB * NT; i++)
        ids[i] = 5 + (i * 7) % 40;
    mpos[0] = 0, mpos[1] = 4, mpos[2] = NT + 2;
    mlab[0] = 6, mlab[1] = 9, mlab[2] = 11;
    tupe_batch x = {NB, NT, ids, lens, NULL, 3, mpos, mlab, NULL, NULL, 0, 0, .rtd_label = NULL};
    *b = x;
}

static int fwd(tupe_model *m, const tupe_batch *b, const tupe_step *s, tupe_fwd_out *o)
{
    tupe_err e;
    int rc = tupe_model_forward(m, b, s, o, &e);
    CHECK_MSG(rc == 0, "forward: %s", e.msg);
    return rc;
}

/* A[i][j] = s Qp_i . Kp_j over head h's columns */
static double corr(const float *pq, const float *pk, int i, int j, int h, int dh, int D, double s)
{
    double a = 0;
    for (int k = 0; k < dh; k++)
        a += (double)pq[(size_t)i * D + h * dh + k] * pk[(size_t)j * D + h * dh + k];
    return s * a;
}

/* bias from the probes against the definition of spec §3 computed here from Qp and Kp. */
static void check_abs_bias(int position, int untie)
{
    tupe_backend *be = backend(0);
    tupe_config c;
    tiny(&c, position, untie);
    tupe_model *m = model(be, &c, 1);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    tupe_fwd_out o;
    if (fwd(m, &b, NULL, &o))
        return;
    int T = NT, H = c.num_heads, D = c.hidden_size, dh = D / H, R = T + 1;
    size_t nb = tupe_model_probe_size(m, TUPE_PROBE_POS_BIAS);
    size_t nq = tupe_model_probe_size(m, TUPE_PROBE_POS_QK);
    CHECK_INT(nb, (size_t)H * T * T);
    CHECK_INT(nq, (size_t)2 * R * D);
    float *bias = malloc(nb * sizeof *bias), *qk = malloc(nq * sizeof *qk);
    tupe_err e;
    CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_BIAS, 0, bias, nb, &e), 0);
    CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_QK, 0, qk, nq, &e), 0);
    const float *pq = qk, *pk = qk + (size_t)R * D;
    float *rel = NULL;
    int32_t *bk = NULL;
    if (position == TUPE_POS_TUPE_R) {
        rel = malloc(33 * (size_t)H * sizeof *rel);
        CHECK_INT(tupe_model_get(m, "position.relative_bias.weight", rel, 33 * (size_t)H, &e), 0);
        bk = malloc((size_t)T * T * sizeof *bk);
        tupe_rel_buckets(&c, T, bk);
    }
    double s = 1.0 / sqrt(2.0 * dh), maxerr = 0;
    for (int h = 0; h < H; h++) {
#define A(i, j) corr(pq, pk, i, j, h, dh, D, s)
        double th1 = A(0, 0), th2 = A(1, 1);
        for (int i = 0; i < T; i++)
            for (int j = 0; j < T; j++) {
                double want;
                if (untie && i == 0)
                    want = th1;          /* row 0, including [0,0] */
                else if (untie && j == 0)
                    want = th2;          /* column 0 */
                else
                    want = A(i + 1, j + 1);
                if (rel)
                    want += rel[(size_t)bk[i * T + j] * H + h];
                double err = fabs(want - bias[((size_t)h * T + i) * T + j]);
                maxerr = err > maxerr ? err : maxerr;
            }
        if (untie) {
            /* The reset values really are the table rows' own correlations. */
            CHECK(bias[((size_t)h * T + 0) * T + 0] == bias[((size_t)h * T + 0) * T + 5]);
            CHECK(bias[((size_t)h * T + 3) * T + 0] == bias[((size_t)h * T + 7) * T + 0]);
        }
#undef A
    }
    CHECK_MSG(maxerr < 1e-5, "max error %g", maxerr);
    free(bias), free(qk), free(rel), free(bk);
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

static void cls_reset_tupe_a(void) { check_abs_bias(TUPE_POS_TUPE_A, 1); }
static void no_reset_tupe_a_tie(void) { check_abs_bias(TUPE_POS_TUPE_A, 0); }
static void cls_reset_tupe_r(void) { check_abs_bias(TUPE_POS_TUPE_R, 1); }
static void no_reset_tupe_r_tie(void) { check_abs_bias(TUPE_POS_TUPE_R, 0); }

/* Spec §4's table, for n in 0..511, both directions. */
static void bucket_table(void)
{
    static const struct { int lo, hi, b; } rows[] = {
        {8, 11, 8}, {12, 15, 9}, {16, 22, 10}, {23, 31, 11}, {32, 45, 12}, {46, 63, 13},
        {64, 90, 14}, {91, 511, 15}};
    for (int n = 0; n < 512; n++) {
        int want = n < 8 ? n : -1;
        for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++)
            if (n >= rows[r].lo && n <= rows[r].hi)
                want = rows[r].b;
        /* key left of the query or the same position: j = i - n */
        CHECK_INT(tupe_rel_bucket(511, 511 - n, 32, 128), want);
        if (n >= 1) /* key right of the query: j = i + n */
            CHECK_INT(tupe_rel_bucket(0, n, 32, 128), 16 + want);
    }
    /* The [CLS] overrides of TUPE-R: column 0 is 32, row 0 is 16 (so [0,0] = 16). */
    tupe_config c;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    enum { TT = 20 };
    int32_t t[TT * TT];
    tupe_rel_buckets(&c, TT, t);
    CHECK_INT(t[0], 16);
    for (int k = 1; k < TT; k++) {
        CHECK_INT(t[k], 16);
        CHECK_INT(t[k * TT], 32);
        CHECK_INT(t[k * TT + 1], tupe_rel_bucket(k, 1, 32, 128));
    }
    c.untie_cls = 0; /* tie-cls: plain buckets */
    tupe_rel_buckets(&c, TT, t);
    CHECK_INT(t[0], 0);
    CHECK_INT(t[5], 16 + 5);
    CHECK_INT(t[5 * TT], 5);
    c.position = TUPE_POS_BERT_R; /* BERT-R: never the [CLS] buckets */
    c.untie_cls = 1;
    tupe_rel_buckets(&c, TT, t);
    CHECK_INT(t[0], 0);
    CHECK_INT(t[5 * TT], 5);
}

/* BERT-R's bias is the relative table alone; BERT-A and BERT-Ad have no bias at all. */
static void bias_per_variant(void)
{
    tupe_backend *be = backend(0);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    tupe_err e;
    tupe_fwd_out o;
    const int none[] = {TUPE_POS_BERT_A, TUPE_POS_BERT_AD};
    for (int k = 0; k < 2; k++) {
        tupe_config c;
        tiny(&c, none[k], 1);
        tupe_model *m = model(be, &c, 2);
        fwd(m, &b, NULL, &o);
        CHECK_INT(tupe_model_probe_size(m, TUPE_PROBE_POS_BIAS), 0);
        float x;
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_BIAS, 0, &x, 1, &e), TUPE_EUSAGE);
        CHECK(tupe_layout_find(tupe_model_layout(m), "position.relative_bias.weight") == NULL);
        tupe_model_free(m);
    }
    tupe_config c;
    tiny(&c, TUPE_POS_BERT_R, 1);
    tupe_model *m = model(be, &c, 3);
    fwd(m, &b, NULL, &o);
    int H = c.num_heads;
    float bias[4 * NT * NT], rel[32 * 4];
    CHECK_INT(tupe_model_probe(m, TUPE_PROBE_POS_BIAS, 0, bias, (size_t)H * NT * NT, &e), 0);
    CHECK_INT(tupe_model_get(m, "position.relative_bias.weight", rel, 32 * (size_t)H, &e), 0);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < NT; i++)
            for (int j = 0; j < NT; j++)
                CHECK(bias[(h * NT + i) * NT + j] == rel[tupe_rel_bucket(i, j, 32, 128) * H + h]);
    CHECK(tupe_layout_find(tupe_model_layout(m), "position.embeddings.weight") == NULL);
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

/* With TUPE (and BERT-Ad) the encoder input is the token embedding alone: one token at two
 * positions gives identical rows; BERT-A's input differs by the position embedding. */
static void input_has_no_position(void)
{
    tupe_backend *be = backend(0);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    for (int i = 0; i < NB * NT; i++)
        ids[i] = 17;
    const int pos[] = {TUPE_POS_TUPE_A, TUPE_POS_TUPE_R, TUPE_POS_BERT_AD, TUPE_POS_BERT_A};
    for (int k = 0; k < 4; k++) {
        tupe_config c;
        tiny(&c, pos[k], 1);
        tupe_model *m = model(be, &c, 4);
        tupe_fwd_out o;
        fwd(m, &b, NULL, &o);
        size_t n = tupe_model_probe_size(m, TUPE_PROBE_HIDDEN);
        float *x = malloc(n * sizeof *x);
        tupe_err e;
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_HIDDEN, 0, x, n, &e), 0);
        int D = c.hidden_size, same = 1;
        for (int t = 1; t < NT; t++)
            same &= memcmp(x, x + (size_t)t * D, (size_t)D * sizeof *x) == 0;
        CHECK_MSG(same == (pos[k] != TUPE_POS_BERT_A), "%s: rows equal: %d",
                  tupe_position_name(pos[k]), same);
        /* Padding rows are zero. */
        for (int t = lens[1]; t < NT; t++)
            for (int j = 0; j < D; j++)
                CHECK(x[((size_t)NT + t) * D + j] == 0);
        free(x);
        tupe_model_free(m);
    }
    tupe_backend_destroy(be);
}

/* ALiBi: Press et al.'s slopes (12 heads: 2^-1..2^-8 then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5; not
 * the naive 2^(-8h/12)), and the bias every layer adds is -m_h |i - j|, symmetric. */
static void alibi_slopes_and_bias(void)
{
    double m[12];
    tupe_alibi_slopes(12, m);
    static const double want12[12] = {-1, -2, -3, -4, -5, -6, -7, -8, -0.5, -1.5, -2.5, -3.5};
    for (int h = 0; h < 12; h++)
        CHECK_MSG(m[h] == exp2(want12[h]), "12 heads: slope %d %.17g", h, m[h]);
    tupe_alibi_slopes(8, m);
    for (int h = 0; h < 8; h++)
        CHECK(m[h] == exp2(-(h + 1.0)));
    tupe_alibi_slopes(6, m); /* 4 of 4 heads, then 2 of 8: 2^-1, 2^-3 */
    static const double want6[6] = {-2, -4, -6, -8, -1, -3};
    for (int h = 0; h < 6; h++)
        CHECK_MSG(m[h] == exp2(want6[h]), "6 heads: slope %d %.17g", h, m[h]);

    tupe_backend *be = backend(0);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    tupe_config c;
    tiny(&c, TUPE_POS_ALIBI, 1);
    tupe_model *mo = model(be, &c, 5);
    tupe_fwd_out o;
    fwd(mo, &b, NULL, &o);
    int H = c.num_heads;
    float bias[4 * NT * NT];
    tupe_err e;
    CHECK_INT(tupe_model_probe(mo, TUPE_PROBE_POS_BIAS, 0, bias, (size_t)H * NT * NT, &e), 0);
    tupe_alibi_slopes(H, m);
    for (int h = 0; h < H; h++)
        for (int i = 0; i < NT; i++)
            for (int j = 0; j < NT; j++)
                CHECK(bias[(h * NT + i) * NT + j] == (float)(-m[h] * abs(i - j)));
    /* No parameters of its own: the layout is NoPE's. */
    tupe_config n;
    tiny(&n, TUPE_POS_NOPE, 1);
    tupe_layout la, ln;
    CHECK_INT(tupe_layout_build(&la, &c, &e), 0);
    CHECK_INT(tupe_layout_build(&ln, &n, &e), 0);
    CHECK_INT(la.nparams, ln.nparams);
    CHECK(tupe_layout_find(&la, "position.relative_bias.weight") == NULL &&
          tupe_layout_find(&la, "embeddings.position_embeddings.weight") == NULL);
    tupe_layout_free(&la);
    tupe_layout_free(&ln);
    tupe_model_free(mo);
    tupe_backend_destroy(be);
}

/* RoPE's two layouts compute the same function once the query and key columns of every head
 * (weights and biases) are permuted: interleaved column 2t is half-split column t, 2t+1 is
 * t + d/2. Without the permutation they differ. */
static void rope_layouts_are_a_permutation(void)
{
    tupe_backend *be = backend(0);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    tupe_config ci, chf;
    tiny(&ci, TUPE_POS_ROPE, 1);
    chf = ci;
    chf.rope_layout = TUPE_ROPE_HALF;
    ci.rope_base = chf.rope_base = 100; /* angles that turn far within 12 positions */
    ci.initializer_range = chf.initializer_range = 0.3; /* scores far from uniform */
    tupe_model *mi = model(be, &ci, 6), *mh = model(be, &chf, 6);
    int D = ci.hidden_size, H = ci.num_heads, dh = D / H, L = ci.num_layers;
    float *w = malloc((size_t)D * D * sizeof *w), *wp = malloc((size_t)D * D * sizeof *wp);
    tupe_err e;
    tupe_fwd_out oi, oh0, oh;
    fwd(mi, &b, NULL, &oi);
    fwd(mh, &b, NULL, &oh0);
    CHECK_MSG(fabs(oi.loss - oh0.loss) > 1e-4, "the layouts should differ unpermuted: %.9g %.9g",
              oi.loss, oh0.loss);
    for (int l = 0; l < L; l++)
        for (int qk = 0; qk < 2; qk++)
            for (int wb = 0; wb < 2; wb++) {
                char name[96];
                snprintf(name, sizeof name, "encoder.layer.%d.attention.self.%s.%s", l,
                         qk ? "key" : "query", wb ? "bias" : "weight");
                size_t rows = (size_t)D, cols = wb ? 1 : (size_t)D;
                CHECK_INT(tupe_model_get(mi, name, w, rows * cols, &e), 0);
                for (int h = 0; h < H; h++)
                    for (int t = 0; t < dh / 2; t++)
                        for (int k = 0; k < 2; k++) {
                            size_t src = (size_t)h * dh + 2 * t + k;
                            size_t dst = (size_t)h * dh + t + k * (dh / 2);
                            memcpy(wp + dst * cols, w + src * cols, cols * sizeof *w);
                        }
                CHECK_INT(tupe_model_set(mh, name, wp, rows * cols, &e), 0);
            }
    fwd(mh, &b, NULL, &oh);
    CHECK_MSG(fabs(oi.loss - oh.loss) < 1e-5, "interleaved %.9g, half-split permuted %.9g",
              oi.loss, oh.loss);
    free(w), free(wp);
    tupe_model_free(mi);
    tupe_model_free(mh);
    tupe_backend_destroy(be);
}

/* NoPE: the stack is permutation-equivariant, so one token at every position gives the same
 * row everywhere in every layer; RoPE and ALiBi make the rows differ. */
static void nope_knows_no_position(void)
{
    tupe_backend *be = backend(0);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    for (int i = 0; i < NB * NT; i++)
        ids[i] = 17;
    ids[3] = 21; /* one other token: attention weights then differ by distance unless NoPE */
    const int pos[] = {TUPE_POS_NOPE, TUPE_POS_ROPE, TUPE_POS_ALIBI};
    for (int k = 0; k < 3; k++) {
        tupe_config c;
        tiny(&c, pos[k], 1);
        c.initializer_range = 0.3; /* scores far from uniform */
        tupe_model *m = model(be, &c, 7);
        tupe_fwd_out o;
        fwd(m, &b, NULL, &o);
        size_t n = tupe_model_probe_size(m, TUPE_PROBE_HIDDEN);
        float *x = malloc(n * sizeof *x);
        tupe_err e;
        CHECK_INT(tupe_model_probe(m, TUPE_PROBE_HIDDEN, c.num_layers, x, n, &e), 0);
        int D = c.hidden_size;
        double diff = 0;
        for (int t = 1; t < NT; t++)
            if (t != 3)
                for (int j = 0; j < D; j++)
                    diff = fmax(diff, fabs((double)x[(size_t)t * D + j] - x[(size_t)1 * D + j]) *
                                          (t != 1));
        CHECK_MSG(pos[k] == TUPE_POS_NOPE ? diff < 1e-5 : diff > 1e-4, "%s: rows differ by %g",
                  tupe_position_name(pos[k]), diff);
        free(x);
        tupe_model_free(m);
    }
    tupe_backend_destroy(be);
}

/* bert-base with the paper's 32,769-row vocabulary: the spec's arithmetic (§3). */
static void bert_base_counts(void)
{
    tupe_config c;
    tupe_err e;
    tupe_config_default(&c);
    c.vocab_size = 32769;
    const size_t D = 768, V = 32769, P = 512, H = 12;
    size_t layer = 4 * (D * D + D) + 2 * D + (D * 3072 + 3072) + (3072 * D + D) + 2 * D;
    size_t base = V * D + 2 * D + 12 * layer + (D * D + D) + 2 * D + V; /* no positions */
    size_t tupe_extra = 513 * D + 2 * (D * D + D) + 2 * D;
    CHECK_INT(tupe_extra, 1576704); /* the spec's figure */
    struct { int pos, untie; size_t want; } v[] = {
        {TUPE_POS_BERT_A, 1, base + P * D},
        {TUPE_POS_BERT_R, 1, base + P * D + 32 * H},
        {TUPE_POS_BERT_AD, 1, base + P * D + 2 * (D * D + D) + 2 * D},
        {TUPE_POS_TUPE_A, 1, 112424193},
        {TUPE_POS_TUPE_A, 0, 112424193},
        {TUPE_POS_TUPE_R, 1, 112424589},
    };
    CHECK_INT(base + tupe_extra, 112424193);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        c.position = v[i].pos;
        c.untie_cls = v[i].untie;
        tupe_layout lay;
        CHECK_INT(tupe_layout_build(&lay, &c, &e), 0);
        CHECK_MSG(lay.nparams == v[i].want, "%s: %zu parameters, expected %zu",
                  tupe_position_name(v[i].pos), lay.nparams, v[i].want);
        tupe_layout_free(&lay);
    }
    /* TUPE-A over a fairseq BERT-A (514-row table): the paper's "1.18M". */
    CHECK_INT(112424193 - (base + 514 * D), 1181952);
}

/* The dropout op alone: rate, scale, and the same bits for any thread count. */
static void dropout_rate_and_threads(void)
{
    enum { N = 1 << 20 };
    float *one = malloc(N * sizeof *one), *out[3];
    for (int i = 0; i < N; i++)
        one[i] = 1.0f;
    const int th[3] = {1, 2, 3};
    for (int k = 0; k < 3; k++) {
        tupe_backend *be = backend(th[k]);
        tupe_dev *x = be->alloc(be, N * 4), *y = be->alloc(be, N * 4);
        be->upload(be, x, one, N, TUPE_F32);
        tupe_drop d = {.p = 0.1, .seed = 42, .step = 7, .site = 3, .base = 1000};
        be->act_fwd(be, y, x, N, TUPE_ACT_NONE, &d);
        out[k] = malloc(N * sizeof(float));
        be->download(be, out[k], y, N, TUPE_F32);
        be->free(be, x);
        be->free(be, y);
        tupe_backend_destroy(be);
    }
    size_t kept = 0;
    double sum = 0;
    for (int i = 0; i < N; i++) {
        kept += out[0][i] != 0;
        sum += out[0][i];
    }
    double rate = 1.0 - (double)kept / N;
    /* binomial sd = sqrt(0.09 / 2^20) = 3e-4 */
    CHECK_MSG(fabs(rate - 0.1) < 0.0015, "drop rate %.5f", rate);
    CHECK_NEAR(sum / N, 1.0, 0.002); /* kept values scaled by 1/(1-p) */
    CHECK(memcmp(out[0], out[1], N * sizeof(float)) == 0);
    CHECK(memcmp(out[0], out[2], N * sizeof(float)) == 0);
    /* A different step draws a different mask; element i of base b+1 is element i+1 of b. */
    tupe_backend *be = backend(2);
    tupe_dev *x = be->alloc(be, N * 4), *y = be->alloc(be, N * 4);
    be->upload(be, x, one, N, TUPE_F32);
    tupe_drop d = {.p = 0.1, .seed = 42, .step = 8, .site = 3, .base = 1000};
    be->act_fwd(be, y, x, N, TUPE_ACT_NONE, &d);
    float *o2 = malloc(N * sizeof *o2);
    be->download(be, o2, y, N, TUPE_F32);
    CHECK(memcmp(out[0], o2, N * sizeof(float)) != 0);
    d.step = 7;
    d.base = 1001;
    be->act_fwd(be, y, x, N, TUPE_ACT_NONE, &d);
    be->download(be, o2, y, N, TUPE_F32);
    CHECK(memcmp(out[0] + 1, o2, (N - 1) * sizeof(float)) == 0);
    be->free(be, x);
    be->free(be, y);
    tupe_backend_destroy(be);
    for (int k = 0; k < 3; k++)
        free(out[k]);
    free(o2);
    free(one);
}

/* A whole training forward/backward with dropout on: bit-identical results with 1, 2 and 3
 * threads (the masks are counter-based, and every reduction has a fixed order). */
/* One training step of a model of c on `threads` threads, from weights of seed 5: the loss,
 * and the gradients (malloc'd, *total of them). */
static float *grads_at(int threads, const tupe_config *c, const tupe_batch *b, int cap_masked,
                       double *loss, size_t *total)
{
    tupe_backend *be = backend(threads);
    tupe_capacity cap = {b->B, b->T, cap_masked};
    tupe_model *m;
    tupe_err e;
    if (tupe_model_create(&m, c, be, &cap, &e) != 0 || tupe_model_init(m, 5, &e) != 0) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    tupe_step st = {.seed = 77, .step = 12};
    tupe_fwd_out o = {0};
    tupe_model_zero_grad(m);
    fwd(m, b, &st, &o);
    CHECK_MSG(tupe_model_backward(m, &e) == 0, "backward: %s", e.msg);
    *loss = o.loss;
    *total = tupe_model_layout(m)->total;
    float *g = malloc(*total * sizeof(float));
    be->download(be, g, tupe_model_grads(m), *total, TUPE_F32);
    tupe_model_free(m);
    tupe_backend_destroy(be);
    return g;
}

/* The loss and every gradient bit for bit the same with 1, 2 and 3 threads. */
static void same_at_1_2_3_threads(const tupe_config *c, const tupe_batch *b, int cap_masked)
{
    float *grads[3];
    double loss[3];
    size_t total = 0;
    for (int k = 0; k < 3; k++)
        grads[k] = grads_at(k + 1, c, b, cap_masked, &loss[k], &total);
    CHECK(loss[0] == loss[1] && loss[0] == loss[2]);
    CHECK(memcmp(grads[0], grads[1], total * sizeof(float)) == 0);
    CHECK(memcmp(grads[0], grads[2], total * sizeof(float)) == 0);
    for (int k = 0; k < 3; k++)
        free(grads[k]);
}

static void model_same_for_any_thread_count(void)
{
    tupe_config c;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    c.hidden_dropout = c.attention_dropout = c.activation_dropout = 0.1;
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    same_at_1_2_3_threads(&c, &b, 0);
}

/* The same at a size where the products are cut into parts (two heads of 64, 64 positions,
 * TUPE-R's 65 x 65 positional products among them): with the kernels used here, the parts must
 * not fall on a small-matrix path when the whole is on the blocked one. Skipped on OpenBLAS's
 * AVX and AVX2 cores and oneDNN's kernels below AVX-512, whose blocked kernels round by the
 * extent of the part (oneDNN's AVX2 ones: ONEDNN_MAX_CPU_ISA=AVX2 makes this test fail). */
static void split_products_same_for_any_thread_count(void)
{
    tupe_err e;
    CHECK_INT(tupe_blas_select(&e), 0);
    const tupe_blas_info *bi = tupe_blas_info_get();
    if (bi->sgemm[0] && strcmp(bi->sgemm_isa, "AVX-512") != 0) {
        unit_skip("%s's %s kernels round a product by the extent of its part", bi->sgemm,
                  bi->sgemm_isa);
        return;
    }
    const char *core = bi->sgemm[0] ? "" : bi->core;
    static const char *const by_extent[] = {"Haswell", "Zen", "Sandybridge", "Bulldozer",
                                            "Piledriver", "Steamroller", "Excavator"};
    for (size_t i = 0; i < sizeof by_extent / sizeof *by_extent; i++)
        if (strcmp(core, by_extent[i]) == 0) {
            unit_skip("OpenBLAS's %s kernels round a product by the extent of its part", core);
            return;
        }
    enum { B = 4, T = 64, M = 20 };
    int32_t ids[B * T], len[B] = {64, 60, 56, 64}, mpos[M], mlab[M];
    for (int i = 0; i < B * T; i++)
        ids[i] = 5 + (i * 37) % 290;
    for (int i = 0; i < M; i++)
        mpos[i] = 13 * i, mlab[i] = 7 + i;
    tupe_batch b = {B, T, ids, len, NULL, M, mpos, mlab, NULL, NULL, 0, 0, .rtd_label = NULL};
    tupe_config c;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    c.vocab_size = 300, c.hidden_size = 128, c.num_heads = 2, c.intermediate_size = 256;
    c.num_layers = 1, c.max_position = T;
    same_at_1_2_3_threads(&c, &b, M);
}

/* Dropout changes the loss in training mode only, and evaluation has none. */
static void dropout_train_vs_eval(void)
{
    tupe_backend *be = backend(0);
    tupe_config c;
    tiny(&c, TUPE_POS_BERT_A, 1);
    c.hidden_dropout = c.attention_dropout = 0.1;
    tupe_model *m = model(be, &c, 6);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    tupe_fwd_out e1, e2, t1, t2, t3;
    tupe_step s1 = {.seed = 1, .step = 1}, s2 = {.seed = 1, .step = 2};
    fwd(m, &b, NULL, &e1);
    fwd(m, &b, &s1, &t1);
    fwd(m, &b, &s1, &t2);
    fwd(m, &b, &s2, &t3);
    fwd(m, &b, NULL, &e2);
    CHECK(e1.loss == e2.loss);
    CHECK(t1.loss == t2.loss);
    CHECK(t1.loss != e1.loss);
    CHECK(t1.loss != t3.loss);
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

static void bad_batches_refused(void)
{
    tupe_backend *be = backend(0);
    tupe_config c;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    tupe_model *m = model(be, &c, 6);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    tupe_err e;
    tupe_fwd_out o;
    batch(&b, ids, mpos, mlab);
    ids[3] = 50;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "sequence 0, position 3: token id 50 outside the vocabulary");
    ids[3] = 5;
    ids[NT + 10] = 999; /* padding: ignored */
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), 0);
    mpos[2] = NT + 10;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "masked position 2: 22 is padding");
    mpos[2] = 4;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "repeated");
    mpos[2] = NT + 2;
    b.T = NT + 1;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "sequence length 13 (this model holds 1 to 12)");
    b.T = NT;
    int32_t badlen[NB] = {12, 0};
    b.lengths = badlen;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "sequence 1: length 0");
    CHECK_INT(tupe_model_backward(m, &e), TUPE_EFAIL);
    tupe_model_free(m);
    tupe_capacity cap = {2, 65, 0};
    CHECK_INT(tupe_model_create(&m, &c, be, &cap, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "exceeds max_position_embeddings 64");
    tupe_backend_destroy(be);
}

/* Capacity {0, 0, 0} (conversion): the parameters and nothing else; no gradients, no forward. */
static void params_only(void)
{
    tupe_backend *be = backend(1);
    tupe_config c;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    tupe_model *full = model(be, &c, 7), *m;
    tupe_capacity cap = {0, 0, 0};
    tupe_err e;
    CHECK_INT(tupe_model_create(&m, &c, be, &cap, &e), 0);
    size_t total = tupe_model_layout(m)->total;
    CHECK(tupe_model_arena_bytes(m) < total * sizeof(float) + 4096);
    CHECK(tupe_model_arena_bytes(full) > 2 * total * sizeof(float));
    CHECK_INT(tupe_model_init(m, 7, &e), 0);
    float *a = malloc(total * sizeof *a), *b = malloc(total * sizeof *b);
    tupe_model_params_get(m, a);
    tupe_model_params_get(full, b);
    CHECK(memcmp(a, b, total * sizeof *a) == 0);
    const tupe_param *p = &tupe_model_layout(m)->t[0];
    CHECK_INT(tupe_model_get_grad(m, p->name, a, p->numel, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "parameters only");
    tupe_model_zero_grad(m);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch x;
    batch(&x, ids, mpos, mlab);
    tupe_fwd_out o;
    CHECK(tupe_model_forward(m, &x, NULL, &o, &e) != 0);
    CHECK_INT(tupe_model_backward(m, &e), TUPE_EFAIL);
    free(a);
    free(b);
    tupe_model_free(m);
    tupe_model_free(full);
    tupe_backend_destroy(be);
}

/* The masked-LM head over the padded vocabulary (model/params.h): the pad rows of the word
 * table and of the decoder's bias lie in no tensor and stay exactly 0 through training (zero
 * gradient, zero weight, weight decay of zero); the fused classifier of a training pass
 * gives the loss and the gradients of the unfused one bit for bit, and a logits probe after
 * it the logits of an evaluation pass. */
static void padded_vocabulary(void)
{
    tupe_backend *be = backend(2);
    tupe_config c;
    tupe_err e;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    tupe_model *m[2] = {model(be, &c, 9), model(be, &c, 9)};
    tupe_model_keep_logits(m[1], 1); /* the unfused path: xent_fwd, then xent_bwd */
    const tupe_layout *lay = tupe_model_layout(m[0]);
    CHECK_INT(lay->vpad, 128);
    const tupe_param *w = tupe_layout_find(lay, "embeddings.word_embeddings.weight");
    const tupe_param *bias = tupe_layout_find(lay, "cls.predictions.bias");
    CHECK(w && bias);
    size_t pads[2][2] = {{w->offset + w->numel, w->offset + 128 * 32},
                         {bias->offset + bias->numel, bias->offset + 128}};
    for (size_t i = 0; i < lay->count; i++) /* no tensor inside a pad */
        for (int k = 0; k < 2; k++)
            CHECK(lay->t[i].offset + lay->t[i].numel <= pads[k][0] || lay->t[i].offset >= pads[k][1]);
    CHECK(lay->total >= pads[1][1]);
    size_t total = lay->total;
    float *p = malloc(total * sizeof *p), *g = malloc(total * sizeof *g);
    float *g1 = malloc(total * sizeof *g1);
    float *lt = malloc(3 * 50 * sizeof *lt), *le = malloc(3 * 50 * sizeof *le);
    int32_t ids[NB * NT], mpos[3], mlab[3];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    tupe_adamw_cfg ac;
    tupe_adamw_defaults(&ac);
    ac.weight_decay = 0.1;
    tupe_adamw *o[2];
    for (int k = 0; k < 2; k++)
        CHECK_INT(tupe_adamw_create(&o[k], m[k], &ac, &e), 0);
    for (uint32_t t = 1; t <= 3; t++) {
        tupe_step st = {.seed = 4, .step = t};
        tupe_fwd_out out[2];
        for (int k = 0; k < 2; k++) {
            tupe_model_zero_grad(m[k]);
            fwd(m[k], &b, &st, &out[k]);
            if (t == 1) /* the logits probed after the training pass, fused or not */
                CHECK_INT(tupe_model_probe(m[k], TUPE_PROBE_LOGITS, 0, k ? le : lt, 3 * 50, &e), 0);
            CHECK_INT(tupe_model_backward(m[k], &e), 0);
        }
        CHECK(out[0].loss == out[1].loss && out[0].correct == out[1].correct);
        be->download(be, g, tupe_model_grads(m[0]), total, TUPE_F32);
        be->download(be, g1, tupe_model_grads(m[1]), total, TUPE_F32);
        CHECK(memcmp(g, g1, total * sizeof *g) == 0);
        if (t == 1)
            CHECK(memcmp(lt, le, 3 * 50 * sizeof *lt) == 0);
        for (int k = 0; k < 2; k++)
            tupe_adamw_step(o[k], 1e-2, tupe_grad_norm(m[k]));
    }
    tupe_model_params_get(m[0], p);
    int nonzero = 0;
    for (int k = 0; k < 2; k++)
        for (size_t i = pads[k][0]; i < pads[k][1]; i++)
            nonzero += p[i] != 0 || g[i] != 0;
    CHECK_INT(nonzero, 0);
    /* an evaluation pass's logits are the training pass's (no dropout here) */
    tupe_fwd_out ev;
    fwd(m[1], &b, NULL, &ev);
    CHECK_INT(tupe_model_probe(m[1], TUPE_PROBE_LOGITS, 0, le, 3 * 50, &e), 0);
    tupe_step st = {.seed = 4, .step = 9};
    tupe_fwd_out tr;
    tupe_model_keep_logits(m[1], 0);
    fwd(m[1], &b, &st, &tr);
    CHECK_INT(tupe_model_probe(m[1], TUPE_PROBE_LOGITS, 0, lt, 3 * 50, &e), 0);
    CHECK(memcmp(lt, le, 3 * 50 * sizeof *lt) == 0);
    for (int k = 0; k < 2; k++) {
        tupe_adamw_free(o[k]);
        tupe_model_free(m[k]);
    }
    free(p), free(g), free(g1), free(lt), free(le);
    tupe_backend_destroy(be);
}

/* The masked-LM head over more rows than masked positions (tupe_batch.rows, a fixed shape for
 * every step): the padding rows (position -1, label -1) change no loss, count or logit, add no
 * gradient (one real position is 0, where a padding row's scatter would land), fused or not;
 * malformed padding is refused. */
static void head_padding_rows(void)
{
    tupe_backend *be = backend(2);
    tupe_config c;
    tiny(&c, TUPE_POS_TUPE_R, 1);
    c.hidden_dropout = c.attention_dropout = 0.1;
    tupe_err e;
    enum { ROWS = 10 };
    int32_t ids[NB * NT], mpos[ROWS], mlab[ROWS];
    tupe_batch b;
    batch(&b, ids, mpos, mlab);
    for (int k = 3; k < ROWS; k++)
        mpos[k] = mlab[k] = -1;
    size_t total = 0;
    float *g[2] = {NULL, NULL}, lg[2][3 * 50];
    for (int fused = 0; fused < 2; fused++) {
        tupe_fwd_out o[2];
        for (int k = 0; k < 2; k++) { /* k = 1: padded */
            tupe_model *m = model(be, &c, 3);
            tupe_model_keep_logits(m, !fused);
            total = tupe_model_layout(m)->total;
            if (!g[k])
                g[k] = malloc(total * sizeof *g[k]);
            b.rows = k ? ROWS : 0;
            tupe_step st = {.seed = 8, .step = 2};
            tupe_model_zero_grad(m);
            fwd(m, &b, &st, &o[k]);
            CHECK_INT(tupe_model_probe_size(m, TUPE_PROBE_LOGITS), 3 * 50);
            if (!fused)
                CHECK_INT(tupe_model_probe(m, TUPE_PROBE_LOGITS, 0, lg[k], 3 * 50, &e), 0);
            CHECK_INT(tupe_model_backward(m, &e), 0);
            be->download(be, g[k], tupe_model_grads(m), total, TUPE_F32);
            tupe_model_free(m);
        }
        CHECK(o[0].loss == o[1].loss && o[0].loss_sum == o[1].loss_sum);
        CHECK_INT(o[1].correct, o[0].correct);
        CHECK_INT(o[1].count, 3);
        if (!fused)
            CHECK(memcmp(lg[0], lg[1], sizeof lg[0]) == 0);
        double gmax = 0, err = 0;
        for (size_t i = 0; i < total; i++) {
            gmax = fmax(gmax, fabs(g[0][i]));
            err = fmax(err, fabs(g[0][i] - g[1][i]));
        }
        CHECK_MSG(gmax > 0 && err <= 1e-6 * gmax, "gradients differ by %g (largest %g)", err, gmax);
    }
    free(g[0]), free(g[1]);
    tupe_model *m = model(be, &c, 3);
    tupe_fwd_out o;
    b.rows = ROWS;
    mpos[5] = 0;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "padding row 5 of the masked-LM head: position 0, label -1");
    mpos[5] = -1;
    b.rows = NB * NT + 1;
    CHECK_INT(tupe_model_forward(m, &b, NULL, &o, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "a masked-LM head of 25 rows for 3 masked positions");
    tupe_model_free(m);
    tupe_backend_destroy(be);
}

UNIT_MAIN(T(cls_reset_tupe_a), T(no_reset_tupe_a_tie), T(cls_reset_tupe_r),
          T(no_reset_tupe_r_tie), T(bucket_table), T(bias_per_variant),
          T(input_has_no_position), T(bert_base_counts), T(dropout_rate_and_threads),
          T(model_same_for_any_thread_count),
          T(split_products_same_for_any_thread_count), T(dropout_train_vs_eval), T(bad_batches_refused), T(params_only),
          T(alibi_slopes_and_bias), T(rope_layouts_are_a_permutation), T(nope_knows_no_position), T(padded_vocabulary),
          T(head_padding_rows))
