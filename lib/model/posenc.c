#include "model/posenc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define AT(p, n) tupe_dev_at(be, (p), (n))
#define PAR(off) ((off) == TUPE_NONE ? NULL : AT(params, (off)))
#define GRD(off) ((off) == TUPE_NONE ? NULL : AT(grads, (off)))

/* ---- tables ---------------------------------------------------------------------------------- */

int tupe_rel_bucket(int i, int j, int num_buckets, int max_distance)
{
    int half = num_buckets / 2, ret = 0, n = i - j;
    if (n < 0) {
        ret = half;
        n = -n;
    }
    int max_exact = half / 2;
    if (n < max_exact)
        return ret + n;
    /* T5's formula, in double: the spec's table (§4) is reproduced exactly, including the
     * boundaries n = 16, 32, 64 where the logarithm ratio is an integer. */
    double v = log((double)n / max_exact) / log((double)max_distance / max_exact) *
               (half - max_exact);
    int b = max_exact + (int)v;
    return ret + (b < half - 1 ? b : half - 1);
}

void tupe_rel_buckets(const tupe_config *c, int T, int32_t *out)
{
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++)
            out[(size_t)i * T + j] = tupe_rel_bucket(i, j, c->rel_pos_buckets, c->max_rel_pos);
    if (c->position == TUPE_POS_TUPE_R && c->untie_cls) {
        /* Column 0 first, then row 0, so that [0,0] gets the [CLS]->others bucket (spec §4). */
        for (int i = 0; i < T; i++)
            out[(size_t)i * T] = c->rel_pos_buckets;
        for (int j = 0; j < T; j++)
            out[j] = c->rel_pos_buckets / 2;
    }
}

/* Press et al.'s get_slopes: for a power of two H, 2^(-8h/H), h = 1..H; otherwise those of
 * the largest power of two c below H, then every other slope of 2c heads for the rest (for 12
 * heads 2^-1 .. 2^-8, then 2^-0.5, 2^-1.5, 2^-2.5, 2^-3.5). */
void tupe_alibi_slopes(int H, double *out)
{
    int c = 1;
    while (2 * c <= H)
        c *= 2;
    for (int h = 0; h < c; h++)
        out[h] = exp2(-8.0 * (h + 1) / c);
    for (int h = c; h < H; h++)
        out[h] = exp2(-8.0 * (2 * (h - c) + 1) / (2 * c));
}

double tupe_rope_angle(double base, int d, int t, double p)
{
    return p * pow(base, -2.0 * t / d);
}

int tupe_deberta_bucket(int r, int k, int maxpos)
{
    int mid = k / 2, a = abs(r);
    if (a <= mid)
        return r;
    /* float, as transformers' make_log_bucket_position (float32 tensors): a double would move
     * some rows at the boundaries where the ratio is an integer */
    float lp = ceilf(logf((float)a / (float)mid) / logf((float)((double)(maxpos - 1) / mid)) *
                     (float)(mid - 1)) + (float)mid;
    return r > 0 ? (int)lp : -(int)lp;
}

/* The table rows [lo, lo + W) that sequences of T positions use (the bucket is monotone). */
static void dis_window(const tupe_config *c, int T, int *lo, int *W)
{
    int k = c->rel_pos_buckets, bt = tupe_deberta_bucket(T - 1, k, c->max_rel_pos);
    int a = k - bt < 0 ? 0 : k - bt, b = k + bt > 2 * k - 1 ? 2 * k - 1 : k + bt;
    *lo = a;
    *W = b - a + 1;
}

/* ---- creation -------------------------------------------------------------------------------- */

