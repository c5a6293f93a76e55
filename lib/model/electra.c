#include "model/electra.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/philox.h"
#include "base/rng.h"

struct tupe_electra {
    tupe_model *outer;
    tupe_model *gen, *disc;
    tupe_config gcfg, dcfg;
    size_t base;                 /* the generator's first element in the flat buffer */
    tupe_grad_ready_fn ready;
    void *ready_ctx;
    int V, Bc, Tc, Mc;
    float *logits;               /* [Mc, V]: the generator's, on the host, for sampling */
    int32_t *ids, *labels;       /* [Bc*Tc]: the discriminator's input and labels */
    int32_t *len;                /* [Bc]: the lengths of the last forward pass */
    int B, T, have_fwd;
};

void tupe_electra_configs(const tupe_config *pair, tupe_config *gen, tupe_config *disc)
{
    *disc = *pair;
    disc->generator_hidden_size = 0;
    disc->rtd_head = 1;
    disc->num_labels = 0;
    disc->embedding_size = tupe_cfg_emb(pair);
    *gen = *disc;
    gen->rtd_head = 0;
    int h = (int)lround(pair->hidden_size * pair->generator_hidden_size);
    gen->hidden_size = h < 1 ? 1 : h;
    gen->num_heads = gen->hidden_size / 64 > 1 ? gen->hidden_size / 64 : 1;
    gen->intermediate_size = 4 * gen->hidden_size;
}

double tupe_electra_default_fraction(int hidden_size) { return hidden_size == 768 ? 1.0 / 3 : 0.25; }

/* a then b into dst (cap bytes; cut to fit: the names of params.c are far shorter) */
static void cat2(char *dst, size_t cap, const char *a, const char *b)
{
    size_t na = strlen(a), nb = strlen(b);
    if (na > cap - 1)
        na = cap - 1;
    if (nb > cap - 1 - na)
        nb = cap - 1 - na;
    memmove(dst + na, b, nb);
    memcpy(dst, a, na);
    dst[na + nb] = 0;
}

/* The generator's tensors in the pair's list: under generator., its head with ELECTRA's
 * Hugging Face names. */
static void gen_name(char *dst, size_t cap, const char *name)
{
    static const char *const map[][2] = {
        {"cls.predictions.transform.dense.", "generator_predictions.dense."},
        {"cls.predictions.transform.LayerNorm.", "generator_predictions.LayerNorm."},
        {"cls.predictions.bias", "generator_lm_head.bias"},
    };
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i][0]);
        if (strncmp(name, map[i][0], n) == 0) {
            cat2(dst, cap, map[i][1], name + n);
            return;
        }
    }
    cat2(dst, cap, "generator.", name);
}

/* Both networks' layouts: the discriminator's from 0, the generator's after it, sharing the
 * embeddings. */
static int sub_layouts(const tupe_config *pair, tupe_config *g, tupe_config *d, tupe_layout *gl,
                       tupe_layout *dl, tupe_err *e)
{
    tupe_electra_configs(pair, g, d);
    int rc = tupe_layout_build(dl, d, e);
    if (rc)
        return rc;
    if ((rc = tupe_layout_build_shared(gl, g, dl, (dl->total + 15) / 16 * 16, e))) {
        tupe_layout_free(dl);
        return rc;
    }
    return 0;
}

