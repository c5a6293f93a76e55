#include "model/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "model/electra.h"

/* Dropout sites (pointwise.h): the embedding output, per layer the attention probabilities,
 * the attention output, the GELU output, the FFN output and DeBERTa's relative table (one mask
 * per step: the table is not per sequence), and the classifier. */
enum { SITE_EMB = 0, SITE_CLS = 5, K_PROBS = 1, K_ATTN = 2, K_ACT = 3, K_FFN = 4, K_REL = 5 };
static uint32_t layer_site(int l, int kind) { return (uint32_t)(8 * (l + 1) + kind); }

typedef struct layer_acts {
    tupe_dev *qkv, *probs, *lse, *ctx, *xh1, *rs1, *y1, *h, *xh2, *rs2; /* probs or lse */
} layer_acts;

typedef struct slot {
    tupe_dev **p;
    size_t off;
} slot;

struct tupe_model {
    tupe_config cfg;
    tupe_backend *be;
    tupe_capacity cap;
    tupe_layout lay;
    size_t arena_bytes;
    tupe_dev *arena;
    tupe_dev *params, *grads;
    tupe_dev *master;   /* wide copy of the parameters when they are narrower (backend.h) */
    size_t flat;        /* elements of those three: the layout's total, rounded up */
    tupe_dev *gdst;     /* where backward adds the gradients (grads, or the caller's) */
    tupe_grad_ready_fn ready;
    void *ready_ctx;
    tupe_params_need_fn need;
    void *need_ctx;
    size_t heads_lo;    /* the first element of the heads (after the last layer) */
    /* int32 inputs */
    tupe_dev *i_ids, *i_types, *i_len, *i_mpos, *i_mlab, *i_labels, *i_cls;
    tupe_dev *targets;
    /* activations: hs[l] is the input of layer l, hs[L] the encoder output */
    tupe_dev **hs;
    tupe_dev *emb_xh, *emb_rs;
    tupe_dev *emb_y, *emb_d, *emb_scr;   /* embedding_size != hidden_size: before the projection */
    layer_acts *la;
    tupe_dev *g_nf, *dh_nf, *tmp_nd, *attn_scr;
    tupe_dev *dY, *dR, *dBr, *dctx, *dqkv;
    tupe_posenc pe;     /* the positional terms (posenc.h) */
    /* heads */
    tupe_dev *hm, *ht, *hg, *hxh, *hrs, *hu, *logits, *lse, *dh1, *dh2;
    /* replaced-token head: its [1, D] output layer as the second row of a [2, D] one whose first
     * row is zero, so that the binary loss is the 2-class cross-entropy of logits (0, z) */
    tupe_dev *rtd_W, *rtd_Bv, *rtd_dW, *rtd_dB, *i_rpos, *i_rlab;
    int R;                  /* non-padding rows of the last forward pass (rtd_head) */
    /* the forward passes' sums (TUPE_SUM_*, device doubles): the caller's (sums_dst, sum k at
     * k * sums_stride) or, with none, the model's own, read back after each pass */
    tupe_dev *sums, *sums_dst;
    size_t sums_stride;
    tupe_electra *pair;     /* an ELECTRA pair: the two networks over this model's buffers */
    int view;               /* parameters and gradients are the caller's (tupe_model_create_view) */
    /* the last forward pass */
    int have_fwd, train, B, T, M, has_types;
    int Mr;             /* the masked-LM head's rows: M and the padding rows (tupe_batch.rows) */
    int logits_grad;    /* the masked-LM logits were replaced by their gradient (xent_fused) */
    int keep_logits;    /* tupe_model_keep_logits */
    tupe_step step;
    uint64_t sample_offset;
    double norm;
    /* arena planning */
    slot *slots;
    size_t nslots, cslots, plan_bytes;
    int plan_failed;
};

/* ---- small helpers ---------------------------------------------------------------------- */

#define AT(p, n) tupe_dev_at(m->be, (p), (n))
#define PAR(off) ((off) == TUPE_NONE ? NULL : AT(m->params, (off)))
#define GRD(off) ((off) == TUPE_NONE ? NULL : AT(m->gdst, (off)))

static void plan(tupe_model *m, tupe_dev **p, size_t bytes)
{
    if (m->nslots == m->cslots) {
        size_t nc = m->cslots ? 2 * m->cslots : 64;
        slot *s = realloc(m->slots, nc * sizeof *s);
        if (!s) {
            m->plan_failed = 1;
            return;
        }
        m->slots = s;
        m->cslots = nc;
    }
    size_t off = (m->plan_bytes + 63) / 64 * 64;
    m->slots[m->nslots++] = (slot){p, off};
    m->plan_bytes = off + (bytes ? bytes : 1);
}

static void plan_r(tupe_model *m, tupe_dev **p, size_t n) { plan(m, p, n * (size_t)m->be->esize); }
static void plan_i(tupe_model *m, tupe_dev **p, size_t n) { plan(m, p, n * 4); }
static void plan_w(tupe_model *m, tupe_dev **p, size_t n) { plan(m, p, n * (size_t)m->be->wsize); }

static tupe_drop mkdrop(const tupe_model *m, double p, uint32_t site, uint64_t per_sample)
{
    tupe_drop d = {.site = site};
    if (m->train && p > 0) {
        d.p = p;
        d.seed = m->step.seed;
        d.step = m->step.step;
        d.base = m->sample_offset * per_sample;
        d.par = m->step.par;
        d.slot = m->step.slot;
        d.per = per_sample;
    }
    return d;
}

/* ---- creation ------------------------------------------------------------------------------- */

static void plan_pe(void *ctx, tupe_dev **p, size_t n, int kind)
{
    tupe_model *m = ctx;
    if (kind == 'i')
        plan_i(m, p, n);
    else if (kind == 'w')
        plan_w(m, p, n);
    else
        plan_r(m, p, n);
}