void tupe_posenc_plan(tupe_posenc *pe, const tupe_config *c, int cap_batch, int cap_seq,
                      tupe_posenc_plan_fn fn, void *ctx)
{
    memset(pe, 0, sizeof *pe);
    pe->cfg = *c;
    pe->terms = tupe_cfg_terms(c);
    pe->cap_seq = cap_seq;
    pe->cap_batch = cap_batch;
    pe->dis_T = -1;
    pe->table_T = -1;
    pe->factor = 1;
    size_t Tc = (size_t)cap_seq, D = (size_t)c->hidden_size, H = (size_t)c->num_heads;
    if (pe->terms & TUPE_PE_REL_BUCKET)
        fn(ctx, &pe->buckets, Tc * Tc, 'i');
    if (tupe_cfg_pos_proj(c)) {
        size_t R = Tc + 1;
        fn(ctx, &pe->p_y, R * D, 'r');
        fn(ctx, &pe->p_xh, R * D, 'r');
        fn(ctx, &pe->p_rs, R, 'w');
        fn(ctx, &pe->pq, R * D, 'r');
        fn(ctx, &pe->pk, R * D, 'r');
        fn(ctx, &pe->dpq, R * D, 'r');
        fn(ctx, &pe->dpk, R * D, 'r');
        fn(ctx, &pe->dpy, R * D, 'r');
        if (pe->terms & TUPE_PE_UNTIED_ABS) {
            fn(ctx, &pe->pA, H * R * R, 'r');
            fn(ctx, &pe->dA, H * R * R, 'r');
        }
    }
    if (tupe_cfg_has_bias(c)) {
        fn(ctx, &pe->bias, H * Tc * Tc, 'w');
        if (tupe_cfg_learned_bias(c))
            fn(ctx, &pe->G, H * Tc * Tc, 'w');
    }
    if (pe->terms & TUPE_PE_ROTATION)
        fn(ctx, &pe->rot, Tc * (D / H), 'w');
    if (pe->terms & TUPE_PE_DISENTANGLED) {
        int lo;
        dis_window(c, cap_seq, &lo, &pe->cap_W);
        size_t W = (size_t)pe->cap_W, Bc = (size_t)cap_batch, L = (size_t)c->num_layers;
        fn(ctx, &pe->dis_idx, Tc * Tc, 'i');
        fn(ctx, &pe->p_y, W * D, 'r');
        fn(ctx, &pe->p_xh, W * D, 'r');
        fn(ctx, &pe->p_rs, W, 'w');
        fn(ctx, &pe->dpy, W * D, 'r');
        fn(ctx, &pe->rpd, W * D, 'r');
        fn(ctx, &pe->drpd, W * D, 'r');
        fn(ctx, &pe->pqk, L * W * 2 * D, 'r');
        fn(ctx, &pe->dpqk, W * 2 * D, 'r');
        fn(ctx, &pe->c2p, H * Bc * Tc * W, 'r');
        fn(ctx, &pe->p2c, H * Bc * Tc * W, 'r');
        fn(ctx, &pe->bias, Bc * H * Tc * Tc, 'w');
        fn(ctx, &pe->G, Bc * H * Tc * Tc, 'w');
    }
}

int tupe_posenc_setup(tupe_posenc *pe, tupe_backend *be, tupe_err *e)
{
    if (!pe->buckets)
        return 0;
    size_t Tc = (size_t)pe->cap_seq;
    int32_t *bk = malloc(Tc * Tc * sizeof *bk);
    if (!bk)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_rel_buckets(&pe->cfg, (int)Tc, bk);
    be->upload(be, pe->buckets, bk, Tc * Tc, TUPE_I32);
    free(bk);
    return 0;
}

int tupe_posenc_rope_scaling(tupe_posenc *pe, int scaling, double factor, tupe_err *e)
{
    if (!(pe->terms & TUPE_PE_ROTATION))
        return tupe_fail(e, TUPE_EUSAGE, "RoPE scaling: the model's position is %s, not rope",
                         tupe_position_name(pe->cfg.position));
    if (scaling < TUPE_ROPE_PLAIN || scaling > TUPE_ROPE_NTK || !(factor >= 1))
        return tupe_fail(e, TUPE_EUSAGE, "RoPE scaling: bad mode or factor %g (>= 1)", factor);
    pe->scaling = scaling;
    pe->factor = factor;
    pe->table_T = -1;
    return 0;
}

/* ---- forward --------------------------------------------------------------------------------- */

