#include "glue/finetune.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "base/outdir.h"
#include "base/progress.h"
#include "base/rng.h"
#include "formats/safetensors.h"
#include "glue/ftsettings.h"
#include "glue/metrics.h"
#include "model/checkpoint.h"
#include "model/config.h"
#include "model/electra.h"
#include "model/model.h"
#include "text/tokenizer.h"
#include "text/vocab.h"
#include "train/rundir.h"

/* ---- recipes ------------------------------------------------------------------------------- */

void tupe_ft_recipe(tupe_ft_opts *o, int recipe, const tupe_glue_task *t)
{
    o->recipe = recipe;
    tupe_adamw_defaults(&o->adam);
    o->dropout = 0.1;
    o->evals_per_epoch = 2;
    o->max_len = 512;
    if (recipe == TUPE_RECIPE_BERT) {
        /* Devlin et al.: 3 epochs, 10% warmup, no decay of LayerNorm and biases. */
        o->batch = 32;
        o->epochs = 3;
        o->warmup_ratio = 0.1;
        o->adam.exclude_ln_bias = 1;
        double g[] = {5e-5, 4e-5, 3e-5, 2e-5};
        memcpy(o->grid, g, sizeof g);
        o->ngrid = 4;
        o->max_len = 128;
    } else if (recipe == TUPE_RECIPE_ROBERTA) {
        /* fairseq's RoBERTa GLUE recipe: 10 epochs, 6% warmup, Adam (0.9, 0.98), weight decay
         * 0.1, no clipping; learning rate and batch per task as in its README. */
        static const struct { const char *task; double lr; int batch; } tab[] = {
            {"MNLI", 1e-5, 32}, {"QNLI", 1e-5, 32}, {"QQP", 1e-5, 32}, {"RTE", 2e-5, 16},
            {"SST-2", 1e-5, 32}, {"MRPC", 1e-5, 16}, {"CoLA", 1e-5, 16}, {"STS-B", 2e-5, 16}};
        o->batch = 32;
        o->grid[0] = 1e-5;
        for (size_t i = 0; t && i < sizeof tab / sizeof tab[0]; i++)
            if (strcmp(tab[i].task, t->name) == 0)
                o->batch = tab[i].batch, o->grid[0] = tab[i].lr;
        o->grid[1] = 2e-5, o->grid[2] = 3e-5;
        o->ngrid = 3;
        if (o->grid[0] == 2e-5)
            o->grid[1] = 1e-5; /* keep the grid free of duplicates, the task's value first */
        o->epochs = 10;
        o->warmup_ratio = 0.06;
        o->adam.beta2 = 0.98;
        o->adam.weight_decay = 0.1;
        o->adam.clip = 0;
    } else if (recipe == TUPE_RECIPE_ELECTRA) {
        /* google-research/electra's configure_finetuning.py (Small and Base): lr 1e-4,
         * layer-wise decay 0.8, 3 epochs (10 for RTE and STS-B), 10% warmup, batch 32, 128
         * tokens, weight decay 0.01 without biases and LayerNorm, and its optimizer: Adam
         * without bias correction, the warmup times a decay from step 0. */
        o->batch = 32;
        o->epochs = t && (strcmp(t->name, "RTE") == 0 || strcmp(t->name, "STS-B") == 0) ? 10 : 3;
        o->warmup_ratio = 0.1;
        o->max_len = 128;
        o->adam.exclude_ln_bias = 1;
        o->adam.electra = 1;
        o->layer_decay = 0.8;
        o->grid[0] = 1e-4;
        o->ngrid = 1;
    } else {
        /* The TUPE paper (tupe-spec §8): batch 32, 10 epochs (5 for the large tasks), 6% warmup,
         * Adam (0.9, 0.999) eps 1e-6, weight decay 0.01, clip 1.0, dropout 0.1. */
        o->batch = 32;
        o->epochs = t && (strcmp(t->name, "MNLI") == 0 || strcmp(t->name, "QNLI") == 0 ||
                          strcmp(t->name, "QQP") == 0) ? 5 : 10;
        o->warmup_ratio = 0.06;
        double g[] = {2e-5, 3e-5, 4e-5, 5e-5};
        memcpy(o->grid, g, sizeof g);
        o->ngrid = 4;
    }
    o->seeds = 5;
    o->lr = o->grid[0];
}

/* ---- inputs ----------------------------------------------------------------------------------- */

typedef struct exset {
    size_t n;
    int32_t *ids, *types;     /* concatenated, off[i] .. off[i] + len[i] */
    size_t *off;
    int32_t *len, *label;
    float *target;            /* regression: label / 5 */
    size_t total;
} exset;

static void exset_free(exset *s)
{
    free(s->ids), free(s->types), free(s->off), free(s->len), free(s->label), free(s->target);
    memset(s, 0, sizeof *s);
}

typedef struct ftctx {
    const tupe_ft_opts *o;
    const tupe_glue_task *t;
    tupe_vocab *vocab;
    tupe_tokenizer *tok;
    tupe_tokctx *tc;
    int32_t cls, sep, pad;
    int bpe;
    tupe_model *m;
    tupe_config cfg;
    int32_t *b_ids, *b_types, *b_len, *b_lab;
    float *b_tgt, *logits;
} ftctx;

static int setup_tokenizer(ftctx *x, tupe_err *e)
{
    int rc = tupe_vocab_load(&x->vocab, x->o->vocab, e);
    if (rc)
        return rc;
    x->bpe = x->vocab->kind == TUPE_VOCAB_BPE;
    x->cls = x->vocab->special[TUPE_SP_CLS];
    x->sep = x->vocab->special[TUPE_SP_SEP];
    x->pad = x->vocab->special[TUPE_SP_PAD] >= 0 ? x->vocab->special[TUPE_SP_PAD] : 0;
    if (x->cls < 0 || x->sep < 0)
        return tupe_fail(e, TUPE_EDATA, "%s: the vocabulary has no %s token", x->o->vocab,
                         x->cls < 0 ? "[CLS]/<s>" : "[SEP]/</s>");
    tupe_tokenizer_opts to = {x->o->lowercase, -1, TUPE_INVALID_REPLACE, 100, 0};
    char codes[4096];
    snprintf(codes, sizeof codes, "%s/codes", x->o->vocab);
    if ((rc = tupe_tokenizer_new(&x->tok, x->vocab, x->bpe ? codes : NULL, &to, e)))
        return rc;
    x->tc = tupe_tokctx_new(x->tok);
    return x->tc ? 0 : tupe_fail(e, TUPE_EFAIL, "out of memory");
}

/* The ids of one sentence, appended to a growing vector. */
static int encode_text(ftctx *x, const char *s, uint32_t **ids, size_t *n, tupe_err *e)
{
    x->tc->n = 0;
    size_t bad;
    int rc = tupe_tokenizer_encode(x->tok, x->tc, s, strlen(s), &bad);
    if (rc == -2)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    *ids = x->tc->ids;
    *n = x->tc->n;
    return 0;
}

