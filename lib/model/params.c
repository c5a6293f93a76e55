#include "model/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"

typedef struct builder {
    tupe_layout *lay;
    size_t cap;
    int failed;
    int packed;     /* place the next tensor right after the previous one (no alignment) */
} builder;

static size_t add(builder *b, const char *name, int d0, int d1, int init)
{
    tupe_layout *lay = b->lay;
    if (b->failed)
        return TUPE_NONE;
    if (lay->count == b->cap) {
        size_t nc = b->cap ? 2 * b->cap : 64;
        tupe_param *t = realloc(lay->t, nc * sizeof *t);
        if (!t) {
            b->failed = 1;
            return TUPE_NONE;
        }
        lay->t = t;
        b->cap = nc;
    }
    tupe_param *p = &lay->t[lay->count++];
    memset(p, 0, sizeof *p);
    snprintf(p->name, sizeof p->name, "%s", name);
    p->ndim = d1 > 0 ? 2 : 1;
    p->shape[0] = d0;
    p->shape[1] = d1 > 0 ? d1 : 0;
    p->numel = (size_t)d0 * (size_t)(d1 > 0 ? d1 : 1);
    p->init = init;
    p->fan_in = d1 > 0 ? d1 : 0;
    size_t len = strlen(name);
    p->no_decay = (len >= 5 && strcmp(name + len - 5, ".bias") == 0) ||
                  strstr(name, "LayerNorm") != NULL;
    /* 16-element alignment (64 bytes) for vector loads, except inside a packed group. */
    p->offset = b->packed ? lay->total : (lay->total + 15) / 16 * 16;
    b->packed = 0;
    lay->total = p->offset + p->numel;
    lay->nparams += p->numel;
    return p->offset;
}

static size_t linear(builder *b, const char *prefix, int out, int in, size_t *bias, int init)
{
    char n[TUPE_PARAM_NAME];
    snprintf(n, sizeof n, "%s.weight", prefix);
    size_t w = add(b, n, out, in, init);
    snprintf(n, sizeof n, "%s.bias", prefix);
    *bias = add(b, n, out, 0, init == TUPE_INIT_FANIN ? TUPE_INIT_FANIN : TUPE_INIT_ZERO);
    if (init == TUPE_INIT_FANIN && !b->failed)
        b->lay->t[b->lay->count - 1].fan_in = in;
    return w;
}

static void layernorm(builder *b, const char *prefix, int D, size_t *g, size_t *be)
{
    char n[TUPE_PARAM_NAME];
    snprintf(n, sizeof n, "%s.weight", prefix);
    *g = add(b, n, D, 0, TUPE_INIT_ONE);
    snprintf(n, sizeof n, "%s.bias", prefix);
    *be = add(b, n, D, 0, TUPE_INIT_ZERO);
}

int tupe_layout_build(tupe_layout *lay, const tupe_config *c, tupe_err *e)
{
    return tupe_layout_build_shared(lay, c, NULL, 0, e);
}

