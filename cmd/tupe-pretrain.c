/* tupe-pretrain: masked-LM pre-training of every positional-encoding variant, on one process or
 * many (mpirun, srun), resumable exactly. The loop is lib/train/pretrain.c. */
#include <jansson.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "cli/cli.h"
#include "cli/devicearg.h"
#include "cli/process.h"
#include "model/posenc.h"
#include "train/comm.h"
#include "train/pretrain.h"

enum {
    O_DATA = 1, O_OUT, O_MODEL, O_POSITION, O_UNTIE, O_TIE, O_CKPT, O_BATCH, O_MICRO, O_LR,
    O_END_LR, O_POWER, O_WARMUP, O_STEPS, O_SEED, O_BETA1, O_BETA2, O_EPS, O_WD, O_CLIP,
    O_EXCL, O_DROPOUT, O_ATTN_DROPOUT, O_MASK_PROB, O_LOG, O_EVAL, O_EVAL_SEQ, O_SAVE, O_KEEP,
    O_KEEP_STEP, O_RESUME, O_STOP_AFTER, O_MAX_TIME, O_SKIP, O_DEVICE, O_PRECISION, O_PREFETCH, O_FORMAT,
    O_TB, O_NO_TB, O_ZERO, O_BUCKET, O_GRAD_REDUCE, O_SEQLEN, O_POS_BUCKET, O_ROPE_SCALING,
    O_OBJECTIVE, O_GEN_SIZE, O_RTD_WEIGHT, O_RECIPE, O_PROBE, O_WRITE_PROBE
};

#define VARIANTS "list:bert-a bert-r bert-ad tupe-a tupe-r rope alibi nope deberta"