static int encode_set(ftctx *x, const tupe_glue_data *d, size_t limit, exset *s, tupe_err *e)
{
    memset(s, 0, sizeof *s);
    size_t n = limit && limit < d->n ? limit : d->n;
    int pair = d->task->test_s2 >= 0 || d->task->s2 >= 0;
    int seps = x->bpe ? (pair ? 3 : 1) : (pair ? 2 : 1); /* separators besides [CLS] */
    size_t cap = n * 64 + 16;
    s->ids = malloc(cap * sizeof *s->ids);
    s->types = malloc(cap * sizeof *s->types);
    s->off = malloc((n ? n : 1) * sizeof *s->off);
    s->len = malloc((n ? n : 1) * sizeof *s->len);
    s->label = malloc((n ? n : 1) * sizeof *s->label);
    s->target = malloc((n ? n : 1) * sizeof *s->target);
    if (!s->ids || !s->types || !s->off || !s->len || !s->label || !s->target)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    uint32_t *a = NULL, *b = NULL;
    size_t acap = 0, bcap = 0;
    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        const tupe_glue_example *ex = &d->ex[i];
        uint32_t *p;
        size_t na, nb = 0;
        if ((rc = encode_text(x, ex->s1, &p, &na, e)))
            break;
        if (na > acap) {
            acap = na * 2;
            uint32_t *t = realloc(a, acap * sizeof *a);
            if (!t) {
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                break;
            }
            a = t;
        }
        memcpy(a, p, na * sizeof *a);
        if (pair && ex->s2) {
            if ((rc = encode_text(x, ex->s2, &p, &nb, e)))
                break;
            if (nb > bcap) {
                bcap = nb * 2;
                uint32_t *t = realloc(b, bcap * sizeof *b);
                if (!t) {
                    rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                    break;
                }
                b = t;
            }
            memcpy(b, p, nb * sizeof *b);
        }
        /* Longest first; the second segment on ties (BERT's _truncate_seq_pair). */
        size_t room = (size_t)x->o->max_len - 1 - (size_t)seps;
        while (na + nb > room) {
            if (na > nb)
                na--;
            else
                nb--;
        }
        size_t L = 1 + na + nb + (size_t)seps;
        if (s->total + L > cap) {
            cap = (s->total + L) * 2;
            int32_t *ni = realloc(s->ids, cap * sizeof *ni), *nt = ni ? realloc(s->types, cap * sizeof *nt) : NULL;
            if (!ni || !nt) {
                if (ni)
                    s->ids = ni;
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
                break;
            }
            s->ids = ni;
            s->types = nt;
        }
        int32_t *o = s->ids + s->total, *ty = s->types + s->total;
        size_t k = 0;
        o[k] = x->cls, ty[k++] = 0;
        for (size_t j = 0; j < na; j++)
            o[k] = (int32_t)a[j], ty[k++] = 0;
        o[k] = x->sep, ty[k++] = 0;
        if (pair && ex->s2) {
            if (x->bpe)
                o[k] = x->sep, ty[k++] = 1; /* <s> A </s> </s> B </s> */
            for (size_t j = 0; j < nb; j++)
                o[k] = (int32_t)b[j], ty[k++] = 1;
            o[k] = x->sep, ty[k++] = 1;
        }
        s->off[i] = s->total;
        s->len[i] = (int32_t)k;
        s->label[i] = ex->label;
        s->target[i] = (float)(ex->value / 5.0);
        s->total += k;
        s->n = i + 1;
    }
    free(a);
    free(b);
    return rc;
}

/* ---- model -------------------------------------------------------------------------------------- */

static int read_state(const char *ckpt, json_t **state, tupe_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", ckpt, TUPE_CKPT_MODEL_FILE);
    tupe_st *st;
    int rc = tupe_st_open(&st, tupe_path_exists(path) ? path : ckpt, e);
    if (rc)
        return rc;
    const char *js = tupe_st_meta(st, "train_state");
    json_error_t je;
    *state = js ? json_loads(js, 0, &je) : NULL;
    tupe_st_close(st);
    return 0;
}

static int make_model(ftctx *x, tupe_backend *be, int num_labels, int capacity_batch, tupe_err *e)
{
    int rc = tupe_ckpt_config(x->o->checkpoint, &x->cfg, e);
    if (rc)
        return rc;
    if (tupe_cfg_pair(&x->cfg)) { /* ELECTRA: the discriminator is fine-tuned */
        tupe_config g, d;
        tupe_electra_configs(&x->cfg, &g, &d);
        x->cfg = d;
        x->cfg.rtd_head = 0;
    }
    if ((uint32_t)x->cfg.vocab_size != tupe_vocab_size(x->vocab))
        return tupe_fail(e, TUPE_EDATA, "%s: the model has a vocabulary of %d tokens, %s has %u",
                         x->o->checkpoint, x->cfg.vocab_size, x->o->vocab, tupe_vocab_size(x->vocab));
    x->cfg.num_labels = num_labels;
    x->cfg.hidden_dropout = x->cfg.attention_dropout = x->cfg.classifier_dropout = x->o->dropout;
    if (x->o->max_len > x->cfg.max_position)
        return tupe_fail(e, TUPE_EUSAGE, "--max-len %d is longer than the model's %d positions",
                         x->o->max_len, x->cfg.max_position);
    tupe_capacity cap = {capacity_batch, x->o->max_len, 0};
    if ((rc = tupe_model_create(&x->m, &x->cfg, be, &cap, e)))
        return rc;
    size_t nb = (size_t)capacity_batch * (size_t)x->o->max_len;
    x->b_ids = malloc(nb * sizeof *x->b_ids);
    x->b_types = malloc(nb * sizeof *x->b_types);
    x->b_len = malloc((size_t)capacity_batch * sizeof *x->b_len);
    x->b_lab = malloc((size_t)capacity_batch * sizeof *x->b_lab);
    x->b_tgt = malloc((size_t)capacity_batch * sizeof *x->b_tgt);
    x->logits = malloc((size_t)capacity_batch * (size_t)(num_labels > 0 ? num_labels : 1) * sizeof *x->logits);
    if (!x->b_ids || !x->b_types || !x->b_len || !x->b_lab || !x->b_tgt || !x->logits)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    return 0;
}

/* ELECTRA's layer-wise learning rates (its run_finetuning's _get_layer_lrs, faithfully: the
 * head is at depth L + 2, so the top layer gets decay^2, the original's quirk). */