/* DeBERTa's rows in use and the row of every (i, j) for T positions, uploaded when T changes. */
static int dis_rows(tupe_posenc *pe, tupe_backend *be, int T, tupe_err *e)
{
    if (pe->dis_T == T)
        return 0;
    const tupe_config *c = &pe->cfg;
    int k = c->rel_pos_buckets, lo;
    dis_window(c, T, &lo, &pe->dis_W);
    pe->dis_lo = lo;
    int32_t *ix = malloc((size_t)T * T * sizeof *ix);
    if (!ix)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (int i = 0; i < T; i++)
        for (int j = 0; j < T; j++) {
            int r = tupe_deberta_bucket(i - j, k, c->max_rel_pos) + k;
            /* c2p and p2c read the same row: the bucket is odd in i - j, so transformers'
             * p2c index -bucket(j - i) is bucket(i - j) */
            r = r < 0 ? 0 : r > 2 * k - 1 ? 2 * k - 1 : r;
            ix[(size_t)i * T + j] = r - lo;
        }
    be->upload(be, pe->dis_idx, ix, (size_t)T * T, TUPE_I32);
    free(ix);
    pe->dis_T = T;
    return 0;
}

/* The fixed tables for T positions, on the host in double, uploaded when T changes. */
static int fixed_tables(tupe_posenc *pe, tupe_backend *be, int T, tupe_err *e)
{
    if (pe->table_T == T || !(pe->terms & (TUPE_PE_LINEAR_BIAS | TUPE_PE_ROTATION)))
        return 0;
    int H = pe->cfg.num_heads, d = pe->cfg.hidden_size / H;
    if (pe->terms & TUPE_PE_LINEAR_BIAS) {
        size_t n = (size_t)H * T * T;
        double *b = malloc(n * sizeof *b), *m = malloc((size_t)H * sizeof *m);
        if (!b || !m) {
            free(b), free(m);
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        }
        tupe_alibi_slopes(H, m);
        /* Symmetric: an encoder needs -m |i - j|, not the causal models' -m j shortcut. */
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++)
                for (int j = 0; j < T; j++)
                    b[((size_t)h * T + i) * T + j] = 0.0 - m[h] * abs(i - j); /* +0 on the diagonal */
        be->upload(be, pe->bias, b, n, TUPE_F64 | TUPE_WIDE);
        free(b), free(m);
    }
    if (pe->terms & TUPE_PE_ROTATION) {
        size_t n = (size_t)T * d;
        double *r = malloc(n * sizeof *r);
        if (!r)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
        double base = pe->cfg.rope_base, pos_scale = 1;
        if (pe->scaling == TUPE_ROPE_PI)
            pos_scale = 1 / pe->factor;
        else if (pe->scaling == TUPE_ROPE_NTK)
            base *= pow(pe->factor, (double)d / (d - 2));
        for (int p = 0; p < T; p++)
            for (int t = 0; t < d / 2; t++) {
                double a = tupe_rope_angle(base, d, t, p * pos_scale);
                r[(size_t)p * d + t] = cos(a);
                r[(size_t)p * d + d / 2 + t] = sin(a);
            }
        be->upload(be, pe->rot, r, n, TUPE_F64 | TUPE_WIDE);
        free(r);
    }
    pe->table_T = T;
    return 0;
}