int tupe_layout_build_shared(tupe_layout *lay, const tupe_config *c, const tupe_layout *shared,
                             size_t base, tupe_err *e)
{
    int rc = tupe_config_check(c, 1, e);
    if (rc)
        return rc;
    memset(lay, 0, sizeof *lay);
    lay->total = base;
    builder b = {lay, 0, 0, 0};
    int D = c->hidden_size, F = c->intermediate_size, V = c->vocab_size, H = c->num_heads;
    int E = tupe_cfg_emb(c);
    size_t none = TUPE_NONE;
    lay->pos_emb = lay->tt_emb = lay->pos = lay->pos_ln_g = lay->pos_ln_b = none;
    lay->pos_q_w = lay->pos_q_b = lay->pos_k_w = lay->pos_k_b = lay->rel = none;
    lay->drel = lay->drel_ln_g = lay->drel_ln_b = none;
    lay->mlm_w = lay->mlm_b = lay->mlm_ln_g = lay->mlm_ln_b = lay->mlm_bias = none;
    lay->cls_w = lay->cls_b = lay->out_w = lay->out_b = none;
    lay->emb_proj_w = lay->emb_proj_b = none;
    lay->rtd_w = lay->rtd_b = lay->rtd_out_w = lay->rtd_out_b = none;
    lay->layer = calloc((size_t)c->num_layers, sizeof *lay->layer);
    if (!lay->layer)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");

    /* The embedding tables and their LayerNorm: an ELECTRA pair's generator takes them from
     * the discriminator (model/electra.c). */
    if (shared) {
        lay->word = shared->word;
        lay->vpad = shared->vpad;
        lay->pos_emb = shared->pos_emb;
        lay->tt_emb = shared->tt_emb;
        lay->emb_ln_g = shared->emb_ln_g;
        lay->emb_ln_b = shared->emb_ln_b;
    } else {
        lay->word = add(&b, "embeddings.word_embeddings.weight", V, E, TUPE_INIT_NORMAL);
        lay->vpad = tupe_vocab_padded(V);
        lay->total += (size_t)(lay->vpad - V) * (size_t)E; /* its pad rows (params.h) */
        if (tupe_cfg_abs_input(c))
            lay->pos_emb = add(&b, "embeddings.position_embeddings.weight", c->max_position, E,
                               TUPE_INIT_NORMAL);
        if (c->type_vocab_size > 0)
            lay->tt_emb = add(&b, "embeddings.token_type_embeddings.weight", c->type_vocab_size,
                              E, TUPE_INIT_NORMAL);
        layernorm(&b, "embeddings.LayerNorm", E, &lay->emb_ln_g, &lay->emb_ln_b);
    }
    if (E != D)
        lay->emb_proj_w = linear(&b, "embeddings_project", D, E, &lay->emb_proj_b,
                                 TUPE_INIT_NORMAL);
    if (tupe_cfg_pos_proj(c)) {
        lay->pos = add(&b, "position.embeddings.weight", tupe_cfg_pos_rows(c), D, TUPE_INIT_NORMAL);
        layernorm(&b, "position.LayerNorm", D, &lay->pos_ln_g, &lay->pos_ln_b);
        lay->pos_q_w = linear(&b, "position.query", D, D, &lay->pos_q_b, TUPE_INIT_NORMAL);
        lay->pos_k_w = linear(&b, "position.key", D, D, &lay->pos_k_b, TUPE_INIT_NORMAL);
    }
    if (tupe_cfg_rel(c))
        lay->rel = add(&b, "position.relative_bias.weight", tupe_cfg_rel_rows(c), H,
                       TUPE_INIT_NORMAL);
    if (tupe_cfg_deberta(c)) {
        lay->drel = add(&b, "position.rel_embeddings.weight", 2 * c->rel_pos_buckets, D,
                        TUPE_INIT_NORMAL);
        layernorm(&b, "position.rel_embeddings.LayerNorm", D, &lay->drel_ln_g, &lay->drel_ln_b);
    }
    for (int l = 0; l < c->num_layers; l++) {
        tupe_layer_offsets *o = &lay->layer[l];
        char p[TUPE_PARAM_NAME];
        /* Weights of q, k, v, then their biases, each group packed: one [3D, D] matrix and
         * one [3D] vector for the fused projection. */
        static const char *const qkv[3] = {"query", "key", "value"};
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "encoder.layer.%d.attention.self.%s.weight", l, qkv[k]);
            b.packed = k > 0;
            size_t off = add(&b, p, D, D, TUPE_INIT_NORMAL);
            if (k == 0)
                o->qkv_w = off;
        }
        for (int k = 0; k < 3; k++) {
            snprintf(p, sizeof p, "encoder.layer.%d.attention.self.%s.bias", l, qkv[k]);
            b.packed = k > 0;
            size_t off = add(&b, p, D, 0, TUPE_INIT_ZERO);
            if (k == 0)
                o->qkv_b = off;
        }
        snprintf(p, sizeof p, "encoder.layer.%d.attention.output.dense", l);
        o->o_w = linear(&b, p, D, D, &o->o_b, TUPE_INIT_NORMAL);
        snprintf(p, sizeof p, "encoder.layer.%d.attention.output.LayerNorm", l);
        layernorm(&b, p, D, &o->ln1_g, &o->ln1_b);
        snprintf(p, sizeof p, "encoder.layer.%d.intermediate.dense", l);
        o->f1_w = linear(&b, p, F, D, &o->f1_b, TUPE_INIT_NORMAL);
        snprintf(p, sizeof p, "encoder.layer.%d.output.dense", l);
        o->f2_w = linear(&b, p, D, F, &o->f2_b, TUPE_INIT_NORMAL);
        snprintf(p, sizeof p, "encoder.layer.%d.output.LayerNorm", l);
        layernorm(&b, p, D, &o->ln2_g, &o->ln2_b);
    }
    if (c->rtd_head) {
        /* ELECTRA's discriminator head, with Hugging Face's names. */
        lay->rtd_w = linear(&b, "discriminator_predictions.dense", D, D, &lay->rtd_b,
                            TUPE_INIT_NORMAL);
        lay->rtd_out_w = linear(&b, "discriminator_predictions.dense_prediction", 1, D,
                                &lay->rtd_out_b, TUPE_INIT_NORMAL);
    } else if (c->num_labels == 0) {
        /* The transform maps the encoder's width to the embeddings' (ELECTRA's generator):
         * the decoder is the word table, [V, E]. */
        lay->mlm_w = linear(&b, "cls.predictions.transform.dense", E, D, &lay->mlm_b,
                            TUPE_INIT_NORMAL);
        layernorm(&b, "cls.predictions.transform.LayerNorm", E, &lay->mlm_ln_g, &lay->mlm_ln_b);
        lay->mlm_bias = add(&b, "cls.predictions.bias", V, 0, TUPE_INIT_ZERO);
        lay->total += (size_t)(lay->vpad - V);
    } else {
        lay->cls_w = linear(&b, "classifier.dense", D, D, &lay->cls_b, TUPE_INIT_FANIN);
        lay->out_w = linear(&b, "classifier.out_proj", c->num_labels, D, &lay->out_b,
                            TUPE_INIT_FANIN);
    }
    if (b.failed) {
        tupe_layout_free(lay);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    return 0;
}