static int layer_decay(tupe_model *m, tupe_adamw *opt, double decay, tupe_err *e)
{
    if (decay <= 0 || decay == 1)
        return 0;
    const tupe_layout *lay = tupe_model_layout(m);
    int L = tupe_model_config(m)->num_layers;
    double *s = malloc((lay->count ? lay->count : 1) * sizeof *s);
    if (!s)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (size_t i = 0; i < lay->count; i++) {
        const char *n = lay->t[i].name;
        int depth = 0; /* embeddings, their projection and the positional terms */
        if (strncmp(n, "encoder.layer.", 14) == 0)
            depth = atoi(n + 14) + 1;
        else if (strncmp(n, "classifier.", 11) == 0 || strncmp(n, "cls.", 4) == 0)
            depth = L + 2;
        s[i] = pow(decay, L + 2 - depth);
    }
    int rc = tupe_adamw_set_lr_scale(opt, s, e);
    free(s);
    return rc;
}

static void ft_free(ftctx *x)
{
    tupe_model_free(x->m);
    tupe_tokctx_free(x->tc);
    tupe_tokenizer_free(x->tok);
    tupe_vocab_free(x->vocab);
    free(x->b_ids), free(x->b_types), free(x->b_len), free(x->b_lab), free(x->b_tgt), free(x->logits);
}

static void make_batch(ftctx *x, const exset *s, const size_t *idx, int n, tupe_batch *b)
{
    int T = 1;
    for (int i = 0; i < n; i++)
        T = s->len[idx[i]] > T ? s->len[idx[i]] : T;
    for (int i = 0; i < n; i++) {
        size_t k = idx[i];
        int32_t *dst = x->b_ids + (size_t)i * (size_t)T, *dt = x->b_types + (size_t)i * (size_t)T;
        memcpy(dst, s->ids + s->off[k], (size_t)s->len[k] * sizeof *dst);
        memcpy(dt, s->types + s->off[k], (size_t)s->len[k] * sizeof *dt);
        for (int t = s->len[k]; t < T; t++)
            dst[t] = x->pad, dt[t] = 0;
        x->b_len[i] = s->len[k];
        /* Test rows have no label: any valid value does (the loss is not used). */
        x->b_lab[i] = s->label[k] >= 0 ? s->label[k] : 0;
        x->b_tgt[i] = isfinite(s->target[k]) ? s->target[k] : 0.0f;
    }
    memset(b, 0, sizeof *b);
    b->B = n;
    b->T = T;
    b->ids = x->b_ids;
    b->lengths = x->b_len;
    b->types = x->cfg.type_vocab_size > 0 ? x->b_types : NULL;
    if (x->cfg.num_labels == 1)
        b->targets = x->b_tgt;
    else
        b->labels = x->b_lab;
}

/* Predictions for a whole set: labels (classification) or values in the file's scale
 * (regression: 5 x the model's output). */
static int predict_set(ftctx *x, const exset *s, int batch, int *labels, double *values, tupe_err *e)
{
    size_t *idx = malloc((size_t)batch * sizeof *idx);
    if (!idx)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    int C = x->cfg.num_labels, rc = 0;
    for (size_t i = 0; i < s->n && !rc; i += (size_t)batch) {
        int n = (int)(s->n - i < (size_t)batch ? s->n - i : (size_t)batch);
        for (int k = 0; k < n; k++)
            idx[k] = i + (size_t)k;
        tupe_batch b;
        make_batch(x, s, idx, n, &b);
        tupe_fwd_out fo;
        if ((rc = tupe_model_forward(x->m, &b, NULL, &fo, e)))
            break;
        if ((rc = tupe_model_probe(x->m, TUPE_PROBE_LOGITS, 0, x->logits, (size_t)n * (size_t)C, e)))
            break;
        for (int k = 0; k < n; k++) {
            const float *l = x->logits + (size_t)k * (size_t)C;
            if (C == 1) {
                values[i + (size_t)k] = 5.0 * l[0];
            } else {
                int best = 0;
                for (int c = 1; c < C; c++)
                    best = l[c] > l[best] ? c : best;
                labels[i + (size_t)k] = best;
            }
        }
    }
    free(idx);
    return rc;
}

/* ---- the training loss ----------------------------------------------------------------------- */

/* The training loss of each step since the last metrics line, left on the device by the
 * forward passes (model.h's sums; no host wait per step) and read at that line. */
typedef struct steplosses {
    tupe_backend *be;
    tupe_dev *d;        /* TUPE_NSUMS * cap doubles: sum k of step i at k * cap + i */
    double *norm;       /* each step's divisor of its summed loss */
    int cap, n;
} steplosses;

static int sl_open(steplosses *sl, tupe_backend *be, int cap, tupe_err *e)
{
    sl->be = be;
    sl->cap = cap;
    sl->n = 0;
    sl->d = be->alloc(be, (size_t)TUPE_NSUMS * (size_t)cap * sizeof(double));
    sl->norm = malloc((size_t)cap * sizeof *sl->norm);
    return sl->d && sl->norm ? 0 : tupe_fail(e, TUPE_EFAIL, "out of memory for the step losses");
}

static void sl_close(steplosses *sl)
{
    if (sl->d)
        sl->be->free(sl->be, sl->d);
    free(sl->norm);
}

/* Step i since the last read: its forward pass's sums go to slot i. */
static void sl_target(steplosses *sl, tupe_model *m)
{
    tupe_model_sums_target(m, tupe_dev_dat(sl->d, (size_t)sl->n), (size_t)sl->cap);
}

/* The mean loss of the steps since the last read (each step's summed loss over its divisor,
 * added in step order), and the first step (1-based, counted back from `step`, the last) whose
 * loss is not finite, or 0; the slots zeroed for the next interval. */
static int sl_read(steplosses *sl, int64_t step, double *mean, int64_t *bad, tupe_err *e)
{
    tupe_backend *be = sl->be;
    double *h = malloc((size_t)sl->n * sizeof *h + 1);
    if (!h)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    be->download(be, h, sl->d, (size_t)sl->n, TUPE_DBL);
    be->zero(be, sl->d, (size_t)sl->n * tupe_dbl_reals(be));
    int rc = be->check ? be->check(be, e) : 0;
    double acc = 0;
    *bad = 0;
    for (int i = 0; i < sl->n && !rc; i++) {
        double l = h[i] / sl->norm[i];
        if (!isfinite(l) && !*bad)
            *bad = step - sl->n + 1 + i;
        acc += l;
    }
    *mean = sl->n ? acc / (double)sl->n : 0;
    sl->n = 0;
    free(h);
    return rc;
}

/* ---- dev evaluation ------------------------------------------------------------------------------ */

typedef struct devsets {
    int n;
    const tupe_glue_split *split[2];
    tupe_glue_data data[2];
    exset ex[2];
} devsets;

static void dev_free(devsets *d)
{
    for (int i = 0; i < d->n; i++) {
        tupe_glue_free(&d->data[i]);
        exset_free(&d->ex[i]);
    }
    d->n = 0;
}

