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

/* ---- creation -------------------------------------------------------------------------------- */

void tupe_posenc_plan(tupe_posenc *pe, const tupe_config *c, int cap_seq, tupe_posenc_plan_fn fn,
                      void *ctx)
{
    memset(pe, 0, sizeof *pe);
    pe->cfg = *c;
    pe->terms = tupe_cfg_terms(c);
    pe->cap_seq = cap_seq;
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
    return 0;
}

const tupe_dev *tupe_posenc_bias(const tupe_posenc *pe) { return pe->bias; }

void tupe_posenc_qk(tupe_posenc *pe, tupe_backend *be, tupe_dev *qkv, int B, int T)
{
    const tupe_config *c = &pe->cfg;
    if (pe->terms & TUPE_PE_ABS_QK)
        be->qk_pos_add(be, qkv, pe->pq, pe->pk, B, T, c->hidden_size);
    if (pe->terms & TUPE_PE_ROTATION)
        be->rope(be, qkv, pe->rot, B, T, c->hidden_size, c->hidden_size / c->num_heads,
                 c->rope_layout == TUPE_ROPE_INTERLEAVED, 0);
}

/* ---- backward -------------------------------------------------------------------------------- */

void tupe_posenc_bwd_begin(tupe_posenc *pe, tupe_backend *be, int T)
{
    const tupe_config *c = &pe->cfg;
    size_t D = (size_t)c->hidden_size, H = (size_t)c->num_heads;
    if (pe->G) /* G is wide: zero it as wsize/esize real elements each */
        be->zero(be, pe->G, H * T * T * (size_t)(be->wsize / be->esize));
    if (pe->terms & TUPE_PE_ABS_QK) {
        be->zero(be, pe->dpq, (size_t)T * D);
        be->zero(be, pe->dpk, (size_t)T * D);
    }
}

tupe_dev *tupe_posenc_bias_acc(const tupe_posenc *pe)
{
    return pe->G;
}

void tupe_posenc_qk_bwd(tupe_posenc *pe, tupe_backend *be, tupe_dev *dqkv, int B, int T)
{
    const tupe_config *c = &pe->cfg;
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
    if (pe->G)
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