int tupe_electra_layout(tupe_layout *lay, const tupe_config *pair, tupe_err *e)
{
    tupe_config g, d;
    tupe_layout gl, dl;
    int rc = sub_layouts(pair, &g, &d, &gl, &dl, e);
    if (rc)
        return rc;
    *lay = dl; /* the discriminator's offsets name the pair's tables */
    size_t n = dl.count + gl.count;
    tupe_param *t = realloc(dl.t, n * sizeof *t);
    if (!t) {
        tupe_layout_free(&dl);
        tupe_layout_free(&gl);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    lay->t = t;
    for (size_t i = 0; i < gl.count; i++) {
        t[dl.count + i] = gl.t[i];
        gen_name(t[dl.count + i].name, TUPE_PARAM_NAME, gl.t[i].name);
    }
    lay->count = n;
    lay->total = gl.total;
    lay->nparams = dl.nparams + gl.nparams;
    tupe_layout_free(&gl);
    return 0;
}

static void on_gen_ready(void *ctx, size_t lo)
{
    tupe_electra *p = ctx;
    /* the generator's last call: its own tensors are done, the shared tables are not */
    if (p->ready)
        p->ready(p->ready_ctx, lo == 0 ? p->base : lo);
}

static void on_disc_ready(void *ctx, size_t lo)
{
    tupe_electra *p = ctx;
    if (p->ready)
        p->ready(p->ready_ctx, lo);
}

int tupe_electra_create(tupe_electra **out, tupe_model *m, const tupe_capacity *cap, tupe_err *e)
{
    *out = NULL;
    tupe_electra *p = calloc(1, sizeof *p);
    if (!p)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    p->outer = m;
    tupe_layout gl, dl;
    int rc = sub_layouts(tupe_model_config(m), &p->gcfg, &p->dcfg, &gl, &dl, e);
    if (rc) {
        free(p);
        return rc;
    }
    p->base = gl.t[0].offset;
    tupe_backend *be = tupe_model_backend(m);
    tupe_capacity dc = {cap->batch, cap->seq, 1};
    if ((rc = tupe_model_create_view(&p->gen, &p->gcfg, be, cap, &gl, tupe_model_params(m),
                                     tupe_model_grads(m), tupe_model_master(m), e))) {
        tupe_layout_free(&dl);
        tupe_electra_free(p);
        return rc;
    }
    if ((rc = tupe_model_create_view(&p->disc, &p->dcfg, be, &dc, &dl, tupe_model_params(m),
                                     tupe_model_grads(m), tupe_model_master(m), e))) {
        tupe_electra_free(p);
        return rc;
    }
    tupe_model_on_grad_ready(p->gen, on_gen_ready, p);
    tupe_model_on_grad_ready(p->disc, on_disc_ready, p);
    tupe_model_keep_logits(p->gen, 1); /* sampled from at every step (model.h) */
    p->V = p->gcfg.vocab_size;
    p->Bc = cap->batch;
    p->Tc = cap->seq;
    p->Mc = cap->masked > 0 && cap->masked <= cap->batch * cap->seq ? cap->masked
                                                                    : cap->batch * cap->seq;
    size_t N = (size_t)p->Bc * (size_t)p->Tc;
    p->logits = malloc((size_t)p->Mc * (size_t)p->V * sizeof *p->logits);
    p->ids = malloc(N * sizeof *p->ids);
    p->labels = malloc(N * sizeof *p->labels);
    p->len = malloc((size_t)p->Bc * sizeof *p->len);
    if (!p->logits || !p->ids || !p->labels || !p->len) {
        tupe_electra_free(p);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    *out = p;
    return 0;
}

void tupe_electra_free(tupe_electra *p)
{
    if (!p)
        return;
    tupe_model_free(p->gen);
    tupe_model_free(p->disc);
    free(p->logits);
    free(p->ids);
    free(p->labels);
    free(p->len);
    free(p);
}

tupe_model *tupe_electra_generator(tupe_electra *p) { return p->gen; }
tupe_model *tupe_electra_discriminator(tupe_electra *p) { return p->disc; }
const int32_t *tupe_electra_corrupted(const tupe_electra *p) { return p->ids; }
const int32_t *tupe_electra_labels(const tupe_electra *p) { return p->labels; }

void tupe_electra_grad_target(tupe_electra *p, tupe_dev *dst)
{
    tupe_model_grad_target(p->gen, dst);
    tupe_model_grad_target(p->disc, dst);
}

void tupe_electra_on_grad_ready(tupe_electra *p, tupe_grad_ready_fn fn, void *ctx)
{
    p->ready = fn;
    p->ready_ctx = ctx;
}

size_t tupe_electra_grad_groups(const tupe_electra *p, size_t *lo, size_t cap)
{
    /* the order of the calls: the generator's backward runs first */
    size_t n = tupe_model_grad_groups(p->gen, lo, cap);
    if (n > 0 && lo[n - 1] == 0)
        lo[n - 1] = p->base;
    return n + tupe_model_grad_groups(p->disc, lo + n, cap - n);
}

int tupe_electra_sample(const float *logits, int V, uint64_t seed, uint32_t step, uint64_t key,
                        int pos)
{
    /* Stream: (step, key, tag | position); block v/4 holds the uniforms of v..v+3. */
    uint32_t s3 = (uint32_t)TUPE_RNG_GUMBEL | (uint32_t)pos << 8;
    uint64_t k = seed ^ (key >> 32) * 0x9E3779B97F4A7C15ull;
    int best = 0;
    double top = -INFINITY;
    for (int v = 0; v < V; v += 4) {
        tupe_u32x4 u = tupe_philox_block(k, step, (uint32_t)key, s3, (uint32_t)(v / 4));
        for (int j = 0; j < 4 && v + j < V; j++) {
            double g = -log(-log((double)tupe_u01f(u.v[j]) + 1e-9) + 1e-9);
            double x = (double)logits[v + j] + g;
            if (x > top) {
                top = x;
                best = v + j;
            }
        }
    }
    return best;
}

int tupe_electra_forward(tupe_electra *p, const tupe_batch *b, const tupe_step *st,
                         tupe_fwd_out *out, tupe_err *e)
{
    p->have_fwd = 0;
    if (!b->mask_pos && b->M > 0)
        return tupe_fail(e, TUPE_EDATA, "masked positions without labels");
    if (b->B > p->Bc || b->T > p->Tc || b->B < 1 || b->T < 1)
        return tupe_fail(e, TUPE_EDATA, "batch of %d x %d (this model holds %d x %d)", b->B, b->T,
                         p->Bc, p->Tc);
    /* 1. the generator: its dropout streams are not the discriminator's */
    tupe_batch gb = *b;
    gb.rtd_label = NULL;
    tupe_step gs;
    if (st) {
        gs = *st;
        gs.seed = tupe_seed_from("electra.generator", st->seed);
    }
    tupe_fwd_out go;
    int rc = tupe_model_forward(p->gen, &gb, st ? &gs : NULL, &go, e);
    if (rc)
        return rc;
    int B = b->B, T = b->T, M = b->M, V = p->V;
    size_t N = (size_t)B * (size_t)T;
    /* 2. the samples, and 3. the discriminator's input and labels */
    memcpy(p->ids, b->ids, N * sizeof *p->ids);
    memset(p->labels, 0, N * sizeof *p->labels);
    int64_t replaced = 0;
    if (b->probe_ids) {
        for (size_t i = 0; i < N; i++) {
            p->ids[i] = b->probe_ids[i];
            p->labels[i] = b->probe_labels[i] != 0;
        }
        for (int i = 0; i < B; i++)
            for (int t = 0; t < b->lengths[i]; t++)
                replaced += p->labels[(size_t)i * T + t];
    } else if (M > 0) {
        if ((rc = tupe_model_probe(p->gen, TUPE_PROBE_LOGITS, 0, p->logits, (size_t)M * V, e)))
            return rc;
        int nt = tupe_model_backend(p->gen)->nthreads > 0 ? tupe_model_backend(p->gen)->nthreads : 1;
#pragma omp parallel for schedule(static) reduction(+ : replaced) num_threads(nt)
        for (int k = 0; k < M; k++) {
            int pos = b->mask_pos[k], bi = pos / T, t = pos % T;
            uint64_t key = b->noise_key ? b->noise_key[bi] : b->sample_offset + (uint64_t)bi;
            int s = tupe_electra_sample(p->logits + (size_t)k * V, V, b->noise_seed, b->noise_step,
                                        key, t);
            p->ids[pos] = s;
            p->labels[pos] = s != b->mask_label[k];
            replaced += p->labels[pos];
        }
    }
    for (int i = 0; i < B; i++) /* padding stays as it came: the ids there are ignored */
        for (int t = b->lengths[i]; t < T; t++)
            p->ids[(size_t)i * T + t] = b->ids[(size_t)i * T + t];
    int64_t tokens = 0;
    for (int i = 0; i < B; i++)
        tokens += b->lengths[i];
    double w = b->rtd_weight > 0 ? b->rtd_weight : TUPE_ELECTRA_RTD_WEIGHT;
    double rn = b->rtd_norm > 0 ? b->rtd_norm : (double)tokens;
    tupe_batch db;
    memset(&db, 0, sizeof db);
    db.B = B;
    db.T = T;
    db.ids = p->ids;
    db.lengths = b->lengths;
    db.types = b->types;
    db.rtd_label = p->labels;
    db.loss_norm = rn / w;
    db.sample_offset = b->sample_offset;
    tupe_fwd_out dout;
    if ((rc = tupe_model_forward(p->disc, &db, st, &dout, e)))
        return rc;
    p->B = B;
    p->T = T;
    memcpy(p->len, b->lengths, (size_t)B * sizeof *p->len);
    p->have_fwd = 1;
    if (out) {
        memset(out, 0, sizeof *out);
        out->loss = go.loss + dout.loss;
        out->loss_sum = go.loss_sum;
        out->correct = go.correct;
        out->count = go.count;
        out->rtd_loss_sum = dout.loss_sum;
        out->rtd_correct = dout.correct;
        out->rtd_count = dout.count;
        out->rtd_replaced = replaced;
    }
    return 0;
}

int tupe_electra_backward(tupe_electra *p, tupe_err *e)
{
    if (!p->have_fwd)
        return tupe_fail(e, TUPE_EFAIL, "backward without a forward pass");
    p->have_fwd = 0;
    int rc = tupe_model_backward(p->gen, e);
    return rc ? rc : tupe_model_backward(p->disc, e);
}

int tupe_electra_scores(tupe_electra *p, float *dst, size_t n, tupe_err *e)
{
    size_t N = (size_t)p->B * (size_t)p->T;
    size_t R = tupe_model_probe_size(p->disc, TUPE_PROBE_LOGITS);
    if (!p->have_fwd || R == 0)
        return tupe_fail(e, TUPE_EFAIL, "no scores: no forward pass since the last backward");
    if (n != N)
        return tupe_fail(e, TUPE_EUSAGE, "scores hold %zu values, not %zu", N, n);
    float *lg = malloc(R * sizeof *lg);
    if (!lg)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int rc = tupe_model_probe(p->disc, TUPE_PROBE_LOGITS, 0, lg, R, e);
    if (!rc) {
        /* rows are the non-padding positions in order; the logit of "replaced" is column 1 */
        size_t r = 0;
        memset(dst, 0, n * sizeof *dst);
        for (int i = 0; i < p->B; i++)
            for (int t = 0; t < p->len[i]; t++)
                dst[(size_t)i * p->T + t] = lg[2 * r++ + 1];
    }
    free(lg);
    return rc;
}