static const tupe_opt train_opts[] = {
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "shard directory written by tupe-shard (required)", "dir"},
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "run directory: config, metrics, checkpoints (required)", "out:dir"},
    {O_MODEL, "model", 'm', TUPE_REQARG, "NAME|FILE", "preset (tiny, small, bert-base, bert-large) or JSON\nconfiguration (default: that of --checkpoint, else\nbert-base)", "list:tiny small bert-base bert-large"},
    {O_POSITION, "position", 0, TUPE_REQARG, "VARIANT", "bert-a, bert-r, bert-ad, tupe-a, tupe-r, rope, alibi,\nnope or deberta (default: the configuration's)", VARIANTS},
    {O_UNTIE, "untie-cls", 0, TUPE_NOARG, NULL, "TUPE: give [CLS] its own positional scores (default)", NULL},
    {O_TIE, "tie-cls", 0, TUPE_NOARG, NULL, "TUPE: no [CLS] reset (the paper's TUPE-A tie-cls)", NULL},
    {O_CKPT, "checkpoint", 'c', TUPE_REQARG, "DIR", "start from these weights (a fresh optimizer)", "dir"},
    {O_BATCH, "batch", 'b', TUPE_REQARG, "N", "sequences per step, all ranks together (default: 256)", NULL},
    {O_MICRO, "micro-batch", 0, TUPE_REQARG, "N", "sequences per forward pass on one rank; gradients\naccumulate over batch/(ranks*N) passes (default: all)", NULL},
    {O_LR, "lr", 0, TUPE_REQARG, "X", "peak learning rate (default: 1e-4)", NULL},
    {O_END_LR, "end-lr", 0, TUPE_REQARG, "X", "learning rate at the last step (default: 0)", NULL},
    {O_POWER, "power", 0, TUPE_REQARG, "X", "power of the polynomial decay (default: 1, linear)", NULL},
    {O_WARMUP, "warmup", 0, TUPE_REQARG, "N", "linear warmup steps (default: 10000)", NULL},
    {O_STEPS, "steps", 's', TUPE_REQARG, "N", "optimizer steps (default: 1000000)", NULL},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "initialization, data order, masks, dropout (default: 1)", NULL},
    {O_BETA1, "beta1", 0, TUPE_REQARG, "X", "Adam beta1 (default: 0.9)", NULL},
    {O_BETA2, "beta2", 0, TUPE_REQARG, "X", "Adam beta2 (default: 0.999)", NULL},
    {O_EPS, "adam-eps", 0, TUPE_REQARG, "X", "Adam epsilon, added to sqrt(v) (default: 1e-6)", NULL},
    {O_WD, "weight-decay", 0, TUPE_REQARG, "X", "decoupled weight decay (default: 0.01)", NULL},
    {O_CLIP, "clip", 0, TUPE_REQARG, "X", "clip the global gradient norm to X; 0 = off (default: 1)", NULL},
    {O_EXCL, "no-decay-ln-bias", 0, TUPE_NOARG, NULL, "no weight decay on biases and LayerNorm parameters", NULL},
    {O_RECIPE, "recipe", 0, TUPE_REQARG, "tupe|electra", "tupe: the paper's optimizer (default); electra:\nELECTRA's (no bias correction, warmup times a decay\nfrom step 0, no decay of biases and LayerNorm)", "list:tupe electra"},
    {O_DROPOUT, "dropout", 0, TUPE_REQARG, "P", "hidden dropout (default: the configuration's, 0.1)", NULL},
    {O_ATTN_DROPOUT, "attention-dropout", 0, TUPE_REQARG, "P", "attention dropout (default: the configuration's)", NULL},
    {O_MASK_PROB, "mask-prob", 0, TUPE_REQARG, "P", "fraction of positions masked (default: 0.15)", NULL},
    {O_OBJECTIVE, "objective", 0, TUPE_REQARG, "mlm|electra", "mlm: masked LM (default); electra: a generator and a\ndiscriminator trained together (replaced-token\ndetection, ELECTRA's masking)", "list:mlm electra"},
    {O_GEN_SIZE, "generator-size", 0, TUPE_REQARG, "F", "ELECTRA: the generator's width as a fraction of the\nmodel's (default: 1/3 for 768 wide, else 1/4)", NULL},
    {O_RTD_WEIGHT, "rtd-weight", 0, TUPE_REQARG, "X", "ELECTRA: weight of the discriminator's loss in the\ntotal (default: 50)", NULL},
    {O_LOG, "log-every", 0, TUPE_REQARG, "N", "steps between progress lines and metrics; 0 = none\n(default: 100)", NULL},
    {O_EVAL, "eval-every", 0, TUPE_REQARG, "N", "steps between validations; 0 = at the end only\n(default: 10000)", NULL},
    {O_EVAL_SEQ, "eval-sequences", 0, TUPE_REQARG, "N", "validation sequences per evaluation (default: all)", NULL},
    {O_SAVE, "save-every", 0, TUPE_REQARG, "N", "steps between checkpoints; 0 = at the end only\n(default: 10000)", NULL},
    {O_KEEP, "keep", 0, TUPE_REQARG, "K", "keep the last K checkpoints (default: 3)", NULL},
    {O_KEEP_STEP, "keep-step", 0, TUPE_REQARG, "N[,N]...", "also save and keep checkpoints at these steps (repeatable)", NULL},
    {O_RESUME, "resume", 'r', TUPE_NOARG, NULL, "continue from the run directory's latest checkpoint", NULL},
    {O_STOP_AFTER, "stop-after", 0, TUPE_REQARG, "N", "leave after N steps of this run, with a checkpoint\n(the schedule still spans --steps)", NULL},
    {O_MAX_TIME, "max-time", 0, TUPE_REQARG, "SECONDS", "leave after the step that passes this time, with a\ncheckpoint (the schedule still spans --steps)", NULL},
    {O_SKIP, "skip-nonfinite", 0, TUPE_NOARG, NULL, "skip updates with a non-finite loss or gradient\n(default: stop)", NULL},
    {O_ZERO, "zero", 0, TUPE_REQARG, "0|1", "1: each rank keeps and updates its shard of the\noptimizer state (ZeRO-1); 0: every rank all of it\n(default: 1)", "list:0 1"},
    {O_BUCKET, "bucket-mb", 0, TUPE_REQARG, "MIB", "gradients sent at a time while the backward pass\nruns, in MiB (default: 25)", NULL},
    {O_GRAD_REDUCE, "grad-reduce", 0, TUPE_REQARG, "tree|nccl", "how the ranks' gradients are summed: tree, in a\nfixed order within each node then across nodes\n(weights independent of the number of ranks, bit\nfor bit); nccl, by NCCL's own collectives (GPUs;\nnot bit-identical across rank counts) (default: tree)", "list:tree nccl"},
    TUPE_DEVICEARG_OPTS(O_DEVICE, O_PRECISION),
    {O_PREFETCH, "prefetch", 0, TUPE_REQARG, "N", "shard frames decoded ahead on a thread (default: 2)", NULL},
    TUPE_OPT_TENSORBOARD(O_TB, O_NO_TB),
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static const tupe_opt eval_opts[] = {
    {O_CKPT, "checkpoint", 'c', TUPE_REQARG, "DIR", "the checkpoint to evaluate (required)", "dir"},
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "shard directory with a validation split (required)", "dir"},
    {O_EVAL_SEQ, "eval-sequences", 0, TUPE_REQARG, "N", "validation sequences (default: all)", NULL},
    {O_MICRO, "micro-batch", 0, TUPE_REQARG, "N", "sequences per forward pass (default: 16)", NULL},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "seed of the evaluation masks (default: 1)", NULL},
    {O_MASK_PROB, "mask-prob", 0, TUPE_REQARG, "P", "fraction of positions masked (default: 0.15)", NULL},
    {O_SEQLEN, "seq-len", 0, TUPE_REQARG, "N", "the first N tokens of every sequence (default:\nall); past the trained length for rope, alibi,\nnope, deberta; refused where a learned table has\nno trained rows", NULL},
    {O_POS_BUCKET, "bucket", 0, TUPE_REQARG, "W", "also the loss of every W positions (0 = none;\ndefault: 0)", NULL},
    {O_ROPE_SCALING, "rope-scaling", 0, TUPE_REQARG, "MODE:F", "RoPE's angles past the trained length: pi:F\n(positions / F) or ntk:F (base x F^(d/(d-2)))", NULL},
    {O_WRITE_PROBE, "write-probe", 0, TUPE_REQARG, "FILE", "ELECTRA: write the probe scored (the corrupted\nsequences, labels, masks; one process)", "out:file"},
    {O_PROBE, "probe", 0, TUPE_REQARG, "FILE", "ELECTRA: score the discriminator on this probe\n(another run's corruption) instead of its own\ngenerator's; the probe fixes masks and noise", "file"},
    TUPE_DEVICEARG_OPTS(O_DEVICE, O_PRECISION),
    TUPE_OPT_FORMAT_JSON(O_FORMAT),
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int cmd_train(tupe_cli *c, void *opts);
static int cmd_eval(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"train", NULL, "pre-train a masked language model",
     "Trains on the training split of --data with the paper's recipe unless told otherwise:\n"
     "Adam (0.9, 0.999), eps 1e-6, weight decay 0.01, peak learning rate 1e-4 after 10k warmup\n"
     "steps, linear decay to 0, clipping at 1.0, batches of 256 sequences, 15% of positions\n"
     "masked (80% [MASK], 10% random, 10% kept), new masks every epoch.", train_opts, NULL, cmd_train},
    {"eval", NULL, "validation loss and accuracy of a checkpoint",
     "Uses fixed masks (from --seed), so that numbers compare across checkpoints and variants.\n"
     "An ELECTRA pair's discriminator is scored on its generator's samples (fixed noise);\n"
     "--write-probe keeps that corruption, --probe scores on one another run wrote.",
     eval_opts, NULL, cmd_eval},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-pretrain", "masked-LM pre-training with every positional encoding",
                               cmds, "train"};

