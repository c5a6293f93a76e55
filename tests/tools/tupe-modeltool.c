/* A test helper for the conversion tests (not installed): deterministic checkpoints of any
 * variant, the logits a checkpoint computes on given inputs, and a tensor-by-tensor comparison
 * of two safetensors files or checkpoints. tests/reference/make_convert_fixtures.py runs it
 * too, to make the tupe checkpoint whose Hugging Face export transformers then reads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/rng.h"
#include "cli/cli.h"
#include "convert/import.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"
#include "model/electra.h"

enum { O_MODEL = 1, O_POSITION, O_TIE, O_VOCAB, O_LABELS, O_TYPES, O_SEED, O_OUT, O_STATE,
       O_CKPT, O_INPUT, O_EXPECT, O_TOL, O_RTOL, O_NAN, O_NETWORK };

static const tupe_opt init_opts[] = {
    {O_MODEL, "model", 0, TUPE_REQARG, "NAME", "preset or JSON configuration (default: tiny)", "file"},
    {O_POSITION, "position", 0, TUPE_REQARG, "P", "bert-a, bert-r, bert-ad, tupe-a, tupe-r", "list:bert-a bert-r bert-ad tupe-a tupe-r"},
    {O_TIE, "tie-cls", 0, TUPE_NOARG, NULL, "untie_cls false", NULL},
    {O_VOCAB, "vocab-size", 0, TUPE_REQARG, "N", "vocabulary size (default: 60)", NULL},
    {O_LABELS, "labels", 0, TUPE_REQARG, "N", "classification head size (0: masked-LM head)", NULL},
    {O_TYPES, "types", 0, TUPE_REQARG, "N", "type_vocab_size (default: the configuration's)", NULL},
    {O_SEED, "seed", 0, TUPE_REQARG, "N", "values (default: 1)", NULL},
    {O_STATE, "train-state", 0, TUPE_REQARG, "JSON", "training state to store", NULL},
    {O_NAN, "nan", 0, TUPE_REQARG, "TENSOR", "make the first element of TENSOR NaN", NULL},
    {O_OUT, "output", 'o', TUPE_REQARG, "DIR", "checkpoint directory", "out:dir"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt logits_opts[] = {
    {O_CKPT, "checkpoint", 'c', TUPE_REQARG, "DIR", "the checkpoint", "dir"},
    {O_INPUT, "input", 0, TUPE_REQARG, "FILE", "safetensors with input.ids [B,T], input.lengths [B]\n(I32) and optionally input.types", "file"},
    {O_OUT, "output", 'o', TUPE_REQARG, "FILE", "write \"logits\" here", "out:file"},
    {O_EXPECT, "expect", 0, TUPE_REQARG, "FILE", "compare with this file's \"logits\"", "file"},
    {O_TOL, "tol", 0, TUPE_REQARG, "X", "largest absolute difference allowed (default: 1e-4)", NULL},
    {O_NETWORK, "network", 0, TUPE_REQARG, "NET", "an ELECTRA pair's generator (masked-LM logits) or\ndiscriminator (the logit of \"replaced\", [valid, 1])", "list:generator discriminator"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};
static const tupe_opt diff_opts[] = {
    {O_RTOL, "rtol", 0, TUPE_REQARG, "X", "allow |a - b| <= X |a| (default: 0, bit-identical)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int run_init(tupe_cli *c, void *opts);
static int run_logits(tupe_cli *c, void *opts);
static int run_diff(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"init", NULL, "a deterministic checkpoint with every tensor random (none 0 or 1)", NULL,
     init_opts, NULL, run_init},
    {"logits", NULL, "masked-LM logits at every valid position (or the head's logits)",
     "Rows in order of (sequence, position) over the positions below each length.", logits_opts, NULL,
     run_logits},
    {"diff", "A B", "compare the tensors of two files or checkpoints",
     "Same names, dtypes and shapes; values equal bit for bit, or within --rtol (compared as\n"
     "float32). Checkpoint configurations must be equal too.", diff_opts, "file", run_diff},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-modeltool", "test helper for tupe-convert", cmds, NULL};

typedef struct init_ctx {
    const tupe_config *c;
    uint64_t seed;
    const char *nan;     /* a tensor whose first element is NaN, or NULL */
} init_ctx;

