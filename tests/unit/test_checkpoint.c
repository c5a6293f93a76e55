/* Checkpoints: a bit-exact round trip of parameters, optimizer moments and training state,
 * training that continues identically after a reload, and refusal of corrupt or mismatched
 * checkpoints with the tensor named. */
#include "backend/backend.h"
#include "base/fileio.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"
#include "unit.h"

static tupe_backend *be;

static void cfg(tupe_config *c, int labels)
{
    tupe_config_default(c);
    c->vocab_size = 40;
    c->hidden_size = 16;
    c->num_layers = 2;
    c->num_heads = 2;
    c->intermediate_size = 32;
    c->max_position = 16;
    c->num_labels = labels;
}

static tupe_model *mk(const tupe_config *c, uint64_t seed)
{
    tupe_capacity cap = {2, 8, 0};
    tupe_model *m;
    tupe_err e;
    if (tupe_model_create(&m, c, be, &cap, &e) || tupe_model_init(m, seed, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    return m;
}

static int32_t ids[16] = {2, 5, 6, 7, 8, 9, 10, 11, 2, 12, 13, 14, 15, 0, 0, 0}, len[2] = {8, 6};
static int32_t mpos[3] = {0, 3, 9}, mlab[3] = {4, 5, 6}, labels[2] = {1, 0};

static void train_step(tupe_model *m, tupe_adamw *o, uint32_t step)
{
    tupe_batch b = {2, 8, ids, len, NULL, 3, mpos, mlab, labels, NULL, 0, 0, .rtd_label = NULL};
    tupe_step st = {.seed = 9, .step = step};
    tupe_err e;
    tupe_model_zero_grad(m);
    CHECK_INT(tupe_model_forward(m, &b, &st, NULL, &e), 0);
    CHECK_INT(tupe_model_backward(m, &e), 0);
    tupe_adamw_step(o, 1e-3, -1);
}

static float *flat(tupe_dev *d, size_t n)
{
    float *x = malloc(n * sizeof *x);
    be->download(be, x, d, n, TUPE_F32);
    return x;
}

static void round_trip_and_resume(void)
{
    tupe_config c;
    cfg(&c, 0);
    tupe_model *a = mk(&c, 1);
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    tupe_adamw *oa;
    tupe_err e;
    CHECK_INT(tupe_adamw_create(&oa, a, &oc, &e), 0);
    train_step(a, oa, 1);
    train_step(a, oa, 2);
    const char *dir = unit_path("ckpt");
    const char *ts = "{\"step\":2,\"seed\":9}";
    CHECK_INT(tupe_ckpt_save(dir, a, oa, ts, &e), 0);
    /* A second save replaces the first in one step. */
    CHECK_INT(tupe_ckpt_save(dir, a, oa, ts, &e), 0);

    tupe_config c2;
    CHECK_INT(tupe_ckpt_config(dir, &c2, &e), 0);
    char what[64];
    CHECK(tupe_config_same_encoder(&c, &c2, what, sizeof what));
    tupe_model *b = mk(&c2, 77);
    tupe_adamw *ob;
    CHECK_INT(tupe_adamw_create(&ob, b, &oc, &e), 0);
    char *state = NULL;
    int rc = tupe_ckpt_load(dir, b, ob, &state, 0, &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    CHECK_STR(state, ts);
    free(state);
    CHECK_INT(tupe_adamw_steps(ob), 2);
    size_t n = tupe_model_layout(a)->total;
    {
        float *x = flat(tupe_model_params(a), n), *y = flat(tupe_model_params(b), n);
        CHECK_MSG(memcmp(x, y, n * sizeof *x) == 0, "the parameters differ after reload");
        free(x), free(y);
        float *ma = malloc(4 * n * sizeof *ma), *mb = ma + 2 * n;
        tupe_adamw_moments_get(oa, ma, ma + n);
        tupe_adamw_moments_get(ob, mb, mb + n);
        CHECK_MSG(memcmp(ma, mb, 2 * n * sizeof *ma) == 0, "the moments differ after reload");
        free(ma);
    }
    /* Two more steps on each: still identical (exact resume). */
    train_step(a, oa, 3);
    train_step(b, ob, 3);
    train_step(a, oa, 4);
    train_step(b, ob, 4);
    float *x = flat(tupe_model_params(a), n), *y = flat(tupe_model_params(b), n);
    CHECK(memcmp(x, y, n * sizeof *x) == 0);
    free(x), free(y);

    /* The file is plain safetensors with the documented metadata. */
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_CKPT_MODEL_FILE);
    tupe_st *st;
    CHECK_INT(tupe_st_open(&st, p, &e), 0);
    CHECK_STR(tupe_st_meta(st, "format"), "pt");
    CHECK_HAS(tupe_st_meta(st, "config"), "\"position\":\"tupe-r\"");
    CHECK(tupe_st_find(st, "encoder.layer.1.output.LayerNorm.bias") != NULL);
    CHECK_INT(tupe_st_count(st), tupe_model_layout(a)->count);
    tupe_st_close(st);
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_CKPT_OPTIM_FILE);
    CHECK_INT(tupe_st_open(&st, p, &e), 0);
    CHECK_HAS(tupe_st_meta(st, "optimizer"), "\"step\":2");
    CHECK(tupe_st_find(st, "exp_avg_sq.embeddings.word_embeddings.weight") != NULL);
    tupe_st_close(st);
    tupe_adamw_free(oa);
    tupe_adamw_free(ob);
    tupe_model_free(a);
    tupe_model_free(b);
}

/* Flip one byte inside a tensor's data: the load names the tensor. */
static void corrupt_refused(void)
{
    tupe_config c;
    cfg(&c, 0);
    tupe_model *a = mk(&c, 1);
    tupe_err e;
    const char *dir = unit_path("bad");
    CHECK_INT(tupe_ckpt_save(dir, a, NULL, NULL, &e), 0);
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, TUPE_CKPT_MODEL_FILE);
    tupe_st *st;
    CHECK_INT(tupe_st_open(&st, p, &e), 0);
    const char *victim = "encoder.layer.1.intermediate.dense.weight";
    uint64_t at = 8 + tupe_st_header_size(st) + tupe_st_find(st, victim)->begin + 37;
    tupe_st_close(st);
    size_t n;
    char *buf = unit_slurp(p, &n);
    char *orig = malloc(n);
    memcpy(orig, buf, n);
    buf[at] ^= 0x10;
    unit_write(p, buf, n);
    tupe_model *b = mk(&c, 2);
    CHECK_INT(tupe_ckpt_load(dir, b, NULL, NULL, 0, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'encoder.layer.1.intermediate.dense.weight': checksum mismatch");
    /* Truncated. */
    unit_write(p, orig, n - 100);
    CHECK_INT(tupe_ckpt_load(dir, b, NULL, NULL, 0, &e), TUPE_EDATA);
    /* Optimizer state asked for but not saved. */
    unit_write(p, orig, n);
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    tupe_adamw *o;
    CHECK_INT(tupe_adamw_create(&o, b, &oc, &e), 0);
    CHECK_INT(tupe_ckpt_load(dir, b, o, NULL, 0, &e), TUPE_ENOINPUT);
    CHECK_INT(tupe_ckpt_load(dir, b, NULL, NULL, 0, &e), 0);
    tupe_adamw_free(o);
    /* A different variant or size is refused by its configuration. */
    tupe_config c3 = c;
    c3.position = TUPE_POS_BERT_A;
    tupe_model *d = mk(&c3, 2);
    CHECK_INT(tupe_ckpt_load(dir, d, NULL, NULL, 0, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "the checkpoint's position differs");
    tupe_model_free(d);
    c3 = c;
    c3.intermediate_size = 48;
    d = mk(&c3, 2);
    CHECK_INT(tupe_ckpt_load(dir, d, NULL, NULL, 0, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "intermediate_size");
    tupe_model_free(d);
    /* Missing directory. */
    CHECK_INT(tupe_ckpt_load(unit_path("none"), b, NULL, NULL, 0, &e), TUPE_ENOINPUT);
    free(buf);
    free(orig);
    tupe_model_free(a);
    tupe_model_free(b);
}

/* Fine-tuning start: a pre-trained (MLM) checkpoint into a classification model. */
static void new_head(void)
{
    tupe_config c;
    cfg(&c, 0);
    tupe_model *a = mk(&c, 1);
    tupe_err e;
    const char *dir = unit_path("pre");
    CHECK_INT(tupe_ckpt_save(dir, a, NULL, NULL, &e), 0);
    tupe_config c2 = c;
    c2.num_labels = 3;
    tupe_model *b = mk(&c2, 5);
    CHECK_INT(tupe_ckpt_load(dir, b, NULL, NULL, 0, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'classifier.dense.weight': missing");
    float before[16 * 16], after[16 * 16];
    CHECK_INT(tupe_model_get(b, "classifier.dense.weight", before, 256, &e), 0);
    CHECK_INT(tupe_ckpt_load(dir, b, NULL, NULL, TUPE_CKPT_HEADS_OPTIONAL, &e), 0);
    CHECK_INT(tupe_model_get(b, "classifier.dense.weight", after, 256, &e), 0);
    CHECK(memcmp(before, after, sizeof before) == 0);
    float wa[40 * 16], wb[40 * 16];
    CHECK_INT(tupe_model_get(a, "embeddings.word_embeddings.weight", wa, 640, &e), 0);
    CHECK_INT(tupe_model_get(b, "embeddings.word_embeddings.weight", wb, 640, &e), 0);
    CHECK(memcmp(wa, wb, sizeof wa) == 0);
    /* The classification checkpoint back into an MLM model: the extra head is refused unless
     * heads are optional. */
    const char *d2 = unit_path("ft");
    CHECK_INT(tupe_ckpt_save(d2, b, NULL, NULL, &e), 0);
    CHECK_INT(tupe_ckpt_load(d2, a, NULL, NULL, 0, &e), TUPE_EDATA);
    CHECK_INT(tupe_ckpt_load(d2, a, NULL, NULL, TUPE_CKPT_HEADS_OPTIONAL, &e), 0);
    tupe_model_free(a);
    tupe_model_free(b);
}

static void init_is_reproducible(void)
{
    tupe_config c;
    cfg(&c, 2);
    tupe_model *a = mk(&c, 11), *b = mk(&c, 11), *d = mk(&c, 12);
    size_t n = tupe_model_layout(a)->total;
    float *x = flat(tupe_model_params(a), n), *y = flat(tupe_model_params(b), n),
          *z = flat(tupe_model_params(d), n);
    CHECK(memcmp(x, y, n * sizeof *x) == 0);
    CHECK(memcmp(x, z, n * sizeof *x) != 0);
    /* Statistics of the BERT init: weights N(0, 0.02), LayerNorm 1, biases 0, head U(+-1/4). */
    tupe_err e;
    float w[40 * 16];
    CHECK_INT(tupe_model_get(a, "embeddings.word_embeddings.weight", w, 640, &e), 0);
    double s = 0, s2 = 0;
    for (int i = 0; i < 640; i++)
        s += w[i], s2 += (double)w[i] * w[i];
    CHECK_NEAR(sqrt(s2 / 640), 0.02, 0.003);
    CHECK_NEAR(s / 640, 0, 0.003);
    float g[16];
    CHECK_INT(tupe_model_get(a, "encoder.layer.0.output.LayerNorm.weight", g, 16, &e), 0);
    CHECK(g[0] == 1 && g[15] == 1);
    CHECK_INT(tupe_model_get(a, "encoder.layer.0.output.dense.bias", g, 16, &e), 0);
    CHECK(g[0] == 0 && g[15] == 0);
    float cw[256];
    CHECK_INT(tupe_model_get(a, "classifier.dense.weight", cw, 256, &e), 0);
    float mx = 0;
    for (int i = 0; i < 256; i++)
        mx = fmaxf(mx, fabsf(cw[i]));
    CHECK(mx <= 0.25f && mx > 0.2f);
    CHECK_INT(tupe_model_get(a, "classifier.dense.bias", g, 16, &e), 0);
    CHECK(g[0] != 0 && fabsf(g[0]) <= 0.25f);
    free(x), free(y), free(z);
    tupe_model_free(a);
    tupe_model_free(b);
    tupe_model_free(d);
}

static void setup(void)
{
    tupe_err e;
    if (tupe_backend_create(&be, "cpu", 0, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
}

static void t_round_trip_and_resume(void) { setup(); round_trip_and_resume(); tupe_backend_destroy(be); }
static void t_corrupt_refused(void) { setup(); corrupt_refused(); tupe_backend_destroy(be); }
static void t_new_head(void) { setup(); new_head(); tupe_backend_destroy(be); }
static void t_init_is_reproducible(void) { setup(); init_is_reproducible(); tupe_backend_destroy(be); }

UNIT_MAIN(T(t_round_trip_and_resume), T(t_corrupt_refused), T(t_new_head),
          T(t_init_is_reproducible))