static volatile sig_atomic_t stop_flag;
static int keep_steps(tupe_cli *c, const char *arg, tupe_pretrain_opts *o)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", arg);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        long v;
        if (o->n_keep_steps == TUPE_PRETRAIN_MAX_KEEP)
            return tupe_cli_usage(c, "--keep-step: at most %d steps", TUPE_PRETRAIN_MAX_KEEP);
        if (tupe_cli_long(c, t, 1, 1L << 62, &v))
            return TUPE_EUSAGE;
        o->keep_steps[o->n_keep_steps++] = v;
    }
    return 0;
}

/* Both subcommands' options, as parsed. */
typedef struct args {
    tupe_pretrain_opts o;
    const char *ckpt, *device, *precision;
    int json;
    int fixed_masks;             /* --seed, --mask-prob or --seq-len given (eval: not with --probe) */
} args;

/* The device and the ranks of the job (as many as `fit` allows, NULL: any); errors printed,
 * exit status returned. */
static int open_compute(tupe_cli *c, const args *a, tupe_comm_fit fit, tupe_backend **be,
                        tupe_comm **comm)
{
    int rc = tupe_devicearg_open(c, a->device, a->precision, be);
    if (rc)
        return rc;
    tupe_err e;
    if (tupe_comm_init(comm, fit, &a->o, &e)) {
        rc = tupe_cli_error(c, &e);
        tupe_backend_destroy(*be);
    }
    return rc;
}