/* Gradients, the integer inputs and every activation, for the capacity m->cap. */
static void plan_acts(tupe_model *m, tupe_backend *be)
{
    const tupe_config *c = &m->cfg;
    size_t Bc = (size_t)m->cap.batch, Tc = (size_t)m->cap.seq, N = Bc * Tc;
    size_t D = (size_t)c->hidden_size, F = (size_t)c->intermediate_size, H = (size_t)c->num_heads;
    size_t L = (size_t)c->num_layers, Mc = (size_t)m->cap.masked;
    size_t E = (size_t)tupe_cfg_emb(c);
    if (!m->view)
        plan_r(m, &m->grads, m->flat);
    plan(m, &m->sums, TUPE_NSUMS * sizeof(double));
    plan_i(m, &m->i_ids, N);
    plan_i(m, &m->i_types, N);
    plan_i(m, &m->i_len, Bc);
    plan_i(m, &m->i_mpos, Mc);
    plan_i(m, &m->i_mlab, Mc);
    plan_i(m, &m->i_labels, Bc);
    plan_i(m, &m->i_cls, Bc);
    plan_w(m, &m->targets, Bc);
    for (size_t l = 0; l <= L; l++)
        plan_r(m, &m->hs[l], N * D);
    plan_r(m, &m->emb_xh, N * E);
    plan_w(m, &m->emb_rs, N);
    if (E != D) {
        plan_r(m, &m->emb_y, N * E);
        plan_r(m, &m->emb_d, N * E);
        plan_r(m, &m->emb_scr, N * E);
    }
    for (size_t l = 0; l < L; l++) {
        layer_acts *a = &m->la[l];
        plan_r(m, &a->qkv, N * 3 * D);
        if (be->attn_flash) /* the attention's rows' log-sum-exp, linear in T */
            plan_w(m, &a->lse, Bc * H * Tc);
        else
            plan_r(m, &a->probs, Bc * H * Tc * Tc);
        plan_r(m, &a->ctx, N * D);
        plan_r(m, &a->xh1, N * D);
        plan_w(m, &a->rs1, N);
        plan_r(m, &a->y1, N * D);
        plan_r(m, &a->h, N * F);
        plan_r(m, &a->xh2, N * D);
        plan_w(m, &a->rs2, N);
    }
    plan_r(m, &m->g_nf, N * F);
    plan_r(m, &m->dh_nf, N * F);
    plan_r(m, &m->tmp_nd, N * D);
    plan_r(m, &m->attn_scr, be->attn_scratch(be, (int)Tc));
    plan_r(m, &m->dY, N * D);
    plan_r(m, &m->dR, N * D);
    plan_r(m, &m->dBr, N * D);
    plan_r(m, &m->dctx, N * D);
    plan_r(m, &m->dqkv, N * 3 * D);
    tupe_posenc_plan(&m->pe, c, (int)Bc, (int)Tc, plan_pe, m);
    size_t rows = c->rtd_head ? N : c->num_labels == 0 ? Mc : Bc;
    /* the masked-LM logits' rows are the padded vocabulary's (model/params.h) */
    size_t cols = c->rtd_head ? 2 : c->num_labels == 0 ? (size_t)m->lay.vpad : (size_t)c->num_labels;
    size_t W = c->num_labels == 0 && !c->rtd_head ? E : D; /* the head's transform width */
    size_t WD = W > D ? W : D;
    plan_r(m, &m->hm, rows * D);
    plan_r(m, &m->ht, rows * W);
    plan_r(m, &m->hg, rows * W);
    plan_r(m, &m->hxh, rows * W);
    plan_w(m, &m->hrs, rows);
    plan_r(m, &m->hu, rows * W);
    plan_r(m, &m->logits, rows * cols);
    plan_w(m, &m->lse, rows);
    plan_r(m, &m->dh1, rows * WD);
    plan_r(m, &m->dh2, rows * WD);
    if (c->rtd_head) {
        plan_r(m, &m->rtd_W, 2 * D);
        plan_r(m, &m->rtd_Bv, 2);
        plan_r(m, &m->rtd_dW, 2 * D);
        plan_r(m, &m->rtd_dB, 2);
        plan_i(m, &m->i_rpos, N);
        plan_i(m, &m->i_rlab, N);
    }
}

int tupe_model_create(tupe_model **out, const tupe_config *cfg, tupe_backend *be,
                      const tupe_capacity *cap, tupe_err *e)
{
    return tupe_model_create_padded(out, cfg, be, cap, 1, e);
}

/* view: NULL, or the layout and buffers of tupe_model_create_view. */
typedef struct view_args {
    tupe_layout *lay;
    tupe_dev *params, *grads, *master;
} view_args;