/* The BERT initialization, then noise on every tensor. */
static int perturb(void *ctx, const tupe_param *p, float *dst, tupe_err *e)
{
    const init_ctx *x = ctx;
    if (!dst) /* asked whether it is given: always */
        return 0;
    tupe_param_init_values(p, x->c->initializer_range, x->seed, dst);
    tupe_rng r;
    tupe_rng_init(&r, tupe_seed_from(p->name, x->seed), 0, 0, 0);
    for (size_t i = 0; i < p->numel; i++)
        dst[i] += (float)(0.05 * tupe_rng_normal(&r));
    if (x->nan && strcmp(x->nan, p->name) == 0)
        dst[0] = NAN;
    return 0;
}

static int do_init(tupe_cli *c, const char *model, int position, int tie, long vocab, long labels,
                   long types, uint64_t seed, const char *state, const char *nan, const char *out)
{
    tupe_err e;
    tupe_config cfg;
    if (tupe_config_load(&cfg, model, &e))
        return tupe_cli_error(c, &e);
    if (position >= 0)
        cfg.position = position;
    cfg.untie_cls = !tie;
    cfg.vocab_size = (int)vocab;
    cfg.num_labels = (int)labels;
    if (types >= 0)
        cfg.type_vocab_size = (int)types;
    tupe_model *m;
    init_ctx x = {&cfg, seed, nan};
    if (tupe_import_build(&m, &cfg, seed, perturb, &x, &e))
        return tupe_cli_error(c, &e);
    int rc = tupe_ckpt_save(out, m, NULL, state, &e) ? tupe_cli_error(c, &e) : 0;
    tupe_import_free(m);
    return rc;
}

static int read_i32(const tupe_st *st, const char *name, int ndim, int32_t **out, uint64_t *shape,
                    tupe_err *e)
{
    const tupe_st_tensor *t = tupe_st_find(st, name);
    if (!t || t->dtype != TUPE_I32 || t->ndim != ndim)
        return tupe_fail_tensor(e, TUPE_EDATA, tupe_st_path(st), name, "expected I32 with %d dims", ndim);
    *out = malloc(t->numel * 4 + 4);
    memcpy(*out, t->data, t->numel * 4);
    for (int d = 0; d < ndim; d++)
        shape[d] = t->shape[d];
    return 0;
}

