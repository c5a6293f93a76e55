/* AdamW as fairseq runs it (spec §7, model contract §5), the learning-rate schedule (linear
 * warmup, then linear or polynomial decay) and global-norm gradient clipping.
 *
 * The moments live on the model's backend, in the layout of the parameters (params.h), so
 * that a checkpoint stores them per tensor and a data-parallel trainer can shard them. */
#ifndef TUPE_OPTIM_H
#define TUPE_OPTIM_H

#include <stdint.h>

#include "model/model.h"

typedef struct tupe_adamw_cfg {
    double beta1, beta2, eps;
    double weight_decay;
    double clip;             /* clip the global gradient norm to this; 0 = no clipping */
    int exclude_ln_bias;     /* no decay for biases and LayerNorm parameters */
    int electra;             /* ELECTRA's AdamWeightDecayOptimizer (google-research/electra
                                model/optimization.py): no bias correction (the step is lr
                                m / (sqrt(v) + eps)), and TensorFlow's clipping (scale
                                clip / max(norm, clip), no 1e-6) */
} tupe_adamw_cfg;

/* The paper's: betas (0.9, 0.999), eps 1e-6, weight decay 0.01 on everything, clip 1.0. */
void tupe_adamw_defaults(tupe_adamw_cfg *c);

typedef struct tupe_schedule {
    double peak;             /* learning rate at the end of warmup */
    double end;              /* learning rate at step `total` */
    int64_t warmup, total;   /* steps */
    double power;            /* 1 = linear decay */
    int electra;             /* ELECTRA's: the warmup multiplies a decay that starts at step 0 */
} tupe_schedule;

/* Learning rate of step t (1-based): peak t/W for t <= W, then
 * (peak - end) ((total - t)/(total - W))^power + end, and `end` after total.
 * electra: with u = t - 1 (the step count before the update, as TensorFlow's global step),
 * ((peak - end) (1 - u/total)^power + end) min(1, u/W): the first update has learning rate 0
 * and step W has peak (1 - (W-1)/total), not peak. */
double tupe_lr_at(const tupe_schedule *s, int64_t t);

typedef struct tupe_adamw tupe_adamw;

int tupe_adamw_create(tupe_adamw **o, tupe_model *m, const tupe_adamw_cfg *c, tupe_err *e);
/* ZeRO-1: moments only for the elements [ranges[2i], ranges[2i+1]) of the flat layout (sorted,
 * apart; cut to the layout), the data-parallel rank's shard; the updates below touch only
 * those elements. ranges NULL: all of them (tupe_adamw_create). */
int tupe_adamw_create_ranges(tupe_adamw **o, tupe_model *m, const tupe_adamw_cfg *c,
                             const size_t *ranges, size_t nranges, tupe_err *e);
void tupe_adamw_free(tupe_adamw *o);
/* Elements it keeps moments for. */
size_t tupe_adamw_held(const tupe_adamw *o);
const tupe_adamw_cfg *tupe_adamw_config(const tupe_adamw *o);
/* Updates done so far (t of the bias correction); settable when resuming. */
int64_t tupe_adamw_steps(const tupe_adamw *o);
void tupe_adamw_set_steps(tupe_adamw *o, int64_t t);
/* The moments to or from host arrays of the whole layout (total floats each): only the
 * elements kept are written (get) or read (put). */
void tupe_adamw_moments_get(tupe_adamw *o, float *exp_avg, float *exp_avg_sq);
void tupe_adamw_moments_put(tupe_adamw *o, const float *exp_avg, const float *exp_avg_sq);

/* Per-tensor learning-rate factors (layer-wise decay, lib/glue): scale[i] multiplies the
 * learning rate of the layout's tensor i (copied; NULL: 1 for all). */
int tupe_adamw_set_lr_scale(tupe_adamw *o, const double *scale, tupe_err *e);

/* Euclidean norm of all gradients (not finite when any gradient is not). */
double tupe_grad_norm(tupe_model *m);
/* One update with learning rate lr: clips by the global norm (computed here unless
 * grad_norm >= 0 is given), then AdamW on every parameter it keeps moments for. Returns the
 * norm before clipping. */
double tupe_adamw_step(tupe_adamw *o, double lr, double grad_norm);
/* The same, the clipping factor computed on the device from sumsq, the gradient's global sum
 * of squares in a device double (TUPE_DBL; train/gradsync.h leaves it there): no host wait.
 * The factor is the one tupe_adamw_step computes from its root, bit for bit. */
void tupe_adamw_step_dev(tupe_adamw *o, double lr, const tupe_dev *sumsq, const tupe_dev *par);
/* The step size (bias corrections in) the next update at learning rate lr takes: with lr, what
 * a step's parameter block holds (backend.h's TUPE_PAR_*), where a device backend's update
 * reads them when par (above) is the block; NULL: the values given. */
double tupe_adamw_next_step_size(const tupe_adamw *o, double lr);
/* The same update restricted to elements [lo, hi) of the flat buffers; grad_norm must be the
 * global norm (>= 0). Each call counts as a step (the bias correction's t advances). */
void tupe_adamw_step_range(tupe_adamw *o, double lr, double grad_norm, size_t lo, size_t hi);

#endif