static int cmd_train(tupe_cli *c, void *opts)
{
    args *a = opts;
    tupe_pretrain_opts *o = &a->o;
    if (!o->data)
        return tupe_cli_usage(c, "--data DIR is required");
    if (!o->out)
        return tupe_cli_usage(c, "--output DIR (the run directory) is required");
    if (strcmp(o->out, "-") == 0)
        return tupe_cli_usage(c, "train writes a run directory, not '-'");
    if (c->nargs)
        return tupe_cli_usage(c, "unexpected argument '%s'", c->args[0]);
    tupe_backend *be;
    tupe_comm *comm;
    /* where rank 0 writes its address and secret: an output, never inside an input */
    int rc = tupe_cli_env_output(c, "TUPE_RENDEZVOUS_FILE");
    if (rc || (rc = open_compute(c, a, tupe_pretrain_fit_world, &be, &comm)))
        return rc;
    o->init = a->ckpt;
    o->inputs = tupe_cli_inputs(c);
    /* a step of a large model can take minutes: rank 0 says that the signal was heard; a second
     * signal stops at once, without the temporaries of a checkpoint being saved (130 whichever
     * the signal, as tupe(7) says) */
    tupe_process_graceful(&stop_flag, !c->quiet && tupe_comm_rank(comm) == 0
                                          ? "tupe-pretrain: stopping after this step, with a "
                                            "checkpoint (a second signal stops at once)\n"
                                          : NULL);
    tupe_pretrain_result r;
    tupe_err e;
    if (tupe_pretrain_run(o, comm, be, &stop_flag, &r, &e)) {
        tupe_comm_abort(comm, e.msg); /* the other ranks stop too, and are told why */
        rc = tupe_cli_error(c, &e);
    } else if (r.complete && tupe_comm_rank(comm) == 0) {
        tupe_cli_note(c, "%s is at step %lld, --steps is %lld: nothing to do (checkpoint %s)",
                      o->out, (long long)r.step, (long long)o->steps, r.checkpoint);
    } else if (r.interrupted && tupe_comm_rank(comm) == 0) {
        tupe_cli_note(c, "%s after step %lld; checkpoint %s written; continue with --resume",
                      stop_flag ? "interrupted" : "stopped", (long long)r.step, r.checkpoint);
    } else if (tupe_comm_rank(comm) == 0) {
        /* NaN: the shards hold no validation sequences (tupe-shard --valid-fraction). */
        char val[64] = "no validation set";
        if (!isnan(r.val_loss))
            snprintf(val, sizeof val, "validation loss %.4f", r.val_loss);
        tupe_cli_note(c, "done: step %lld, loss of that step %.4f, %s, checkpoint %s%s", (long long)r.step,
                      r.last_loss, val, r.checkpoint, r.skipped ? " (some updates skipped: non-finite)" : "");
    }
    tupe_comm_finalize(comm);
    tupe_backend_destroy(be);
    return rc;
}