static int do_logits(tupe_cli *c, const char *ckpt, const char *input, const char *out,
                     const char *expect, double tol, int network)
{
    tupe_err e;
    tupe_st *in = NULL;
    int32_t *ids = NULL, *len = NULL, *types = NULL, *pos = NULL, *lab = NULL;
    float *logits = NULL;
    tupe_model *m = NULL;
    tupe_backend *be = NULL;
    uint64_t s2[2], s1[1];
    int rc = 0;
    tupe_config cfg;
    if (tupe_st_open(&in, input, &e) || read_i32(in, "input.ids", 2, &ids, s2, &e) ||
        read_i32(in, "input.lengths", 1, &len, s1, &e) || tupe_ckpt_config(ckpt, &cfg, &e))
        goto fail;
    if (tupe_st_find(in, "input.types") && read_i32(in, "input.types", 2, &types, s2, &e))
        goto fail;
    int B = (int)s2[0], T = (int)s2[1], M = 0;
    pos = malloc((size_t)B * (size_t)T * 4);
    lab = malloc((size_t)B * (size_t)T * 4);
    for (int b = 0; b < B; b++)
        for (int t = 0; t < len[b]; t++) {
            pos[M] = b * T + t;
            lab[M++] = ids[b * T + t];
        }
    tupe_capacity cap = {B, T, M};
    if (tupe_backend_create(&be, "cpu", 0, &e) || tupe_model_create(&m, &cfg, be, &cap, &e) ||
        tupe_ckpt_load(ckpt, m, NULL, NULL, 0, &e))
        goto fail;
    float *targets = calloc((size_t)B, sizeof *targets);
    int32_t *labels = calloc((size_t)B, sizeof *labels);
    /* an ELECTRA pair: one of its networks, alone */
    tupe_electra *pair = tupe_model_pair(m);
    tupe_model *net = !pair ? m : network ? tupe_electra_discriminator(pair) : tupe_electra_generator(pair);
    int32_t *rtd = pair && network ? calloc((size_t)B * (size_t)T, sizeof *rtd) : NULL;
    tupe_batch batch = {B, T, ids, len, types, M, pos, lab, labels, targets, 0, 0, .rtd_label = rtd};
    tupe_fwd_out fo;
    rc = tupe_model_forward(net, &batch, NULL, &fo, &e);
    free(targets);
    free(labels);
    free(rtd);
    if (rc)
        goto fail;
    size_t n = tupe_model_probe_size(net, TUPE_PROBE_LOGITS);
    logits = malloc(n * sizeof *logits);
    if (tupe_model_probe(net, TUPE_PROBE_LOGITS, 0, logits, n, &e))
        goto fail;
    uint64_t shape[2] = {cfg.num_labels ? (uint64_t)B : (uint64_t)M, 0};
    if (rtd) { /* the head's rows are [0, logit of "replaced"] */
        for (size_t r = 0; r < n / 2; r++)
            logits[r] = logits[2 * r + 1];
        n /= 2;
    }
    shape[1] = n / shape[0];
    if (out) {
        tupe_stw *w = tupe_stw_new();
        rc = tupe_stw_add(w, "logits", TUPE_F32, 2, shape, logits, &e) || tupe_stw_write(w, out, &e);
        tupe_stw_free(w);
        if (rc)
            goto fail;
    }
    if (expect) {
        tupe_st *x;
        float *want = malloc(n * sizeof *want);
        if (tupe_st_open(&x, expect, &e) || tupe_st_read_f32(x, "logits", 2, shape, want, n, &e)) {
            free(want);
            goto fail;
        }
        tupe_st_close(x);
        double worst = 0;
        for (size_t i = 0; i < n; i++)
            worst = fmax(worst, fabs((double)logits[i] - want[i]));
        free(want);
        printf("logits [%llu, %llu]: max abs difference %.3g (tolerance %g)\n",
               (unsigned long long)shape[0], (unsigned long long)shape[1], worst, tol);
        rc = worst <= tol ? 0 : 1;
    }
    goto done;
fail:
    rc = tupe_cli_error(c, &e);
done:
    free(logits);
    tupe_model_free(m);
    if (be)
        tupe_backend_destroy(be);
    free(ids), free(len), free(types), free(pos), free(lab);
    tupe_st_close(in);
    return rc;
}

static int do_diff(tupe_cli *c, double rtol)
{
    if (c->nargs != 2)
        return tupe_cli_usage(c, "expected A and B");
    tupe_err e;
    tupe_tset *a = NULL, *b = NULL;
    if (tupe_tset_open_path(&a, c->args[0], &e) || tupe_tset_open_path(&b, c->args[1], &e)) {
        tupe_tset_close(a);
        return tupe_cli_error(c, &e);
    }
    int bad = 0;
    const char *ca = tupe_tset_meta(a, "config"), *cb = tupe_tset_meta(b, "config");
    if ((ca || cb) && (!ca || !cb || strcmp(ca, cb) != 0)) {
        printf("config differs:\n  %s\n  %s\n", ca ? ca : "(none)", cb ? cb : "(none)");
        bad = 1;
    }
    if (tupe_tset_count(a) != tupe_tset_count(b)) {
        printf("%zu tensors, %zu tensors\n", tupe_tset_count(a), tupe_tset_count(b));
        bad = 1;
    }
    double worst = 0;
    for (size_t i = 0; i < tupe_tset_count(a); i++) {
        const tupe_st_tensor *x = tupe_tset_tensor(a, i);
        long j = tupe_tset_find(b, x->name);
        if (j < 0) {
            printf("%s: only in %s\n", x->name, c->args[0]);
            bad = 1;
            continue;
        }
        const tupe_st_tensor *y = tupe_tset_tensor(b, (size_t)j);
        int same = x->ndim == y->ndim && x->numel == y->numel;
        for (int d = 0; same && d < x->ndim; d++)
            same = x->shape[d] == y->shape[d];
        if (!same || (rtol == 0 && x->dtype != y->dtype)) {
            printf("%s: dtype or shape differs\n", x->name);
            bad = 1;
            continue;
        }
        if (rtol == 0) {
            if (memcmp(x->data, y->data, x->end - x->begin) != 0) {
                printf("%s: values differ\n", x->name);
                bad = 1;
            }
            continue;
        }
        float *u = malloc(x->numel * 4 + 4), *v = malloc(y->numel * 4 + 4);
        if (tupe_to_f32(x->dtype, x->data, u, x->numel) || tupe_to_f32(y->dtype, y->data, v, y->numel)) {
            printf("%s: not a float tensor\n", x->name);
            bad = 1;
        }
        for (uint64_t k = 0; !bad && k < x->numel; k++) {
            double d = fabs((double)u[k] - v[k]);
            worst = fmax(worst, u[k] != 0 ? d / fabs(u[k]) : d);
            if (d > rtol * fabs(u[k])) {
                printf("%s[%llu]: %.9g vs %.9g\n", x->name, (unsigned long long)k, u[k], v[k]);
                bad = 1;
            }
        }
        free(u);
        free(v);
    }
    if (!bad)
        printf("%zu tensors equal%s (max rel difference %.3g)\n", tupe_tset_count(a),
               rtol == 0 ? " bit for bit" : " within tolerance", worst);
    tupe_tset_close(a);
    tupe_tset_close(b);
    return bad;
}

