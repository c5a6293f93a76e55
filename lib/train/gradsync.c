#include "train/gradsync.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* One step of the plan of the local sum: the micro-batch computed into slot `slot`, then
 * `adds` sums (slot[d-1] += slot[d], the top of the stack folded down). */
typedef struct leaf {
    int micro, slot, adds;
} leaf;

struct tupe_gradsync {
    tupe_model *m;
    tupe_backend *be;
    tupe_comm *c;
    int me, world, zero, k;      /* me: this rank's slot (train/comm.h) */
    size_t total, flat;
    leaf *plan;
    int depth;                   /* slots: 0 is the model's gradient buffer */
    tupe_dev **slot;
    size_t *cut;                 /* bucket j: [cut[j], cut[j+1]), nb of them */
    int nb;
    int next;                    /* buckets >= next have been sent this step */
    int last;                    /* the plan's index of the micro-batch now computed */
    int failed;
    tupe_err err;                /* the first error of a grad-ready call */
    size_t *ranges, nranges;     /* what this rank updates */
    size_t *pieces;              /* its slot's piece of every bucket (nb ranges) */
    int gathered, waited;        /* buckets whose parameters are gathered, and waited for */
};

/* The forward pass is about to read the parameters below hi: the compute stream waits for the
 * gathers of the buckets that hold them (and of those below), not for the others. An error
 * leaves the backend failed, which the forward pass reports. */
static void on_need(void *ctx, size_t hi)
{
    tupe_gradsync *g = ctx;
    tupe_err e;
    while (g->waited < g->gathered && g->cut[g->waited] < hi)
        if (tupe_comm_dev_after(g->c, g->be, g->waited++, &e))
            g->waited = g->gathered;
}

size_t tupe_gradsync_flat_multiple(int world)
{
    return (size_t)TUPE_GRADSYNC_RUN * (size_t)(world > 0 ? world : 1);
}

/* Post-order of the tree over leaves c, c+m, ... below k (pointwise.h). */
static void visit(tupe_gradsync *g, int c, int m, int *n, int *sp)
{
    if (c + m >= g->k) {
        g->plan[*n].micro = c;
        g->plan[*n].slot = (*sp)++;
        g->plan[*n].adds = 0;
        if (*sp > g->depth)
            g->depth = *sp;
        (*n)++;
        return;
    }
    visit(g, c, 2 * m, n, sp);
    visit(g, c + m, 2 * m, n, sp);
    g->plan[*n - 1].adds++;
    (*sp)--;
}

static size_t round_up(size_t x, size_t u) { return (x + u - 1) / u * u; }

