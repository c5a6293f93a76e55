/* Masked-LM pre-training: the loop behind tupe-pretrain.
 *
 * One process per rank (lib/train/comm.h). Step s trains on the global batch of `batch` sequences
 * at positions [s·batch, (s+1)·batch) of the epoch order of the shard reader (the epoch's
 * tail that does not fill a batch is dropped); rank r reads every world-th of them, in
 * micro-batches of `micro_batch`. Masks are drawn per (seed, epoch, stored index) and the loss
 * is the mean over every masked position of the global batch, so the gradient does not depend
 * on the number of ranks or micro-batches (up to the order of floating-point sums). Gradients
 * are summed across ranks before clipping and the AdamW update, which every rank performs.
 *
 * A run directory (train/rundir.h: the rules every run directory follows) holds:
 *   config.json                 the model configuration
 *   metrics.jsonl               one JSON object per logged step and per evaluation
 *   tensorboard/                the same values as TensorBoard event files (train/rundir.h)
 *   checkpoints/step-NNNNNNNN/  model.safetensors + optimizer.safetensors (lib/model/checkpoint.h);
 *                               the training state (step, data position, counters) rides in
 *                               model.safetensors' metadata as "train_state"
 * A run resumed from its latest checkpoint continues with the same data order, masks, dropout
 * and optimizer state, so N + N steps end with the same weights as 2N steps in one go. */
#ifndef TUPE_PRETRAIN_H
#define TUPE_PRETRAIN_H

#include <signal.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "base/note.h"
#include "base/pathguard.h"
#include "model/config.h"
#include "model/optim.h"
#include "train/comm.h"

#define TUPE_PRETRAIN_MAX_KEEP 64

typedef struct tupe_pretrain_opts {
    const char *data;            /* shard directory */
    const char *out;             /* run directory */
    const char *model;           /* preset name or JSON file; NULL: the configuration of
                                    `init`, else bert-base */
    const char *position;        /* variant override, or NULL */
    int untie_cls;               /* -1 keep the configuration's; 0 or 1 */
    double dropout, attention_dropout; /* < 0 keep the configuration's */
    const char *init;            /* checkpoint to start the weights from (not its optimizer), or NULL */
    int64_t steps, warmup;
    int batch;                   /* sequences per step, all ranks together */
    int micro_batch;             /* sequences per forward pass on one rank (0: batch / world) */
    double lr, end_lr, power;    /* schedule: peak, final value, decay power */
    tupe_adamw_cfg adam;
    uint64_t seed;
    double mask_prob, mask_frac, random_frac;
    int64_t log_every, eval_every, save_every; /* 0 = never (evaluation and saving also at the end) */
    int64_t eval_sequences;      /* validation sequences per evaluation (0 = the whole split) */
    int keep_last;               /* checkpoints kept besides the listed steps */
    int64_t keep_steps[TUPE_PRETRAIN_MAX_KEEP];
    int n_keep_steps;
    int resume;                  /* continue from the latest checkpoint of the run directory */
    int64_t stop_after;          /* leave (with a checkpoint) after this many steps of this
                                    invocation; 0 = run to the end of the schedule */
    double max_time;             /* leave (with a checkpoint) after the step that ends past this
                                    many seconds of this invocation; 0 = no limit */
    int skip_nonfinite;          /* skip updates with a non-finite loss or gradient */
    tupe_note_fn note;           /* progress lines and remarks (rank 0's), or NULL */
    void *note_ctx;
    int prefetch;                /* frames decoded ahead by the shard reader */
    const char *tensorboard;     /* event files of the metrics (train/rundir.h); NULL: the run
                                    directory's tensorboard/ */
    int no_tensorboard;          /* metrics.jsonl only */
    const tupe_guard *inputs;    /* the command line's inputs, which -o is held apart from again
                                    once its lock is taken (train/rundir.h), or NULL */
    int zero;                    /* shard the optimizer over the ranks (ZeRO-1; 1) or not (0) */
    double bucket_mb;            /* MiB of gradients sent at a time (train/gradsync.h; 25) */
    int grad_reduce;             /* TUPE_REDUCE_TREE (fixed order; default) or _NCCL (train/comm.h) */
    /* tupe_eval_checkpoint only: */
    int eval_seq_len;            /* the first N tokens of every validation sequence (0: all) */
    int eval_bucket;             /* loss per bucket of this many positions (0: none) */
    int rope_scaling;            /* RoPE's angles (model/posenc.h enum tupe_rope_scaling) */
    double rope_factor;          /* and their factor (>= 1) */
    const char *probe;           /* an ELECTRA pair scored on this probe (train/rtdprobe.h):
                                    its corrupted sequences rather than the split's masks and
                                    the pair's own samples (eval_seq_len 0), or NULL */
    const char *write_probe;     /* an ELECTRA pair: write the probe it scored here (one
                                    rank), or NULL */
    int objective;               /* TUPE_OBJ_MLM (default) or TUPE_OBJ_ELECTRA (model/electra.h) */
    double generator_size;       /* ELECTRA: the generator's width as a fraction of the
                                    discriminator's; 0 = ELECTRA's for the size (1/3 for a
                                    768-wide model, else 1/4) */
    double rtd_weight;           /* ELECTRA: lambda, the discriminator loss's weight (50) */
} tupe_pretrain_opts;