static int dev_load(ftctx *x, devsets *d, tupe_glue_skip_fn skip, void *ctx, tupe_err *e)
{
    memset(d, 0, sizeof *d);
    const tupe_glue_task *t = x->t;
    for (int i = 0; i < t->nsplits && d->n < 2; i++) {
        if (t->splits[i].kind != TUPE_GLUE_DEV)
            continue;
        int k = d->n;
        d->split[k] = &t->splits[i];
        int rc = tupe_glue_read(t, d->split[k], x->o->data, &d->data[k], skip, ctx, e);
        if (!rc)
            rc = encode_set(x, &d->data[k], (size_t)x->o->max_dev, &d->ex[k], e);
        d->n++;
        if (rc)
            return rc;
        /* Score against the examples actually evaluated (--max-dev). */
        d->data[k].n = d->ex[k].n;
    }
    if (!d->n)
        return tupe_fail(e, TUPE_EUSAGE, "%s has no labelled dev split", t->name);
    return 0;
}

static int evaluate(ftctx *x, devsets *d, int batch, tupe_ft_scores *sc, tupe_err *e)
{
    memset(sc, 0, sizeof *sc);
    sc->select = NAN;
    for (int k = 0; k < d->n; k++) {
        size_t n = d->ex[k].n;
        int *lab = calloc(n ? n : 1, sizeof *lab);
        double *val = calloc(n ? n : 1, sizeof *val);
        int rc = lab && val ? predict_set(x, &d->ex[k], batch, lab, val, e)
                            : tupe_fail(e, TUPE_EFAIL, "out of memory");
        if (!rc)
            rc = tupe_glue_score(&d->data[k], x->t->nlabels > 1 ? lab : NULL,
                                 x->t->nlabels > 1 ? NULL : val, &sc->s[k], e);
        free(lab), free(val);
        if (rc)
            return rc;
        sc->set[k] = d->split[k]->board;
    }
    sc->nsets = d->n;
    sc->select = tupe_glue_scores_get(&sc->s[0], x->t->select);
    return 0;
}

static json_t *scores_json(const tupe_ft_scores *sc)
{
    json_t *o = json_object();
    for (int k = 0; k < sc->nsets; k++) {
        json_t *m = json_object();
        for (int i = 0; i < sc->s[k].n; i++)
            json_object_set_new(m, sc->s[k].name[i],
                                isnan(sc->s[k].value[i]) ? json_null() : json_real(sc->s[k].value[i]));
        json_object_set_new(o, sc->set[k], m);
    }
    return o;
}

static void format_scores(char *buf, size_t cap, const tupe_ft_scores *sc)
{
    size_t n = 0;
    buf[0] = 0;
    for (int k = 0; k < sc->nsets && n < cap; k++) {
        n += (size_t)snprintf(buf + n, cap - n, "%s%s", k ? "; " : "", sc->set[k]);
        for (int i = 0; i < sc->s[k].n && n < cap; i++)
            n += (size_t)snprintf(buf + n, cap - n, " %s %.2f", sc->s[k].name[i], 100 * sc->s[k].value[i]);
    }
}

/* ---- training ------------------------------------------------------------------------------------- */

static void skip_print(void *ctx, const char *path, uint64_t line, const char *why)
{
    const tupe_ft_opts *o = ctx;
    tupe_note(o->note, o->note_ctx, TUPE_NOTE_INFO, "%s:%llu: skipped: %s", path,
              (unsigned long long)line, why);
}

/* A message for the user, on a line of its own when a progress bar is drawn. */
static void say(const tupe_ft_opts *o, tupe_progress *pr, int kind, const char *fmt, ...)
    TUPE_PRINTF(4, 5);
static void say(const tupe_ft_opts *o, tupe_progress *pr, int kind, const char *fmt, ...)
{
    if (pr)
        tupe_progress_clear(pr);
    va_list ap;
    va_start(ap, fmt);
    tupe_vnote(o->note, o->note_ctx, kind, fmt, ap);
    va_end(ap);
}

/* What the settings record of the precision (a bf16 run computes other numbers). */
static const char *precision_of(const tupe_backend *be)
{
    return strstr(be->name, "bf16") ? "bf16" : "fp32";
}

static const char *recipe_name(int r)
{
    return r == TUPE_RECIPE_BERT      ? "bert"
           : r == TUPE_RECIPE_ROBERTA ? "roberta"
           : r == TUPE_RECIPE_ELECTRA ? "electra"
                                      : "tupe";
}

