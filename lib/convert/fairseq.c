#include "convert/fairseq.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/outdir.h"
#include "convert/tensorfile.h"
#include "model/checkpoint.h"

typedef struct fs_ctx {
    const tupe_fairseq_opts *o;
    const char *file;
    tupe_tset *s;
    char enc[32];            /* "decoder.sentence_encoder." or "encoder.sentence_encoder." */
    char lm[32];             /* "decoder.lm_head." ... */
    char head[256];          /* "classification_heads.NAME." or "" */
    tupe_config c;
    float *qkv;              /* one in_proj weight [3D, D] */
} fs_ctx;

static const tupe_st_tensor *find(const fs_ctx *x, const char *prefix, const char *name)
{
    char n[512];
    snprintf(n, sizeof n, "%s%s", prefix, name);
    long i = tupe_tset_find(x->s, n);
    return i < 0 ? NULL : tupe_tset_tensor(x->s, (size_t)i);
}

static int ends_with(const char *s, const char *suf)
{
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && strcmp(s + a - b, suf) == 0;
}

/* Our name -> the fairseq name; *chunk receives 0/1/2 for the query/key/value third of a fused
 * in_proj tensor, -1 otherwise. 0, or -1 for a name without a counterpart. */
static int fs_name(const fs_ctx *x, const char *ours, char *out, size_t cap, int *chunk)
{
    static const struct { const char *ours, *fs; int where; } map[] = {
        /* where: 0 encoder, 1 lm head, 2 classification head */
        {"embeddings.word_embeddings.", "embed_tokens.", 0},
        {"embeddings.LayerNorm.", "emb_layer_norm.", 0},
        {"position.embeddings.", "pos.", 0},
        {"position.LayerNorm.", "pos_ln.", 0},
        {"position.query.", "pos_q_linear.", 0},
        {"position.key.", "pos_k_linear.", 0},
        {"position.relative_bias.", "relative_attention_bias.", 0},
        {"cls.predictions.transform.dense.", "dense.", 1},
        {"cls.predictions.transform.LayerNorm.", "layer_norm.", 1},
        {"cls.predictions.bias", "bias", 1},
        {"classifier.dense.", "dense.", 2},
        {"classifier.out_proj.", "out_proj.", 2},
    };
    *chunk = -1;
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++) {
        size_t n = strlen(map[i].ours);
        if (strncmp(ours, map[i].ours, n) == 0) {
            const char *pre = map[i].where == 0 ? x->enc : map[i].where == 1 ? x->lm : x->head;
            snprintf(out, cap, "%s%s%s", pre, map[i].fs, ours + n);
            return 0;
        }
    }
    int l, k = 0;
    if (sscanf(ours, "encoder.layer.%d.%n", &l, &k) != 1 || k == 0)
        return -1;
    const char *rest = ours + k;
    static const struct { const char *ours, *fs; int chunk; } layer[] = {
        {"attention.self.query.", "self_attn.in_proj_", 0},
        {"attention.self.key.", "self_attn.in_proj_", 1},
        {"attention.self.value.", "self_attn.in_proj_", 2},
        {"attention.output.dense.", "self_attn.out_proj.", -1},
        {"attention.output.LayerNorm.", "self_attn_layer_norm.", -1},
        {"intermediate.dense.", "fc1.", -1},
        {"output.dense.", "fc2.", -1},
        {"output.LayerNorm.", "final_layer_norm.", -1},
    };
    for (size_t i = 0; i < sizeof layer / sizeof layer[0]; i++) {
        size_t n = strlen(layer[i].ours);
        if (strncmp(rest, layer[i].ours, n) == 0) {
            snprintf(out, cap, "%slayers.%d.%s%s", x->enc, l, layer[i].fs, rest + n);
            *chunk = layer[i].chunk;
            return 0;
        }
    }
    return -1;
}

static int fs_fill(void *ctx, const tupe_param *p, float *dst, tupe_err *e)
{
    fs_ctx *x = ctx;
    char n[512];
    int chunk;
    if (fs_name(x, p->name, n, sizeof n, &chunk))
        return tupe_fail(e, TUPE_EFAIL, "parameter '%s' has no fairseq name", p->name);
    uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
    /* Fused [Q; K; V] along the output dimension: read it whole, take our third. */
    if (chunk >= 0)
        shape[0] *= 3;
    if (chunk < 0 || !dst)
        return tupe_tset_read(x->s, n, p->ndim, shape, dst, e);
    int rc = tupe_tset_read(x->s, n, p->ndim, shape, x->qkv, e);
    if (!rc)
        memcpy(dst, x->qkv + (size_t)chunk * p->numel, p->numel * sizeof *dst);
    return rc;
}