int tupe_posenc_fwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                    int T, tupe_err *e)
{
    const tupe_config *c = &pe->cfg;
    int D = c->hidden_size, H = c->num_heads, dh = D / H;
    int rc = fixed_tables(pe, be, T, e);
    if (rc)
        return rc;
    if (tupe_cfg_pos_proj(c)) {
        int R = tupe_cfg_tupe(c) ? T + 1 : T;
        be->ln_fwd(be, pe->p_y, pe->p_xh, pe->p_rs, PAR(y->pos), PAR(y->pos_ln_g),
                   PAR(y->pos_ln_b), R, D, c->layer_norm_eps);
        be->linear_fwd(be, pe->pq, NULL, pe->p_y, PAR(y->pos_q_w), PAR(y->pos_q_b), R, D, D,
                       TUPE_ACT_NONE, NULL);
        be->linear_fwd(be, pe->pk, NULL, pe->p_y, PAR(y->pos_k_w), PAR(y->pos_k_b), R, D, D,
                       TUPE_ACT_NONE, NULL);
        if (tupe_cfg_tupe(c)) {
            /* A_h = s Qp_h Kp_h^T: the scale of the query side folded into the product. */
            double s = tupe_cfg_score_scale(c);
            for (int h = 0; h < H; h++)
                be->gemm(be, 0, 1, R, R, dh, s, AT(pe->pq, (size_t)h * dh), D,
                         AT(pe->pk, (size_t)h * dh), D, 0, AT(pe->pA, (size_t)h * R * R), R);
        }
    }
    if (tupe_cfg_learned_bias(c))
        be->pos_bias_fwd(be, pe->bias, tupe_cfg_tupe(c) ? pe->pA : NULL, PAR(y->rel),
                         (const int32_t *)pe->buckets, pe->cap_seq, T, H, tupe_cfg_reset(c));
    if (pe->terms & TUPE_PE_DISENTANGLED) {
        if ((rc = dis_rows(pe, be, T, e)))
            return rc;
        /* LN of the rows in use only: LayerNorm acts on each row alone */
        be->ln_fwd(be, pe->p_y, pe->p_xh, pe->p_rs, AT(PAR(y->drel), (size_t)pe->dis_lo * D),
                   PAR(y->drel_ln_g), PAR(y->drel_ln_b), pe->dis_W, D, c->layer_norm_eps);
    }
    return 0;
}

const tupe_dev *tupe_posenc_bias(const tupe_posenc *pe) { return pe->bias; }

size_t tupe_posenc_bias_bstride(const tupe_posenc *pe, int T)
{
    return pe->terms & TUPE_PE_DISENTANGLED ? (size_t)pe->cfg.num_heads * T * T : 0;
}

/* DeBERTa's scores of the content against the table's projections, into the bias:
 * c2p[h] = Q_h PK_h^T, p2c[h] = K_h PQ_h^T, both then gathered by relative row. */
static void dis_scores(tupe_posenc *pe, tupe_backend *be, int l, const tupe_dev *qkv, int B,
                       int T)
{
    int D = pe->cfg.hidden_size, H = pe->cfg.num_heads, dh = D / H, W = pe->dis_W, N = B * T;
    const tupe_dev *pqk = AT(pe->pqk, (size_t)l * pe->cap_W * 2 * D);
    for (int h = 0; h < H; h++) {
        size_t o = (size_t)h * dh, co = (size_t)h * N * W;
        be->gemm(be, 0, 1, N, W, dh, 1, AT(qkv, o), 3 * D, AT(pqk, D + o), 2 * D, 0,
                 AT(pe->c2p, co), W);
        be->gemm(be, 0, 1, N, W, dh, 1, AT(qkv, D + o), 3 * D, AT(pqk, o), 2 * D, 0,
                 AT(pe->p2c, co), W);
    }
    be->dis_bias_fwd(be, pe->bias, pe->c2p, pe->p2c, (const int32_t *)pe->dis_idx, B, T, H, W,
                     tupe_cfg_score_scale(&pe->cfg));
}

/* The table after layer l's dropout (DeBERTa's pos_dropout): rpd, or the table itself. */
static const tupe_dev *dis_table(tupe_posenc *pe, tupe_backend *be, const tupe_drop *drop)
{
    if (!drop || !(drop->p > 0))
        return pe->p_y;
    be->act_fwd(be, pe->rpd, pe->p_y, (size_t)pe->dis_W * pe->cfg.hidden_size, TUPE_ACT_NONE,
                drop);
    return pe->rpd;
}