static char *best_state(const ftctx *x, const tupe_ft_scores *sc, double lr)
{
    json_t *o = json_object(), *labels = json_array();
    json_object_set_new(o, "task", json_string(x->t->name));
    for (int i = 0; i < x->t->nlabels && x->t->nlabels > 1; i++)
        json_array_append_new(labels, json_string(x->t->labels[i]));
    json_object_set_new(o, "labels", labels);
    json_object_set_new(o, "regression", json_boolean(x->t->nlabels == 1));
    json_object_set_new(o, "max_len", json_integer(x->o->max_len));
    json_object_set_new(o, "lowercase", json_boolean(x->o->lowercase));
    char h[22];
    tupe_hash_hex(x->vocab->hash, h);
    json_object_set_new(o, "vocab_hash", json_string(h));
    json_object_set_new(o, "recipe", json_string(recipe_name(x->o->recipe)));
    json_object_set_new(o, "lr", json_real(lr));
    json_object_set_new(o, "seed", json_integer((json_int_t)x->o->seed));
    json_object_set_new(o, "step", json_integer(sc->step));
    json_object_set_new(o, "epoch", json_real(sc->epoch));
    json_object_set_new(o, "dev", scores_json(sc));
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static int check_vocab_of(ftctx *x, tupe_err *e)
{
    json_t *st = NULL;
    int rc = read_state(x->o->checkpoint, &st, e);
    if (rc)
        return rc;
    json_t *vh = st ? json_object_get(st, "vocab_hash") : NULL;
    uint64_t h;
    if (json_is_string(vh) && tupe_hash_parse(json_string_value(vh), &h) == 0 && h != x->vocab->hash) {
        char a[22], b[22];
        tupe_hash_hex(h, a);
        tupe_hash_hex(x->vocab->hash, b);
        rc = tupe_fail(e, TUPE_EDATA, "%s was trained with another vocabulary (%s) than %s (%s)",
                       x->o->checkpoint, a, x->o->vocab, b);
    }
    json_decref(st);
    return rc;
}

int tupe_ft_train(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                  tupe_ft_scores *best, tupe_err *e)
{
    memset(best, 0, sizeof *best);
    best->select = NAN;
    if (t->splits[0].kind != TUPE_GLUE_TRAIN)
        return tupe_fail(e, TUPE_EUSAGE, "%s has no training split (predict it with an MNLI model)", t->name);
    ftctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.t = t;
    tupe_glue_data train;
    memset(&train, 0, sizeof train);
    exset tr;
    memset(&tr, 0, sizeof tr);
    devsets dev;
    memset(&dev, 0, sizeof dev);
    tupe_adamw *opt = NULL;
    tupe_rundir *rdir = NULL;
    tupe_err end_err;
    size_t *order = NULL;
    steplosses sl = {NULL, NULL, NULL, 0, 0};
    json_t *settings = NULL;
    int rc;
    tupe_rundir_spec where = {o->out, &tupe_run_finetune, 0, o->tensorboard, o->no_tensorboard,
                              o->inputs};
    if ((rc = tupe_rundir_claim(&rdir, &where, e)) ||
        !(settings = tupe_ft_settings(o, t, precision_of(be), e)) ||
        (rc = setup_tokenizer(&x, e)) || (rc = check_vocab_of(&x, e)) ||
        (rc = tupe_glue_read(t, &t->splits[0], o->data, &train, skip_print, (void *)o, e)) ||
        (rc = encode_set(&x, &train, (size_t)o->max_train, &tr, e)) ||
        (rc = dev_load(&x, &dev, skip_print, (void *)o, e)) ||
        (rc = make_model(&x, be, t->nlabels, o->batch, e)))
        goto out;
    /* The pre-trained encoder; the head (absent from the file) keeps its fresh initialization. */
    if ((rc = tupe_model_init(x.m, o->seed, e)) ||
        (rc = tupe_ckpt_load(o->checkpoint, x.m, NULL, NULL, TUPE_CKPT_HEADS_OPTIONAL, e)) ||
        (rc = tupe_model_init_prefix(x.m, o->seed, "classifier.", e)) ||
        (rc = tupe_adamw_create(&opt, x.m, &o->adam, e)) ||
        (rc = layer_decay(x.m, opt, o->layer_decay, e)))
        goto out;
    if ((rc = tupe_rundir_begin(&rdir, &where, -1, e)))
        goto out;
    size_t n = tr.n;
    int64_t spe = (int64_t)((n + (size_t)o->batch - 1) / (size_t)o->batch);
    int64_t total = spe * o->epochs;
    int64_t warm = (int64_t)llround(o->warmup_ratio * (double)total);
    tupe_schedule sched = {o->lr, 0, warm, total, 1, o->adam.electra};
    int64_t eval_every = (spe + o->evals_per_epoch - 1) / (o->evals_per_epoch > 0 ? o->evals_per_epoch : 1);
    order = malloc((n ? n : 1) * sizeof *order);
    if (!order) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    tupe_progress pr;
    /* A progress line between the evaluations: on a large task they are hours apart. */
    tupe_progress_start(&pr, "fine-tune", (uint64_t)total, "steps", o->quiet);
    say(o, &pr, TUPE_NOTE_INFO, "%s, %zu training examples, %zu dev; %s recipe, lr %.3g, "
        "batch %d, %d epochs (%lld steps, %lld warmup), seed %llu", t->name, n,
        dev.ex[0].n, recipe_name(o->recipe), o->lr, o->batch, o->epochs,
        (long long)total, (long long)warm, (unsigned long long)o->seed);
    int64_t step = 0;
    if ((rc = sl_open(&sl, be, (int)eval_every, e)))
        goto out;
    for (int ep = 0; ep < o->epochs && !rc; ep++) {
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        tupe_rng r;
        tupe_rng_init(&r, o->seed, (uint32_t)ep, 0, TUPE_RNG_SHUFFLE);
        tupe_rng_shuffle_u64(&r, (uint64_t *)order, n);
        for (int64_t s = 0; s < spe && !rc; s++) {
            size_t first = (size_t)s * (size_t)o->batch;
            int bn = (int)(n - first < (size_t)o->batch ? n - first : (size_t)o->batch);
            tupe_batch b;
            make_batch(&x, &tr, order + first, bn, &b);
            step++;
            b.sample_offset = (uint64_t)step * (uint64_t)o->batch;
            tupe_step ts = {.seed = o->seed, .step = (uint32_t)step};
            tupe_fwd_out fo;
            tupe_model_zero_grad(x.m);
            sl_target(&sl, x.m);
            rc = tupe_model_forward(x.m, &b, &ts, &fo, e);
            tupe_model_sums_target(x.m, NULL, 0); /* the evaluations read their own */
            if (rc || (rc = tupe_model_backward(x.m, e)))
                break;
            sl.norm[sl.n++] = fo.norm;
            double norm = tupe_grad_norm(x.m);
            if (!isfinite(norm)) {
                rc = tupe_fail(e, TUPE_EFAIL, "%s: step %lld: non-finite gradient (norm %g); "
                               "try a lower --lr", t->name, (long long)step, norm);
                break;
            }
            tupe_adamw_step(opt, tupe_lr_at(&sched, step), norm);
            tupe_progress_set(&pr, (uint64_t)step);
            if ((s + 1) % eval_every == 0 || s + 1 == spe) {
                double mean = 0;
                int64_t bad = 0;
                if ((rc = sl_read(&sl, step, &mean, &bad, e)))
                    break;
                if (bad) {
                    rc = tupe_fail(e, TUPE_EFAIL, "%s: step %lld: non-finite loss; try a lower "
                                   "--lr", t->name, (long long)bad);
                    break;
                }
                tupe_ft_scores sc;
                if ((rc = evaluate(&x, &dev, o->batch, &sc, e)))
                    break;
                sc.step = step;
                sc.epoch = ep + (double)(s + 1) / (double)spe;
                json_t *line = json_object();
                json_object_set_new(line, "step", json_integer(step));
                json_object_set_new(line, "epoch", json_real(sc.epoch));
                json_object_set_new(line, "train_loss", json_real(mean));
                json_object_set_new(line, "lr", json_real(tupe_lr_at(&sched, step)));
                json_object_set_new(line, "dev", scores_json(&sc));
                char *js = json_dumps(line, JSON_COMPACT);
                tupe_rundir_metric(rdir, "%s", js);
                free(js);
                json_decref(line);
                int improved = !isnan(sc.select) && (isnan(best->select) || sc.select > best->select);
                char scores[256];
                format_scores(scores, sizeof scores, &sc);
                say(o, &pr, TUPE_NOTE_STATUS, "epoch %.2f  step %lld  loss %.4f  dev: %s%s", sc.epoch,
                    (long long)step, mean, scores, improved ? "  (best)" : "");
                if (improved) {
                    *best = sc;
                    char dir[4200];
                    snprintf(dir, sizeof dir, "%s/best", o->out);
                    char *state = best_state(&x, &sc, o->lr);
                    rc = state ? tupe_ckpt_save(dir, x.m, NULL, state, e) : tupe_fail(e, TUPE_EFAIL, "out of memory");
                    free(state);
                }
            }
        }
    }
    if (!rc) {
        tupe_progress_finish(&pr);
        json_t *res = json_object();
        json_object_set_new(res, "task", json_string(t->name));
        json_object_set_new(res, "select_metric", json_string(t->select));
        json_object_set_new(res, "select", isnan(best->select) ? json_null() : json_real(best->select));
        json_object_set_new(res, "lr", json_real(o->lr));
        json_object_set_new(res, "seed", json_integer((json_int_t)o->seed));
        json_object_set_new(res, "step", json_integer(best->step));
        json_object_set_new(res, "epoch", json_real(best->epoch));
        json_object_set_new(res, "dev", scores_json(best));
        json_object_set(res, "settings", settings);
        char *js = json_dumps(res, JSON_INDENT(2));
        json_decref(res);
        char path[4200];
        snprintf(path, sizeof path, "%s/results.json", o->out);
        rc = js ? tupe_write_file(path, js, strlen(js), e) : tupe_fail(e, TUPE_EFAIL, "out of memory");
        free(js);
        /* Constant predictions (a collapsed model) leave Pearson undefined at every evaluation:
         * nothing was better than nothing, so there is no best checkpoint to report. */
        if (!rc && isnan(best->select))
            rc = tupe_fail(e, TUPE_EFAIL, "%s: no dev evaluation gave a defined %s (the predictions were "
                           "constant; try a lower --lr): no checkpoint kept", t->name, t->select);
    }
out:
    if (!settings && !rc)
        rc = e->code;
    json_decref(settings);
    if (tupe_rundir_end(rdir, &end_err) && !rc) { /* metrics.jsonl or the event file */
        *e = end_err;
        rc = e->code;
    }
    free(order);
    sl_close(&sl);
    tupe_adamw_free(opt);
    dev_free(&dev);
    exset_free(&tr);
    tupe_glue_free(&train);
    ft_free(&x);
    return rc;
}

/* ---- eval and predict with a fine-tuned checkpoint --------------------------------------------------- */

/* The task's labels must be those the checkpoint was trained with, in the same order. */
static int load_finetuned(ftctx *x, tupe_backend *be, tupe_ft_opts *oo, tupe_err *e)
{
    json_t *st = NULL;
    int rc = read_state(x->o->checkpoint, &st, e);
    if (rc)
        return rc;
    const tupe_glue_task *t = x->t;
    const tupe_glue_task *trained = st ? tupe_glue_task_find(json_string_value(json_object_get(st, "task")) ?
                                                           json_string_value(json_object_get(st, "task")) : "") : NULL;
    if (!trained) {
        json_decref(st);
        return tupe_fail(e, TUPE_EDATA, "%s is not a tupe-glue checkpoint (no task in its training state)",
                         x->o->checkpoint);
    }
    /* AX is predicted by an MNLI model; otherwise the task must be the trained one. */
    int ok = trained == t || (strcmp(t->name, "AX") == 0 && strcmp(trained->name, "MNLI") == 0);
    json_t *labels = json_object_get(st, "labels");
    for (size_t i = 0; ok && t->nlabels > 1 && i < (size_t)t->nlabels; i++)
        ok = json_is_string(json_array_get(labels, i)) &&
             strcmp(json_string_value(json_array_get(labels, i)), t->labels[i]) == 0;
    if (!ok) {
        json_decref(st);
        return tupe_fail(e, TUPE_EUSAGE, "%s was fine-tuned on %s, not %s", x->o->checkpoint, trained->name, t->name);
    }
    json_t *ml = json_object_get(st, "max_len"), *lc = json_object_get(st, "lowercase");
    if (json_is_integer(ml) && oo->max_len <= 0)
        oo->max_len = (int)json_integer_value(ml);
    if (json_is_boolean(lc))
        oo->lowercase = json_is_true(lc);
    json_decref(st);
    if (oo->max_len <= 0)
        oo->max_len = 512;
    if ((rc = setup_tokenizer(x, e)) || (rc = check_vocab_of(x, e)) ||
        (rc = make_model(x, be, trained->nlabels, oo->batch, e)) ||
        (rc = tupe_ckpt_load(x->o->checkpoint, x->m, NULL, NULL, 0, e)))
        return rc;
    return 0;
}

int tupe_ft_eval(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                 tupe_ft_scores *s, tupe_err *e)
{
    tupe_ft_opts oo = *o;
    ftctx x;
    memset(&x, 0, sizeof x);
    x.o = &oo;
    x.t = t;
    devsets dev;
    memset(&dev, 0, sizeof dev);
    int rc = load_finetuned(&x, be, &oo, e);
    if (!rc)
        rc = dev_load(&x, &dev, skip_print, (void *)o, e);
    if (!rc)
        rc = evaluate(&x, &dev, oo.batch, s, e);
    dev_free(&dev);
    ft_free(&x);
    return rc;
}

int tupe_ft_predict(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be, tupe_err *e)
{
    tupe_ft_opts oo = *o;
    ftctx x;
    memset(&x, 0, sizeof x);
    x.o = &oo;
    x.t = t;
    int rc = tupe_outdir_check(o->out, TUPE_PREDICTIONS_KIND, TUPE_OUTDIR_INTO, e);
    int made = !tupe_path_exists(o->out); /* removed again if nothing comes of it */
    if (!rc)
        rc = load_finetuned(&x, be, &oo, e);
    if (!rc)
        rc = tupe_outdir_into(o->out, TUPE_PREDICTIONS_KIND, e);
    for (int i = 0; !rc && i < t->nsplits; i++) {
        const tupe_glue_split *sp = &t->splits[i];
        if (sp->kind != TUPE_GLUE_TEST)
            continue;
        tupe_glue_data d;
        exset s;
        memset(&s, 0, sizeof s);
        if ((rc = tupe_glue_read(t, sp, o->data, &d, NULL, NULL, e)))
            break;
        rc = encode_set(&x, &d, 0, &s, e);
        int *lab = calloc(s.n ? s.n : 1, sizeof *lab);
        double *val = calloc(s.n ? s.n : 1, sizeof *val);
        if (!rc && (!lab || !val))
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        if (!rc)
            rc = predict_set(&x, &s, oo.batch, lab, val, e);
        if (!rc) {
            char path[4200];
            snprintf(path, sizeof path, "%s/%s.tsv", o->out, sp->board);
            rc = tupe_glue_write_predictions(path, t, t->nlabels > 1 ? lab : NULL,
                                             t->nlabels > 1 ? NULL : val, s.n, e);
        }
        free(lab), free(val);
        exset_free(&s);
        tupe_glue_free(&d);
    }
    ft_free(&x);
    if (rc && made)
        tupe_outdir_discard(o->out);
    return rc;
}

/* ---- sweep ------------------------------------------------------------------------------------------- */

/* -1 when DIR holds no finished run; an error when it holds one of another task, learning
 * rate or seed (an earlier sweep into the same directory), whose scores must not be reused. */
static int read_results(const char *dir, const tupe_ft_opts *r, const tupe_glue_task *t,
                        const json_t *settings, double *select, double sets[2], tupe_err *e)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/results.json", dir);
    json_error_t je;
    json_t *o = json_load_file(path, 0, &je);
    if (!o)
        return -1;
    const char *task = json_string_value(json_object_get(o, "task"));
    double lr = json_number_value(json_object_get(o, "lr"));
    json_int_t seed = json_integer_value(json_object_get(o, "seed"));
    if (!task || strcmp(task, t->name) != 0 || fabs(lr - r->lr) > 1e-6 * r->lr || (uint64_t)seed != r->seed) {
        int rc = tupe_fail(e, TUPE_EUSAGE, "%s: a run of %s with lr %g and seed %lld, not of %s with lr %g "
                           "and seed %llu (a sweep with other settings; use another -o)", path,
                           task ? task : "?", lr, (long long)seed, t->name, r->lr, (unsigned long long)r->seed);
        json_decref(o);
        return rc;
    }
    int rc = tupe_ft_settings_compare(json_object_get(o, "settings"), settings, dir, e);
    if (rc) {
        json_decref(o);
        return rc;
    }
    json_t *s = json_object_get(o, "select"), *metric = json_object_get(o, "select_metric"),
           *dev = json_object_get(o, "dev");
    *select = json_is_number(s) ? json_number_value(s) : NAN;
    sets[0] = sets[1] = NAN;
    const char *k;
    json_t *v;
    int i = 0;
    json_object_foreach(dev, k, v) {
        if (i < 2 && json_is_string(metric)) {
            json_t *m = json_object_get(v, json_string_value(metric));
            sets[i] = json_is_number(m) ? json_number_value(m) : NAN;
        }
        i++;
    }
    json_decref(o);
    return 0;
}

