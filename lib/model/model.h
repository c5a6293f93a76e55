/* The encoder of every positional-encoding variant (spec §2-§5, model contract §3), its heads
 * and losses, forward and backward, on a compute backend.
 *
 * A model owns one device allocation (the arena) holding its parameters, their gradients and
 * every activation, sized at creation from the configuration and a capacity (largest batch,
 * sequence length and number of masked positions it will see). Parameters and gradients are
 * each one flat buffer with the layout of params.h, so that an optimizer, a data-parallel
 * all-reduce or a checkpoint writer can treat them as a whole.
 *
 * Typical step:
 *     tupe_model_zero_grad(m);
 *     tupe_model_forward(m, &batch, &step, &out, &e);    // loss in out.loss
 *     tupe_model_backward(m, &e);                        // gradients accumulate
 *     ... optimizer on tupe_model_params / tupe_model_grads ...
 */
#ifndef TUPE_MODEL_H
#define TUPE_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "model/config.h"
#include "model/params.h"
#include "model/posenc.h"

typedef struct tupe_model tupe_model;

/* {0, 0, 0}: parameters only (conversion, inspection of weights): no gradients and no
 * activations are allocated; forward passes and gradient access fail. */
typedef struct tupe_capacity {
    int batch;      /* sequences per forward pass */
    int seq;        /* padded length T (at most max_position_embeddings where the variant
                       has a learned position table) */
    int masked;     /* masked positions per forward pass (MLM head); 0 = batch * seq. The
                       logits take masked x vocab_size reals: give a tight bound */
} tupe_capacity;

/* One forward pass's input, on the host. Sequences are right-padded: positions >= lengths[b]
 * are padding (their ids are ignored). */
/* A batch's integer inputs already on the device, uploaded ahead by the caller (backend.h,
 * upload_ahead): ids [B*T], lengths [B], mask_pos and mask_label [rows], the same values as the
 * batch's host arrays (which the forward pass still checks and reads). */
typedef struct tupe_batch_dev {
    const tupe_dev *ids, *lengths, *mask_pos, *mask_label;
} tupe_batch_dev;

typedef struct tupe_batch {
    int B, T;
    const int32_t *ids;         /* [B*T] */
    const int32_t *lengths;     /* [B], each in 1..T */
    const int32_t *types;       /* [B*T] token types, or NULL (all 0) */
    /* masked-LM head */
    int M;
    const int32_t *mask_pos;    /* [M] distinct flat positions b*T + t, t < lengths[b] */
    const int32_t *mask_label;  /* [M] the original token ids */
    /* classification (num_labels >= 2) or regression (num_labels == 1) head */
    const int32_t *labels;      /* [B] */
    const float *targets;       /* [B] */
    double loss_norm;           /* the summed loss is divided by this; 0 = M (MLM) or B */
    uint64_t sample_offset;     /* global index of sequence 0: names its dropout streams */
    /* replaced-token head (rtd_head): 1 where the token was replaced, at every position
     * [B*T] (padding ignored); the loss is over every non-padding position */
    const int32_t *rtd_label;
    /* an ELECTRA pair (model/electra.h): ids hold the generator's (masked) input and
     * mask_label the original tokens; the discriminator's loss, divided by rtd_norm (0 = the
     * batch's non-padding tokens), enters the total with the weight rtd_weight (0 = 50).
     * The generator's samples draw Gumbel noise named by (noise_seed, noise_step, the
     * sequence's key, position): noise_key [B], or NULL for sample_offset + b. */
    double rtd_norm, rtd_weight;
    uint64_t noise_seed;
    uint32_t noise_step;
    const uint64_t *noise_key;
    /* an ELECTRA pair scored on a given probe (train/rtdprobe.h): the discriminator's input
     * and labels [B*T] as given, nothing sampled (the generator still runs on ids) */
    const int32_t *probe_ids, *probe_labels;
    /* the same inputs on the device (a masked-LM batch of a model without an ELECTRA pair or
     * token types), taken into the model's input buffers on the device, or NULL: uploaded */
    const tupe_batch_dev *dev;
    /* The masked-LM head's rows: 0 (= M), or M to the capacity's masked, the same every step
     * (a training step with the same launches, of the same shapes, whatever M: a CUDA graph's
     * prerequisite); mask_pos and mask_label then hold `rows` entries, those past M padding
     * rows: position -1 and label -1 (backend.h: a zero row, an ignored label). The loss,
     * correct and count are those of the M real rows. */
    int rows;
} tupe_batch;

/* Training-mode settings of a forward pass; NULL means evaluation (no dropout). */
typedef struct tupe_step {
    uint64_t seed;              /* dropout seed */
    uint32_t step;              /* training step: dropout differs from step to step */
    /* The step's parameter block (backend.h's TUPE_PAR_*), or NULL: the dropout kernels read
     * step and the sample offset of micro-batch `slot` from it, and the masked-LM loss its
     * divisor (the batch's loss_norm, which the block must then hold). */
    const tupe_dev *par;
    int slot;
} tupe_step;