/* --rope-scaling pi:F | ntk:F */
static int rope_scaling(tupe_cli *c, const char *arg, tupe_pretrain_opts *o)
{
    const char *colon = strchr(arg, ':');
    int mode = !colon ? -1 : strncmp(arg, "pi", 2) == 0 && colon == arg + 2 ? TUPE_ROPE_PI
                           : strncmp(arg, "ntk", 3) == 0 && colon == arg + 3 ? TUPE_ROPE_NTK
                                                                            : -1;
    if (mode < 0)
        return tupe_cli_usage(c, "--rope-scaling: expected pi:F or ntk:F, got '%s'", arg);
    o->rope_scaling = mode;
    return tupe_cli_double(c, colon + 1, 1, 1e6, &o->rope_factor);
}

/* The loss of every bucket of positions, as text lines or a JSON array. */
static void print_buckets(const tupe_eval_result *r, int w, int json)
{
    for (int k = 0; k < r->nbuckets; k++) {
        int lo = k * w, hi = (k + 1) * w < r->seq_len ? (k + 1) * w : r->seq_len;
        if (json) {
            char loss[32];
            if (r->bucket_loss[k] == r->bucket_loss[k])
                snprintf(loss, sizeof loss, "%.6f", r->bucket_loss[k]);
            else
                snprintf(loss, sizeof loss, "null");
            printf("%s{\"from\":%d,\"to\":%d,\"loss\":%s,\"masked\":%lld}", k ? "," : "", lo, hi,
                   loss, (long long)r->bucket_masked[k]);
        } else if (r->bucket_masked[k] > 0) {
            printf("  positions %d-%d: loss %.4f (%lld masked)\n", lo, hi - 1, r->bucket_loss[k],
                   (long long)r->bucket_masked[k]);
        } else {
            printf("  positions %d-%d: n/a (none masked)\n", lo, hi - 1);
        }
    }
}