static int sweep_runs(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                      const json_t *settings, double *median_out, double *best_lr, tupe_err *e);

int tupe_ft_sweep(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                  double *median_out, double *best_lr, tupe_err *e)
{
    /* The sweep's directory: its own kind, one sweep at a time; its settings, which every
     * finished run there must share to be counted. */
    tupe_dirlock *lock = NULL;
    int rc = tupe_outdir_check(o->out, TUPE_SWEEP_KIND, TUPE_OUTDIR_REPLACE, e);
    if (rc || (rc = tupe_mkdir_p(o->out, e)) || (rc = tupe_dirlock_take(&lock, o->out, e)) ||
        (rc = tupe_outdir_check(o->out, TUPE_SWEEP_KIND, TUPE_OUTDIR_REPLACE, e)) ||
        (rc = tupe_outdir_mark(o->out, TUPE_SWEEP_KIND, e))) {
        tupe_dirlock_release(lock);
        return rc;
    }
    json_t *settings = tupe_ft_settings(o, t, precision_of(be), e);
    if (!settings) {
        tupe_dirlock_release(lock);
        return e->code;
    }
    rc = sweep_runs(o, t, be, settings, median_out, best_lr, e);
    json_decref(settings);
    tupe_dirlock_release(lock);
    return rc;
}