/* The int value of `key` in the file's "args" metadata (the script stores fairseq's
 * argparse.Namespace there as JSON), or def. */
static int arg_int(const fs_ctx *x, const char *key, int def)
{
    const char *a = tupe_tset_meta(x->s, "args");
    if (!a)
        return def;
    json_error_t je;
    json_t *j = json_loads(a, 0, &je);
    json_t *v = json_object_get(j, key);
    int r = json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) < INT_MAX
                ? (int)json_integer_value(v)
                : def;
    json_decref(j);
    return r;
}

static int need2(const fs_ctx *x, const tupe_st_tensor *t, const char *prefix, const char *name,
                 tupe_err *e)
{
    char n[512];
    snprintf(n, sizeof n, "%s%s", prefix, name);
    if (!t)
        return tupe_fail_tensor(e, TUPE_EDATA, x->file, n, "missing: expected a matrix");
    if (t->ndim != 2 || t->shape[0] == 0 || t->shape[1] == 0 || t->shape[0] > (1u << 24) ||
        t->shape[1] > 65536) {
        char s[160];
        return tupe_fail_tensor(e, TUPE_EDATA, x->file, n, "shape %s, expected a matrix",
                                tupe_shape_str(s, sizeof s, t->ndim, t->shape));
    }
    return 0;
}

/* The classification head to take: --head, or the only one there is. */
static int pick_head(fs_ctx *x, tupe_err *e)
{
    const char *pre = "classification_heads.";
    size_t pn = strlen(pre);
    char names[1024] = "";
    int count = 0, found = 0;
    for (size_t i = 0; i < tupe_tset_count(x->s); i++) {
        const char *n = tupe_tset_name(x->s, i);
        if (strncmp(n, pre, pn) != 0 || !ends_with(n, ".out_proj.weight"))
            continue;
        char h[200];
        size_t hl = strlen(n) - pn - strlen(".out_proj.weight");
        if (hl == 0 || hl >= sizeof h)
            continue;
        memcpy(h, n + pn, hl);
        h[hl] = 0;
        count++;
        size_t k = strlen(names);
        snprintf(names + k, sizeof names - k, "%s%s", k ? ", " : "", h);
        if (!x->o->head ? count == 1 : strcmp(h, x->o->head) == 0) {
            snprintf(x->head, sizeof x->head, "%s%s.", pre, h);
            found = 1;
        }
    }
    if (x->o->head && !found)
        return tupe_fail(e, TUPE_EDATA, "%s: no classification head '%s' (the file has: %s)",
                         x->file, x->o->head, count ? names : "none");
    if (!x->o->head && count > 1)
        return tupe_fail(e, TUPE_EUSAGE, "%s: %d classification heads (%s): choose one with --head",
                         x->file, count, names);
    if (!found)
        x->head[0] = 0;
    return 0;
}