void tupe_posenc_qk(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                    int l, tupe_dev *qkv, int B, int T, const tupe_drop *drop)
{
    const tupe_config *c = &pe->cfg;
    if (pe->terms & TUPE_PE_DISENTANGLED) {
        /* share_att_key: the table through the layer's own query and key projections */
        int D = c->hidden_size;
        const tupe_layer_offsets *o = &y->layer[l];
        be->linear_fwd(be, AT(pe->pqk, (size_t)l * pe->cap_W * 2 * D), NULL,
                       dis_table(pe, be, drop), PAR(o->qkv_w), PAR(o->qkv_b), pe->dis_W, D,
                       2 * D, TUPE_ACT_NONE, NULL);
        dis_scores(pe, be, l, qkv, B, T);
    }
    if (pe->terms & TUPE_PE_ABS_QK)
        be->qk_pos_add(be, qkv, pe->pq, pe->pk, B, T, c->hidden_size);
    if (pe->terms & TUPE_PE_ROTATION)
        be->rope(be, qkv, pe->rot, B, T, c->hidden_size, c->hidden_size / c->num_heads,
                 c->rope_layout == TUPE_ROPE_INTERLEAVED, 0);
}

/* ---- backward -------------------------------------------------------------------------------- */

void tupe_posenc_bwd_begin(tupe_posenc *pe, tupe_backend *be, int B, int T)
{
    const tupe_config *c = &pe->cfg;
    size_t D = (size_t)c->hidden_size, H = (size_t)c->num_heads;
    size_t nb = pe->terms & TUPE_PE_DISENTANGLED ? (size_t)B : 1; /* G per sequence */
    if (pe->G) /* G is wide: zero it as wsize/esize real elements each */
        be->zero(be, pe->G, nb * H * T * T * (size_t)(be->wsize / be->esize));
    if (pe->terms & TUPE_PE_DISENTANGLED)
        be->zero(be, pe->dpy, (size_t)pe->dis_W * D);
    if (pe->terms & TUPE_PE_ABS_QK) {
        be->zero(be, pe->dpq, (size_t)T * D);
        be->zero(be, pe->dpk, (size_t)T * D);
    }
}

tupe_dev *tupe_posenc_bias_acc(const tupe_posenc *pe)
{
    return pe->G;
}

void tupe_posenc_bias_layer(tupe_posenc *pe, tupe_backend *be, int l, const tupe_dev *qkv,
                            int B, int T)
{
    if (pe->terms & TUPE_PE_DISENTANGLED)
        dis_scores(pe, be, l, qkv, B, T);
}

/* DeBERTa's backward of layer l: G (this layer's, then zeroed for the next) to the gathered
 * scores, to Q, K and the table's projections, to the layer's W_q, W_k and the table. */
static void dis_bwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                    tupe_dev *grads, int l, tupe_dev *dqkv, const tupe_dev *qkv, int B, int T,
                    const tupe_drop *drop)
{
    const tupe_config *c = &pe->cfg;
    int D = c->hidden_size, H = c->num_heads, dh = D / H, W = pe->dis_W, N = B * T;
    const tupe_layer_offsets *o = &y->layer[l];
    const tupe_dev *pqk = AT(pe->pqk, (size_t)l * pe->cap_W * 2 * D);
    be->dis_bias_bwd(be, pe->c2p, pe->p2c, pe->G, (const int32_t *)pe->dis_idx, B, T, H, W,
                     tupe_cfg_score_scale(c));
    be->zero(be, pe->G, (size_t)B * H * T * T * (size_t)(be->wsize / be->esize));
    for (int h = 0; h < H; h++) {
        size_t ho = (size_t)h * dh, co = (size_t)h * N * W;
        /* c2p: dQ_h += dC PK_h, dPK_h = dC^T Q_h; p2c: dK_h += dP PQ_h, dPQ_h = dP^T K_h */
        be->gemm(be, 0, 0, N, dh, W, 1, AT(pe->c2p, co), W, AT(pqk, D + ho), 2 * D, 1,
                 AT(dqkv, ho), 3 * D);
        be->gemm(be, 1, 0, W, dh, N, 1, AT(pe->c2p, co), W, AT(qkv, ho), 3 * D, 0,
                 AT(pe->dpqk, D + ho), 2 * D);
        be->gemm(be, 0, 0, N, dh, W, 1, AT(pe->p2c, co), W, AT(pqk, ho), 2 * D, 1,
                 AT(dqkv, D + ho), 3 * D);
        be->gemm(be, 1, 0, W, dh, N, 1, AT(pe->p2c, co), W, AT(qkv, D + ho), 3 * D, 0,
                 AT(pe->dpqk, ho), 2 * D);
    }
    int dropped = drop && drop->p > 0;
    be->linear_bwd(be, pe->drpd, 0, GRD(o->qkv_w), GRD(o->qkv_b), pe->dpqk,
                   dis_table(pe, be, drop), PAR(o->qkv_w), W, D, 2 * D);
    if (dropped)
        be->act_bwd(be, pe->drpd, NULL, pe->p_y, (size_t)W * D, TUPE_ACT_NONE, drop);
    be->add(be, pe->dpy, pe->drpd, (size_t)W * D, 1);
}

