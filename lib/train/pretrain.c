#include "train/pretrain.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/blas.h"
#include "backend/pointwise.h"
#include "base/checksum.h"
#include "base/fault.h"
#include "base/fileio.h"
#include "base/progress.h"
#include "data/shardread.h"
#include "model/checkpoint.h"
#include "model/electra.h"
#include "model/model.h"
#include "train/gradsync.h"
#include "train/masking.h"
#include "train/rundir.h"
#include "train/rtdmetrics.h"
#include "train/rtdprobe.h"

void tupe_pretrain_defaults(tupe_pretrain_opts *o)
{
    memset(o, 0, sizeof *o);
    o->model = NULL; /* bert-base, or the configuration of --checkpoint */
    o->untie_cls = -1;
    o->dropout = o->attention_dropout = -1;
    o->steps = 1000000;
    o->warmup = 10000;
    o->batch = 256;
    o->lr = 1e-4;
    o->end_lr = 0;
    o->power = 1;
    tupe_adamw_defaults(&o->adam);
    o->seed = 1;
    o->mask_prob = 0.15;
    o->mask_frac = 0.8;
    o->random_frac = 0.1;
    o->log_every = 100;
    o->eval_every = 10000;
    o->save_every = 10000;
    o->keep_last = 3;
    o->prefetch = 2;
    o->zero = 1;
    o->bucket_mb = 25;
    o->rtd_weight = TUPE_ELECTRA_RTD_WEIGHT;
}

/* ---- checkpoints of a run ----------------------------------------------------------------- */

static int is_keep_step(const tupe_pretrain_opts *o, int64_t step)
{
    for (int k = 0; k < o->n_keep_steps; k++)
        if (o->keep_steps[k] == step)
            return 1;
    return 0;
}

/* ---- state shared by training and evaluation ------------------------------------------------ */

typedef struct run {
    const tupe_pretrain_opts *o;
    tupe_comm *comm;
    int rank, world;
    int slot;                    /* which sequences of a batch it reads (train/comm.h) */
    tupe_model *m;
    tupe_config cfg;
    const tupe_shard_meta *meta;
    uint32_t seq_len;
    uint32_t crop;               /* evaluation: the first `crop` tokens of every sequence (0: all) */
    int mb;                      /* sequences per forward pass */
    int mrows;                   /* the masked-LM head's rows in every batch (tupe_batch.rows) */
    tupe_mask_cfg mask;
    int32_t *rand_ids;
    int electra;                 /* the model is an ELECTRA pair */
    int32_t specials[4];         /* ELECTRA's masking: ids never masked */
    int nspecial, mask_cap;
    uint64_t *keys, *b_keys;     /* each row's stored index: names its sampling noise */
    tupe_rtdprobe *probe;           /* evaluation on a given probe: its sequences, not the split's */
    tupe_rtdprobe_writer *pw;       /* evaluation writing the probe it scores */
    int32_t *pids, *plab;        /* the probe's rows: the discriminator's input and labels */
    int32_t *b_pids, *b_plab;    /* and packed for the model */
    /* the sequences of one step on this rank (row i = sequence i) */
    int32_t *ids, *lengths, *mcount, *mpos, *mlab;
    /* one micro-batch, packed for the model */
    int32_t *b_ids, *b_pos, *b_lab, *b_len;
    uint32_t *seq;
} run;