typedef struct args {
    const char *model, *out, *state, *ckpt, *input, *expect, *nan;
    int position, tie;
    long vocab, labels, types;
    uint64_t seed;
    double tol, rtol;
    int network;
} args;

static int run_init(tupe_cli *c, void *opts)
{
    const args *a = opts;
    return a->out ? do_init(c, a->model, a->position, a->tie, a->vocab, a->labels, a->types, a->seed,
                            a->state, a->nan, a->out)
                  : tupe_cli_usage(c, "--output is required");
}

static int run_logits(tupe_cli *c, void *opts)
{
    const args *a = opts;
    return a->ckpt && a->input && (a->out || a->expect)
               ? do_logits(c, a->ckpt, a->input, a->out, a->expect, a->tol, a->network)
               : tupe_cli_usage(c, "--checkpoint, --input and --output or --expect are required");
}

static int run_diff(tupe_cli *c, void *opts) { return do_diff(c, ((const args *)opts)->rtol); }

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a = {.model = "tiny", .position = -1, .vocab = 60, .types = -1, .seed = 1, .tol = 1e-4};
    const char *arg;
    int id, rc = 0;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_MODEL: a.model = arg; break;
        case O_POSITION: rc = tupe_cli_choice(&c, arg, "bert-a|bert-r|bert-ad|tupe-a|tupe-r", &a.position); break;
        case O_TIE: a.tie = 1; break;
        case O_VOCAB: rc = tupe_cli_long(&c, arg, 1, 1 << 24, &a.vocab); break;
        case O_LABELS: rc = tupe_cli_long(&c, arg, 0, 1 << 20, &a.labels); break;
        case O_TYPES: rc = tupe_cli_long(&c, arg, 0, 1 << 16, &a.types); break;
        case O_SEED: rc = tupe_cli_u64(&c, arg, 0, UINT64_MAX, &a.seed); break;
        case O_STATE: a.state = arg; break;
        case O_NAN: a.nan = arg; break;
        case O_OUT: a.out = arg; break;
        case O_CKPT: a.ckpt = arg; break;
        case O_INPUT: a.input = arg; break;
        case O_EXPECT: a.expect = arg; break;
        case O_TOL: rc = tupe_cli_double(&c, arg, 0, 1e9, &a.tol); break;
        case O_RTOL: rc = tupe_cli_double(&c, arg, 0, 1, &a.rtol); break;
        case O_NETWORK: rc = tupe_cli_choice(&c, arg, "generator|discriminator", &a.network); break;
        }
        if (rc)
            break;
    }
    if (rc || id < 0) {
        tupe_cli_end(&c);
        return rc ? rc : c.exit_code;
    }
    tupe_threads_apply(c.threads);
    rc = tupe_cli_run(&c, &a);
    tupe_cli_end(&c);
    return rc;
}