void tupe_posenc_qk_bwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y,
                        tupe_dev *params, tupe_dev *grads, int l, tupe_dev *dqkv,
                        const tupe_dev *qkv, int B, int T, const tupe_drop *drop)
{
    const tupe_config *c = &pe->cfg;
    if (pe->terms & TUPE_PE_DISENTANGLED)
        dis_bwd(pe, be, y, params, grads, l, dqkv, qkv, B, T, drop);
    if (pe->terms & TUPE_PE_ABS_QK)
        be->qk_pos_grad(be, pe->dpq, pe->dpk, dqkv, B, T, c->hidden_size);
    /* The rotation is orthogonal: the gradient before it is the gradient after, rotated back. */
    if (pe->terms & TUPE_PE_ROTATION)
        be->rope(be, dqkv, pe->rot, B, T, c->hidden_size, c->hidden_size / c->num_heads,
                 c->rope_layout == TUPE_ROPE_INTERLEAVED, 1);
}

void tupe_posenc_bwd(tupe_posenc *pe, tupe_backend *be, const tupe_layout *y, tupe_dev *params,
                     tupe_dev *grads, int T)
{
    const tupe_config *c = &pe->cfg;
    int D = c->hidden_size, H = c->num_heads, dh = D / H;
    if (pe->terms & TUPE_PE_DISENTANGLED)
        be->ln_bwd(be, AT(GRD(y->drel), (size_t)pe->dis_lo * D), 1, GRD(y->drel_ln_g),
                   GRD(y->drel_ln_b), pe->dpy, pe->p_xh, pe->p_rs, PAR(y->drel_ln_g), pe->dis_W,
                   D);
    if (pe->G && !(pe->terms & TUPE_PE_DISENTANGLED))
        be->pos_bias_bwd(be, tupe_cfg_tupe(c) ? pe->dA : NULL, GRD(y->rel), pe->G,
                         (const int32_t *)pe->buckets, pe->cap_seq, T, H, tupe_cfg_reset(c));
    if (!tupe_cfg_pos_proj(c))
        return;
    int R = tupe_cfg_tupe(c) ? T + 1 : T;
    if (tupe_cfg_tupe(c)) {
        double s = tupe_cfg_score_scale(c);
        for (int h = 0; h < H; h++) {
            tupe_dev *dA = AT(pe->dA, (size_t)h * R * R);
            be->gemm(be, 0, 0, R, dh, R, s, dA, R, AT(pe->pk, (size_t)h * dh), D, 0,
                     AT(pe->dpq, (size_t)h * dh), D);
            be->gemm(be, 1, 0, R, dh, R, s, dA, R, AT(pe->pq, (size_t)h * dh), D, 0,
                     AT(pe->dpk, (size_t)h * dh), D);
        }
    }
    be->linear_bwd(be, pe->dpy, 0, GRD(y->pos_q_w), GRD(y->pos_q_b), pe->dpq, pe->p_y,
                   PAR(y->pos_q_w), R, D, D);
    be->linear_bwd(be, pe->dpy, 1, GRD(y->pos_k_w), GRD(y->pos_k_b), pe->dpk, pe->p_y,
                   PAR(y->pos_k_w), R, D, D);
    be->ln_bwd(be, GRD(y->pos), 1, GRD(y->pos_ln_g), GRD(y->pos_ln_b), pe->dpy, pe->p_xh,
               pe->p_rs, PAR(y->pos_ln_g), R, D);
}