enum { TUPE_OBJ_MLM = 0, TUPE_OBJ_ELECTRA = 1 };

/* The paper's defaults (tupe-spec §7): batch 256, lr 1e-4, warmup 10k, 1M steps, ... */
void tupe_pretrain_defaults(tupe_pretrain_opts *o);

/* Outcome of a run, for the caller's message and exit status. */
typedef struct tupe_pretrain_result {
    int64_t step;                /* last step completed */
    int interrupted;             /* stopped by a signal (a checkpoint was written) */
    int complete;                /* resumed at or past --steps: nothing was done */
    int64_t skipped;             /* updates skipped for non-finite values */
    double last_loss, val_loss, val_acc;
    char checkpoint[4096];       /* the last checkpoint written or resumed from ("" if none) */
} tupe_pretrain_result;

/* Whether training can use `world` ranks (a tupe_comm_fit, train/comm.h; opts: the
 * tupe_pretrain_opts): --batch divides among them and --micro-batch divides each rank's share.
 * TUPE_EUSAGE naming the options otherwise. */
int tupe_pretrain_fit_world(int world, const void *opts, tupe_err *e);

/* Train. *stop is polled after every step (set it from a signal handler): the run then
 * writes a checkpoint and returns with result->interrupted. */
int tupe_pretrain_run(const tupe_pretrain_opts *o, tupe_comm *comm, tupe_backend *be,
                   volatile sig_atomic_t *stop, tupe_pretrain_result *result, tupe_err *e);

/* Validation loss of a checkpoint on a shard directory's validation split, with the fixed
 * evaluation masks: comparable across checkpoints and variants. With eval_seq_len, on the
 * first N tokens of every sequence (masks drawn on those): past the trained length for
 * RoPE, ALiBi and NoPE, refused for a learned position table (it has no rows there); with
 * eval_bucket, the loss of every bucket of positions too. */
#define TUPE_EVAL_MAX_BUCKETS 256
typedef struct tupe_eval_result {
    double loss, acc;            /* mean cross-entropy (nats), accuracy of the masked tokens
                                    (ELECTRA: the generator's) */
    int64_t masked, sequences;
    int seq_len;                 /* the positions evaluated (0..seq_len-1) */
    int nbuckets;                /* with eval_bucket: positions [k w, (k+1) w) */
    double bucket_loss[TUPE_EVAL_MAX_BUCKETS];   /* mean cross-entropy, NAN where none masked */
    int64_t bucket_masked[TUPE_EVAL_MAX_BUCKETS];
    int electra;                 /* the checkpoint is an ELECTRA pair: the values below are set */
    double rtd_loss, rtd_acc;    /* the discriminator's mean binary cross-entropy and accuracy
                                    over every non-padding token, with fixed sampling noise */
    double replaced;             /* fraction of those tokens replaced by the generator */
    double rtd_auc, rtd_precision, rtd_recall; /* of "replaced" over those tokens (NaN AUC with
                                    one class only): train/rtdmetrics.h */
    int64_t tokens;
} tupe_eval_result;
int tupe_eval_checkpoint(const char *checkpoint, const char *data, const tupe_pretrain_opts *o,
                         tupe_comm *comm, tupe_backend *be, tupe_eval_result *r, tupe_err *e);

#endif