typedef struct tupe_fwd_out {
    double loss;                /* loss_sum / loss_norm: the value whose gradient backward gives */
    double loss_sum;            /* summed natural-log cross-entropy (or squared error) */
    int64_t correct;            /* predictions equal to the label (MLM and classification) */
    int64_t count;              /* M, or B for the heads (the non-padding tokens for rtd_head) */
    double norm;                /* the divisor of loss_sum: the batch's loss_norm, else count */
    /* an ELECTRA pair: loss = MLM + rtd_weight * RTD; loss_sum, correct and count above are
     * the generator's; below, the discriminator's summed loss, its correct predictions over
     * rtd_count non-padding tokens, and how many of them were replaced */
    double rtd_loss_sum;
    int64_t rtd_correct, rtd_count, rtd_replaced;
} tupe_fwd_out;

int tupe_model_create(tupe_model **m, const tupe_config *cfg, tupe_backend *be,
                      const tupe_capacity *cap, tupe_err *e);
/* The same with flat buffers (parameters, gradients, master) that hold a multiple of
 * flat_multiple elements, the ones past the layout's total zeros: room for collectives in
 * equal pieces (train/gradsync.h). */
int tupe_model_create_padded(tupe_model **m, const tupe_config *cfg, tupe_backend *be,
                             const tupe_capacity *cap, size_t flat_multiple, tupe_err *e);
void tupe_model_free(tupe_model *m);
/* A model over a caller's flat buffers (model/electra.c: each network of a pair): `lay` (taken
 * over, freed with the model) addresses params, grads and master (which may be NULL), whose
 * elements the caller owns; only the activations are allocated. tupe_model_zero_grad,
 * _init and _params_get/_put are the owner's business, not this model's. */
int tupe_model_create_view(tupe_model **m, const tupe_config *cfg, tupe_backend *be,
                           const tupe_capacity *cap, tupe_layout *lay, tupe_dev *params,
                           tupe_dev *grads, tupe_dev *master, tupe_err *e);

const tupe_config *tupe_model_config(const tupe_model *m);
tupe_backend *tupe_model_backend(const tupe_model *m);
const tupe_layout *tupe_model_layout(const tupe_model *m);
/* RoPE's angles from now on (evaluation past the trained length): posenc.h's
 * tupe_rope_scaling with factor >= 1. Another variant: TUPE_EUSAGE. */
int tupe_model_rope_scaling(tupe_model *m, int scaling, double factor, tupe_err *e);
/* Bytes of the arena (parameters, gradients, activations). */
size_t tupe_model_arena_bytes(const tupe_model *m);

/* The flat buffers: `total` elements each (tupe_model_layout(m)->total), real (backend.h). */
tupe_dev *tupe_model_params(tupe_model *m);
tupe_dev *tupe_model_grads(tupe_model *m);
/* The wide (fp32) master copy of the parameters, when the backend's real elements are narrower
 * (cuda-bf16); NULL otherwise, where the parameters are their own master. */
tupe_dev *tupe_model_master(tupe_model *m);
/* Every parameter to or from the host as fp32, flat in the layout (through the master copy
 * when there is one, so that nothing is lost to the bf16 working copy). */
void tupe_model_params_get(tupe_model *m, float *flat);
void tupe_model_params_put(tupe_model *m, const float *flat);
void tupe_model_zero_grad(tupe_model *m);
/* Elements of the flat buffers: the layout's total rounded up to the flat_multiple of
 * tupe_model_create_padded (elements past the total stay zero). */
size_t tupe_model_flat_size(const tupe_model *m);
/* Where the next backward passes add the gradients: dst (flat_size reals, laid out as
 * tupe_model_grads), or NULL for tupe_model_grads itself. */
void tupe_model_grad_target(tupe_model *m, tupe_dev *dst);
/* fn(ctx, lo) is called during tupe_model_backward each time the gradients of the elements
 * from lo to the end of the layout are final, the word, position and token-type embeddings
 * and the positional terms (below the first layer) excepted: after the heads, after each
 * layer from the last down (lo: that layer's first element), and at the end (lo = 0). The
 * backend work computing them is queued then, maybe not done. fn NULL: none. */
typedef void (*tupe_grad_ready_fn)(void *ctx, size_t lo);
void tupe_model_on_grad_ready(tupe_model *m, tupe_grad_ready_fn fn, void *ctx);
/* fn(ctx, hi) is called during tupe_model_forward before the work that reads the parameters of
 * the elements below hi is queued, hi growing: the embeddings and positional terms (below the
 * first layer), then each layer from the first up, then the heads (hi = flat_size), so that
 * parameters still arriving (train/gradsync.h) are waited for part by part. fn NULL: none. */