/* The configuration the tensors imply. */
static int shape_config(fs_ctx *x, tupe_err *e)
{
    tupe_config *c = &x->c;
    tupe_config_default(c);
    const tupe_st_tensor *emb = find(x, x->enc, "embed_tokens.weight");
    const tupe_st_tensor *pos = find(x, x->enc, "pos.weight");
    const tupe_st_tensor *fc1 = find(x, x->enc, "layers.0.fc1.weight");
    const tupe_st_tensor *rel = find(x, x->enc, "relative_attention_bias.weight");
    int rc;
    if ((rc = need2(x, emb, x->enc, "embed_tokens.weight", e)) ||
        (rc = need2(x, pos, x->enc, "pos.weight", e)) ||
        (rc = need2(x, fc1, x->enc, "layers.0.fc1.weight", e)))
        return rc;
    c->vocab_size = (int)emb->shape[0];
    c->hidden_size = (int)emb->shape[1];
    c->intermediate_size = (int)fc1->shape[0];
    if (pos->shape[0] < 2) {
        char s[160];
        return tupe_fail_tensor(e, TUPE_EDATA, x->file, pos->name, "shape %s, expected [positions + 1, %d]",
                                tupe_shape_str(s, sizeof s, pos->ndim, pos->shape), c->hidden_size);
    }
    c->max_position = (int)pos->shape[0] - 1;
    int layers = 0;
    char lp[64];
    snprintf(lp, sizeof lp, "%slayers.", x->enc);
    for (size_t i = 0; i < tupe_tset_count(x->s); i++) {
        int l;
        const char *n = tupe_tset_name(x->s, i);
        if (strncmp(n, lp, strlen(lp)) == 0 && sscanf(n + strlen(lp), "%d.", &l) == 1 &&
            l >= layers && l < 100000)
            layers = l + 1;
    }
    c->num_layers = layers;
    int heads = x->o->heads;
    if (rel) {
        if ((rc = need2(x, rel, x->enc, "relative_attention_bias.weight", e)))
            return rc;
        c->position = TUPE_POS_TUPE_R;
        c->rel_pos_buckets = (int)rel->shape[0] - 1;
        if (heads && heads != (int)rel->shape[1]) {
            char s[160];
            return tupe_fail_tensor(e, TUPE_EDATA, x->file, rel->name,
                                    "shape %s: %llu heads, but --heads %d",
                                    tupe_shape_str(s, sizeof s, rel->ndim, rel->shape),
                                    (unsigned long long)rel->shape[1], heads);
        }
        heads = (int)rel->shape[1];
    } else {
        c->position = TUPE_POS_TUPE_A;
        if (!heads)
            heads = arg_int(x, "encoder_attention_heads", 12);
    }
    c->num_heads = heads;
    c->max_rel_pos = arg_int(x, "max_rel_pos", 128);
    c->untie_cls = 1;
    c->type_vocab_size = 0;
    c->layer_norm_eps = 1e-5;
    if (x->head[0]) {
        const tupe_st_tensor *out = find(x, x->head, "out_proj.weight");
        if ((rc = need2(x, out, x->head, "out_proj.weight", e)))
            return rc;
        c->num_labels = (int)out->shape[0];
    }
    if (c->num_layers == 0)
        return tupe_fail(e, TUPE_EDATA, "%s: no %slayers.N tensors", x->file, x->enc);
    if ((rc = tupe_config_check(c, 1, e))) {
        if (!rel && !x->o->heads && c->hidden_size % c->num_heads)
            return tupe_fail(e, TUPE_EDATA, "%s: hidden size %d is not a multiple of %d heads "
                             "(%s): give the model's number of heads with --heads", x->file,
                             c->hidden_size, c->num_heads,
                             tupe_tset_meta(x->s, "args") ? "the file's args" : "the default");
        return tupe_err_wrap(e, "%s: the tensors' sizes", x->file);
    }
    return 0;
}

static int check_lm_tied(fs_ctx *x, tupe_model *m, tupe_err *e)
{
    char n[64];
    snprintf(n, sizeof n, "%sweight", x->lm);
    int same;
    if (tupe_tset_find(x->s, n) < 0)
        return 0;
    int rc = tupe_import_same(x->s, n, m, "embeddings.word_embeddings.weight", &same, e);
    if (!rc && !same)
        rc = tupe_fail_tensor(e, TUPE_EDATA, x->file, n, "differs from %sembed_tokens.weight: tupe "
                              "ties the output layer to the token embeddings", x->enc);
    return rc;
}