static int sweep_runs(const tupe_ft_opts *o, const tupe_glue_task *t, tupe_backend *be,
                      const json_t *settings, double *median_out, double *best_lr, tupe_err *e)
{
    int rc = 0;
    int S = o->seeds > 0 ? o->seeds : 1;
    double med[TUPE_FT_MAX_GRID], med_sets[TUPE_FT_MAX_GRID][2];
    for (int g = 0; g < TUPE_FT_MAX_GRID; g++)
        med[g] = med_sets[g][0] = med_sets[g][1] = NAN;
    double *runs = malloc((size_t)o->ngrid * (size_t)S * 3 * sizeof *runs);
    if (!runs)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (int g = 0; g < o->ngrid && !rc; g++) {
        for (int s = 0; s < S && !rc; s++) {
            char dir[4200], tbdir[4200];
            tupe_ft_opts r = *o;
            r.lr = o->grid[g];
            r.seed = o->seed + (uint64_t)s;
            r.out = dir;
            snprintf(dir, sizeof dir, "%s/lr-%g/seed-%llu", o->out, r.lr, (unsigned long long)r.seed);
            if (o->tensorboard) {   /* one TensorBoard run per fine-tuning run */
                snprintf(tbdir, sizeof tbdir, "%s/lr-%g/seed-%llu", o->tensorboard, r.lr,
                         (unsigned long long)r.seed);
                r.tensorboard = tbdir;
            }
            double sel, sets[2];
            int got = read_results(dir, &r, t, settings, &sel, sets, e);
            if (got > 0) {
                rc = got;
                break;
            }
            if (got < 0) {
                tupe_ft_scores b;
                tupe_err te;
                int trc = tupe_ft_train(&r, t, be, &b, &te);
                /* A run that finished without a defined score (its results.json says so) counts
                 * as the lowest of its seeds; any other failure stops the sweep. */
                if (read_results(dir, &r, t, settings, &sel, sets, e) != 0) {
                    rc = trc ? (*e = te, trc) : tupe_fail(e, TUPE_EFAIL, "%s/results.json was not written", dir);
                    break;
                }
                if (trc)
                    say(o, NULL, TUPE_NOTE_INFO, "%s: %s", dir, te.msg);
            } else {
                say(o, NULL, TUPE_NOTE_INFO, "%s: done before (%s %.2f), not rerun", dir, t->select, 100 * sel);
            }
            double *row = runs + ((size_t)g * (size_t)S + (size_t)s) * 3;
            row[0] = sel, row[1] = sets[0], row[2] = sets[1];
        }
        if (rc)
            break;
        double col[3][64];
        for (int k = 0; k < 3; k++)
            for (int s = 0; s < S && s < 64; s++)
                col[k][s] = runs[((size_t)g * (size_t)S + (size_t)s) * 3 + (size_t)k];
        med[g] = tupe_median(col[0], (size_t)(S < 64 ? S : 64));
        med_sets[g][0] = tupe_median(col[1], (size_t)(S < 64 ? S : 64));
        med_sets[g][1] = tupe_median(col[2], (size_t)(S < 64 ? S : 64));
    }
    if (rc) {
        free(runs);
        return rc;
    }
    int bg = 0;
    for (int g = 1; g < o->ngrid; g++)
        if (med[g] > med[bg] || isnan(med[bg]))
            bg = g;
    *median_out = med[bg];
    *best_lr = o->grid[bg];
    /* sweep.tsv: one row per run; sweep.json and sweep.md: the medians. */
    tupe_out *tsv;
    char path[4200];
    snprintf(path, sizeof path, "%s/sweep.tsv", o->out);
    if ((rc = tupe_out_open(&tsv, path, e))) {
        free(runs);
        return rc;
    }
    tupe_out_printf(tsv, e, "task\tlr\tseed\t%s\n", t->select);
    for (int g = 0; g < o->ngrid; g++)
        for (int s = 0; s < S; s++)
            tupe_out_printf(tsv, e, "%s\t%g\t%llu\t%.6f\n", t->name, o->grid[g],
                            (unsigned long long)(o->seed + (uint64_t)s), runs[((size_t)g * (size_t)S + (size_t)s) * 3]);
    if ((rc = tupe_out_commit(tsv, e))) {
        free(runs);
        return rc;
    }
    json_t *js = json_object(), *per = json_array();
    json_object_set_new(js, "task", json_string(t->name));
    json_object_set_new(js, "metric", json_string(t->select));
    json_object_set_new(js, "seeds", json_integer(S));
    for (int g = 0; g < o->ngrid; g++) {
        json_t *r = json_object();
        json_object_set_new(r, "lr", json_real(o->grid[g]));
        json_object_set_new(r, "median", isnan(med[g]) ? json_null() : json_real(med[g]));
        json_array_append_new(per, r);
    }
    json_object_set_new(js, "grid", per);
    json_object_set_new(js, "best_lr", json_real(o->grid[bg]));
    json_object_set_new(js, "median", isnan(med[bg]) ? json_null() : json_real(med[bg]));
    json_t *sets = json_object();
    for (int k = 0, nd = 0; k < t->nsplits; k++)
        if (t->splits[k].kind == TUPE_GLUE_DEV && nd < 2) {
            double v = med_sets[bg][nd++];
            json_object_set_new(sets, t->splits[k].board, isnan(v) ? json_null() : json_real(v));
        }
    json_object_set_new(js, "median_by_set", sets);
    char *txt = json_dumps(js, JSON_INDENT(2));
    json_decref(js);
    snprintf(path, sizeof path, "%s/sweep.json", o->out);
    rc = txt ? tupe_write_file(path, txt, strlen(txt), e) : tupe_fail(e, TUPE_EFAIL, "out of memory");
    free(txt);
    if (!rc) {
        tupe_out *md;
        snprintf(path, sizeof path, "%s/sweep.md", o->out);
        if (!(rc = tupe_out_open(&md, path, e))) {
            tupe_out_printf(md, e, "| %s | lr | median %s over %d seeds |\n|---|---|---|\n", t->name, t->select, S);
            for (int g = 0; g < o->ngrid; g++)
                isnan(med[g]) ? tupe_out_printf(md, e, "| | %g | undefined |\n", o->grid[g])
                              : tupe_out_printf(md, e, "| %s | %g | %.2f |\n", g == bg ? "best" : "", o->grid[g], 100 * med[g]);
            rc = tupe_out_commit(md, e);
        }
    }
    free(runs);
    return rc;
}