typedef void (*tupe_params_need_fn)(void *ctx, size_t hi);
void tupe_model_on_params_need(tupe_model *m, tupe_params_need_fn fn, void *ctx);
/* The `lo` of those calls, in their order (num_layers + 2 of them, the last 0), into lo[]. */
size_t tupe_model_grad_groups(const tupe_model *m, size_t *lo, size_t cap);

/* BERT initialization (spec §5) from the seed: N(0, initializer_range) for weights and
 * embeddings, zero biases, unit LayerNorm; the classification head U(+-1/sqrt(fan_in)). */
int tupe_model_init(tupe_model *m, uint64_t seed, tupe_err *e);
/* Same, for the tensors whose names start with `prefix` only (e.g. "classifier."). */
int tupe_model_init_prefix(tupe_model *m, uint64_t seed, const char *prefix, tupe_err *e);

/* One tensor to or from the host, as fp32 (n must equal its numel). Unknown name: TUPE_EDATA. */
int tupe_model_set(tupe_model *m, const char *name, const float *src, size_t n, tupe_err *e);
int tupe_model_get(tupe_model *m, const char *name, float *dst, size_t n, tupe_err *e);
int tupe_model_get_grad(tupe_model *m, const char *name, float *dst, size_t n, tupe_err *e);
/* The same in double precision (exact on the cpu64 backend). */
int tupe_model_set_f64(tupe_model *m, const char *name, const double *src, size_t n, tupe_err *e);
int tupe_model_get_grad_f64(tupe_model *m, const char *name, double *dst, size_t n, tupe_err *e);

/* A forward pass's sums (issue 28's P5: a step's scalars stay on the device): device doubles
 * (backend.h's TUPE_DBL) that the losses add into, read by the host once per logging interval.
 * An ELECTRA pair: the generator's loss and correct predictions, then the discriminator's. */
enum { TUPE_SUM_LOSS = 0, TUPE_SUM_CORRECT, TUPE_SUM_RTD_LOSS, TUPE_SUM_RTD_CORRECT, TUPE_NSUMS };
/* Where the next forward passes add their sums: sum k at dst + k * stride doubles (the caller
 * zeroes them). With a target, a pass queues its work and returns without waiting for the
 * device: out's loss, loss_sum, correct, rtd_loss_sum and rtd_correct are 0 (the counts are
 * there; device errors come with the caller's next read). dst NULL (the default): each pass
 * reads its own sums back into out (one host wait). */
void tupe_model_sums_target(tupe_model *m, tupe_dev *dst, size_t stride);

/* Forward pass and loss. Errors (TUPE_EDATA) name what is wrong with the batch. */
int tupe_model_forward(tupe_model *m, const tupe_batch *b, const tupe_step *step,
                       tupe_fwd_out *out, tupe_err *e);
/* Gradients of the last forward pass's loss, added into tupe_model_grads. The work is queued:
 * device errors come with the next read (a download, a forward pass without a sums target,
 * the backend's check). */
int tupe_model_backward(tupe_model *m, tupe_err *e);

/* What the last forward pass computed, for inspection (tupe-attnviz, tests). */
enum tupe_probe {
    TUPE_PROBE_LOGITS = 0,    /* [M, V] (MLM) or [B, C]; valid until backward */
    TUPE_PROBE_POS_BIAS,      /* [H, T, T]: positional bias added to every layer's scores */
    TUPE_PROBE_ATTN_PROBS,    /* [B, H, T, T] of a layer (before dropout; valid until backward) */
    TUPE_PROBE_QKV,           /* [B*T, 3D] of a layer: Q | K | V after their biases (BERT-Ad:
                                 with the position projections added); unscaled */
    TUPE_PROBE_HIDDEN,        /* [B*T, D]: input of layer `layer` (layer L: the encoder output) */
    TUPE_PROBE_POS_QK         /* [2, R, D]: position queries and keys (TUPE: R = T+1, the
                                 queries unscaled; BERT-Ad: R = T) */
};
/* A training forward pass of the masked-LM head replaces the logits by their gradient (the
 * fused classifier: one pass over them, backend.h xent_fused), and a TUPE_PROBE_LOGITS
 * after it computes them again (the decoder's product, in a buffer of its own). keep 1:
 * training passes keep the logits (the gradient then takes a pass of its own in backward),
 * for a caller that reads them at every step (an ELECTRA generator's samples). */
void tupe_model_keep_logits(tupe_model *m, int keep);
/* Elements of a probe for the last forward pass; 0 when the model does not have it. */
size_t tupe_model_probe_size(const tupe_model *m, int probe);
int tupe_model_probe(tupe_model *m, int probe, int layer, float *dst, size_t n, tupe_err *e);

#endif