void tupe_layout_free(tupe_layout *lay)
{
    if (!lay)
        return;
    free(lay->t);
    free(lay->layer);
    memset(lay, 0, sizeof *lay);
}

const tupe_param *tupe_layout_find(const tupe_layout *lay, const char *name)
{
    for (size_t i = 0; i < lay->count; i++)
        if (strcmp(lay->t[i].name, name) == 0)
            return &lay->t[i];
    return NULL;
}

#define INIT_BLOCK 65536

void tupe_param_init_values(const tupe_param *p, double init_range, uint64_t seed, float *out)
{
    size_t n = p->numel;
    switch (p->init) {
    case TUPE_INIT_ZERO:
        memset(out, 0, n * sizeof *out);
        return;
    case TUPE_INIT_ONE:
        for (size_t i = 0; i < n; i++)
            out[i] = 1.0f;
        return;
    default:
        break;
    }
    uint64_t ts = tupe_seed_from(p->name, seed);
    size_t nb = (n + INIT_BLOCK - 1) / INIT_BLOCK;
    double bound = p->fan_in > 0 ? 1.0 / sqrt((double)p->fan_in) : 0;
#pragma omp parallel for schedule(static)
    for (size_t blk = 0; blk < nb; blk++) {
        tupe_rng r;
        tupe_rng_init(&r, ts, (uint32_t)blk, (uint32_t)(blk >> 32), TUPE_RNG_INIT);
        size_t lo = blk * INIT_BLOCK, hi = lo + INIT_BLOCK < n ? lo + INIT_BLOCK : n;
        for (size_t i = lo; i < hi; i++) {
            if (p->init == TUPE_INIT_FANIN)
                out[i] = (float)((2.0 * tupe_rng_uniform(&r) - 1.0) * bound);
            else
                out[i] = (float)(tupe_rng_normal(&r) * init_range);
        }
    }
}