int tupe_ft_table(const char *dir, tupe_err *e)
{
    static const struct { const char *col, *task, *set; } cols[] = {
        {"MNLI-m", "MNLI", "MNLI-m"}, {"MNLI-mm", "MNLI", "MNLI-mm"}, {"QNLI", "QNLI", NULL},
        {"QQP", "QQP", NULL},         {"SST", "SST-2", NULL},       {"CoLA", "CoLA", NULL},
        {"MRPC", "MRPC", NULL},       {"RTE", "RTE", NULL},         {"STS", "STS-B", NULL}};
    enum { NC = sizeof cols / sizeof cols[0] };
    double v[NC];
    int have = 0;
    for (int i = 0; i < NC; i++) {
        v[i] = NAN;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s/sweep.json", dir, cols[i].task);
        if (!tupe_path_exists(path))
            continue; /* a task not swept: a gap in the table */
        /* A result that is there but cannot be read is an error, never a gap: an average
         * over the others would look complete. */
        char *txt;
        size_t len;
        int rc = tupe_read_text(path, &txt, &len, 64u << 20, e);
        if (rc)
            return rc;
        json_error_t je;
        json_t *o = json_loadb(txt, len, 0, &je);
        free(txt);
        if (!o)
            return tupe_fail_linecol(e, TUPE_EDATA, path, (uint64_t)(je.line > 0 ? je.line : 1),
                                     (uint64_t)(je.column > 0 ? je.column : 1), "not a sweep result: %s",
                                     je.text);
        json_t *x = cols[i].set ? json_object_get(json_object_get(o, "median_by_set"), cols[i].set)
                                : json_object_get(o, "median");
        if (!x || (!json_is_number(x) && !json_is_null(x))) {
            json_decref(o);
            return tupe_fail(e, TUPE_EDATA, "%s: no %s median (not a sweep result written by "
                             "tupe-glue sweep)", path, cols[i].set ? cols[i].set : "task");
        }
        if (json_is_number(x)) {
            v[i] = 100 * json_number_value(x);
            have++;
        }
        json_decref(o);
    }
    if (!have)
        return tupe_fail(e, TUPE_ENOINPUT, "%s: no <TASK>/sweep.json found", dir);
    double sum = 0;
    for (int i = 0; i < NC; i++)
        sum += isnan(v[i]) ? 0 : v[i];
    double avg = sum / have;
    const char *mark = have < NC ? "*" : "";
    char path[4200];
    tupe_out *o;
    int rc;
    snprintf(path, sizeof path, "%s/table.md", dir);
    if ((rc = tupe_out_open(&o, path, e)))
        return rc;
    tupe_out_printf(o, e, "|");
    for (int i = 0; i < NC; i++)
        tupe_out_printf(o, e, " %s |", cols[i].col);
    tupe_out_printf(o, e, " Avg |\n|");
    for (int i = 0; i <= NC; i++)
        tupe_out_printf(o, e, "---|");
    tupe_out_printf(o, e, "\n|");
    for (int i = 0; i < NC; i++)
        isnan(v[i]) ? tupe_out_printf(o, e, " |") : tupe_out_printf(o, e, " %.2f |", v[i]);
    tupe_out_printf(o, e, " %.2f%s |\n", avg, mark);
    if (have < NC)
        tupe_out_printf(o, e, "\n\\* average of the %d tasks present, not of all nine columns.\n", have);
    if ((rc = tupe_out_commit(o, e)))
        return rc;
    snprintf(path, sizeof path, "%s/table.tsv", dir);
    if ((rc = tupe_out_open(&o, path, e)))
        return rc;
    for (int i = 0; i < NC; i++)
        tupe_out_printf(o, e, "%s\t", cols[i].col);
    tupe_out_printf(o, e, "Avg\n");
    for (int i = 0; i < NC; i++)
        isnan(v[i]) ? tupe_out_printf(o, e, "\t") : tupe_out_printf(o, e, "%.2f\t", v[i]);
    tupe_out_printf(o, e, "%.2f\n", avg);
    if ((rc = tupe_out_commit(o, e)))
        return rc;
    json_t *js = json_object();
    for (int i = 0; i < NC; i++)
        json_object_set_new(js, cols[i].col, isnan(v[i]) ? json_null() : json_real(v[i]));
    json_object_set_new(js, "Avg", json_real(avg));
    json_object_set_new(js, "complete", json_boolean(have == NC));
    char *txt = json_dumps(js, JSON_INDENT(2));
    json_decref(js);
    snprintf(path, sizeof path, "%s/table.json", dir);
    rc = txt ? tupe_write_file(path, txt, strlen(txt), e) : tupe_fail(e, TUPE_EFAIL, "out of memory");
    free(txt);
    return rc;
}