int tupe_gradsync_create(tupe_gradsync **out, tupe_model *m, tupe_comm *c,
                         const tupe_gradsync_opts *o, tupe_err *e)
{
    *out = NULL;
    tupe_gradsync *g = calloc(1, sizeof *g);
    if (!g)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    g->m = m;
    g->be = tupe_model_backend(m);
    g->c = c;
    g->me = tupe_comm_slot(c);
    g->world = tupe_comm_world(c);
    g->zero = o->zero && g->world > 1;
    g->k = o->micro > 0 ? o->micro : 1;
    const tupe_layout *lay = tupe_model_layout(m);
    g->total = lay->total;
    g->flat = tupe_model_flat_size(m);
    size_t unit = tupe_gradsync_flat_multiple(g->world);
    int rc = 0;
    if (g->flat % unit)
        rc = tupe_fail(e, TUPE_EFAIL, "gradsync: the model's flat buffers (%zu) are not a "
                       "multiple of %zu", g->flat, unit);
    /* the plan and its slots */
    g->plan = calloc((size_t)g->k, sizeof *g->plan);
    if (!rc && !g->plan)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc) {
        int n = 0, sp = 0;
        visit(g, 0, 1, &n, &sp);
        g->slot = calloc((size_t)g->depth, sizeof *g->slot);
        if (!g->slot)
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    if (!rc) {
        g->slot[0] = tupe_model_grads(m);
        for (int d = 1; d < g->depth && !rc; d++)
            if (!(g->slot[d] = g->be->alloc(g->be, g->flat * (size_t)g->be->esize)))
                rc = tupe_fail(e, TUPE_EFAIL, "out of memory for the sums of %d micro-batches "
                               "(%.1f MiB)", g->k, (double)g->flat * g->be->esize / (1 << 20));
    }
    /* buckets: cut where a layer or the heads begin, rounded up to whole units, merged from
     * the top down until each holds about bucket_bytes */
    size_t want = (o->bucket_bytes ? o->bucket_bytes : (size_t)25 << 20) / (size_t)g->be->esize;
    g->cut = malloc(((size_t)tupe_model_config(m)->num_layers + 3) * sizeof *g->cut);
    if (!rc && !g->cut)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc) {
        const tupe_config *cfg = tupe_model_config(m);
        size_t cap = (size_t)cfg->num_layers + 2;
        size_t *desc = malloc(cap * sizeof *desc), *cuts = malloc((cap + 1) * sizeof *cuts);
        if (!desc || !cuts) {
            rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        } else {
            size_t nd = tupe_model_grad_groups(m, desc, cap), ncut = 0;
            cuts[ncut++] = g->flat;
            for (size_t i = 0; i < nd; i++) {
                size_t b = round_up(desc[i], unit);
                if (b < cuts[ncut - 1] && (b == 0 || cuts[ncut - 1] - b >= want))
                    cuts[ncut++] = b;
            }
            if (cuts[ncut - 1] != 0)
                cuts[ncut++] = 0;
            for (size_t i = 0; i < ncut; i++) /* ascending */
                g->cut[i] = cuts[ncut - 1 - i];
            g->nb = (int)ncut - 1;
        }
        free(desc);
        free(cuts);
    }
    /* this rank's pieces: what it sums (of the norm too) and, under ZeRO-1, updates */
    g->ranges = malloc((size_t)(g->nb ? g->nb : 1) * 2 * sizeof *g->ranges);
    g->pieces = malloc((size_t)(g->nb ? g->nb : 1) * 2 * sizeof *g->pieces);
    if (!rc && (!g->ranges || !g->pieces))
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc) {
        for (int j = 0; j < g->nb; j++) {
            size_t piece = (g->cut[j + 1] - g->cut[j]) / (size_t)g->world;
            g->pieces[2 * j] = g->cut[j] + (size_t)g->me * piece;
            g->pieces[2 * j + 1] = g->cut[j] + (size_t)(g->me + 1) * piece;
        }
        if (g->zero) {
            memcpy(g->ranges, g->pieces, (size_t)g->nb * 2 * sizeof *g->ranges);
            g->nranges = (size_t)g->nb;
        } else {
            g->ranges[0] = 0;
            g->ranges[1] = g->flat;
            g->nranges = 1;
        }
    }
    if (rc) {
        tupe_gradsync_free(g);
        return rc;
    }
    if (g->zero)
        tupe_model_on_params_need(m, on_need, g);
    *out = g;
    return 0;
}

void tupe_gradsync_free(tupe_gradsync *g)
{
    if (!g)
        return;
    if (g->m) {
        on_need(g, g->flat); /* the memory the gathers write is freed after */
        tupe_model_grad_target(g->m, NULL);
        tupe_model_on_grad_ready(g->m, NULL, NULL);
        tupe_model_on_params_need(g->m, NULL, NULL);
    }
    for (int d = 1; g->slot && d < g->depth; d++)
        if (g->slot[d])
            g->be->free(g->be, g->slot[d]);
    free(g->slot);
    free(g->plan);
    free(g->cut);
    free(g->ranges);
    free(g->pieces);
    free(g);
}

const size_t *tupe_gradsync_ranges(const tupe_gradsync *g, size_t *n)
{
    *n = g->nranges;
    return g->ranges;
}

int tupe_gradsync_buckets(const tupe_gradsync *g) { return g->nb; }

int tupe_gradsync_order(const tupe_gradsync *g, int i) { return g->plan[i].micro; }

/* Bucket j: the last micro-batch's sums added, then sent (and, unsharded, gathered). */
static int send_bucket(tupe_gradsync *g, int j, tupe_err *e)
{
    tupe_backend *be = g->be;
    size_t lo = g->cut[j], hi = g->cut[j + 1];
    size_t top = hi < g->total ? hi : g->total;
    const leaf *L = &g->plan[g->k - 1];
    for (int a = 0, d = L->slot; a < L->adds; a++, d--)
        if (top > lo)
            be->add(be, tupe_dev_at(be, g->slot[d - 1], lo), tupe_dev_at(be, g->slot[d], lo),
                    top - lo, 1);
    tupe_dev *buf = tupe_dev_at(be, tupe_model_grads(g->m), lo);
    size_t piece = (hi - lo) / (size_t)g->world;
    return g->zero ? tupe_comm_dev_reduce(g->c, be, buf, piece, e)
                   : tupe_comm_dev_allreduce(g->c, be, buf, piece, e);
}

/* model.h's grad-ready call of the last micro-batch: the buckets from lo up, top first. */
static void on_ready(void *ctx, size_t lo)
{
    tupe_gradsync *g = ctx;
    while (!g->failed && g->next > 0 && g->cut[g->next - 1] >= lo) {
        g->next--;
        if (send_bucket(g, g->next, &g->err))
            g->failed = 1;
    }
}