static int cmd_eval(tupe_cli *c, void *opts)
{
    args *a = opts;
    if (!a->o.data)
        return tupe_cli_usage(c, "--data DIR is required");
    if (!a->ckpt)
        return tupe_cli_usage(c, "--checkpoint DIR is required");
    if (c->nargs)
        return tupe_cli_usage(c, "unexpected argument '%s'", c->args[0]);
    if (a->o.probe && a->fixed_masks)
        return tupe_cli_usage(c, "--probe fixes the sequences, masks and noise: not with --seed, "
                              "--mask-prob or --seq-len");
    if (a->o.write_probe && strcmp(a->o.write_probe, "-") == 0)
        return tupe_cli_usage(c, "--write-probe: a file, not '-' (the results go to standard "
                              "output)");
    tupe_backend *be;
    tupe_comm *comm;
    int rc = open_compute(c, a, NULL, &be, &comm);
    if (rc)
        return rc;
    tupe_eval_result r;
    tupe_err e;
    if (tupe_eval_checkpoint(a->ckpt, a->o.data, &a->o, comm, be, &r, &e)) {
        tupe_comm_abort(comm, e.msg);
        rc = tupe_cli_error(c, &e);
    }
    else if (tupe_comm_rank(comm) == 0) {
        if (a->json) {
            /* The path as a JSON string (quotes, backslashes; null if it is not UTF-8). */
            json_t *js = json_string(a->ckpt);
            char *q = js ? json_dumps(js, JSON_ENCODE_ANY) : NULL;
            printf("{\"checkpoint\":%s,\"val_loss\":%.6f,\"val_loss_bits\":%.6f,\"val_acc\":%.6f,"
                   "\"masked\":%lld,\"sequences\":%lld", q ? q : "null", r.loss, r.loss / M_LN2,
                   r.acc, (long long)r.masked, (long long)r.sequences);
            if (a->o.eval_seq_len)
                printf(",\"seq_len\":%d", r.seq_len);
            if (r.nbuckets) {
                printf(",\"buckets\":[");
                print_buckets(&r, a->o.eval_bucket, 1);
                printf("]");
            }
            if (r.electra) {
                printf(",\"val_disc_loss\":%.6f,\"val_disc_acc\":%.6f,\"val_replaced\":%.6f,"
                       "\"tokens\":%lld", r.rtd_loss, r.rtd_acc, r.replaced, (long long)r.tokens);
                if (isnan(r.rtd_auc))
                    printf(",\"val_disc_auc\":null");
                else
                    printf(",\"val_disc_auc\":%.6f", r.rtd_auc);
                printf(",\"val_disc_precision\":%.6f,\"val_disc_recall\":%.6f", r.rtd_precision,
                       r.rtd_recall);
            }
            printf("}\n");
            free(q);
            json_decref(js);
        } else {
            printf("%s: validation loss %.4f (%.3f bits), accuracy %.2f%% (%lld masked tokens in %lld "
                   "sequences", a->ckpt, r.loss, r.loss / M_LN2, 100 * r.acc, (long long)r.masked,
                   (long long)r.sequences);
            if (a->o.eval_seq_len)
                printf(" of their first %d tokens", r.seq_len);
            printf(")\n");
            print_buckets(&r, a->o.eval_bucket, 0);
        }
        if (!a->json && r.electra)
            printf("%s: discriminator loss %.4f, accuracy %.2f%% (%.2f%% of %lld tokens replaced by "
                   "the generator)\n%s: discriminator AUC %.4f, precision %.4f, recall %.4f (of "
                   "\"replaced\")\n", a->ckpt, r.rtd_loss, 100 * r.rtd_acc, 100 * r.replaced,
                   (long long)r.tokens, a->ckpt, r.rtd_auc, r.rtd_precision, r.rtd_recall);
    }
    tupe_comm_finalize(comm);
    tupe_backend_destroy(be);
    return rc;
}

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a = {0};
    tupe_pretrain_defaults(&a.o);
    tupe_pretrain_opts *o = &a.o;
    const char *arg;
    int id, rc = 0;
    long v;
    uint64_t u;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_DATA: o->data = arg; break;
        case O_OUT: o->out = arg; break;
        case O_TB: o->tensorboard = arg; break;
        case O_NO_TB: o->no_tensorboard = 1; break;
        case O_MODEL: o->model = arg; break;
        case O_POSITION: o->position = arg; break;
        case O_UNTIE: o->untie_cls = 1; break;
        case O_TIE: o->untie_cls = 0; break;
        case O_CKPT: a.ckpt = arg; break;
        case O_BATCH: rc = tupe_cli_long(&c, arg, 1, 1 << 24, &v); o->batch = (int)v; break;
        case O_MICRO: rc = tupe_cli_long(&c, arg, 1, 1 << 24, &v); o->micro_batch = (int)v; break;
        case O_LR: rc = tupe_cli_double(&c, arg, 0, 10, &o->lr); break;
        case O_END_LR: rc = tupe_cli_double(&c, arg, 0, 10, &o->end_lr); break;
        case O_POWER: rc = tupe_cli_double(&c, arg, 0.01, 100, &o->power); break;
        case O_WARMUP: rc = tupe_cli_u64(&c, arg, 0, 1ULL << 40, &u); o->warmup = (int64_t)u; break;
        case O_STEPS: rc = tupe_cli_u64(&c, arg, 1, 1ULL << 40, &u); o->steps = (int64_t)u; break;
        case O_SEED: rc = tupe_cli_u64(&c, arg, 0, UINT64_MAX, &o->seed); a.fixed_masks = 1; break;
        case O_BETA1: rc = tupe_cli_double(&c, arg, 0, 0.999999, &o->adam.beta1); break;
        case O_BETA2: rc = tupe_cli_double(&c, arg, 0, 0.999999999, &o->adam.beta2); break;
        case O_EPS: rc = tupe_cli_double(&c, arg, 0, 1, &o->adam.eps); break;
        case O_WD: rc = tupe_cli_double(&c, arg, 0, 10, &o->adam.weight_decay); break;
        case O_CLIP: rc = tupe_cli_double(&c, arg, 0, 1e9, &o->adam.clip); break;
        case O_EXCL: o->adam.exclude_ln_bias = 1; break;
        case O_RECIPE:
            if (!(rc = tupe_cli_choice(&c, arg, "tupe|electra", &o->adam.electra)) && o->adam.electra)
                o->adam.exclude_ln_bias = 1;
            break;
        case O_DROPOUT: rc = tupe_cli_double(&c, arg, 0, 0.99, &o->dropout); break;
        case O_ATTN_DROPOUT: rc = tupe_cli_double(&c, arg, 0, 0.99, &o->attention_dropout); break;
        case O_MASK_PROB: rc = tupe_cli_double(&c, arg, 0.001, 0.999, &o->mask_prob); a.fixed_masks = 1; break;
        case O_LOG: rc = tupe_cli_u64(&c, arg, 0, 1ULL << 40, &u); o->log_every = (int64_t)u; break;
        case O_EVAL: rc = tupe_cli_u64(&c, arg, 0, 1ULL << 40, &u); o->eval_every = (int64_t)u; break;
        case O_EVAL_SEQ: rc = tupe_cli_u64(&c, arg, 0, 1ULL << 40, &u); o->eval_sequences = (int64_t)u; break;
        case O_SAVE: rc = tupe_cli_u64(&c, arg, 0, 1ULL << 40, &u); o->save_every = (int64_t)u; break;
        case O_KEEP: rc = tupe_cli_long(&c, arg, 1, 100000, &v); o->keep_last = (int)v; break;
        case O_KEEP_STEP: rc = keep_steps(&c, arg, o); break;
        case O_RESUME: o->resume = 1; break;
        case O_STOP_AFTER: rc = tupe_cli_u64(&c, arg, 1, 1ULL << 40, &u); o->stop_after = (int64_t)u; break;
        case O_MAX_TIME: rc = tupe_cli_double(&c, arg, 1, 1e9, &o->max_time); break;
        case O_SKIP: o->skip_nonfinite = 1; break;
        case O_ZERO: rc = tupe_cli_long(&c, arg, 0, 1, &v); o->zero = (int)v; break;
        case O_BUCKET: rc = tupe_cli_double(&c, arg, 0.001, 1 << 20, &o->bucket_mb); break;
        case O_GRAD_REDUCE: rc = tupe_cli_choice(&c, arg, "tree|nccl", &o->grad_reduce); break;
        case O_OBJECTIVE: rc = tupe_cli_choice(&c, arg, "mlm|electra", &o->objective); break;
        case O_GEN_SIZE: rc = tupe_cli_double(&c, arg, 0.001, 1, &o->generator_size); break;
        case O_RTD_WEIGHT: rc = tupe_cli_double(&c, arg, 0.001, 1e6, &o->rtd_weight); break;
        case O_DEVICE: rc = tupe_devicearg_device(&c, arg, &a.device); break;
        case O_PRECISION: rc = tupe_devicearg_precision(&c, arg, &a.precision); break;
        case O_PREFETCH: rc = tupe_cli_long(&c, arg, 0, 64, &v); o->prefetch = (int)v; break;
        case O_FORMAT: rc = tupe_cli_choice(&c, arg, "text|json", &a.json); break;
        case O_SEQLEN: rc = tupe_cli_long(&c, arg, 1, 1 << 20, &v); o->eval_seq_len = (int)v; a.fixed_masks = 1; break;
        case O_PROBE: o->probe = arg; break;
        case O_WRITE_PROBE: o->write_probe = arg; break;
        case O_POS_BUCKET: rc = tupe_cli_long(&c, arg, 0, 1 << 20, &v); o->eval_bucket = (int)v; break;
        case O_ROPE_SCALING: rc = rope_scaling(&c, arg, o); break;
        }
        if (rc) {
            tupe_cli_end(&c);
            return TUPE_EUSAGE;
        }
    }
    if (id < 0)
        return c.exit_code;
    o->note = tupe_cli_on_note;
    o->note_ctx = &c;
    rc = tupe_cli_run(&c, &a);
    tupe_cli_end(&c);
    return rc;
}