static int create(tupe_model **out, const tupe_config *cfg, tupe_backend *be,
                  const tupe_capacity *cap, size_t flat_multiple, const view_args *view,
                  tupe_err *e)
{
    *out = NULL;
    int params_only = cap->batch == 0 && cap->seq == 0;
    if (!params_only && (cap->batch < 1 || cap->seq < 1))
        return tupe_fail(e, TUPE_EUSAGE, "model capacity: batch and sequence length must be >= 1");
    /* Only a learned table limits the length: RoPE, ALiBi and NoPE are defined at any. */
    if (cap->seq > cfg->max_position && tupe_cfg_pos_table(cfg))
        return tupe_fail(e, TUPE_EUSAGE,
                         "sequence length %d exceeds max_position_embeddings %d", cap->seq,
                         cfg->max_position);
    tupe_model *m = calloc(1, sizeof *m);
    if (!m)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    m->cfg = *cfg;
    m->be = be;
    m->cap = *cap;
    if (m->cap.masked <= 0 || m->cap.masked > cap->batch * cap->seq)
        m->cap.masked = cap->batch * cap->seq;
    int rc = 0;
    if (view) {
        m->lay = *view->lay;
        memset(view->lay, 0, sizeof *view->lay);
        m->view = 1;
    } else {
        rc = tupe_cfg_pair(cfg) ? tupe_electra_layout(&m->lay, cfg, e)
                                : tupe_layout_build(&m->lay, cfg, e);
    }
    if (rc) {
        free(m);
        return rc;
    }
    const tupe_config *c = &m->cfg;
    size_t L = (size_t)c->num_layers;
    m->hs = calloc(L + 1, sizeof *m->hs);
    m->la = calloc(L, sizeof *m->la);
    if (!m->hs || !m->la) {
        tupe_model_free(m);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }

    size_t mult = flat_multiple > 0 ? flat_multiple : 1;
    m->flat = (m->lay.total + mult - 1) / mult * mult;
    m->heads_lo = m->lay.total;
    for (size_t i = m->lay.count; i-- > 0;)
        if (strncmp(m->lay.t[i].name, "encoder.layer.", 14) == 0) {
            if (i + 1 < m->lay.count)
                m->heads_lo = m->lay.t[i + 1].offset;
            break;
        }
    if (view) {
        m->params = view->params;
        m->grads = view->grads;
        m->master = view->master;
    } else {
        plan_r(m, &m->params, m->flat);
        if (be->wsize > be->esize)
            plan_w(m, &m->master, m->flat);
    }
    if (!params_only && tupe_cfg_pair(c)) /* the two networks' activations are their own */
        plan_r(m, &m->grads, m->flat);
    else if (!params_only)
        plan_acts(m, be);
    if (m->plan_failed) {
        tupe_model_free(m);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    m->arena_bytes = m->plan_bytes;
    m->arena = be->alloc(be, m->arena_bytes);
    if (!m->arena) {
        tupe_model_free(m);
        return tupe_fail(e, TUPE_EFAIL, "out of memory: the model needs %.1f MiB",
                         (double)m->plan_bytes / (1 << 20));
    }
    for (size_t i = 0; i < m->nslots; i++)
        *m->slots[i].p = (tupe_dev *)((char *)m->arena + m->slots[i].off);
    free(m->slots);
    m->slots = NULL;
    m->nslots = m->cslots = 0;
    m->gdst = m->grads;

    if (!params_only && (rc = tupe_posenc_setup(&m->pe, be, e))) {
        tupe_model_free(m);
        return rc;
    }
    if (!params_only && tupe_cfg_pair(c) && (rc = tupe_electra_create(&m->pair, m, &m->cap, e))) {
        tupe_model_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int tupe_model_create_padded(tupe_model **out, const tupe_config *cfg, tupe_backend *be,
                             const tupe_capacity *cap, size_t flat_multiple, tupe_err *e)
{
    return create(out, cfg, be, cap, flat_multiple, NULL, e);
}

int tupe_model_create_view(tupe_model **out, const tupe_config *cfg, tupe_backend *be,
                           const tupe_capacity *cap, tupe_layout *lay, tupe_dev *params,
                           tupe_dev *grads, tupe_dev *master, tupe_err *e)
{
    view_args v = {lay, params, grads, master};
    int rc = create(out, cfg, be, cap, 1, &v, e);
    tupe_layout_free(lay); /* taken over, or left over by a failure */
    return rc;
}

void tupe_model_free(tupe_model *m)
{
    if (!m)
        return;
    tupe_electra_free(m->pair);
    if (m->arena)
        m->be->free(m->be, m->arena);
    tupe_layout_free(&m->lay);
    free(m->hs);
    free(m->la);
    free(m->slots);
    free(m);
}

const tupe_config *tupe_model_config(const tupe_model *m) { return &m->cfg; }
tupe_electra *tupe_model_pair(tupe_model *m) { return m->pair; }
tupe_backend *tupe_model_backend(const tupe_model *m) { return m->be; }
const tupe_layout *tupe_model_layout(const tupe_model *m) { return &m->lay; }
size_t tupe_model_arena_bytes(const tupe_model *m) { return m->arena_bytes; }
int tupe_model_rope_scaling(tupe_model *m, int scaling, double factor, tupe_err *e)
{
    return tupe_posenc_rope_scaling(&m->pe, scaling, factor, e);
}
tupe_dev *tupe_model_params(tupe_model *m) { return m->params; }
tupe_dev *tupe_model_master(tupe_model *m) { return m->master; }
tupe_dev *tupe_model_grads(tupe_model *m) { return m->grads; }
size_t tupe_model_flat_size(const tupe_model *m) { return m->flat; }
void tupe_model_grad_target(tupe_model *m, tupe_dev *dst)
{
    m->gdst = dst ? dst : m->grads;
    if (m->pair)
        tupe_electra_grad_target(m->pair, m->gdst);
}
void tupe_model_on_grad_ready(tupe_model *m, tupe_grad_ready_fn fn, void *ctx)
{
    m->ready = fn;
    m->ready_ctx = ctx;
    if (m->pair)
        tupe_electra_on_grad_ready(m->pair, fn, ctx);
}

void tupe_model_on_params_need(tupe_model *m, tupe_params_need_fn fn, void *ctx)
{
    m->need = fn;
    m->need_ctx = ctx;
}

/* The parameters below hi are about to be read (tupe_model_on_params_need). */
static void need(tupe_model *m, size_t hi)
{
    if (m->need)
        m->need(m->need_ctx, hi);
}

/* The first element of layer l's parameters, the heads' for l = num_layers. */
static size_t layer_lo(const tupe_model *m, int l)
{
    return l < m->cfg.num_layers ? m->lay.layer[l].qkv_w : m->heads_lo;
}

size_t tupe_model_grad_groups(const tupe_model *m, size_t *lo, size_t cap)
{
    if (m->pair)
        return tupe_electra_grad_groups(m->pair, lo, cap);
    size_t n = 0;
    if (n < cap)
        lo[n++] = m->heads_lo;
    for (int l = m->cfg.num_layers - 1; l >= 0 && n < cap; l--)
        lo[n++] = m->lay.layer[l].qkv_w;
    if (n < cap)
        lo[n++] = 0;
    return n;
}
void tupe_model_zero_grad(tupe_model *m)
{
    if (m->grads && !m->view)
        m->be->zero(m->be, m->grads, m->lay.total);
}

/* ---- parameters ----------------------------------------------------------------------------- */

int tupe_model_init_prefix(tupe_model *m, uint64_t seed, const char *prefix, tupe_err *e)
{
    size_t maxn = 0;
    for (size_t i = 0; i < m->lay.count; i++)
        if (m->lay.t[i].numel > maxn)
            maxn = m->lay.t[i].numel;
    float *buf = malloc((maxn ? maxn : 1) * sizeof *buf);
    if (!buf)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (size_t i = 0; i < m->lay.count; i++) {
        const tupe_param *p = &m->lay.t[i];
        if (prefix && strncmp(p->name, prefix, strlen(prefix)) != 0)
            continue;
        tupe_param_init_values(p, m->cfg.initializer_range, seed, buf);
        m->be->upload(m->be, AT(m->params, p->offset), buf, p->numel, TUPE_F32);
        if (m->master)
            m->be->upload(m->be, tupe_dev_wat(m->be, m->master, p->offset), buf, p->numel,
                          TUPE_F32 | TUPE_WIDE);
    }
    free(buf);
    return 0;
}

int tupe_model_init(tupe_model *m, uint64_t seed, tupe_err *e)
{
    return tupe_model_init_prefix(m, seed, NULL, e);
}

static int find(tupe_model *m, const char *name, size_t n, const tupe_param **p, tupe_err *e)
{
    *p = tupe_layout_find(&m->lay, name);
    if (!*p)
        return tupe_fail(e, TUPE_EDATA, "tensor '%s': not a parameter of this model", name);
    if ((*p)->numel != n)
        return tupe_fail(e, TUPE_EDATA, "tensor '%s': %zu elements, expected %zu", name, n,
                         (*p)->numel);
    return 0;
}

/* One tensor between the host and the parameter (grad = 0) or gradient (grad = 1) buffer. */
static int xfer(tupe_model *m, const char *name, void *host, size_t n, int grad, int up, int dt,
                tupe_err *e)
{
    const tupe_param *p;
    int rc = find(m, name, n, &p, e);
    if (rc)
        return rc;
    if (grad && !m->grads)
        return tupe_fail(e, TUPE_EUSAGE, "%s: the model was made for its parameters only", name);
    tupe_dev *d = AT(grad ? m->grads : m->params, p->offset);
    tupe_dev *w = grad ? NULL : tupe_dev_wat(m->be, m->master, p->offset);
    if (up) {
        m->be->upload(m->be, d, host, n, dt);
        if (w)
            m->be->upload(m->be, w, host, n, dt | TUPE_WIDE);
    } else if (w) {
        m->be->download(m->be, host, w, n, dt | TUPE_WIDE);
    } else {
        m->be->download(m->be, host, d, n, dt);
    }
    return 0;
}

void tupe_model_params_get(tupe_model *m, float *flat)
{
    if (m->master)
        m->be->download(m->be, flat, m->master, m->lay.total, TUPE_F32 | TUPE_WIDE);
    else
        m->be->download(m->be, flat, m->params, m->lay.total, TUPE_F32);
}

void tupe_model_params_put(tupe_model *m, const float *flat)
{
    m->be->upload(m->be, m->params, flat, m->lay.total, TUPE_F32);
    if (m->master)
        m->be->upload(m->be, m->master, flat, m->lay.total, TUPE_F32 | TUPE_WIDE);
}

int tupe_model_set(tupe_model *m, const char *name, const float *src, size_t n, tupe_err *e)
{
    return xfer(m, name, (void *)src, n, 0, 1, TUPE_F32, e);
}

int tupe_model_set_f64(tupe_model *m, const char *name, const double *src, size_t n, tupe_err *e)
{
    return xfer(m, name, (void *)src, n, 0, 1, TUPE_F64, e);
}

int tupe_model_get(tupe_model *m, const char *name, float *dst, size_t n, tupe_err *e)
{
    return xfer(m, name, dst, n, 0, 0, TUPE_F32, e);
}

int tupe_model_get_grad(tupe_model *m, const char *name, float *dst, size_t n, tupe_err *e)
{
    return xfer(m, name, dst, n, 1, 0, TUPE_F32, e);
}

int tupe_model_get_grad_f64(tupe_model *m, const char *name, double *dst, size_t n, tupe_err *e)
{
    return xfer(m, name, dst, n, 1, 0, TUPE_F64, e);
}

/* ---- forward --------------------------------------------------------------------------------- */

/* n integers into an input buffer: taken on the device from where they were uploaded ahead,
 * or uploaded from the host. */
static void input_in(tupe_backend *be, tupe_dev *dst, const tupe_dev *ahead, const int32_t *host,
                     size_t n)
{
    if (ahead)
        be->ahead_take(be, dst, ahead, n * 4);
    else
        be->upload(be, dst, host, n, TUPE_I32);
}

static int check_batch(const tupe_model *m, const tupe_batch *b, tupe_err *e)
{
    const tupe_config *c = &m->cfg;
    if (b->dev && (c->num_labels != 0 || c->rtd_head || b->types || !m->be->ahead_take))
        return tupe_fail(e, TUPE_EUSAGE, "inputs on the device ahead of the forward pass are for "
                         "masked-LM batches without token types only");
    if (b->B < 1 || b->B > m->cap.batch)
        return tupe_fail(e, TUPE_EDATA, "batch of %d sequences (this model holds 1 to %d)", b->B,
                         m->cap.batch);
    if (b->T < 1 || b->T > m->cap.seq)
        return tupe_fail(e, TUPE_EDATA, "sequence length %d (this model holds 1 to %d)", b->T,
                         m->cap.seq);
    if (!b->ids || !b->lengths)
        return tupe_fail(e, TUPE_EDATA, "batch without token ids or lengths");
    for (int i = 0; i < b->B; i++) {
        if (b->lengths[i] < 1 || b->lengths[i] > b->T)
            return tupe_fail(e, TUPE_EDATA, "sequence %d: length %d not in 1..%d", i,
                             b->lengths[i], b->T);
        for (int t = 0; t < b->lengths[i]; t++) {
            int32_t id = b->ids[(size_t)i * b->T + t];
            if (id < 0 || id >= c->vocab_size)
                return tupe_fail(e, TUPE_EDATA,
                                 "sequence %d, position %d: token id %d outside the vocabulary "
                                 "(size %d)", i, t, id, c->vocab_size);
            if (b->types) {
                int32_t ty = b->types[(size_t)i * b->T + t];
                if (ty < 0 || ty >= (c->type_vocab_size > 0 ? c->type_vocab_size : 1))
                    return tupe_fail(e, TUPE_EDATA,
                                     "sequence %d, position %d: token type %d (type_vocab_size %d)",
                                     i, t, ty, c->type_vocab_size);
            }
        }
    }
    if (c->rtd_head) {
        if (!b->rtd_label)
            return tupe_fail(e, TUPE_EDATA, "replaced-token batch without labels");
        for (int i = 0; i < b->B; i++)
            for (int t = 0; t < b->lengths[i]; t++)
                if (b->rtd_label[(size_t)i * b->T + t] != 0 && b->rtd_label[(size_t)i * b->T + t] != 1)
                    return tupe_fail(e, TUPE_EDATA, "sequence %d, position %d: replaced-token "
                                     "label %d is not 0 or 1", i, t, b->rtd_label[(size_t)i * b->T + t]);
    } else if (c->num_labels == 0) {
        if (b->M < 0 || b->M > m->cap.masked)
            return tupe_fail(e, TUPE_EDATA, "%d masked positions (this model holds up to %d)",
                             b->M, m->cap.masked);
        if (b->M > 0 && (!b->mask_pos || !b->mask_label))
            return tupe_fail(e, TUPE_EDATA, "masked positions without labels");
        if (b->rows != 0 && (b->rows < b->M || b->rows > m->cap.masked))
            return tupe_fail(e, TUPE_EDATA, "a masked-LM head of %d rows for %d masked positions "
                             "(this model holds up to %d)", b->rows, b->M, m->cap.masked);
        for (int i = b->M; i < b->rows; i++)
            if (b->mask_pos[i] != -1 || b->mask_label[i] != -1)
                return tupe_fail(e, TUPE_EDATA, "padding row %d of the masked-LM head: position "
                                 "%d, label %d (not -1)", i, b->mask_pos[i], b->mask_label[i]);
        unsigned char *seen = calloc((size_t)b->B * b->T, 1);
        if (!seen)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        for (int i = 0; i < b->M; i++) {
            int32_t p = b->mask_pos[i];
            const char *bad = p < 0 || p >= b->B * b->T            ? "outside the batch"
                              : p % b->T >= b->lengths[p / b->T] ? "padding"
                              : seen[p]                           ? "repeated"
                                                                  : NULL;
            if (bad) {
                free(seen);
                return tupe_fail(e, TUPE_EDATA, "masked position %d: %d is %s", i, p, bad);
            }
            seen[p] = 1;
            if (b->mask_label[i] < 0 || b->mask_label[i] >= c->vocab_size) {
                free(seen);
                return tupe_fail(e, TUPE_EDATA, "masked position %d: label %d outside the "
                                 "vocabulary", i, b->mask_label[i]);
            }
        }
        free(seen);
    } else if (c->num_labels == 1) {
        if (!b->targets)
            return tupe_fail(e, TUPE_EDATA, "regression batch without targets");
        for (int i = 0; i < b->B; i++)
            if (!isfinite(b->targets[i]))
                return tupe_fail(e, TUPE_EDATA, "sequence %d: target is not finite", i);
    } else {
        if (!b->labels)
            return tupe_fail(e, TUPE_EDATA, "classification batch without labels");
        for (int i = 0; i < b->B; i++)
            if (b->labels[i] < 0 || b->labels[i] >= c->num_labels)
                return tupe_fail(e, TUPE_EDATA, "sequence %d: label %d not in 0..%d", i,
                                 b->labels[i], c->num_labels - 1);
    }
    return 0;
}

void tupe_model_sums_target(tupe_model *m, tupe_dev *dst, size_t stride)
{
    if (m->pair) { /* the generator's sums, then the discriminator's (the RTD_ ones) */
        tupe_model_sums_target(tupe_electra_generator(m->pair), dst, stride);
        tupe_model_sums_target(tupe_electra_discriminator(m->pair),
                               tupe_dev_dat(dst, TUPE_SUM_RTD_LOSS * stride), stride);
        return;
    }
    m->sums_dst = dst;
    m->sums_stride = stride;
}

int tupe_model_forward(tupe_model *m, const tupe_batch *b, const tupe_step *st, tupe_fwd_out *out,
                       tupe_err *e)
{
    if (m->pair && b->dev)
        return tupe_fail(e, TUPE_EUSAGE, "an ELECTRA pair uploads its own inputs (none ahead)");
    if (m->pair)
        return tupe_electra_forward(m->pair, b, st, out, e);
    if (!m->i_ids)
        return tupe_fail(e, TUPE_EUSAGE, "the model was made for its parameters only");
    m->have_fwd = 0;
    m->logits_grad = 0;
    int rc = check_batch(m, b, e);
    if (rc)
        return rc;
    tupe_backend *be = m->be;
    const tupe_config *c = &m->cfg;
    const tupe_layout *y = &m->lay;
    int B = b->B, T = b->T, N = B * T, D = c->hidden_size, F = c->intermediate_size;
    int H = c->num_heads, dh = D / H, V = c->vocab_size, E = tupe_cfg_emb(c);
    m->B = B;
    m->T = T;
    m->M = c->num_labels == 0 && !c->rtd_head ? b->M : 0;
    m->Mr = m->M > 0 && b->rows > m->M ? b->rows : m->M;
    m->train = st != NULL;
    if (st)
        m->step = *st;
    m->sample_offset = b->sample_offset;
    m->has_types = b->types != NULL && c->type_vocab_size > 0;

    input_in(be, m->i_ids, b->dev ? b->dev->ids : NULL, b->ids, (size_t)N);
    input_in(be, m->i_len, b->dev ? b->dev->lengths : NULL, b->lengths, (size_t)B);
    if (b->types)
        be->upload(be, m->i_types, b->types, (size_t)N, TUPE_I32);
    const int32_t *ids = (const int32_t *)m->i_ids, *len = (const int32_t *)m->i_len;
    const int32_t *types = m->has_types ? (const int32_t *)m->i_types : NULL;

    need(m, layer_lo(m, 0));
    if ((rc = tupe_posenc_fwd(&m->pe, be, y, m->params, T, e)))
        return rc;

    /* ELECTRA: LN and dropout at the embeddings' width, then the projection to the encoder's */
    tupe_drop d = mkdrop(m, c->hidden_dropout, SITE_EMB, (uint64_t)T * E);
    be->embed_fwd(be, E != D ? m->emb_y : m->hs[0], m->emb_xh, m->emb_rs, ids, types, len,
                  PAR(y->word), PAR(y->pos_emb), PAR(y->tt_emb), PAR(y->emb_ln_g),
                  PAR(y->emb_ln_b), B, T, E, c->layer_norm_eps, &d);
    if (E != D)
        be->linear_fwd(be, m->hs[0], NULL, m->emb_y, PAR(y->emb_proj_w), PAR(y->emb_proj_b), N, E,
                       D, TUPE_ACT_NONE, NULL);
    double scale = tupe_cfg_score_scale(c);
    for (int l = 0; l < c->num_layers; l++) {
        const tupe_layer_offsets *o = &y->layer[l];
        layer_acts *a = &m->la[l];
        need(m, layer_lo(m, l + 1));
        be->linear_fwd(be, a->qkv, NULL, m->hs[l], PAR(o->qkv_w), PAR(o->qkv_b), N, D, 3 * D,
                       TUPE_ACT_NONE, NULL);
        d = mkdrop(m, c->hidden_dropout, layer_site(l, K_REL), 0);
        tupe_posenc_qk(&m->pe, be, y, m->params, l, a->qkv, B, T, &d);
        d = mkdrop(m, c->attention_dropout, layer_site(l, K_PROBS), (uint64_t)H * T * T);
        be->attn_fwd(be, a->ctx, a->probs, a->lse, a->qkv, tupe_posenc_bias(&m->pe),
                     tupe_posenc_bias_bstride(&m->pe, T), len, B, T, H, dh, scale, &d,
                     m->attn_scr);
        be->linear_fwd(be, m->tmp_nd, NULL, a->ctx, PAR(o->o_w), NULL, N, D, D, TUPE_ACT_NONE,
                       NULL);
        d = mkdrop(m, c->hidden_dropout, layer_site(l, K_ATTN), (uint64_t)T * D);
        be->resid_ln_fwd(be, a->y1, a->xh1, a->rs1, m->hs[l], m->tmp_nd, PAR(o->o_b),
                         PAR(o->ln1_g), PAR(o->ln1_b), N, D, c->layer_norm_eps, &d);
        d = mkdrop(m, c->activation_dropout, layer_site(l, K_ACT), (uint64_t)T * F);
        be->linear_fwd(be, a->h, m->g_nf, a->y1, PAR(o->f1_w), PAR(o->f1_b), N, D, F,
                       TUPE_ACT_GELU, &d);
        be->linear_fwd(be, m->tmp_nd, NULL, m->g_nf, PAR(o->f2_w), NULL, N, F, D, TUPE_ACT_NONE,
                       NULL);
        d = mkdrop(m, c->hidden_dropout, layer_site(l, K_FFN), (uint64_t)T * D);
        be->resid_ln_fwd(be, m->hs[l + 1], a->xh2, a->rs2, a->y1, m->tmp_nd, PAR(o->f2_b),
                         PAR(o->ln2_g), PAR(o->ln2_b), N, D, c->layer_norm_eps, &d);
    }

    need(m, m->flat);
    tupe_dev *top = m->hs[c->num_layers];
    tupe_fwd_out r;
    memset(&r, 0, sizeof r);
    /* the losses add into device doubles: the caller's, or ours, zeroed and read back below */
    tupe_dev *sums = m->sums_dst ? m->sums_dst : m->sums;
    size_t ss = m->sums_dst ? m->sums_stride : 1;
    tupe_dev *s_loss = sums, *s_ok = tupe_dev_dat(sums, TUPE_SUM_CORRECT * ss);
    if (!m->sums_dst)
        be->zero(be, m->sums, TUPE_NSUMS * tupe_dbl_reals(be));
    if (c->rtd_head) {
        /* every non-padding position, in order */
        int32_t *rp = malloc((size_t)N * 2 * sizeof *rp);
        if (!rp)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        int R = 0;
        for (int i = 0; i < B; i++)
            for (int t = 0; t < b->lengths[i]; t++) {
                rp[R] = i * T + t;
                rp[N + R++] = b->rtd_label[(size_t)i * T + t];
            }
        be->upload(be, m->i_rpos, rp, (size_t)R, TUPE_I32);
        be->upload(be, m->i_rlab, rp + N, (size_t)R, TUPE_I32);
        free(rp);
        m->R = R;
        r.count = R;
        be->gather_rows(be, m->hm, top, (const int32_t *)m->i_rpos, R, D);
        be->linear_fwd(be, m->ht, m->hg, m->hm, PAR(y->rtd_w), PAR(y->rtd_b), R, D, D,
                       TUPE_ACT_GELU, NULL);
        be->add(be, AT(m->rtd_W, (size_t)D), PAR(y->rtd_out_w), (size_t)D, 0);
        be->add(be, AT(m->rtd_Bv, 1), PAR(y->rtd_out_b), 1, 0);
        be->linear_fwd(be, m->logits, NULL, m->hg, m->rtd_W, m->rtd_Bv, R, D, 2, TUPE_ACT_NONE,
                       NULL);
        be->xent_fwd(be, m->lse, m->logits, (const int32_t *)m->i_rlab, R, 2, 2, s_loss, s_ok);
    } else if (c->num_labels == 0) {
        /* over Mr rows, the padding rows' loss, gradient and count 0 (backend.h) */
        int M = m->Mr;
        r.count = b->M;
        if (M > 0) {
            input_in(be, m->i_mpos, b->dev ? b->dev->mask_pos : NULL, b->mask_pos, (size_t)M);
            input_in(be, m->i_mlab, b->dev ? b->dev->mask_label : NULL, b->mask_label, (size_t)M);
            be->gather_rows(be, m->hm, top, (const int32_t *)m->i_mpos, M, D);
            be->linear_fwd(be, m->ht, m->hg, m->hm, PAR(y->mlm_w), PAR(y->mlm_b), M, D, E,
                           TUPE_ACT_GELU, NULL);
            be->ln_fwd(be, m->hu, m->hxh, m->hrs, m->hg, PAR(y->mlm_ln_g), PAR(y->mlm_ln_b), M, E,
                       c->layer_norm_eps);
            /* over the padded table: rows of vpad logits, 0 past V */
            be->linear_fwd(be, m->logits, NULL, m->hu, PAR(y->word), PAR(y->mlm_bias), M, E,
                           y->vpad, TUPE_ACT_NONE, NULL);
            const int32_t *lab = (const int32_t *)m->i_mlab;
            if (m->train && !m->keep_logits) {
                /* the fused classifier: one pass over the logits for the loss and for its
                 * gradient, which replaces them (a probe computes them again) */
                double norm = b->loss_norm > 0 ? b->loss_norm : (double)b->M; /* m->norm below */
                /* a block holds the norm of a step's batch (model.h's tupe_step) */
                const tupe_dev *snorm = m->step.par && b->loss_norm > 0
                                            ? tupe_dev_dat(m->step.par, TUPE_PAR_LOSS_NORM) : NULL;
                be->xent_fused(be, m->logits, m->logits, lab, M, V, y->vpad, 1.0 / norm, snorm,
                               s_loss, s_ok);
                m->logits_grad = 1;
            } else {
                be->xent_fwd(be, m->lse, m->logits, lab, M, V, y->vpad, s_loss, s_ok);
            }
        }
    } else {
        int C = c->num_labels;
        int32_t *cls = malloc((size_t)B * sizeof *cls);
        if (!cls)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        for (int i = 0; i < B; i++)
            cls[i] = i * T;
        be->upload(be, m->i_cls, cls, (size_t)B, TUPE_I32);
        free(cls);
        r.count = B;
        be->gather_rows(be, m->hm, top, (const int32_t *)m->i_cls, B, D);
        d = mkdrop(m, c->classifier_dropout, SITE_CLS, (uint64_t)D);
        be->linear_fwd(be, m->ht, m->hg, m->hm, PAR(y->cls_w), PAR(y->cls_b), B, D, D,
                       TUPE_ACT_TANH, &d);
        be->linear_fwd(be, m->logits, NULL, m->hg, PAR(y->out_w), PAR(y->out_b), B, D, C,
                       TUPE_ACT_NONE, NULL);
        if (C == 1) {
            be->upload(be, m->targets, b->targets, (size_t)B, TUPE_F32 | TUPE_WIDE);
            be->mse_fwd(be, m->logits, m->targets, B, s_loss);
        } else {
            be->upload(be, m->i_labels, b->labels, (size_t)B, TUPE_I32);
            be->xent_fwd(be, m->lse, m->logits, (const int32_t *)m->i_labels, B, C, C, s_loss,
                         s_ok);
        }
    }
    m->norm = b->loss_norm > 0 ? b->loss_norm : (r.count > 0 ? (double)r.count : 1.0);
    r.norm = m->norm;
    if (!m->sums_dst) { /* the one host wait of such a pass */
        double h[2];
        be->download(be, h, m->sums, 2, TUPE_DBL);
        r.loss_sum = h[0];
        r.correct = (int64_t)llround(h[1]);
        r.loss = r.loss_sum / m->norm;
        if (be->check && (rc = be->check(be, e)))
            return rc;
    }
    m->have_fwd = 1;
    if (out)
        *out = r;
    return 0;
}

/* ---- backward -------------------------------------------------------------------------------- */

int tupe_model_backward(tupe_model *m, tupe_err *e)
{
    if (m->pair)
        return tupe_electra_backward(m->pair, e);
    if (!m->have_fwd)
        return tupe_fail(e, TUPE_EFAIL, "backward without a forward pass");
    m->have_fwd = 0; /* the probabilities and logits are overwritten below */
    tupe_backend *be = m->be;
    const tupe_config *c = &m->cfg;
    const tupe_layout *y = &m->lay;
    int B = m->B, T = m->T, N = B * T, D = c->hidden_size, F = c->intermediate_size;
    int H = c->num_heads, dh = D / H, V = c->vocab_size, E = tupe_cfg_emb(c);
    const int32_t *len = (const int32_t *)m->i_len;
    double inv = 1.0 / m->norm;
    tupe_drop d;

    /* Heads: the gradient of the encoder output into dY. */
    be->zero(be, m->dY, (size_t)N * D);
    if (c->rtd_head) {
        int R = m->R;
        be->xent_bwd(be, m->logits, m->logits, m->lse, (const int32_t *)m->i_rlab, R, 2, 2, inv);
        be->zero(be, m->rtd_dW, 2 * (size_t)D);
        be->zero(be, m->rtd_dB, 2);
        be->linear_bwd(be, m->dh1, 0, m->rtd_dW, m->rtd_dB, m->logits, m->hg, m->rtd_W, R, D, 2);
        be->add(be, GRD(y->rtd_out_w), AT(m->rtd_dW, (size_t)D), (size_t)D, 1);
        be->add(be, GRD(y->rtd_out_b), AT(m->rtd_dB, 1), 1, 1);
        be->act_bwd(be, m->dh1, NULL, m->ht, (size_t)R * D, TUPE_ACT_GELU, NULL);
        be->linear_bwd(be, m->dh2, 0, GRD(y->rtd_w), GRD(y->rtd_b), m->dh1, m->hm, PAR(y->rtd_w),
                       R, D, D);
        be->scatter_rows(be, m->dY, m->dh2, (const int32_t *)m->i_rpos, R, D);
    } else if (c->num_labels == 0) {
        int M = m->Mr;
        if (M > 0) {
            /* the pad columns' gradient is 0: the pad rows' gradients stay 0; the padding
             * rows' (label -1) too, and their scatter adds nothing */
            if (!m->logits_grad)
                be->xent_bwd(be, m->logits, m->logits, m->lse, (const int32_t *)m->i_mlab, M, V,
                             y->vpad, inv);
            be->linear_bwd(be, m->dh1, 0, GRD(y->word), GRD(y->mlm_bias), m->logits, m->hu,
                           PAR(y->word), M, E, y->vpad);
            be->ln_bwd(be, m->dh2, 0, GRD(y->mlm_ln_g), GRD(y->mlm_ln_b), m->dh1, m->hxh, m->hrs,
                       PAR(y->mlm_ln_g), M, E);
            be->act_bwd(be, m->dh2, NULL, m->ht, (size_t)M * E, TUPE_ACT_GELU, NULL);
            be->linear_bwd(be, m->dh1, 0, GRD(y->mlm_w), GRD(y->mlm_b), m->dh2, m->hm,
                           PAR(y->mlm_w), M, D, E);
            be->scatter_rows(be, m->dY, m->dh1, (const int32_t *)m->i_mpos, M, D);
        }
    } else {
        int C = c->num_labels;
        if (C == 1)
            be->mse_bwd(be, m->logits, m->logits, m->targets, B, inv);
        else
            be->xent_bwd(be, m->logits, m->logits, m->lse, (const int32_t *)m->i_labels, B, C, C,
                         inv);
        be->linear_bwd(be, m->dh1, 0, GRD(y->out_w), GRD(y->out_b), m->logits, m->hg,
                       PAR(y->out_w), B, D, C);
        d = mkdrop(m, c->classifier_dropout, SITE_CLS, (uint64_t)D);
        be->act_bwd(be, m->dh1, NULL, m->ht, (size_t)B * D, TUPE_ACT_TANH, &d);
        be->linear_bwd(be, m->dh2, 0, GRD(y->cls_w), GRD(y->cls_b), m->dh1, m->hm, PAR(y->cls_w),
                       B, D, D);
        be->scatter_rows(be, m->dY, m->dh2, (const int32_t *)m->i_cls, B, D);
    }
    if (m->ready)
        m->ready(m->ready_ctx, m->heads_lo);

    tupe_posenc_bwd_begin(&m->pe, be, B, T);
    double scale = tupe_cfg_score_scale(c);
    for (int l = c->num_layers - 1; l >= 0; l--) {
        const tupe_layer_offsets *o = &y->layer[l];
        layer_acts *a = &m->la[l];
        /* dY: gradient of this layer's output. */
        d = mkdrop(m, c->hidden_dropout, layer_site(l, K_FFN), (uint64_t)T * D);
        be->resid_ln_bwd(be, m->dR, m->dBr, GRD(o->ln2_g), GRD(o->ln2_b), m->dY, a->xh2, a->rs2,
                         PAR(o->ln2_g), N, D, &d);
        /* dh = (dBr W2) GELU'(h), with GELU(h) recomputed in the same pass for dW2. */
        tupe_drop da = mkdrop(m, c->activation_dropout, layer_site(l, K_ACT), (uint64_t)T * F);
        be->linear_bwd(be, m->dh_nf, 0, NULL, NULL, m->dBr, NULL, PAR(o->f2_w), N, F, D);
        be->act_bwd(be, m->dh_nf, m->g_nf, a->h, (size_t)N * F, TUPE_ACT_GELU, &da);
        be->linear_bwd(be, NULL, 0, GRD(o->f2_w), GRD(o->f2_b), m->dBr, m->g_nf, NULL, N, F, D);
        be->linear_bwd(be, m->dR, 1, GRD(o->f1_w), GRD(o->f1_b), m->dh_nf, a->y1, PAR(o->f1_w), N,
                       D, F);
        d = mkdrop(m, c->hidden_dropout, layer_site(l, K_ATTN), (uint64_t)T * D);
        be->resid_ln_bwd(be, m->dY, m->dBr, GRD(o->ln1_g), GRD(o->ln1_b), m->dR, a->xh1, a->rs1,
                         PAR(o->ln1_g), N, D, &d);
        be->linear_bwd(be, m->dctx, 0, GRD(o->o_w), GRD(o->o_b), m->dBr, a->ctx, PAR(o->o_w), N,
                       D, D);
        if (!a->probs) /* the flash backward recomputes the scores: this layer's bias */
            tupe_posenc_bias_layer(&m->pe, be, l, a->qkv, B, T);
        d = mkdrop(m, c->attention_dropout, layer_site(l, K_PROBS), (uint64_t)H * T * T);
        be->attn_bwd(be, m->dqkv, tupe_posenc_bias_acc(&m->pe), a->probs, a->lse, a->ctx,
                     m->dctx, a->qkv, tupe_posenc_bias(&m->pe),
                     tupe_posenc_bias_bstride(&m->pe, T), len, B, T, H, dh, scale, &d,
                     m->attn_scr);
        d = mkdrop(m, c->hidden_dropout, layer_site(l, K_REL), 0);
        tupe_posenc_qk_bwd(&m->pe, be, y, m->params, m->gdst, l, m->dqkv, a->qkv, B, T, &d);
        be->linear_bwd(be, m->dY, 1, GRD(o->qkv_w), GRD(o->qkv_b), m->dqkv, m->hs[l],
                       PAR(o->qkv_w), N, D, 3 * D);
        if (m->ready)
            m->ready(m->ready_ctx, o->qkv_w);
    }
    if (E != D)
        be->linear_bwd(be, m->emb_d, 0, GRD(y->emb_proj_w), GRD(y->emb_proj_b), m->dY, m->emb_y,
                       PAR(y->emb_proj_w), N, E, D);
    d = mkdrop(m, c->hidden_dropout, SITE_EMB, (uint64_t)T * E);
    be->embed_bwd(be, GRD(y->word), GRD(y->pos_emb), GRD(y->tt_emb), GRD(y->emb_ln_g),
                  GRD(y->emb_ln_b), E != D ? m->emb_d : m->dY, m->emb_xh, m->emb_rs,
                  PAR(y->emb_ln_g), (const int32_t *)m->i_ids,
                  m->has_types ? (const int32_t *)m->i_types : NULL, len, B, T, E, V,
                  c->type_vocab_size, &d, E != D ? m->emb_scr : m->dR);
    tupe_posenc_bwd(&m->pe, be, y, m->params, m->gdst, T);
    if (m->ready)
        m->ready(m->ready_ctx, 0);
    return 0; /* queued, not waited for (model.h): no host wait inside a step */
}

/* ---- probes ---------------------------------------------------------------------------------- */

/* A layer's attention probabilities where the forward pass kept only their log-sum-exp (the
 * flash attention): the layer's attention again, materialised into buffers of the probe's. */
static int probe_probs(tupe_model *m, int layer, float *dst, size_t n, tupe_err *e)
{
    tupe_backend *be = m->be;
    const tupe_config *c = &m->cfg;
    int B = m->B, T = m->T, D = c->hidden_size, H = c->num_heads;
    tupe_dev *probs = be->alloc(be, n * (size_t)be->esize);
    tupe_dev *ctx = be->alloc(be, (size_t)B * T * D * (size_t)be->esize);
    int rc = 0;
    if (!probs || !ctx) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of device memory for the attention probabilities");
    } else {
        tupe_posenc_bias_layer(&m->pe, be, layer, m->la[layer].qkv, B, T);
        be->attn_fwd(be, ctx, probs, NULL, m->la[layer].qkv, tupe_posenc_bias(&m->pe),
                     tupe_posenc_bias_bstride(&m->pe, T),
                     (const int32_t *)m->i_len, B, T, H, D / H, tupe_cfg_score_scale(c), NULL,
                     m->attn_scr);
        be->download(be, dst, probs, n, TUPE_F32);
        if (be->check)
            rc = be->check(be, e);
    }
    if (probs)
        be->free(be, probs);
    if (ctx)
        be->free(be, ctx);
    return rc;
}

/* The masked-LM logits without their rows' pad columns; where the fused classifier replaced
 * them by their gradient, the decoder's product again (of the same operands) into a buffer
 * of the probe's. */
static int probe_mlm_logits(tupe_model *m, float *dst, tupe_err *e)
{
    tupe_backend *be = m->be;
    const tupe_layout *y = &m->lay;
    size_t M = (size_t)m->M, V = (size_t)m->cfg.vocab_size, ld = (size_t)y->vpad;
    size_t n = M > 0 ? M * ld : 1;
    float *rows = malloc(n * sizeof *rows);
    tupe_dev *lg = m->logits_grad ? be->alloc(be, n * (size_t)be->esize) : m->logits;
    int rc = 0;
    if (!rows || !lg) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of %smemory for the logits", rows ? "device " : "");
    } else {
        if (m->logits_grad)
            be->linear_fwd(be, lg, NULL, m->hu, PAR(y->word), PAR(y->mlm_bias), (int)M,
                           tupe_cfg_emb(&m->cfg), y->vpad, TUPE_ACT_NONE, NULL);
        be->download(be, rows, lg, M * ld, TUPE_F32);
        for (size_t k = 0; k < M; k++)
            memcpy(dst + k * V, rows + k * ld, V * sizeof *dst);
        if (be->check)
            rc = be->check(be, e);
    }
    if (m->logits_grad && lg)
        be->free(be, lg);
    free(rows);
    return rc;
}

size_t tupe_model_probe_size(const tupe_model *m, int probe)
{
    const tupe_config *c = &m->cfg;
    size_t B = (size_t)m->B, T = (size_t)m->T, D = (size_t)c->hidden_size,
           H = (size_t)c->num_heads;
    if (m->pair) /* the two networks have their own: model/electra.h */
        return 0;
    switch (probe) {
    case TUPE_PROBE_LOGITS:
        if (c->rtd_head)
            return (size_t)m->R * 2;
        return c->num_labels == 0 ? (size_t)m->M * (size_t)c->vocab_size
                                  : B * (size_t)c->num_labels;
    case TUPE_PROBE_POS_BIAS:
        return tupe_cfg_has_bias(c) ? H * T * T : 0;
    case TUPE_PROBE_ATTN_PROBS:
        return B * H * T * T;
    case TUPE_PROBE_QKV:
        return B * T * 3 * D;
    case TUPE_PROBE_HIDDEN:
        return B * T * D;
    case TUPE_PROBE_POS_QK:
        return tupe_cfg_pos_proj(c) ? 2 * (tupe_cfg_tupe(c) ? T + 1 : T) * D : 0;
    }
    return 0;
}

int tupe_model_probe(tupe_model *m, int probe, int layer, float *dst, size_t n, tupe_err *e)
{
    if (!m->have_fwd)
        return tupe_fail(e, TUPE_EFAIL, "nothing to probe: no forward pass since the last backward");
    size_t want = tupe_model_probe_size(m, probe);
    if (want == 0)
        return tupe_fail(e, TUPE_EUSAGE, "this model has no such quantity");
    if (n != want)
        return tupe_fail(e, TUPE_EUSAGE, "probe holds %zu values, not %zu", want, n);
    int L = m->cfg.num_layers;
    int need_layer = probe == TUPE_PROBE_ATTN_PROBS || probe == TUPE_PROBE_QKV;
    if ((need_layer && (layer < 0 || layer >= L)) ||
        (probe == TUPE_PROBE_HIDDEN && (layer < 0 || layer > L)))
        return tupe_fail(e, TUPE_EUSAGE, "layer %d out of range", layer);
    tupe_backend *be = m->be;
    switch (probe) {
    case TUPE_PROBE_LOGITS:
        if (!m->cfg.rtd_head && m->cfg.num_labels == 0)
            return probe_mlm_logits(m, dst, e);
        be->download(be, dst, m->logits, n, TUPE_F32);
        break;
    case TUPE_PROBE_POS_BIAS:
        be->download(be, dst, m->pe.bias, n, TUPE_F32 | TUPE_WIDE);
        break;
    case TUPE_PROBE_ATTN_PROBS:
        if (m->la[layer].probs) {
            be->download(be, dst, m->la[layer].probs, n, TUPE_F32);
            break;
        }
        return probe_probs(m, layer, dst, n, e);
    case TUPE_PROBE_QKV:
        be->download(be, dst, m->la[layer].qkv, n, TUPE_F32);
        break;
    case TUPE_PROBE_HIDDEN:
        be->download(be, dst, m->hs[layer], n, TUPE_F32);
        break;
    case TUPE_PROBE_POS_QK:
        be->download(be, dst, m->pe.pq, n / 2, TUPE_F32);
        be->download(be, dst + n / 2, m->pe.pk, n / 2, TUPE_F32);
        break;
    }
    return 0;
}

void tupe_model_keep_logits(tupe_model *m, int keep)
{
    m->keep_logits = keep != 0;
}