int tupe_gradsync_begin(tupe_gradsync *g, int i, tupe_err *e)
{
    (void)e;
    const leaf *L = &g->plan[i];
    g->last = i;
    if (i == 0) {
        g->next = g->nb;
        g->failed = 0;
    }
    tupe_dev *dst = g->slot[L->slot];
    g->be->zero(g->be, dst, g->total);
    tupe_model_grad_target(g->m, dst);
    tupe_model_on_grad_ready(g->m, i == g->k - 1 ? on_ready : NULL, g);
    return 0;
}

int tupe_gradsync_end(tupe_gradsync *g, int i, tupe_err *e)
{
    const leaf *L = &g->plan[i];
    tupe_model_grad_target(g->m, NULL);
    tupe_model_on_grad_ready(g->m, NULL, NULL);
    if (g->failed) {
        *e = g->err;
        return e->code ? e->code : TUPE_EFAIL;
    }
    if (i == g->k - 1)
        return 0; /* its sums go bucket by bucket */
    for (int a = 0, d = L->slot; a < L->adds; a++, d--)
        g->be->add(g->be, g->slot[d - 1], g->slot[d], g->total, 1);
    return 0;
}

int tupe_gradsync_finish(tupe_gradsync *g, const tupe_dev *dvals, size_t ndv, double *vals,
                         size_t nvals, double *norm, tupe_err *e)
{
    tupe_backend *be = g->be;
    int rc = 0;
    /* the last step's gathers, where no forward pass waited for them (no micro-batch of this
     * rank had anything to learn from): before this rank's update changes its pieces */
    on_need(g, g->flat);
    while (!rc && g->next > 0) /* the buckets no grad-ready call sent (a skipped micro-batch) */
        rc = send_bucket(g, --g->next, e);
    if (rc || (rc = tupe_comm_dev_join(g->c, be, e)))
        return rc;
    /* every rank its pieces, sharded or not: each run's sum from one rank, exact */
    double s = 0;
    if ((rc = tupe_comm_dev_sums(g->c, be, tupe_model_grads(g->m), g->pieces, (size_t)g->nb,
                                 g->flat, TUPE_GRADSYNC_RUN, dvals, ndv, vals, nvals, &s, e)))
        return rc;
    *norm = sqrt(s);
    return 0;
}

int tupe_gradsync_share(tupe_gradsync *g, tupe_err *e)
{
    if (!g->zero)
        return 0;
    /* from the embeddings up, in the order the next forward pass needs them, each bucket
     * marked; that pass waits for each as it comes to it (on_need) */
    tupe_backend *be = g->be;
    tupe_dev *p = tupe_model_params(g->m);
    int rc = 0;
    g->gathered = g->waited = 0;
    for (int j = 0; j < g->nb && !rc; j++) {
        rc = tupe_comm_dev_gather(g->c, be, tupe_dev_at(be, p, g->cut[j]),
                                  (g->cut[j + 1] - g->cut[j]) / (size_t)g->world, 0, e);
        if (!rc && !(rc = tupe_comm_dev_mark(g->c, be, j, e)))
            g->gathered = j + 1;
    }
    return rc;
}

int tupe_gradsync_gather_state(tupe_gradsync *g, tupe_adamw *o, float **moments, tupe_err *e)
{
    *moments = NULL;
    if (!g->zero)
        return 0;
    tupe_backend *be = g->be;
    tupe_dev *w = tupe_model_master(g->m);
    int rc = 0;
    for (int j = 0; j < g->nb && w && !rc; j++)
        rc = tupe_comm_dev_gather(g->c, be, tupe_dev_wat(be, w, g->cut[j]),
                                  (g->cut[j + 1] - g->cut[j]) / (size_t)g->world, 1, e);
    if (rc || (rc = tupe_comm_dev_join(g->c, be, e)))
        return rc;
    float *h = calloc(2 * g->flat, sizeof *h), *out = malloc(2 * g->total * sizeof *out);
    if (!h || !out) {
        free(h), free(out);
        return tupe_fail(e, TUPE_EFAIL, "out of memory for the optimizer state");
    }
    tupe_adamw_moments_get(o, h, h + g->flat);
    for (int k = 0; k < 2 && !rc; k++)
        for (int j = 0; j < g->nb && !rc; j++) {
            size_t piece = (g->cut[j + 1] - g->cut[j]) / (size_t)g->world;
            rc = tupe_comm_gather_slots_f32(g->c, h + (size_t)k * g->flat + g->cut[j], piece, e);
        }
    if (!rc) {
        memcpy(out, h, g->total * sizeof *out);
        memcpy(out + g->total, h + g->flat, g->total * sizeof *out);
        *moments = out;
    } else {
        free(out);
    }
    free(h);
    return rc;
}

int tupe_gradsync_join(tupe_gradsync *g, tupe_err *e)
{
    on_need(g, g->flat);
    return g->be->check ? g->be->check(g->be, e) : 0;
}