int tupe_fairseq_import(const char *file, const char *ckpt, const tupe_fairseq_opts *o,
                        tupe_err *e)
{
    fs_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    x.file = file;
    tupe_model *m = NULL;
    struct stat sb;
    if (stat(file, &sb) == 0 && S_ISDIR(sb.st_mode))
        return tupe_fail(e, TUPE_ENOINPUT, "%s: a directory (expected the .safetensors file that "
                         "share/tupe/fairseq2safetensors.py writes; --from hf reads directories)", file);
    /* before the work: the directory to replace must be a checkpoint or empty */
    int rc = tupe_outdir_check(ckpt, TUPE_CKPT_KIND, TUPE_OUTDIR_REPLACE, e);
    if (!rc)
        rc = tupe_tset_open(&x.s, file, e);
    if (rc)
        return rc;
    const char *tops[] = {"decoder.", "encoder."};
    for (int i = 0; i < 2 && !x.enc[0]; i++) {
        char n[64];
        snprintf(n, sizeof n, "%ssentence_encoder.embed_tokens.weight", tops[i]);
        if (tupe_tset_find(x.s, n) >= 0) {
            snprintf(x.enc, sizeof x.enc, "%ssentence_encoder.", tops[i]);
            snprintf(x.lm, sizeof x.lm, "%slm_head.", tops[i]);
        }
    }
    if (!x.enc[0]) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: no decoder.sentence_encoder.embed_tokens.weight: not a "
                       "TUPE fairseq model state", file);
        goto out;
    }
    /* Buffers some fairseq versions save next to the parameters. */
    for (size_t i = 0; i < tupe_tset_count(x.s); i++) {
        const char *n = tupe_tset_name(x.s, i);
        if (ends_with(n, ".version") || ends_with(n, "._float_tensor")) {
            tupe_tset_use(x.s, i);
            tupe_note(o->note, o->note_ctx, TUPE_NOTE_DETAIL, "%s: '%s' ignored: a buffer, not a parameter", file, n);
        }
    }
    if ((rc = pick_head(&x, e)) || (rc = shape_config(&x, e)))
        goto out;
    if (x.head[0]) {
        tupe_tset_drop(x.s, x.lm, "a classification model has no masked-LM head", o->note,
                       o->note_ctx);
        for (size_t i = 0; i < tupe_tset_count(x.s); i++) {
            const char *n = tupe_tset_name(x.s, i);
            if (!tupe_tset_used(x.s, i) && strncmp(n, "classification_heads.", 21) == 0 &&
                strncmp(n, x.head, strlen(x.head)) != 0) {
                tupe_tset_use(x.s, i);
                tupe_note(o->note, o->note_ctx, TUPE_NOTE_INFO, "%s: '%s' dropped: another classification head", file, n);
            }
        }
    }
    tupe_tset_expect_source(x.s, "(from the sizes of embed_tokens, pos and layers.0.fc1)");
    x.qkv = malloc(3 * (size_t)x.c.hidden_size * (size_t)x.c.hidden_size * sizeof *x.qkv);
    if (!x.qkv) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    if ((rc = tupe_import_build(&m, &x.c, o->seed, fs_fill, &x, e)))
        goto out;
    if (!x.head[0] && (rc = check_lm_tied(&x, m, e)))
        goto out;
    long u = tupe_tset_unused(x.s);
    if (u >= 0) {
        rc = tupe_fail_tensor(e, TUPE_EDATA, file, tupe_tset_name(x.s, (size_t)u),
                              "no place for it in a %s model (not a TUPE parameter, or a layer "
                              "beyond the %d the tensors imply)", tupe_position_name(x.c.position),
                              x.c.num_layers);
        goto out;
    }
    json_t *st = json_pack("{s:s, s:s, s:s}", "imported_from", "fairseq", "source", file,
                           "position", tupe_position_name(x.c.position));
    if (x.head[0]) {
        char h[sizeof x.head];
        size_t hl = strlen(x.head) - 22; /* "classification_heads." NAME "." */
        memcpy(h, x.head + 21, hl);
        h[hl] = 0;
        json_object_set_new(st, "head", json_string(h));
        json_object_set_new(st, "labels", json_array());
        json_object_set_new(st, "regression", json_boolean(x.c.num_labels == 1));
    }
    char *state = json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(st);
    /* Every tensor is in the model: unmapping the source now keeps its pages out of the peak. */
    tupe_tset_close(x.s);
    x.s = NULL;
    if (!state)
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
    else
        rc = tupe_ckpt_save(ckpt, m, NULL, state, e);
    free(state);
    if (!rc)
        tupe_note(o->note, o->note_ctx, TUPE_NOTE_DETAIL, "%s: %s, %d layers, %d heads, vocabulary %d, %zu parameters", ckpt,
                tupe_position_name(x.c.position), x.c.num_layers, x.c.num_heads, x.c.vocab_size,
                tupe_model_layout(m)->nparams);
out:
    free(x.qkv);
    tupe_import_free(m);
    tupe_tset_close(x.s);
    return rc;
}