static int alloc_buffers(run *r, int nseq, tupe_err *e)
{
    size_t n = (size_t)nseq * r->seq_len, nb = (size_t)r->mb * r->seq_len;
    r->ids = malloc(n * sizeof *r->ids);
    r->mpos = malloc(n * sizeof *r->mpos);
    r->mlab = malloc(n * sizeof *r->mlab);
    r->lengths = malloc((size_t)nseq * sizeof *r->lengths);
    r->mcount = malloc((size_t)nseq * sizeof *r->mcount);
    r->b_ids = malloc(nb * sizeof *r->b_ids);
    r->b_pos = malloc(nb * sizeof *r->b_pos);
    r->b_lab = malloc(nb * sizeof *r->b_lab);
    r->b_len = malloc((size_t)r->mb * sizeof *r->b_len);
    r->seq = malloc(r->seq_len * sizeof *r->seq);
    r->keys = malloc((size_t)nseq * sizeof *r->keys);
    r->b_keys = malloc((size_t)r->mb * sizeof *r->b_keys);
    if (!r->ids || !r->mpos || !r->mlab || !r->lengths || !r->mcount || !r->b_ids || !r->b_pos ||
        !r->b_lab || !r->b_len || !r->seq || !r->keys || !r->b_keys)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (r->probe) {
        r->pids = malloc(n * sizeof *r->pids);
        r->plab = malloc(n * sizeof *r->plab);
        r->b_pids = malloc(nb * sizeof *r->b_pids);
        r->b_plab = malloc(nb * sizeof *r->b_plab);
        if (!r->pids || !r->plab || !r->b_pids || !r->b_plab)
            return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    return 0;
}

static void free_run(run *r)
{
    free(r->ids), free(r->mpos), free(r->mlab), free(r->lengths), free(r->mcount);
    free(r->b_ids), free(r->b_pos), free(r->b_lab), free(r->b_len), free(r->seq), free(r->rand_ids);
    free(r->keys), free(r->b_keys);
    free(r->pids), free(r->plab), free(r->b_pids), free(r->b_plab);
    tupe_rtdprobe_free(r->probe);
    tupe_rtdprobe_abort(r->pw);
    tupe_model_free(r->m);
    r->m = NULL;
}

/* Random replacement tokens: every id but the special ones. */
static int mask_setup(run *r, tupe_err *e)
{
    const int32_t *sp = r->meta->special;
    if (sp[TUPE_SP_MASK] < 0)
        return tupe_fail(e, TUPE_EDATA, "%s: the shards record no [MASK] id (the vocabulary has "
                         "no mask token)", r->o->data);
    uint32_t V = r->meta->vocab_size;
    r->rand_ids = malloc(V * sizeof *r->rand_ids);
    if (!r->rand_ids)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t n = 0;
    for (uint32_t i = 0; i < V; i++) {
        int special = 0;
        for (int k = 0; k < TUPE_SP_COUNT; k++)
            special |= sp[k] == (int32_t)i;
        if (!special)
            r->rand_ids[n++] = (int32_t)i;
    }
    tupe_mask_cfg mc = {r->o->seed, r->o->mask_prob, r->o->mask_frac, r->o->random_frac,
                        sp[TUPE_SP_MASK], r->rand_ids, n};
    r->mask = mc;
    r->electra = tupe_cfg_pair(&r->cfg);
    if (r->electra) {
        /* ELECTRA: 85% [MASK], 15% kept, no random token; [CLS], [SEP], [MASK] and [PAD]
         * never chosen; at most max_predictions_per_seq = int((p + 0.005) T) per sequence */
        r->mask.mask_frac = 0.85;
        r->mask.random_frac = 0;
        static const int which[4] = {TUPE_SP_CLS, TUPE_SP_SEP, TUPE_SP_MASK, TUPE_SP_PAD};
        r->nspecial = 0;
        for (int k = 0; k < 4; k++)
            if (sp[which[k]] >= 0)
                r->specials[r->nspecial++] = sp[which[k]];
        r->mask_cap = (int)((r->o->mask_prob + 0.005) * r->seq_len);
    }
    return 0;
}

/* Read and mask up to `count` sequences of this rank (row i = sequence i). Returns how many
 * were read (fewer only at the end of the split), or -1. */
static int read_masked(run *r, tupe_shardr *rd, uint32_t epoch, int count, int64_t *masked,
                       int64_t *tokens, tupe_err *e)
{
    int got = 0;
    for (int i = 0; i < count; i++) {
        uint32_t len;
        uint64_t index;
        int rc = tupe_shardr_next(rd, r->seq, &len, &index, e);
        if (rc < 0)
            return -1;
        if (rc == 0)
            break;
        int32_t *row = r->ids + (size_t)i * r->seq_len;
        for (uint32_t t = 0; t < r->seq_len; t++)
            row[t] = (int32_t)r->seq[t];
        if (r->crop && len > r->crop)
            len = r->crop;
        r->lengths[i] = (int32_t)len;
        r->keys[i] = index;
        r->mcount[i] = r->electra
            ? tupe_mask_electra(&r->mask, r->specials, r->nspecial, r->mask_cap, epoch, index, row,
                                (int)len, r->mpos + (size_t)i * r->seq_len,
                                r->mlab + (size_t)i * r->seq_len)
            : tupe_mask_sample(&r->mask, epoch, index, row, (int)len,
                               r->mpos + (size_t)i * r->seq_len, r->mlab + (size_t)i * r->seq_len);
        *masked += r->mcount[i];
        *tokens += len;
        got++;
    }
    return got;
}

/* The same from the probe: its sequences first + world k (this rank's), from the k-th. */
static int read_probe(run *r, int64_t k, int count)
{
    const tupe_rtdprobe *p = r->probe;
    int got = 0;
    for (uint64_t j = (uint64_t)r->slot + (uint64_t)k * (uint64_t)r->world;
         got < count && j < p->count; j += (uint64_t)r->world, got++) {
        size_t row = (size_t)got * r->seq_len;
        uint32_t len = p->len[j];
        tupe_rtdprobe_inputs(p, j, r->ids + row, NULL);
        memcpy(r->pids + row, p->ids + p->tok[j], len * sizeof *r->pids);
        memcpy(r->plab + row, p->label + p->tok[j], len * sizeof *r->plab);
        r->lengths[got] = (int32_t)len;
        r->keys[got] = p->key[j];
        r->mcount[got] = (int32_t)p->nmask[j];
        memcpy(r->mpos + row, p->mpos + p->msk[j], p->nmask[j] * sizeof *r->mpos);
        memcpy(r->mlab + row, p->morig + p->msk[j], p->nmask[j] * sizeof *r->mlab);
    }
    return got;
}

/* The rows of the last batch b into the probe being written: what the discriminator read. */
static int write_probe(run *r, const tupe_batch *b, tupe_err *e)
{
    tupe_electra *pair = tupe_model_pair(r->m);
    const int32_t *cor = tupe_electra_corrupted(pair), *lab = tupe_electra_labels(pair);
    int rc = 0;
    for (int i = 0; !rc && i < b->B; i++) {
        size_t row = (size_t)i * r->seq_len, at = (size_t)i * (size_t)b->T;
        rc = tupe_rtdprobe_add(r->pw, r->keys[i], (uint32_t)b->lengths[i], cor + at, lab + at,
                            (uint32_t)r->mcount[i], r->mpos + row, r->mlab + row, r->ids + row, e);
    }
    return rc;
}

/* Pack rows first, first + stride, ... (n of them) into a model batch padded to the longest of
 * them. */
static void make_batch(run *r, int first, int n, int stride, tupe_batch *b)
{
    int T = 1;
    for (int i = 0; i < n; i++) {
        r->b_len[i] = r->lengths[first + i * stride];
        T = r->b_len[i] > T ? r->b_len[i] : T;
    }
    int M = 0;
    for (int i = 0; i < n; i++) {
        size_t row = (size_t)(first + i * stride);
        r->b_keys[i] = r->keys[row];
        memcpy(r->b_ids + (size_t)i * (size_t)T, r->ids + row * r->seq_len, (size_t)T * sizeof *r->ids);
        const int32_t *mp = r->mpos + row * r->seq_len;
        const int32_t *ml = r->mlab + row * r->seq_len;
        for (int k = 0; k < r->mcount[row]; k++) {
            r->b_pos[M] = i * T + mp[k];
            r->b_lab[M++] = ml[k];
        }
    }
    /* the head over the same rows every step (a CUDA graph's fixed shapes), M of them real */
    int rows = M > r->mrows ? M : r->mrows;
    for (int k = M; k < rows; k++)
        r->b_pos[k] = r->b_lab[k] = -1;
    memset(b, 0, sizeof *b);
    b->B = n;
    b->T = T;
    b->ids = r->b_ids;
    b->lengths = r->b_len;
    b->M = M;
    b->rows = rows;
    b->mask_pos = r->b_pos;
    b->mask_label = r->b_lab;
    b->noise_key = r->b_keys;
    b->noise_seed = r->o->seed;
    b->rtd_weight = r->o->rtd_weight;
    if (r->probe) { /* the given corruption; padding as the generator's input */
        for (int i = 0; i < n; i++) {
            size_t row = (size_t)(first + i * stride) * r->seq_len, at = (size_t)i * (size_t)T;
            memcpy(r->b_pids + at, r->b_ids + at, (size_t)T * sizeof *r->b_pids);
            memset(r->b_plab + at, 0, (size_t)T * sizeof *r->b_plab);
            memcpy(r->b_pids + at, r->pids + row, (size_t)r->b_len[i] * sizeof *r->b_pids);
            memcpy(r->b_plab + at, r->plab + row, (size_t)r->b_len[i] * sizeof *r->b_plab);
        }
        b->probe_ids = r->b_pids;
        b->probe_labels = r->b_plab;
    }
}

static int open_reader(run *r, tupe_shardr **rd, int split, int shuffle, tupe_err *e)
{
    tupe_shardr_opts so;
    tupe_shardr_opts_init(&so);
    so.split = split;
    so.rank = (uint32_t)r->slot;
    so.world = (uint32_t)r->world;
    so.shuffle = shuffle;
    so.seed = r->o->seed;
    so.prefetch = r->o->prefetch;
    return tupe_shardr_open(rd, r->o->data, &so, e);
}

/* Mean loss and accuracy on the validation split with the fixed evaluation masks. */
/* Add the cross-entropy of every masked position of the last forward pass to its bucket of
 * w positions (sums[2k] loss, sums[2k+1] count), from the logits (in double). */
static int bucket_losses(run *r, const tupe_batch *b, int w, double *sums, tupe_err *e)
{
    int V = r->cfg.vocab_size;
    size_t n = (size_t)b->M * V;
    float *lg = malloc(n * sizeof *lg);
    if (!lg)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    /* an ELECTRA pair: its generator's masked-LM logits */
    tupe_electra *pair = tupe_model_pair(r->m);
    int rc = tupe_model_probe(pair ? tupe_electra_generator(pair) : r->m, TUPE_PROBE_LOGITS, 0,
                              lg, n, e);
    for (int k = 0; !rc && k < b->M; k++) {
        const float *x = lg + (size_t)k * V;
        double mx = x[0], s = 0;
        for (int v = 1; v < V; v++)
            mx = x[v] > mx ? x[v] : mx;
        for (int v = 0; v < V; v++)
            s += exp(x[v] - mx);
        int bk = (b->mask_pos[k] % b->T) / w;
        sums[2 * bk] += mx + log(s) - x[b->mask_label[k]];
        sums[2 * bk + 1] += 1;
    }
    free(lg);
    return rc;
}

/* The discriminator's scores and labels of the last forward pass's non-padding tokens,
 * appended to *sc and *lb (n of cap). */
typedef struct rtd_probe {
    double *sc;
    int32_t *lb;
    size_t n, cap;
    float *buf;
} rtd_probe;

static int rtd_collect(run *r, const tupe_batch *b, rtd_probe *p, tupe_err *e)
{
    tupe_electra *pair = tupe_model_pair(r->m);
    size_t N = (size_t)b->B * (size_t)b->T;
    float *buf = realloc(p->buf, N * sizeof *buf);
    if (!buf)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    p->buf = buf;
    int rc = tupe_electra_scores(pair, buf, N, e);
    if (rc)
        return rc;
    const int32_t *lab = tupe_electra_labels(pair);
    for (int i = 0; i < b->B; i++)
        for (int t = 0; t < b->lengths[i]; t++) {
            if (p->n == p->cap) {
                size_t c = p->cap ? 2 * p->cap : 4096;
                double *s2 = realloc(p->sc, c * sizeof *s2);
                if (s2)
                    p->sc = s2;
                int32_t *l2 = s2 ? realloc(p->lb, c * sizeof *l2) : NULL;
                if (!l2)
                    return tupe_fail(e, TUPE_EFAIL, "out of memory");
                p->lb = l2;
                p->cap = c;
            }
            p->sc[p->n] = buf[(size_t)i * b->T + t];
            p->lb[p->n++] = lab[(size_t)i * b->T + t];
        }
    return 0;
}

/* AUC, precision and recall over every rank's tokens: each rank's put at its place (its
 * slot's offset) in one array that a sum over the ranks fills. */
static int rtd_finish(run *r, const rtd_probe *p, tupe_eval_result *res, tupe_err *e)
{
    int W = r->world;
    double *cnt = calloc((size_t)W, sizeof *cnt);
    if (!cnt)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    cnt[r->slot] = (double)p->n;
    int rc = W > 1 ? tupe_comm_allreduce_f64(r->comm, cnt, (size_t)W, e) : 0;
    size_t off = 0, total = 0;
    for (int k = 0; k < W; k++) {
        off += k < r->slot ? (size_t)cnt[k] : 0;
        total += (size_t)cnt[k];
    }
    free(cnt);
    if (rc)
        return rc;
    double *all = calloc(2 * (total ? total : 1), sizeof *all);
    int32_t *lb = malloc((total ? total : 1) * sizeof *lb);
    if (!all || !lb) {
        free(all), free(lb);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    for (size_t i = 0; i < p->n; i++) {
        all[off + i] = p->sc[i];
        all[total + off + i] = p->lb[i];
    }
    if (W > 1 && (rc = tupe_comm_allreduce_f64(r->comm, all, 2 * total, e))) {
        free(all), free(lb);
        return rc;
    }
    for (size_t i = 0; i < total; i++)
        lb[i] = all[total + i] != 0;
    tupe_rtd_metrics m;
    if (tupe_rtd_metrics_of(all, lb, total, &m))
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    res->rtd_auc = m.auc, res->rtd_precision = m.precision, res->rtd_recall = m.recall;
    free(all), free(lb);
    return rc;
}

static int evaluate(run *r, int64_t limit, tupe_eval_result *res, tupe_err *e)
{
    int w = r->o->eval_bucket, T = (int)(r->crop ? r->crop : r->seq_len);
    int nb = w > 0 ? (T + w - 1) / w : 0;
    if (nb > TUPE_EVAL_MAX_BUCKETS)
        return tupe_fail(e, TUPE_EUSAGE, "%d buckets of %d positions: at most %d", nb, w,
                         TUPE_EVAL_MAX_BUCKETS);
    double bsums[2 * TUPE_EVAL_MAX_BUCKETS] = {0};
    memset(res, 0, sizeof *res);
    res->seq_len = T;
    res->nbuckets = nb;
    if (!r->probe && r->meta->split[TUPE_SPLIT_VALID].sequences == 0)
        return 0;
    tupe_shardr *rd = NULL;
    int rc = r->probe ? 0 : open_reader(r, &rd, TUPE_SPLIT_VALID, 0, e);
    if (rc)
        return rc;
    uint64_t n = r->probe ? r->probe->count : tupe_shardr_size(rd);
    if (limit > 0 && (uint64_t)limit < n)
        n = (uint64_t)limit;
    /* This rank's positions below n: its slot s, s + W, ... */
    uint64_t s = (uint64_t)r->slot;
    int64_t mine = n > s ? (int64_t)((n - s + (uint64_t)r->world - 1) / (uint64_t)r->world) : 0;
    double sums[7] = {0}; /* loss, correct, masked; ELECTRA: rtd loss, correct, tokens, replaced */
    uint64_t seqs = 0;
    /* the passes' losses and correct predictions add up on the device, read at the end */
    tupe_backend *be = tupe_model_backend(r->m);
    tupe_dev *dsum = be->alloc(be, TUPE_NSUMS * sizeof(double));
    if (!dsum) {
        tupe_shardr_close(rd);
        return tupe_fail(e, TUPE_EFAIL, "out of device memory for the validation's sums");
    }
    tupe_model_sums_target(r->m, dsum, 1);
    rtd_probe probe = {NULL, NULL, 0, 0, NULL};
    for (int64_t done = 0; done < mine;) {
        int want = (int)(mine - done < r->mb ? mine - done : r->mb);
        int64_t masked = 0, tokens = 0;
        int got = r->probe ? read_probe(r, done, want)
                           : read_masked(r, rd, TUPE_MASK_EVAL_EPOCH, want, &masked, &tokens, e);
        if (got < 0) {
            rc = e->code;
            break;
        }
        if (got == 0)
            break;
        tupe_batch b;
        make_batch(r, 0, got, 1, &b);
        b.noise_step = TUPE_MASK_EVAL_EPOCH; /* fixed noise: comparable across checkpoints */
        if (b.M > 0 || r->electra) {
            tupe_fwd_out out;
            if ((rc = tupe_model_forward(r->m, &b, NULL, &out, e)))
                break;
            sums[2] += (double)out.count;
            sums[5] += (double)out.rtd_count;
            sums[6] += (double)out.rtd_replaced;
            if ((nb && (rc = bucket_losses(r, &b, w, bsums, e))) ||
                (r->electra && (rc = rtd_collect(r, &b, &probe, e))) ||
                (r->pw && (rc = write_probe(r, &b, e))))
                break;
        }
        seqs += (uint64_t)got;
        done += got;
    }
    tupe_shardr_close(rd);
    tupe_model_sums_target(r->m, NULL, 0);
    double ds[TUPE_NSUMS];
    be->download(be, ds, dsum, TUPE_NSUMS, TUPE_DBL);
    be->free(be, dsum);
    if (!rc && be->check)
        rc = be->check(be, e);
    if (rc) {
        free(probe.sc), free(probe.lb), free(probe.buf);
        return rc;
    }
    sums[0] = ds[TUPE_SUM_LOSS];
    sums[1] = ds[TUPE_SUM_CORRECT];
    sums[3] = ds[TUPE_SUM_RTD_LOSS];
    sums[4] = ds[TUPE_SUM_RTD_CORRECT];
    if ((rc = tupe_comm_allreduce_f64(r->comm, sums, 7, e)) ||
        (rc = tupe_comm_allreduce_u64(r->comm, &seqs, 1, e)) ||
        (nb && (rc = tupe_comm_allreduce_f64(r->comm, bsums, (size_t)2 * nb, e))) ||
        (r->electra && (rc = rtd_finish(r, &probe, res, e)))) {
        free(probe.sc), free(probe.lb), free(probe.buf);
        return rc;
    }
    free(probe.sc), free(probe.lb), free(probe.buf);
    for (int k = 0; k < nb; k++) {
        res->bucket_masked[k] = (int64_t)bsums[2 * k + 1];
        res->bucket_loss[k] = bsums[2 * k + 1] > 0 ? bsums[2 * k] / bsums[2 * k + 1] : NAN;
    }
    res->masked = (int64_t)sums[2];
    res->sequences = (int64_t)seqs;
    res->loss = sums[2] > 0 ? sums[0] / sums[2] : NAN;
    res->acc = sums[2] > 0 ? sums[1] / sums[2] : NAN;
    res->electra = r->electra;
    if (r->electra) {
        res->tokens = (int64_t)sums[5];
        res->rtd_loss = sums[5] > 0 ? sums[3] / sums[5] : NAN;
        res->rtd_acc = sums[5] > 0 ? sums[4] / sums[5] : NAN;
        res->replaced = sums[5] > 0 ? sums[6] / sums[5] : NAN;
    }
    return 0;
}

/* ---- configuration ------------------------------------------------------------------------ */

/* --position and --tie-cls / --untie-cls. */
static int apply_variant(const tupe_pretrain_opts *o, tupe_config *c, tupe_err *e)
{
    if (o->position) {
        int p = tupe_position_parse(o->position);
        if (p < 0)
            return tupe_fail(e, TUPE_EUSAGE, "unknown position variant '%s'", o->position);
        c->position = p;
    }
    if (o->untie_cls >= 0)
        c->untie_cls = o->untie_cls;
    return 0;
}

/* The configuration of the resumed or evaluated checkpoint `ckpt`; else --model; else that of
 * the --checkpoint the weights come from; else bert-base. */
static int resolve_config(run *r, const char *ckpt, tupe_err *e)
{
    const tupe_pretrain_opts *o = r->o;
    int rc = ckpt ? tupe_ckpt_config(ckpt, &r->cfg, e)
             : !o->model && o->init ? tupe_ckpt_config(o->init, &r->cfg, e)
             : tupe_config_load(&r->cfg, o->model ? o->model : "bert-base", e);
    if (rc)
        return rc;
    if (ckpt && r->cfg.num_labels > 0) /* a tupe-glue checkpoint: its head replaced the MLM head */
        return tupe_fail(e, TUPE_EDATA, "%s is a fine-tuned classifier (%d labels): it has no "
                         "masked-LM head", ckpt, r->cfg.num_labels);
    if (!ckpt) {
        if ((rc = apply_variant(o, &r->cfg, e)))
            return rc;
        r->cfg.num_labels = 0;
        if (o->objective == TUPE_OBJ_ELECTRA && !tupe_cfg_pair(&r->cfg))
            r->cfg.generator_hidden_size = o->generator_size > 0
                                               ? o->generator_size
                                               : tupe_electra_default_fraction(r->cfg.hidden_size);
        else if (o->objective == TUPE_OBJ_MLM && tupe_cfg_pair(&r->cfg))
            return tupe_fail(e, TUPE_EUSAGE, "%s is an ELECTRA generator and discriminator: "
                             "continue it with --objective electra", o->init ? o->init : o->model);
    } else if (tupe_cfg_pair(&r->cfg) != (o->objective == TUPE_OBJ_ELECTRA) && r->o->out) {
        return tupe_fail(e, TUPE_EUSAGE, "%s was trained with --objective %s: --resume continues "
                         "the run's objective", ckpt, tupe_cfg_pair(&r->cfg) ? "electra" : "mlm");
    } else if (o->model || o->position || o->untie_cls >= 0) {
        /* --resume continues the run's own model: options that ask for another are refused
         * rather than ignored. */
        tupe_config want = r->cfg;
        char field[64];
        if ((o->model && (rc = tupe_config_load(&want, o->model, e))) || (rc = apply_variant(o, &want, e)))
            return rc;
        if (o->model && tupe_cfg_pair(&r->cfg) && !tupe_cfg_pair(&want))
            want.generator_hidden_size = o->generator_size > 0 ? o->generator_size
                                         : tupe_electra_default_fraction(want.hidden_size);
        if (want.vocab_size == 0)
            want.vocab_size = r->cfg.vocab_size;
        if (!tupe_config_same_encoder(&want, &r->cfg, field, sizeof field)) {
            if (strcmp(field, "position") == 0)
                return tupe_fail(e, TUPE_EUSAGE, "%s is a %s model, not %s: --resume continues the "
                                 "run's model", ckpt, tupe_position_name(r->cfg.position),
                                 tupe_position_name(want.position));
            return tupe_fail(e, TUPE_EUSAGE, "%s: its %s differs from the one --model, --position or "
                             "--tie-cls ask for: --resume continues the run's model", ckpt, field);
        }
    }
    if (o->untie_cls >= 0 && !tupe_cfg_tupe(&r->cfg))
        return tupe_fail(e, TUPE_EUSAGE, "--%s applies to tupe-a and tupe-r, not to a %s model",
                         o->untie_cls ? "untie-cls" : "tie-cls", tupe_position_name(r->cfg.position));
    /* A resumed run keeps its dropout: another one given now would make it another run. */
    if (ckpt && o->dropout >= 0 && o->dropout != r->cfg.hidden_dropout)
        return tupe_fail(e, TUPE_EUSAGE, "%s was trained with --dropout %g; resume with the same "
                         "(now %g): another value would continue it as a different run", ckpt,
                         r->cfg.hidden_dropout, o->dropout);
    if (ckpt && o->attention_dropout >= 0 && o->attention_dropout != r->cfg.attention_dropout)
        return tupe_fail(e, TUPE_EUSAGE, "%s was trained with --attention-dropout %g; resume with "
                         "the same (now %g): another value would continue it as a different run",
                         ckpt, r->cfg.attention_dropout, o->attention_dropout);
    if (o->dropout >= 0)
        r->cfg.hidden_dropout = o->dropout;
    if (o->attention_dropout >= 0)
        r->cfg.attention_dropout = o->attention_dropout;
    if (r->cfg.vocab_size == 0)
        r->cfg.vocab_size = (int)r->meta->vocab_size;
    if ((uint32_t)r->cfg.vocab_size != r->meta->vocab_size)
        return tupe_fail(e, TUPE_EDATA, "%s: the shards use a vocabulary of %u tokens, the model %d",
                         o->data, r->meta->vocab_size, r->cfg.vocab_size);
    uint32_t len = r->crop ? r->crop : r->seq_len;
    if (len > (uint32_t)r->cfg.max_position && tupe_cfg_pos_table(&r->cfg))
        return tupe_fail(e, TUPE_EDATA, "%s: sequences of %u tokens, longer than the model's "
                         "max_position_embeddings (%d): a %s model's learned position table has "
                         "no rows past it", o->data, len, r->cfg.max_position,
                         tupe_position_name(r->cfg.position));
    return tupe_config_check(&r->cfg, 1, e);
}

/* A checkpoint's training state (its JSON text; NULL where it has none or it does not parse),
 * read once by every check below. */
static json_t *state_parse(const char *txt)
{
    return txt ? json_loads(txt, 0, NULL) : NULL;
}

/* A checkpoint of tupe-pretrain records the vocabulary of its shards: shards of another
 * vocabulary of the same size, whose ids mean other tokens, are refused. */
static int check_vocab_hash(const run *r, const char *ckpt, const json_t *st, tupe_err *e)
{
    json_t *vh = st ? json_object_get(st, "vocab_hash") : NULL;
    uint64_t h;
    int rc = 0;
    if (json_is_string(vh) && tupe_hash_parse(json_string_value(vh), &h) == 0 && h != 0 &&
        r->meta->vocab_hash != 0 && h != r->meta->vocab_hash) {
        char a[22], b[22];
        tupe_hash_hex(h, a);
        tupe_hash_hex(r->meta->vocab_hash, b);
        rc = tupe_fail(e, TUPE_EDATA, "%s was trained with another vocabulary (%s) than the shards "
                       "of %s (%s)", ckpt, a, r->o->data, b);
    }
    return rc;
}

static int create_model(run *r, tupe_backend *be, tupe_err *e)
{
    /* floor(prob * len + u) positions at most per sequence: the logits buffer (masked x
     * vocabulary) is sized by this bound, not by every position. */
    int T = (int)(r->crop ? r->crop : r->seq_len);
    int per_seq = (int)floor(r->o->mask_prob * T) + 1;
    if (per_seq > T)
        per_seq = T;
    tupe_capacity cap = {r->mb, T, r->mb * per_seq};
    r->mrows = cap.masked;
    return tupe_model_create_padded(&r->m, &r->cfg, be, &cap, tupe_gradsync_flat_multiple(r->world), e);
}

/* ---- the training state stored with a checkpoint ------------------------------------------- */

typedef struct tstate {
    int64_t step, tokens, skipped;
    uint64_t data_hash;
    int batch;
    double elapsed;
    int has_seed;                /* read from a checkpoint: whether it recorded its seed */
    uint64_t seed;
    int64_t trained_len;         /* the longest sequences training has used, this run and the
                                  * checkpoint it started from: a learned position table's rows
                                  * past it never had a gradient (0: not recorded) */
} tstate;

/* What determines a run's results besides its model, data, batch and seed (checked on their
 * own): the schedule, the optimizer and the masking, each with the option that sets it. A
 * resumed run must be continued with the same values, or it would be a mixture. */
typedef struct recipe_field {
    const char *key, *opt;
    double (*get)(const tupe_pretrain_opts *o);
} recipe_field;

static double r_lr(const tupe_pretrain_opts *o) { return o->lr; }
static double r_end_lr(const tupe_pretrain_opts *o) { return o->end_lr; }
static double r_power(const tupe_pretrain_opts *o) { return o->power; }
static double r_warmup(const tupe_pretrain_opts *o) { return (double)o->warmup; }
static double r_steps(const tupe_pretrain_opts *o) { return (double)o->steps; }
static double r_beta1(const tupe_pretrain_opts *o) { return o->adam.beta1; }
static double r_beta2(const tupe_pretrain_opts *o) { return o->adam.beta2; }
static double r_eps(const tupe_pretrain_opts *o) { return o->adam.eps; }
static double r_wd(const tupe_pretrain_opts *o) { return o->adam.weight_decay; }
static double r_clip(const tupe_pretrain_opts *o) { return o->adam.clip; }
static double r_excl(const tupe_pretrain_opts *o) { return o->adam.exclude_ln_bias; }
static double r_mask(const tupe_pretrain_opts *o) { return o->mask_prob; }
static double r_mfrac(const tupe_pretrain_opts *o) { return o->mask_frac; }
static double r_rfrac(const tupe_pretrain_opts *o) { return o->random_frac; }
static double r_obj(const tupe_pretrain_opts *o) { return o->objective; }
static double r_rtdw(const tupe_pretrain_opts *o) { return o->rtd_weight; }
static double r_recipe(const tupe_pretrain_opts *o) { return o->adam.electra; }

static const recipe_field recipe[] = {
    {"lr", "--lr", r_lr}, {"end_lr", "--end-lr", r_end_lr}, {"power", "--power", r_power},
    {"warmup", "--warmup", r_warmup}, {"steps", "--steps", r_steps}, {"beta1", "--beta1", r_beta1},
    {"beta2", "--beta2", r_beta2}, {"adam_eps", "--adam-eps", r_eps},
    {"weight_decay", "--weight-decay", r_wd}, {"clip", "--clip", r_clip},
    {"electra_optimizer", "--recipe", r_recipe},
    {"no_decay_ln_bias", "--no-decay-ln-bias", r_excl}, {"mask_prob", "--mask-prob", r_mask},
    {"mask_frac", "--mask-prob", r_mfrac}, {"random_frac", "--mask-prob", r_rfrac},
    {"objective", "--objective", r_obj}, {"rtd_weight", "--rtd-weight", r_rtdw}};

static json_t *recipe_json(const tupe_pretrain_opts *o)
{
    json_t *j = json_object();
    for (size_t i = 0; i < sizeof recipe / sizeof recipe[0]; i++)
        json_object_set_new(j, recipe[i].key, json_real(recipe[i].get(o)));
    return j;
}

/* The recipe recorded in a checkpoint's training state against this invocation's: a usage
 * error naming the first option that differs and both values. A checkpoint from before the
 * recipe was recorded is not checked. */
static int check_recipe(const json_t *st, const tupe_pretrain_opts *o, const char *from, tupe_err *e)
{
    json_t *saved = st ? json_object_get(st, "recipe") : NULL;
    int rc = 0;
    for (size_t i = 0; json_is_object(saved) && i < sizeof recipe / sizeof recipe[0] && !rc; i++) {
        json_t *v = json_object_get(saved, recipe[i].key);
        double now = recipe[i].get(o);
        if (json_is_number(v) && json_number_value(v) != now && recipe[i].get == r_recipe)
            rc = tupe_fail(e, TUPE_EUSAGE, "%s was trained with --recipe %s; resume with the same "
                           "(now %s)", from, json_number_value(v) ? "electra" : "tupe",
                           now ? "electra" : "tupe");
        else if (json_is_number(v) && json_number_value(v) != now)
            rc = tupe_fail(e, TUPE_EUSAGE, "%s was trained with %s %g; resume with the same (now %g): "
                           "another value would continue it as a different run", from, recipe[i].opt,
                           json_number_value(v), now);
    }
    return rc;
}

static char *state_json(const tstate *s, const run *r)
{
    json_t *o = json_object();
    char h[22];
    tupe_hash_hex(s->data_hash, h);
    json_object_set_new(o, "step", json_integer(s->step));
    json_object_set_new(o, "tokens", json_integer(s->tokens));
    json_object_set_new(o, "skipped_nonfinite", json_integer(s->skipped));
    json_object_set_new(o, "batch", json_integer(s->batch));
    json_object_set_new(o, "seed", json_integer((json_int_t)r->o->seed));
    json_object_set_new(o, "data_hash", json_string(h));
    /* The vocabulary the model's ids mean: tupe-glue and tupe-convert check it. */
    tupe_hash_hex(r->meta->vocab_hash, h);
    json_object_set_new(o, "vocab_hash", json_string(h));
    json_object_set_new(o, "elapsed_s", json_real(s->elapsed));
    json_object_set_new(o, "world", json_integer(r->world));
    json_object_set_new(o, "recipe", recipe_json(r->o));
    json_object_set_new(o, "trained_seq_len", json_integer(s->trained_len));
    char *txt = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return txt;
}

/* The state's trained_seq_len (0 when absent: checkpoints before it, or not tupe-pretrain's). */
static int64_t state_trained_len(const json_t *st)
{
    json_t *v = st ? json_object_get(st, "trained_seq_len") : NULL;
    json_int_t n = json_is_integer(v) ? json_integer_value(v) : 0;
    return n > 0 && n <= 1 << 20 ? (int64_t)n : 0;
}

/* Evaluation past the longest sequences a learned position table was trained on would read
 * rows that never had a gradient (their initial noise): refused, as past its last row. */
static int check_trained_len(const run *r, const char *ckpt, const json_t *st, tupe_err *e)
{
    uint32_t len = r->crop ? r->crop : r->seq_len;
    if (!tupe_cfg_pos_table(&r->cfg))
        return 0;
    int64_t n = state_trained_len(st);
    if (n && len > n)
        return tupe_fail(e, TUPE_EDATA, "%s was trained on sequences of at most %lld tokens: its "
                         "learned position table (%s) has no trained rows past them, so it cannot "
                         "be evaluated on %u (--seq-len; rope, alibi, nope and deberta can)", ckpt,
                         (long long)n, tupe_position_name(r->cfg.position), len);
    return 0;
}

static int parse_state(const json_t *o, const char *where, tstate *s, tupe_err *e)
{
    if (!o)
        return tupe_fail(e, TUPE_EDATA, "%s: no readable training state in the checkpoint", where);
    json_t *st = json_object_get(o, "step"), *tk = json_object_get(o, "tokens"),
           *sk = json_object_get(o, "skipped_nonfinite"), *b = json_object_get(o, "batch"),
           *dh = json_object_get(o, "data_hash"), *el = json_object_get(o, "elapsed_s");
    int rc = 0;
    if (!json_is_integer(st) || !json_is_integer(b) || !json_is_string(dh) ||
        tupe_hash_parse(json_string_value(dh), &s->data_hash))
        rc = tupe_fail(e, TUPE_EDATA, "%s: malformed training state", where);
    else {
        s->step = json_integer_value(st);
        json_int_t batch = json_integer_value(b);
        s->batch = batch > 0 && batch <= INT_MAX ? (int)batch : 0;
        s->tokens = json_is_integer(tk) ? json_integer_value(tk) : 0;
        s->skipped = json_is_integer(sk) ? json_integer_value(sk) : 0;
        s->elapsed = json_is_number(el) ? json_number_value(el) : 0;
        json_t *sd = json_object_get(o, "seed");
        s->has_seed = json_is_integer(sd);
        s->seed = s->has_seed ? (uint64_t)json_integer_value(sd) : 0;
        s->trained_len = state_trained_len(o);
        /* The metadata carries no check of its own: refuse what no run could have written. */
        if (s->step < 0 || s->batch <= 0 || s->tokens < 0 || s->skipped < 0 ||
            s->skipped > s->step || !(s->elapsed >= 0))
            rc = tupe_fail(e, TUPE_EDATA, "%s: training state out of range (step %lld, batch "
                           "%lld)", where, (long long)s->step, (long long)batch);
    }
    return rc;
}

/* The identity of the training data: the manifest's content hash and split sizes. */
static uint64_t data_identity(const tupe_shard_meta *m)
{
    uint64_t v[6] = {m->in_hash, m->vocab_hash, m->seq_len, m->seed,
                     m->split[TUPE_SPLIT_TRAIN].sequences, m->split[TUPE_SPLIT_VALID].sequences};
    return tupe_hash64(v, sizeof v);
}

/* A message for the user (the caller's note function), from rank 0 only. */
static void say(const run *r, int kind, const char *fmt, ...) TUPE_PRINTF(3, 4);
static void say(const run *r, int kind, const char *fmt, ...)
{
    if (r->rank != 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    tupe_vnote(r->o->note, r->o->note_ctx, kind, fmt, ap);
    va_end(ap);
}

/* ---- training --------------------------------------------------------------------------------- */

/* The per-micro-batch sums of a step: the loss (the MLM loss alone for ELECTRA), then ELECTRA's
 * generator correct predictions, discriminator loss and correct predictions. */
#define NSUM 4

/* A training run: the state shared with evaluation, and the loop's own. */

typedef struct trainer {
    run r;
    tupe_shardr *rd;             /* the training split */
    tupe_adamw *opt;
    tupe_gradsync *gs;           /* the gradient's sums over micro-batches and ranks */
    double *mloss;               /* the summed loss of each micro-batch of a step, all ranks';
                                    ELECTRA: then NSUM - 1 more such columns (sums[] below) */
    tupe_dev *dml;               /* the same columns on the device (model.h's TUPE_SUM_*), where
                                    the forward passes add them: read with the norm, once; then
                                    the step's parameter block (par) */
    tupe_dev *par;               /* backend.h's TUPE_PAR_*: written once at each step's start */
    double *par_h;               /* its values on the host (after mloss's, in its allocation) */
    tupe_backend *be;
    double ex[4], ex_acc[4];     /* ELECTRA: the step's generator loss and accuracy,
                                    discriminator loss and accuracy; their sums since the
                                    last metrics line */
    tupe_rundir *dir;            /* rank 0's run directory while it is written */
    tupe_schedule sched;
    tstate st;
    tupe_pretrain_result *res;
    int per_rank;                /* sequences of each step on this rank */
    uint64_t nseq;               /* training sequences */
    int64_t spe;                 /* steps per epoch */
    char resume_from[4096];      /* the checkpoint the run resumes from, or "" */
    int64_t resume_step;
    int64_t saved_at;            /* the step of the last checkpoint written or resumed, or -1 */
    uint64_t cur_epoch;          /* the epoch the reader is positioned in */
    /* The step whose sequences are already read and masked in r's rows, read while the step
     * before ran, and their counts summed over the ranks (masked, tokens); 0: none. */
    int64_t next_step;
    uint64_t next_counts[2];
    /* That step's micro-batches uploaded too (masked LM): each one's ids, lengths, mask
     * positions and labels (tupe_batch_dev), in device buffers of their own (the model's input
     * buffers keep their addresses); ahead_step is the step they hold, 0: none. */
    tupe_dev **ahead;            /* 4 per micro-batch of this rank, or NULL (ELECTRA) */
    int64_t ahead_step;
    volatile sig_atomic_t *stop; /* set by a signal */
    int leave;                   /* every rank's answer: leave after the last step */
    /* Since the last metrics line (last) and the last progress line of either kind (note):
     * time, tokens, summed loss and steps. */
    double interval, t0, t_start, t_last, loss_acc, t_note, note_acc;
    int64_t tok_last, n_acc, tok_note, n_note;
} trainer;

int tupe_pretrain_fit_world(int world, const void *opts, tupe_err *e)
{
    const tupe_pretrain_opts *o = opts;
    if (o->batch <= 0 || o->batch % world)
        return tupe_fail(e, TUPE_EUSAGE, "--batch %d is not a multiple of the %d ranks", o->batch, world);
    int per_rank = o->batch / world, mb = o->micro_batch > 0 ? o->micro_batch : per_rank;
    if (per_rank % mb)
        return tupe_fail(e, TUPE_EUSAGE, "--micro-batch %d does not divide the %d sequences of each "
                         "rank (--batch %d over %d ranks)", mb, per_rank, o->batch, world);
    return 0;
}

/* Options that need no data: refused before any file is opened. */
static int check_options(trainer *t, tupe_err *e)
{
    const tupe_pretrain_opts *o = t->r.o;
    int rc = tupe_pretrain_fit_world(t->r.world, o, e);
    if (rc)
        return rc;
    t->per_rank = o->batch / t->r.world;
    t->r.mb = o->micro_batch > 0 ? o->micro_batch : t->per_rank;
    tupe_config c;
    memset(&c, 0, sizeof c);
    return apply_variant(o, &c, e);
}

/* Where the run is written (train/rundir.h). */
static tupe_rundir_spec run_spec(const tupe_pretrain_opts *o)
{
    tupe_rundir_spec s = {o->out, &tupe_run_pretrain, o->resume, o->tensorboard, o->no_tensorboard,
                          o->inputs};
    return s;
}

/* The run directory: a new run, or the latest checkpoint of the one to resume. */
static int find_run(trainer *t, tupe_err *e)
{
    const tupe_pretrain_opts *o = t->r.o;
    /* Rank 0 takes an existing directory (its kind, its lock) before any work, and only then
     * reads its checkpoints; a run from before kinds were recorded is taken when it is
     * resumed. The other ranks only read it. tupe_rundir_begin holds the directory to what
     * was read here. */
    tupe_rundir_spec where = run_spec(o);
    int rc = t->r.rank == 0 ? tupe_rundir_claim(&t->dir, &where, e)
                            : tupe_rundir_check(o->out, &tupe_run_pretrain, o->resume, e);
    if (rc || (rc = tupe_rundir_latest(o->out, t->resume_from, sizeof t->resume_from,
                                        &t->resume_step, e)))
        return rc;
    if (!o->resume && t->resume_from[0])
        /* A new run here would have its checkpoints pruned in favour of the old run's later ones
         * and mix two runs in one directory. */
        return tupe_fail(e, TUPE_ECANTCREAT, "%s already holds a run (checkpoints up to step %lld): "
                         "--resume continues it; to start over, remove it or choose another -o",
                         o->out, (long long)t->resume_step);
    return 0;
}

static int open_data(trainer *t, tupe_err *e)
{
    int rc = open_reader(&t->r, &t->rd, TUPE_SPLIT_TRAIN, 1, e);
    if (rc)
        return rc;
    t->r.meta = tupe_shardr_meta(t->rd);
    t->r.seq_len = t->r.meta->seq_len;
    t->nseq = tupe_shardr_size(t->rd);
    t->spe = (int64_t)(t->nseq / (uint64_t)t->r.o->batch);
    if (t->spe == 0)
        return tupe_fail(e, TUPE_EDATA, "%s: the training split has %llu sequences, fewer than one "
                         "batch of %d", t->r.o->data, (unsigned long long)t->nseq, t->r.o->batch);
    return 0;
}

/* The device buffers of the next step's micro-batches (train_step). */
static int ahead_alloc(trainer *t, tupe_backend *be, tupe_err *e)
{
    int k = t->per_rank / t->r.mb;
    size_t T = t->r.seq_len, mb = (size_t)t->r.mb, bytes[4] = {mb * T * 4, mb * 4, mb * T * 4, mb * T * 4};
    t->be = be;
    if (!(t->ahead = calloc((size_t)k * 4, sizeof *t->ahead)))
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    for (int i = 0; i < 4 * k; i++)
        if (!(t->ahead[i] = be->alloc(be, bytes[i % 4])))
            return tupe_fail(e, TUPE_EFAIL, "out of device memory for the next step's inputs");
    return 0;
}

static void ahead_free(trainer *t)
{
    for (int i = 0; t->ahead && i < 4 * (t->per_rank / t->r.mb); i++)
        if (t->ahead[i])
            t->be->free(t->be, t->ahead[i]);
    free(t->ahead);
}

/* The step's micro-batches, read into r's rows, packed and uploaded ahead: the device copies
 * them while it computes the step before, and the step's forward passes take them on the
 * device (tupe_batch_dev). */
static void upload_ahead(trainer *t, int64_t step)
{
    run *r = &t->r;
    tupe_backend *be = t->be;
    int k = t->per_rank / r->mb;
    for (int i = 0; i < k; i++) {
        int mi = tupe_gradsync_order(t->gs, i);
        tupe_batch b;
        make_batch(r, mi, r->mb, k, &b);
        tupe_dev **d = t->ahead + 4 * i;
        be->upload_ahead(be, d[0], b.ids, (size_t)b.B * (size_t)b.T, TUPE_I32);
        be->upload_ahead(be, d[1], b.lengths, (size_t)b.B, TUPE_I32);
        be->upload_ahead(be, d[2], b.mask_pos, (size_t)b.rows, TUPE_I32);
        be->upload_ahead(be, d[3], b.mask_label, (size_t)b.rows, TUPE_I32);
    }
    t->ahead_step = step;
}

static int build_model(trainer *t, tupe_backend *be, tupe_err *e)
{
    const tupe_pretrain_opts *o = t->r.o;
    int rc;
    if ((rc = resolve_config(&t->r, t->resume_from[0] ? t->resume_from : NULL, e)) ||
        (rc = mask_setup(&t->r, e)) || (rc = alloc_buffers(&t->r, t->per_rank, e)) ||
        (rc = create_model(&t->r, be, e)) || (rc = tupe_comm_dev_open(t->r.comm, be, o->grad_reduce, e)))
        return rc;
    tupe_gradsync_opts go = {t->per_rank / t->r.mb, o->zero, (size_t)(o->bucket_mb * (1 << 20))};
    size_t nranges;
    if ((rc = tupe_gradsync_create(&t->gs, t->r.m, t->r.comm, &go, e)))
        return rc;
    const size_t *ranges = tupe_gradsync_ranges(t->gs, &nranges);
    if ((rc = tupe_adamw_create_ranges(&t->opt, t->r.m, &o->adam, ranges, nranges, e)))
        return rc;
    /* ELECTRA: NSUM columns; and three more: the next step's counts, the stop (train_step);
     * then the parameter block's host values, and on the device the block after the columns */
    size_t k = (size_t)(t->per_rank / t->r.mb), ncol = k * (size_t)t->r.world * NSUM;
    t->mloss = calloc(ncol + 3 + TUPE_PAR_OFFSET + k, sizeof *t->mloss);
    if (!t->mloss)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    t->par_h = t->mloss + ncol + 3;
    t->be = be;
    t->dml = be->alloc(be, (ncol + TUPE_PAR_OFFSET + k) * sizeof(double));
    if (!t->dml)
        return tupe_fail(e, TUPE_EFAIL, "out of device memory for a step's sums");
    t->par = tupe_dev_dat(t->dml, ncol);
    if (!t->r.electra && (rc = ahead_alloc(t, be, e)))
        return rc;
    tstate st = {0, 0, 0, data_identity(t->r.meta), t->r.o->batch, 0, 0, 0, t->r.seq_len};
    t->st = st;
    return 0;
}

/* The weights and the training state: the checkpoint resumed (which must continue this run's
 * data order), the --checkpoint to start from, or a fresh initialization. A run resumed at or
 * past --steps is complete: nothing more to do. */
static int load_weights(trainer *t, tupe_err *e)
{
    const tupe_pretrain_opts *o = t->r.o;
    const char *from = t->resume_from;
    char *js = NULL;
    int rc;
    if (!from[0]) {
        if (!o->init)
            return tupe_model_init(t->r.m, o->seed, e);
        if ((rc = tupe_ckpt_load(o->init, t->r.m, NULL, &js, TUPE_CKPT_HEADS_OPTIONAL, e)))
            return rc;
        json_t *st = state_parse(js);
        free(js);
        if (!(rc = check_vocab_hash(&t->r, o->init, st, e))) {
            /* continued pre-training keeps what the start had trained; a start that does not
             * say (an imported model) leaves it unknown */
            int64_t n = state_trained_len(st);
            t->st.trained_len = n > t->st.trained_len ? n : n ? t->st.trained_len : 0;
        }
        json_decref(st);
        return rc;
    }
    if ((rc = tupe_ckpt_load(from, t->r.m, t->opt, &js, 0, e)))
        return rc;
    json_t *st = state_parse(js);
    free(js);
    tstate saved;
    rc = parse_state(st, from, &saved, e);
    if (rc) {
        json_decref(st);
        return rc;
    }
    if (saved.batch != o->batch)
        rc = tupe_fail(e, TUPE_EUSAGE, "%s was trained with --batch %d; resume with the same batch "
                       "(now %d) to continue the same data order", from, saved.batch, o->batch);
    else if (saved.has_seed && saved.seed != o->seed)
        rc = tupe_fail(e, TUPE_EUSAGE, "%s was trained with --seed %llu; resume with the same seed "
                       "(now %llu) to continue the same data order, masks and dropout", from,
                       (unsigned long long)saved.seed, (unsigned long long)o->seed);
    if (!rc)
        rc = check_recipe(st, o, from, e);
    json_decref(st);
    if (rc)
        return rc;
    if (saved.step != t->resume_step)
        return tupe_fail(e, TUPE_EDATA, "%s: its training state is at step %lld (checkpoint "
                         "damaged?)", from, (long long)saved.step);
    if (saved.data_hash != t->st.data_hash)
        return tupe_fail(e, TUPE_EDATA, "%s was trained on other shards than %s", from, o->data);
    if (saved.trained_len && saved.trained_len < t->st.trained_len)
        saved.trained_len = t->st.trained_len; /* unrecorded (older checkpoints) stays unknown */
    t->st = saved;
    snprintf(t->res->checkpoint, sizeof t->res->checkpoint, "%s", from);
    if (t->st.step >= o->steps) {
        /* A requeued job of a finished run: leave the run directory as it is. */
        t->res->step = t->st.step;
        t->res->complete = 1;
    }
    return 0;
}

/* Every rank must run the same job: the same options, data, vocabulary, starting weights and
 * kind of device; the first difference stops every rank with a message naming it. */
static int agree(trainer *t, tupe_err *e)
{
    const run *r = &t->r;
    if (r->world == 1)
        return 0;
    const tupe_pretrain_opts *o = r->o;
    const tupe_adamw_cfg *a = &o->adam;
    char txt[4096];
    int n = snprintf(txt, sizeof txt,
                     "--model %s\n--position %s\n--untie-cls %d\n--dropout %.17g\n"
                     "--attention-dropout %.17g\n--checkpoint %s\n--steps %lld\n--warmup %lld\n"
                     "--batch %d\n--micro-batch %d\n--lr %.17g\n--end-lr %.17g\n--power %.17g\n"
                     "--beta1 %.17g\n--beta2 %.17g\n--adam-eps %.17g\n--weight-decay %.17g\n"
                     "--clip %.17g\n--no-decay-ln-bias %d\n--seed %llu\n--mask-prob %.17g\n"
                     "--log-every %lld\n--eval-every %lld\n--eval-sequences %lld\n"
                     "--save-every %lld\n--keep %d\n--resume %d\n--stop-after %lld\n"
                     "--max-time %.17g\n--skip-nonfinite %d\n--zero %d\n--bucket-mb %.17g\n"
                     "--grad-reduce %s\n--objective %d\n--generator-size %.17g\n"
                     "--rtd-weight %.17g\n--recipe %d\n",
                     o->model ? o->model : "(default)", o->position ? o->position : "(default)",
                     o->untie_cls, o->dropout, o->attention_dropout, o->init ? o->init : "(none)",
                     (long long)o->steps, (long long)o->warmup, o->batch, r->mb, o->lr, o->end_lr,
                     o->power, a->beta1, a->beta2, a->eps, a->weight_decay, a->clip,
                     a->exclude_ln_bias, (unsigned long long)o->seed, o->mask_prob,
                     (long long)o->log_every, (long long)o->eval_every,
                     (long long)o->eval_sequences, (long long)o->save_every, o->keep_last,
                     o->resume, (long long)o->stop_after, o->max_time, o->skip_nonfinite, o->zero,
                     o->bucket_mb, o->grad_reduce == TUPE_REDUCE_NCCL ? "nccl" : "tree",
                     o->objective, o->generator_size, o->rtd_weight, a->electra);
    for (int k = 0; k < o->n_keep_steps && n > 0 && (size_t)n < sizeof txt; k++)
        n += snprintf(txt + n, sizeof txt - (size_t)n, "--keep-step %lld\n", (long long)o->keep_steps[k]);
    int rc = tupe_comm_agree(r->comm, "the options", txt, e);
    if (rc)
        return rc;
    /* the vocabulary first: the data's identity includes it */
    char h[24];
    tupe_hash_hex(r->meta->vocab_hash, h);
    snprintf(txt, sizeof txt, "vocabulary of %u tokens (hash %s)\n", r->meta->vocab_size, h);
    if ((rc = tupe_comm_agree(r->comm, "the vocabulary", txt, e)))
        return rc;
    tupe_hash_hex(data_identity(r->meta), h);
    snprintf(txt, sizeof txt, "%llu training sequences of %u tokens (shards' identity %s)\n",
             (unsigned long long)t->nseq, r->seq_len, h);
    if ((rc = tupe_comm_agree(r->comm, "the data (--data)", txt, e)))
        return rc;
    const char *base = strrchr(t->resume_from, '/');
    snprintf(txt, sizeof txt, "%.200s\n", !t->resume_from[0] ? "no checkpoint to resume from"
                                         : base ? base + 1 : t->resume_from);
    if ((rc = tupe_comm_agree(r->comm, "the checkpoint to resume (is -o on a file system every "
                              "rank sees?)", txt, e)))
        return rc;
    /* the weights themselves, whatever they come from */
    size_t total = tupe_model_layout(r->m)->total;
    float *w = malloc(total * sizeof *w);
    if (!w)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_model_params_get(r->m, w);
    tupe_hash_hex(tupe_hash64(w, total * sizeof *w), h);
    free(w);
    snprintf(txt, sizeof txt, "starting weights with hash %s on a %s backend\n", h,
             tupe_model_backend(r->m)->name);
    return tupe_comm_agree(r->comm, "the starting weights or the device", txt, e);
}

/* The one line saying which BLAS kernels compute a CPU backend's products (NULL on a GPU). */
static const char *kernels_line(const run *r)
{
    const tupe_blas_info *bi = tupe_blas_info_get();
    return bi && strncmp(tupe_model_backend(r->m)->name, "cpu", 3) == 0 ? bi->line : NULL;
}

/* Rank 0 opens the run directory and writes the model's configuration into it; the first line
 * metrics.jsonl gets from this start says what computes it. */
static int start_run_dir(trainer *t, tupe_err *e)
{
    const tupe_pretrain_opts *o = t->r.o;
    if (t->r.rank != 0)
        return 0;
    tupe_rundir_spec where = run_spec(o);
    int rc = tupe_rundir_begin(&t->dir, &where, t->resume_from[0] ? t->resume_step : -1, e);
    if (rc)
        return rc;
    const char *kl = kernels_line(&t->r);
    json_t *js = json_pack("{s:s, s:s?}", "backend", tupe_model_backend(t->r.m)->name, "kernels", kl);
    char *start = js ? json_dumps(js, JSON_COMPACT) : NULL;
    json_decref(js);
    if (!start)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    tupe_rundir_metric(t->dir, "{\"step\":%lld,\"start\":%s}", (long long)t->st.step, start);
    free(start);
    char path[4200];
    snprintf(path, sizeof path, "%s/config.json", o->out);
    char *cj = tupe_config_json(&t->r.cfg, 2);
    size_t cl = cj ? strlen(cj) : 0;
    char *line = cj ? realloc(cj, cl + 2) : NULL;
    if (line) {
        line[cl] = '\n';
        line[cl + 1] = 0;
        rc = tupe_write_file(path, line, cl + 1, e);
    } else {
        free(cj);
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    free(line);
    return rc;
}

/* What is about to run, and the options that will not do what they seem to. */
static void announce(const trainer *t)
{
    const tupe_pretrain_opts *o = t->r.o;
    const run *r = &t->r;
    say(r, TUPE_NOTE_INFO, "%s%s, %d layers x %d, vocabulary %d; %llu training "
        "sequences of %u tokens; batch %d (%d rank%s x %d micro-batch%s of %d); %lld steps%s",
        tupe_position_name(r->cfg.position),
        tupe_cfg_tupe(&r->cfg) && !r->cfg.untie_cls ? " (tie-cls)" : "",
        r->cfg.num_layers, r->cfg.hidden_size, r->cfg.vocab_size,
        (unsigned long long)t->nseq, r->seq_len, o->batch, r->world, r->world > 1 ? "s" : "",
        t->per_rank / r->mb, t->per_rank / r->mb > 1 ? "es" : "", r->mb,
        (long long)o->steps, t->resume_from[0] ? "; resuming" : "");
    if (kernels_line(r))
        say(r, TUPE_NOTE_INFO, "matrix products: %s", kernels_line(r));
    if (o->adam.electra)
        say(r, TUPE_NOTE_INFO, "--recipe electra: Adam without bias correction, the warmup "
            "times a decay from step 0 (the first update has learning rate 0), no weight decay "
            "of biases and LayerNorm, TensorFlow's clipping");
    if (r->world > 1) {
        int N = tupe_comm_nodes(r->comm), L = tupe_comm_node_size(r->comm);
        say(r, TUPE_NOTE_INFO, "ranks meet through %s (%s); %d node%s x %d rank%s; gradients "
            "through %s in %d bucket%s (%zu reals), summed %s; optimizer state %s",
            tupe_comm_backend(r->comm), tupe_comm_launcher(r->comm), N, N > 1 ? "s" : "", L,
            L > 1 ? "s" : "", tupe_comm_dev_path(r->comm), tupe_gradsync_buckets(t->gs),
            tupe_gradsync_buckets(t->gs) > 1 ? "s" : "", tupe_model_flat_size(r->m),
            o->grad_reduce == TUPE_REDUCE_NCCL ? "by NCCL's own collectives (in its order)"
            : N > 1 ? "in a fixed order, within each node then across nodes" : "in a fixed order",
            o->zero ? "sharded over the ranks (ZeRO-1)" : "whole on every rank");
        if (tupe_comm_hosts(r->comm) > N)
            say(r, TUPE_NOTE_INFO, "the %d hosts have unequal numbers of ranks: the gradients "
                "are summed as if on one node (more traffic between hosts)",
                tupe_comm_hosts(r->comm));
    }
    if (t->resume_from[0])
        say(r, TUPE_NOTE_INFO, "resumed from %s (step %lld)", t->resume_from, (long long)t->st.step);
    else if (o->resume)
        say(r, TUPE_NOTE_INFO, "--resume: no checkpoint in %s/checkpoints yet: a new run", o->out);
    for (int k = 0; k < o->n_keep_steps; k++)
        if (o->keep_steps[k] > o->steps)
            say(r, TUPE_NOTE_INFO, "warning: --keep-step %lld is past the last step "
                "(--steps %lld): no such checkpoint", (long long)o->keep_steps[k], (long long)o->steps);
    if (o->warmup > o->steps) /* the default warmup is 10,000 steps */
        say(r, TUPE_NOTE_INFO, "warning: --warmup %lld is longer than --steps %lld: the "
            "learning rate rises to %.3g at most, never to its peak of %g",
            (long long)o->warmup, (long long)o->steps, tupe_lr_at(&t->sched, o->steps), o->lr);
}

static int save(trainer *t, tupe_err *e)
{
    run *r = &t->r;
    /* a sharded optimizer's moments and fp32 weights made whole first (every rank) */
    float *moments = NULL;
    int rc = tupe_gradsync_gather_state(t->gs, t->opt, &moments, e);
    if (rc)
        return rc;
    if (r->rank == 0) {
        char dir[4096];
        tupe_rundir_checkpoint(dir, sizeof dir, r->o->out, t->st.step);
        char *js = state_json(&t->st, r);
        rc = js ? tupe_ckpt_save_moments(dir, r->m, t->opt, moments, js, e)
                : tupe_fail(e, TUPE_EFAIL, "out of memory");
        free(js);
        if (!rc) {
            snprintf(t->res->checkpoint, sizeof t->res->checkpoint, "%s", dir);
            tupe_rundir_prune(r->o->out, r->o->keep_last, r->o->keep_steps, r->o->n_keep_steps);
        }
    }
    /* Every rank learns whether the checkpoint exists before going on. */
    int32_t failed = rc != 0;
    tupe_err e2;
    if (tupe_comm_allmax_i32(r->comm, &failed, 1, &e2))
        return rc ? rc : tupe_fail(e, e2.code, "%s", e2.msg);
    if (failed && !rc)
        return tupe_fail(e, TUPE_EIO, "rank 0 could not write the checkpoint of step %lld",
                         (long long)t->st.step);
    if (!rc)
        t->saved_at = t->st.step;
    free(moments);
    return rc;
}

/* This rank's sequences of step `step` read and masked into r's rows; counts[0..1] this rank's
 * masked positions and tokens. */
static int read_step(trainer *t, int64_t step, uint64_t *counts, tupe_err *e)
{
    run *r = &t->r;
    const tupe_pretrain_opts *o = r->o;
    uint64_t epoch = (uint64_t)((step - 1) / t->spe);
    uint64_t consumed = (uint64_t)((step - 1) % t->spe) * (uint64_t)o->batch;
    int rc;
    if (epoch != t->cur_epoch) {
        if ((rc = tupe_shardr_seek(t->rd, epoch, consumed, e)))
            return rc;
        t->cur_epoch = epoch;
    }
    int64_t masked = 0, tokens = 0;
    int got = read_masked(r, t->rd, (uint32_t)epoch, t->per_rank, &masked, &tokens, e);
    if (got < 0)
        return e->code;
    if (got != t->per_rank)
        return tupe_fail(e, TUPE_EDATA, "%s: the epoch ended early (rank %d read %d of %d sequences)",
                         o->data, r->rank, got, t->per_rank);
    counts[0] = (uint64_t)masked;
    counts[1] = (uint64_t)tokens;
    return 0;
}

/* The global index of sequence 0 of this rank's micro-batch i of step `step` (its dropout's
 * base): this rank's micro-batch mi holds its sequences mi, mi + k, ...: the global batch's
 * micro-batch j = slot + mi * world (gradsync.h), whatever the number of ranks. */
static uint64_t micro_offset(const trainer *t, int64_t step, int i)
{
    int j = t->r.slot + tupe_gradsync_order(t->gs, i) * t->r.world;
    return (uint64_t)(step - 1) * (uint64_t)t->r.o->batch + (uint64_t)j * (uint64_t)t->r.mb;
}

/* The masked-LM loss's divisor: the step's masked positions over every rank (1 where there
 * are none, whose loss is 0). The device's block and the host's batch take the same double. */
static double loss_norm(const uint64_t *counts)
{
    return counts[0] ? (double)counts[0] : 1.0;
}

/* The step's parameter block (backend.h's TUPE_PAR_*), in one upload before its work: the
 * values the step's kernels would otherwise take by value, the same doubles as the host's. */
static void put_params(trainer *t, int64_t step, const uint64_t *counts)
{
    int k = t->per_rank / t->r.mb;
    double lr = tupe_lr_at(&t->sched, step), *p = t->par_h;
    p[TUPE_PAR_STEP] = (double)(uint32_t)step;
    p[TUPE_PAR_LR] = lr;
    p[TUPE_PAR_STEP_SIZE] = tupe_adamw_next_step_size(t->opt, lr);
    p[TUPE_PAR_LOSS_NORM] = loss_norm(counts);
    for (int i = 0; i < k; i++)
        p[TUPE_PAR_OFFSET + i] = (double)micro_offset(t, step, i);
    t->be->upload(t->be, t->par, p, (size_t)(TUPE_PAR_OFFSET + k), TUPE_DBL);
}

/* One optimizer step: this rank's sequences read and masked (already, while the step before
 * ran, but for the first step of a run and after a validation), forward and backward over its
 * micro-batches, gradients and loss summed over the ranks, the update (or, with
 * --skip-nonfinite, none for a non-finite loss or gradient). The next step's sequences are read
 * before this step's sums, while the device still computes, and their counts travel with the
 * sums (no host collective between steps). *loss and *norm are the step's. */
static int train_step(trainer *t, int64_t step, double *loss, double *norm, tupe_err *e)
{
    run *r = &t->r;
    const tupe_pretrain_opts *o = r->o;
    int rc;
    uint64_t counts[2];
    int ahead = 0;
    if (t->next_step == step) {
        counts[0] = t->next_counts[0];
        counts[1] = t->next_counts[1];
        ahead = t->ahead_step == step;
    } else if ((rc = read_step(t, step, counts, e)) ||
               (rc = tupe_comm_allreduce_u64(r->comm, counts, 2, e))) {
        return rc;
    }
    t->next_step = t->ahead_step = 0;
    put_params(t, step, counts);
    int k = t->per_rank / r->mb, n = k * r->world;
    memset(t->mloss, 0, (size_t)n * NSUM * sizeof *t->mloss);
    t->be->zero(t->be, t->dml, (size_t)n * NSUM * tupe_dbl_reals(t->be));
    for (int i = 0; i < k; i++) {
        int mi = tupe_gradsync_order(t->gs, i), j = r->slot + mi * r->world;
        tupe_batch b;
        make_batch(r, mi, r->mb, k, &b);
        tupe_batch_dev bd = {t->ahead ? t->ahead[4 * i] : NULL, t->ahead ? t->ahead[4 * i + 1] : NULL,
                             t->ahead ? t->ahead[4 * i + 2] : NULL, t->ahead ? t->ahead[4 * i + 3] : NULL};
        b.dev = ahead ? &bd : NULL;
        b.loss_norm = loss_norm(counts);
        b.rtd_norm = (double)counts[1];
        b.noise_step = (uint32_t)step;
        b.sample_offset = micro_offset(t, step, i);
        if ((rc = tupe_gradsync_begin(t->gs, i, e)))
            return rc;
        if (b.M > 0 || r->electra) { /* else nothing masked: no gradient */
            tupe_step ts = {.seed = o->seed, .step = (uint32_t)step, .par = t->par, .slot = i};
            /* its sums into column j of the device's (no host wait) */
            tupe_model_sums_target(r->m, tupe_dev_dat(t->dml, (size_t)j), (size_t)n);
            if ((rc = tupe_model_forward(r->m, &b, &ts, NULL, e)) || (rc = tupe_model_backward(r->m, e)))
                return rc;
        }
        if ((rc = tupe_gradsync_end(t->gs, i, e)))
            return rc;
    }
    /* a rank killed here, mid-step, while the others wait for its gradient (the tests of
     * dead ranks) */
    tupe_fault_point("trainer.step");
    /* the next step's sequences (the rows are free: the micro-batches were packed), their
     * counts after the losses: integers, summed exactly as doubles */
    int more = step < o->steps;
    size_t nv = (size_t)n * (r->electra ? NSUM : 1);
    if (more) {
        uint64_t nc[2];
        if ((rc = read_step(t, step + 1, nc, e)))
            return rc;
        t->mloss[nv] = (double)nc[0];
        t->mloss[nv + 1] = (double)nc[1];
        if (t->ahead)
            upload_ahead(t, step + 1);
    }
    /* whether to leave after this step: a signal, --stop-after or --max-time (rank 0's
     * clock); summed with the rest, so that every rank has the same answer without a
     * collective of its own */
    size_t at = nv + 2 * (size_t)more;
    t->mloss[at] = (t->stop && *t->stop) ||
                   (o->stop_after > 0 && step - t->resume_step >= o->stop_after) ||
                   (r->rank == 0 && o->max_time > 0 && tupe_now() - t->t_start >= o->max_time);
    /* the micro-batches' losses (ELECTRA: NSUM columns of them; on the device): each from one
     * rank, summed over the ranks with the norm, then added by the gradient's tree */
    if ((rc = tupe_gradsync_finish(t->gs, t->dml, nv, t->mloss, at + 1, norm, e)))
        return rc;
    t->leave = t->mloss[at] > 0;
    if (more) {
        t->next_step = step + 1;
        t->next_counts[0] = (uint64_t)t->mloss[nv];
        t->next_counts[1] = (uint64_t)t->mloss[nv + 1];
    }
    double loss_sum = tupe_tree_sum_d(t->mloss, n);
    *loss = counts[0] ? loss_sum / (double)counts[0] : 0;
    if (r->electra) {
        double m = counts[0] ? (double)counts[0] : 1, tk = counts[1] ? (double)counts[1] : 1;
        t->ex[0] = *loss;
        t->ex[1] = tupe_tree_sum_d(t->mloss + n, n) / m;
        t->ex[2] = tupe_tree_sum_d(t->mloss + 2 * n, n) / tk;
        t->ex[3] = tupe_tree_sum_d(t->mloss + 3 * n, n) / tk;
        *loss += o->rtd_weight * t->ex[2];
    }
    if (tupe_fault_hit("trainer.nonfinite"))
        *loss = NAN; /* fault injection for the tests of the non-finite handling */
    if (!isfinite(*loss) || !isfinite(*norm)) {
        if (!o->skip_nonfinite)
            return tupe_fail(e, TUPE_EFAIL, "step %lld: non-finite %s (loss %g, gradient norm %g); "
                             "stopped. The last good checkpoint is %s; --skip-nonfinite skips such "
                             "steps instead", (long long)step, isfinite(*loss) ? "gradient" : "loss",
                             *loss, *norm, t->res->checkpoint[0] ? t->res->checkpoint : "(none yet)");
        t->st.skipped++;
        say(r, TUPE_NOTE_INFO, "step %lld: non-finite loss or gradient, update skipped (%lld so far)",
            (long long)step, (long long)t->st.skipped);
    } else {
        /* the clipping factor from the sum of squares the device kept (the same bits as the
         * host's from *norm); the skip above is the host's, from the step's one read */
        tupe_adamw_step_dev(t->opt, tupe_lr_at(&t->sched, step), tupe_gradsync_sumsq(t->gs),
                            t->par);
        if ((rc = tupe_gradsync_share(t->gs, e)))
            return rc;
    }
    t->st.step = step;
    tupe_comm_progress(r->comm, step);
    t->st.tokens += (int64_t)counts[1];
    t->res->step = step;
    t->res->last_loss = *loss;
    return 0;
}

/* "step 10/30  loss 10.1063 (14.580 bits)  lr 0.0008  |g| 1.48  7906 tok/s  ETA 0:03": the
 * loss is the mean over the steps since the previous line, which took step_s each. */
static void progress_line(const run *r, int64_t step, int64_t steps, double loss, double lr,
                          double norm, double tps, double step_s)
{
    char eta[24];
    tupe_fmt_duration(eta, sizeof eta, step_s * (double)(steps - step));
    say(r, TUPE_NOTE_STATUS, "step %lld/%lld  loss %.4f (%.3f bits)  lr %.3g  |g| %.3g  %.0f tok/s  ETA %s",
        (long long)step, (long long)steps, loss, loss / M_LN2, lr, norm, tps, eta);
}

/* After a step: a metrics line and a progress line every --log-every steps (and at the last),
 * and between them a progress line at the progress interval, for slow runs. */
static void report_step(trainer *t, int64_t step, double loss, double norm)
{
    const tupe_pretrain_opts *o = t->r.o;
    t->loss_acc += loss;
    for (int q = 0; q < 4; q++)
        t->ex_acc[q] += t->ex[q];
    t->n_acc++;
    t->note_acc += loss;
    t->n_note++;
    double now = tupe_now();
    t->st.elapsed = now - t->t0;
    int log_now = o->log_every > 0 && (step % o->log_every == 0 || step == o->steps);
    if (log_now) {
        double dt = now - t->t_last, tps = dt > 0 ? (double)(t->st.tokens - t->tok_last) / dt : 0;
        double avg = t->loss_acc / (double)t->n_acc, lr = tupe_lr_at(&t->sched, step);
        progress_line(&t->r, step, o->steps, avg, lr, norm, tps, dt / (double)t->n_acc);
        tupe_rundir_metric(t->dir, "{\"step\":%lld,\"epoch\":%llu,\"loss\":%.6f,\"loss_bits\":%.6f,\"lr\":%.6g,"
                           "\"grad_norm\":%.6g,\"tokens_per_s\":%.1f,\"tokens\":%lld,\"elapsed_s\":%.3f}",
                           (long long)step, (unsigned long long)((step - 1) / t->spe), avg, avg / M_LN2,
                           lr, norm, tps, (long long)t->st.tokens, t->st.elapsed);
        if (t->r.electra) {
            double k = (double)t->n_acc;
            say(&t->r, TUPE_NOTE_STATUS, "  generator loss %.4f  accuracy %.2f%%  discriminator "
                "loss %.4f  accuracy %.2f%%", t->ex_acc[0] / k, 100 * t->ex_acc[1] / k,
                t->ex_acc[2] / k, 100 * t->ex_acc[3] / k);
            tupe_rundir_metric(t->dir, "{\"step\":%lld,\"gen_loss\":%.6f,\"gen_acc\":%.6f,"
                               "\"disc_loss\":%.6f,\"disc_acc\":%.6f}", (long long)step,
                               t->ex_acc[0] / k, t->ex_acc[1] / k, t->ex_acc[2] / k, t->ex_acc[3] / k);
        }
        memset(t->ex_acc, 0, sizeof t->ex_acc);
        t->t_last = now;
        t->tok_last = t->st.tokens;
        t->loss_acc = 0;
        t->n_acc = 0;
    }
    if (o->log_every > 0 && !log_now && now - t->t_note >= t->interval) {
        /* A slow run (a large model on a CPU) says how it goes at the progress interval
         * between its --log-every lines (a progress line, not a metrics line). */
        double dt = now - t->t_note;
        progress_line(&t->r, step, o->steps, t->note_acc / (double)t->n_note, tupe_lr_at(&t->sched, step),
                      norm, dt > 0 ? (double)(t->st.tokens - t->tok_note) / dt : 0, dt / (double)t->n_note);
    }
    if (log_now || now - t->t_note >= t->interval) {
        t->t_note = now;
        t->tok_note = t->st.tokens;
        t->note_acc = 0;
        t->n_note = 0;
    }
}

/* The validation of step `step`, reported as a progress line and a metrics line. */
static int validate(trainer *t, int64_t step, tupe_err *e)
{
    /* the validation reads into the rows of the next step's sequences: they are read again,
     * from where that step begins */
    t->next_step = 0;
    t->cur_epoch = UINT64_MAX;
    tupe_eval_result ev;
    int rc = evaluate(&t->r, t->r.o->eval_sequences, &ev, e);
    if (rc || ev.masked == 0)
        return rc;
    t->res->val_loss = ev.loss;
    t->res->val_acc = ev.acc;
    say(&t->r, TUPE_NOTE_STATUS, "step %lld  validation loss %.4f (%.3f bits)  accuracy %.2f%%  "
        "(%lld sequences)", (long long)step, ev.loss, ev.loss / M_LN2, 100 * ev.acc, (long long)ev.sequences);
    tupe_rundir_metric(t->dir, "{\"step\":%lld,\"val_loss\":%.6f,\"val_loss_bits\":%.6f,\"val_acc\":%.6f,"
                       "\"val_masked\":%lld}", (long long)step, ev.loss, ev.loss / M_LN2, ev.acc,
                       (long long)ev.masked);
    if (ev.electra) {
        say(&t->r, TUPE_NOTE_STATUS, "step %lld  validation discriminator loss %.4f  accuracy "
            "%.2f%%  (%.2f%% of %lld tokens replaced)", (long long)step, ev.rtd_loss,
            100 * ev.rtd_acc, 100 * ev.replaced, (long long)ev.tokens);
        say(&t->r, TUPE_NOTE_STATUS, "step %lld  validation discriminator AUC %.4f  precision "
            "%.4f  recall %.4f (of \"replaced\")", (long long)step, ev.rtd_auc,
            ev.rtd_precision, ev.rtd_recall);
        char auc[48] = ""; /* none with one class only */
        if (!isnan(ev.rtd_auc))
            snprintf(auc, sizeof auc, ",\"val_disc_auc\":%.6f", ev.rtd_auc);
        tupe_rundir_metric(t->dir, "{\"step\":%lld,\"val_disc_loss\":%.6f,\"val_disc_acc\":%.6f,"
                           "\"val_replaced\":%.6f,\"val_tokens\":%lld%s,\"val_disc_precision\":%.6f,"
                           "\"val_disc_recall\":%.6f}", (long long)step, ev.rtd_loss, ev.rtd_acc,
                           ev.replaced, (long long)ev.tokens, auc, ev.rtd_precision,
                           ev.rtd_recall);
    }
    return 0;
}

/* Steps until --steps, a stop, or an error; then, at the end of the schedule, the final
 * validation and checkpoint. */
static int train(trainer *t, volatile sig_atomic_t *stop, tupe_err *e)
{
    const tupe_pretrain_opts *o = t->r.o;
    t->interval = tupe_progress_interval();
    t->t_last = t->t_start = t->t_note = tupe_now();
    t->t0 = t->t_last - t->st.elapsed;
    t->tok_last = t->tok_note = t->st.tokens;
    t->saved_at = t->resume_from[0] ? t->st.step : -1;
    t->cur_epoch = UINT64_MAX;
    t->next_step = 0;
    t->stop = stop;
    int rc = 0;
    for (int64_t step = t->st.step + 1; step <= o->steps; step++) {
        double loss = 0, norm = 0;
        if ((rc = train_step(t, step, &loss, &norm, e)))
            break;
        report_step(t, step, loss, norm);
        if (o->eval_every > 0 && step % o->eval_every == 0 && step != o->steps && (rc = validate(t, step, e)))
            break;
        /* A step to keep is saved even off the --save-every grid: keeping it is the point. */
        if (((o->save_every > 0 && step % o->save_every == 0) || is_keep_step(o, step)) &&
            step != o->steps && (rc = save(t, e)))
            break;
        if (t->leave) { /* decided with the step's sums (train_step) */
            if (t->saved_at != step)
                rc = save(t, e);
            t->res->interrupted = !rc;
            break;
        }
    }
    if (!rc && !t->res->interrupted && t->st.step == o->steps) {
        if ((rc = validate(t, t->st.step, e)))
            return rc;
        if (t->saved_at != t->st.step)
            rc = save(t, e);
    }
    t->res->skipped = t->st.skipped;
    return rc;
}

int tupe_pretrain_run(const tupe_pretrain_opts *o, tupe_comm *comm, tupe_backend *be,
                      volatile sig_atomic_t *stop, tupe_pretrain_result *res, tupe_err *e)
{
    memset(res, 0, sizeof *res);
    res->val_loss = res->val_acc = NAN;
    trainer *t = calloc(1, sizeof *t);
    if (!t)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    t->r.o = o;
    t->r.comm = comm;
    t->r.rank = tupe_comm_rank(comm);
    t->r.slot = tupe_comm_slot(comm);
    t->r.world = tupe_comm_world(comm);
    t->res = res;
    tupe_schedule sched = {o->lr, o->end_lr, o->warmup, o->steps, o->power, o->adam.electra};
    t->sched = sched;
    int rc;
    if (!(rc = check_options(t, e)) && !(rc = find_run(t, e)) && !(rc = open_data(t, e)) &&
        !(rc = build_model(t, be, e)) && !(rc = load_weights(t, e)) && !(rc = agree(t, e)) &&
        !res->complete && !(rc = start_run_dir(t, e))) {
        announce(t);
        rc = train(t, stop, e);
    }
    tupe_err end_err; /* metrics.jsonl or the event file could not be written */
    if (tupe_rundir_end(t->dir, &end_err) && !rc) {
        *e = end_err;
        rc = e->code;
    }
    tupe_gradsync_free(t->gs);
    tupe_adamw_free(t->opt);
    tupe_shardr_close(t->rd);
    free(t->mloss);
    if (t->dml)
        t->be->free(t->be, t->dml);
    ahead_free(t);
    free_run(&t->r);
    free(t);
    return rc;
}

/* Evaluation's probes: the one read (checked against the data and the model) and the one
 * written. */
static int open_probes(run *r, const char *ckpt, tupe_err *e)
{
    const tupe_pretrain_opts *o = r->o;
    if ((o->probe || o->write_probe) && !r->electra)
        return tupe_fail(e, TUPE_EUSAGE, "--%s scores a discriminator: %s is a masked-LM model, "
                         "not an ELECTRA pair", o->probe ? "probe" : "write-probe", ckpt);
    if (o->write_probe && r->world > 1)
        return tupe_fail(e, TUPE_EUSAGE, "--write-probe: one process writes the probe (this job "
                         "has %d ranks)", r->world);
    if (o->probe && r->crop)
        return tupe_fail(e, TUPE_EUSAGE, "--seq-len: the probe %s fixes the sequences", o->probe);
    tupe_rtdprobe_info info = {(uint32_t)r->cfg.vocab_size, r->meta->vocab_hash, o->seed,
                            TUPE_MASK_EVAL_EPOCH, r->mask.mask_id, o->mask_prob};
    if (o->probe) {
        int rc = tupe_rtdprobe_read(&r->probe, o->probe, e);
        if (rc)
            return rc;
        const tupe_rtdprobe_info *pi = &r->probe->info;
        char a[22], b[22];
        tupe_hash_hex(pi->vocab_hash, a);
        tupe_hash_hex(info.vocab_hash, b);
        if (pi->vocab_size != info.vocab_size || pi->vocab_hash != info.vocab_hash)
            return tupe_fail(e, TUPE_EDATA, "%s: a probe of a vocabulary of %u tokens (%s); %s's "
                             "has %u (%s)", o->probe, pi->vocab_size, a, o->data, info.vocab_size, b);
        if (pi->mask_id != info.mask_id)
            return tupe_fail(e, TUPE_EDATA, "%s: [MASK] is %d there, %d in %s", o->probe,
                             pi->mask_id, info.mask_id, o->data);
        if (r->probe->max_len > r->seq_len)
            return tupe_fail(e, TUPE_EDATA, "%s: sequences of up to %u tokens; those of %s have "
                             "%u", o->probe, r->probe->max_len, o->data, r->seq_len);
        info = *pi; /* a probe rewritten is the same corruption */
    }
    return o->write_probe ? tupe_rtdprobe_create(&r->pw, o->write_probe, &info, e) : 0;
}

int tupe_eval_checkpoint(const char *checkpoint, const char *data, const tupe_pretrain_opts *o,
                         tupe_comm *comm, tupe_backend *be, tupe_eval_result *res, tupe_err *e)
{
    tupe_pretrain_opts oo = *o;
    oo.data = data;
    run r;
    memset(&r, 0, sizeof r);
    r.o = &oo;
    r.comm = comm;
    r.rank = tupe_comm_rank(comm);
    r.slot = tupe_comm_slot(comm);
    r.world = tupe_comm_world(comm);
    r.mb = o->micro_batch > 0 ? o->micro_batch : 16;
    tupe_shardr *rd;
    int rc = open_reader(&r, &rd, TUPE_SPLIT_VALID, 0, e);
    if (rc)
        return rc;
    r.meta = tupe_shardr_meta(rd);
    r.seq_len = r.meta->seq_len;
    if (o->eval_seq_len > 0 && (uint32_t)o->eval_seq_len > r.seq_len)
        rc = tupe_fail(e, TUPE_EUSAGE, "--seq-len %d: the sequences of %s have %u tokens (make "
                       "longer ones with tupe-shard --seq-len)", o->eval_seq_len, data, r.seq_len);
    else if (o->eval_seq_len > 0)
        r.crop = (uint32_t)o->eval_seq_len;
    if (!rc && !o->probe && r.meta->split[TUPE_SPLIT_VALID].sequences == 0)
        rc = tupe_fail(e, TUPE_EDATA, "%s: no validation split (make one with tupe-shard "
                       "--valid-fraction)", data);
    if (!rc && !(rc = resolve_config(&r, checkpoint, e)) && !(rc = mask_setup(&r, e)) &&
        !(rc = open_probes(&r, checkpoint, e)) &&
        !(rc = alloc_buffers(&r, r.mb, e)) && !(rc = create_model(&r, be, e)) &&
        !(rc = o->rope_scaling ? tupe_model_rope_scaling(r.m, o->rope_scaling, o->rope_factor, e)
                               : 0)) {
        char *js = NULL;
        json_t *st = NULL;
        if (!(rc = tupe_ckpt_load(checkpoint, r.m, NULL, &js, 0, e)) && (st = state_parse(js), 1) &&
            !(rc = check_vocab_hash(&r, checkpoint, st, e)) &&
            !(rc = check_trained_len(&r, checkpoint, st, e)) &&
            !(rc = evaluate(&r, o->eval_sequences, res, e)) && res->masked == 0)
            rc = tupe_fail(e, TUPE_EFAIL, "%s: no position of the %lld sequence%s evaluated was "
                           "masked, so there is no loss (more --eval-sequences, or a larger "
                           "--mask-prob)", data, (long long)res->sequences, res->sequences == 1 ? "" : "s");
        if (!rc && r.pw) {
            rc = tupe_rtdprobe_commit(r.pw, e);
            r.pw = NULL;
        }
        json_decref(st);
        free(js);
    }
    tupe_shardr_close(rd);
    free_run(&r);
    return rc;
}
