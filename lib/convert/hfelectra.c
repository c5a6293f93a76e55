#include "convert/hfelectra.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/dtype.h"
#include "base/fileio.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"
#include "model/electra.h"
#include "model/params.h"

#define NET_D 0
#define NET_G 1
#define NET_BOTH 2
#define TT "electra.embeddings.token_type_embeddings.weight"
static const char *const NET_DIR[2] = {TUPE_HFELECTRA_DISC, TUPE_HFELECTRA_GEN};

/* Prefix pairs, ours -> Hugging Face, and the directory that holds them. */
static const struct { const char *ours, *hf; int net; } names[] = {
    {"embeddings_project.", "electra.embeddings_project.", NET_D},
    {"embeddings.", "electra.embeddings.", NET_BOTH},
    {"encoder.", "electra.encoder.", NET_D},
    {"discriminator_predictions.", "discriminator_predictions.", NET_D},
    {"generator.embeddings_project.", "electra.embeddings_project.", NET_G},
    {"generator.encoder.", "electra.encoder.", NET_G},
    {"generator_predictions.", "generator_predictions.", NET_G},
    {"generator_lm_head.", "generator_lm_head.", NET_G},
};

/* The network of a pair's tensor (NET_D, NET_G, NET_BOTH) and its Hugging Face name (tupe:
 * the remote-code model's); -1 for a tensor without one. */
static int hf_name(const char *ours, int tupe, char *hf, size_t cap)
{
    if (tupe) { /* tupe's BERT names under bert. (convert/hfbert.h), the heads ELECTRA's */
        int net = strncmp(ours, "generator.", 10) == 0 ? NET_G : NET_D;
        const char *n = net == NET_G ? ours + 10 : ours;
        if (strncmp(n, "generator_predictions.", 22) == 0)
            return snprintf(hf, cap, "cls.predictions.transform.%s", n + 22), NET_G;
        if (strcmp(n, "generator_lm_head.bias") == 0)
            return snprintf(hf, cap, "cls.predictions.bias"), NET_G;
        if (strncmp(n, "discriminator_predictions.", 26) == 0 || strncmp(n, "embeddings_project.", 19) == 0)
            return snprintf(hf, cap, "%s%s", n[0] == 'e' ? "bert." : "", n), net;
        if (tupe_hf_name(n, hf, cap))
            return -1;
        return net == NET_D && strncmp(n, "embeddings.", 11) == 0 ? NET_BOTH : net;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i].ours);
        if (strncmp(ours, names[i].ours, n) == 0) {
            snprintf(hf, cap, "%s%s", names[i].hf, ours + n);
            return names[i].net;
        }
    }
    return -1;
}

/* ---- export ---------------------------------------------------------------------------------- */

static int add(tupe_stw *w, const char *name, int to, int ndim, const uint64_t *shape, int dt,
               const void *data, float *buf, size_t n, tupe_err *e)
{
    if (dt == to) /* already in the precision asked: straight from the mapped checkpoint */
        return tupe_stw_add(w, name, dt, ndim, shape, data, e);
    tupe_to_f32(dt, data, buf, n);
    return to == TUPE_F32 ? tupe_stw_add_copy(w, name, to, ndim, shape, buf, e)
                          : tupe_stw_add_f32(w, name, to, ndim, shape, buf, e);
}

static int write_net(const char *path, int net, tupe_tset *s, const tupe_layout *lay,
                     const tupe_config *pair, int tupe, int to, tupe_err *e)
{
    size_t most = (size_t)tupe_cfg_emb(pair);
    for (size_t i = 0; i < lay->count; i++)
        most = lay->t[i].numel > most ? lay->t[i].numel : most;
    tupe_stw *w = tupe_stw_new();
    float *buf = malloc(most * sizeof *buf);
    int rc = !w || !buf ? tupe_fail(e, TUPE_EFAIL, "out of memory") : tupe_stw_meta(w, "format", "pt", e);
    for (size_t i = 0; i < lay->count && !rc; i++) {
        const tupe_param *p = &lay->t[i];
        char hf[TUPE_PARAM_NAME + 16];
        int k = hf_name(p->name, tupe, hf, sizeof hf);
        if (k < 0)
            rc = tupe_fail(e, TUPE_EFAIL, "parameter '%s' has no Hugging Face name", p->name);
        if (k < 0 || (k != net && k != NET_BOTH))
            continue;
        uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
        int dt;
        const void *data = tupe_tset_raw(s, p->name, p->ndim, shape, &dt, e);
        rc = data ? add(w, hf, to, p->ndim, shape, dt, data, buf, p->numel, e) : e->code;
    }
    if (!rc && !tupe && pair->type_vocab_size == 0) {
        /* ElectraEmbeddings always adds a token-type row: one of zeros adds nothing */
        uint64_t shape[2] = {1, (uint64_t)tupe_cfg_emb(pair)};
        memset(buf, 0, shape[1] * sizeof *buf);
        rc = add(w, TT, to, 2, shape, TUPE_F32, buf, buf, shape[1], e);
    }
    if (!rc)
        rc = tupe_stw_write(w, path, e);
    free(buf);
    tupe_stw_free(w);
    return rc;
}

static json_t *net_config(const tupe_config *c, const tupe_config *pair, int net, int tupe,
                          const tupe_vocab *v, int dtype)
{
    json_t *j = json_object();
    const char *arch = net == NET_D ? "ForPreTraining" : "ForMaskedLM";
    char a[64];
    snprintf(a, sizeof a, "%sElectra%s", tupe ? "Tupe" : "", arch);
    json_object_set_new(j, "architectures", json_pack("[s]", a));
    json_object_set_new(j, "model_type", json_string(tupe ? "tupe" : "electra"));
    tupe_hf_config_fields(j, c, v, dtype, !tupe && c->type_vocab_size == 0);
    json_object_set_new(j, "embedding_size", json_integer(tupe_cfg_emb(pair)));
    if (tupe) {
        tupe_hf_tupe_fields(j, c);
        /* transformers runs them with the code written beside (trust_remote_code) */
        char m[96];
        snprintf(m, sizeof m, "modeling_tupe_electra.%s", a);
        json_t *am = json_pack("{s:s,s:s,s:s}", "AutoConfig", "configuration_tupe.TupeConfig",
                               "AutoModel", "modeling_tupe_electra.TupeElectraModel",
                               net == NET_D ? "AutoModelForPreTraining" : "AutoModelForMaskedLM", m);
        if (net == NET_D) /* tupe's head (dense, tanh) on the discriminator's encoder */
            json_object_set_new(am, "AutoModelForSequenceClassification",
                                json_string("modeling_tupe_electra.TupeElectraForSequenceClassification"));
        json_object_set_new(j, "auto_map", am);
    } else {
        json_object_set_new(j, "position_embedding_type", json_string("absolute"));
    }
    /* the pair's own fraction, which the widths alone give only up to rounding */
    json_object_set_new(j, "tupe_generator_hidden_size", json_real(pair->generator_hidden_size));
    return j;
}

int tupe_hfelectra_write(const char *dir, tupe_tset *s, const tupe_config *pair,
                         const tupe_vocab *v, const json_t *state, const tupe_hf_export_opts *o,
                         tupe_err *e)
{
    tupe_layout lay;
    int rc = tupe_electra_layout(&lay, pair, e);
    if (rc)
        return rc;
    tupe_config cfg[2];
    tupe_electra_configs(pair, &cfg[NET_G], &cfg[NET_D]);
    int tupe = pair->position != TUPE_POS_BERT_A; /* the remote-code model */
    for (int net = 0; net < 2 && !rc; net++) {
        char sub[PATH_MAX], path[PATH_MAX + 32];
        snprintf(sub, sizeof sub, "%s/%s", dir, NET_DIR[net]);
        if (mkdir(sub, 0777) != 0) {
            rc = tupe_fail_errno(e, TUPE_ECANTCREAT, errno, "%s: cannot create", sub);
            break;
        }
        snprintf(path, sizeof path, "%s/model.safetensors", sub);
        if ((rc = write_net(path, net, s, &lay, pair, tupe, o->dtype, e)) ||
            (tupe && (rc = tupe_hf_write_code(sub, 1, e))))
            break;
        json_t *j = net_config(&cfg[net], pair, net, tupe, v, o->dtype);
        snprintf(path, sizeof path, "%s/config.json", sub);
        rc = tupe_hf_write_json(path, j, e);
        json_decref(j);
        if (!rc)
            rc = tupe_hf_write_tokenizer(sub, v, o, state, pair->max_position,
                                         pair->type_vocab_size, e);
    }
    tupe_layout_free(&lay);
    return rc;
}

/* ---- import ---------------------------------------------------------------------------------- */

int tupe_hfelectra_is_pair(const char *src)
{
    char p[PATH_MAX];
    snprintf(p, sizeof p, "%s/%s/config.json", src, TUPE_HFELECTRA_DISC);
    return tupe_path_exists(p);
}

typedef struct net {
    char dir[PATH_MAX], cfgpath[PATH_MAX + 16];
    json_t *j;
    tupe_tset *s;
    tupe_config c;
} net;

typedef struct import_ctx {
    net n[2];
    int tupe;            /* model_type "tupe": the remote-code model */
} import_ctx;

static int bad(const net *n, tupe_err *e, const char *key, const char *want)
{
    return tupe_fail(e, TUPE_EDATA, "%s: \"%s\" must be %s", n->cfgpath, key, want);
}

static int int_of(const net *n, const char *key, int def, int *out, tupe_err *e)
{
    json_t *v = json_object_get(n->j, key);
    if (!v)
        return *out = def, 0;
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
        return bad(n, e, key, "a non-negative integer");
    return *out = (int)json_integer_value(v), 0;
}

static int real_of(const net *n, const char *key, double def, double *out, tupe_err *e)
{
    json_t *v = json_object_get(n->j, key);
    if (!v || json_is_null(v))
        return *out = def, 0;
    if (!json_is_number(v))
        return bad(n, e, key, "a number");
    return *out = json_number_value(v), 0;
}

/* One directory's config.json as a plain configuration (ElectraConfig's defaults; a
 * model_type "tupe" one as import --from hf reads it). */
static int read_net(net *n, const char *src, int k, int *tupe, tupe_err *e)
{
    snprintf(n->dir, sizeof n->dir, "%s/%s", src, NET_DIR[k]);
    snprintf(n->cfgpath, sizeof n->cfgpath, "%s/config.json", n->dir);
    char *buf;
    size_t len;
    int rc = tupe_read_text(n->cfgpath, &buf, &len, 16u << 20, e);
    if (rc)
        return rc;
    json_error_t je;
    n->j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!n->j)
        return tupe_fail_linecol(e, TUPE_EDATA, n->cfgpath, je.line > 0 ? je.line : 1,
                                 je.column > 0 ? je.column : 1, "%s", je.text);
    if (!json_is_object(n->j))
        return tupe_fail(e, TUPE_EDATA, "%s: expected a JSON object", n->cfgpath);
    const char *mt = json_string_value(json_object_get(n->j, "model_type"));
    *tupe = mt && strcmp(mt, "tupe") == 0;
    if (*tupe) {
        int emb;
        if ((rc = tupe_hf_read_config(n->j, n->cfgpath, &n->c, e)) ||
            (rc = int_of(n, "embedding_size", n->c.hidden_size, &emb, e)))
            return rc;
        n->c.embedding_size = emb;
        return tupe_tset_open_path(&n->s, n->dir, e);
    }
    if (!mt || strcmp(mt, "electra") != 0)
        return bad(n, e, "model_type", "\"electra\" or \"tupe\"");
    const char *act = json_string_value(json_object_get(n->j, "hidden_act"));
    if (json_object_get(n->j, "hidden_act") && (!act || strcmp(act, "gelu") != 0))
        return bad(n, e, "hidden_act", "\"gelu\" (the exact erf GELU, the only one tupe computes)");
    const char *pet = json_string_value(json_object_get(n->j, "position_embedding_type"));
    if (json_object_get(n->j, "position_embedding_type") && (!pet || strcmp(pet, "absolute") != 0))
        return bad(n, e, "position_embedding_type", "\"absolute\" (BERT-A)");
    tupe_config *c = &n->c;
    tupe_config_default(c);
    c->position = TUPE_POS_BERT_A;
    int emb;
    if ((rc = int_of(n, "vocab_size", 30522, &c->vocab_size, e)) ||
        (rc = int_of(n, "hidden_size", 256, &c->hidden_size, e)) ||
        (rc = int_of(n, "embedding_size", 128, &emb, e)) ||
        (rc = int_of(n, "num_hidden_layers", 12, &c->num_layers, e)) ||
        (rc = int_of(n, "num_attention_heads", 4, &c->num_heads, e)) ||
        (rc = int_of(n, "intermediate_size", 1024, &c->intermediate_size, e)) ||
        (rc = int_of(n, "max_position_embeddings", 512, &c->max_position, e)) ||
        (rc = int_of(n, "type_vocab_size", 2, &c->type_vocab_size, e)) ||
        (rc = real_of(n, "hidden_dropout_prob", 0.1, &c->hidden_dropout, e)) ||
        (rc = real_of(n, "attention_probs_dropout_prob", 0.1, &c->attention_dropout, e)) ||
        (rc = real_of(n, "classifier_dropout", c->hidden_dropout, &c->classifier_dropout, e)) ||
        (rc = real_of(n, "layer_norm_eps", 1e-12, &c->layer_norm_eps, e)) ||
        (rc = real_of(n, "initializer_range", 0.02, &c->initializer_range, e)))
        return rc;
    c->embedding_size = emb;
    if ((rc = tupe_tset_open_path(&n->s, n->dir, e)))
        return rc;
    tupe_tset_drop(n->s, "electra.embeddings.position_ids", "a buffer, not a parameter", NULL, NULL);
    tupe_tset_drop(n->s, "electra.embeddings.token_type_ids", "a buffer, not a parameter", NULL, NULL);
    return 0;
}

/* The pair whose networks the two directories hold, or the field where they disagree with
 * what tupe derives from the discriminator. */
static int pair_config(import_ctx *x, tupe_config *pair, tupe_err *e)
{
    const net *d = &x->n[NET_D], *g = &x->n[NET_G];
    *pair = d->c;
    double f;
    int rc = real_of(d, "tupe_generator_hidden_size",
                     (double)g->c.hidden_size / d->c.hidden_size, &f, e);
    if (rc)
        return rc;
    if (!(f > 0 && f <= 1))
        return bad(d, e, "tupe_generator_hidden_size", "in (0, 1]");
    pair->generator_hidden_size = f;
    tupe_config want, disc;
    tupe_electra_configs(pair, &want, &disc);
    static const char *const keys[] = {"hidden_size", "num_attention_heads", "intermediate_size",
                                       "num_hidden_layers", "vocab_size", "embedding_size",
                                       "max_position_embeddings", "type_vocab_size",
                                       "position_embedding_type", "untie_cls",
                                       "rel_pos_buckets", "max_rel_pos"};
    const int have[] = {g->c.hidden_size, g->c.num_heads, g->c.intermediate_size,
                        g->c.num_layers, g->c.vocab_size, g->c.embedding_size,
                        g->c.max_position, g->c.type_vocab_size, g->c.position, g->c.untie_cls,
                        g->c.rel_pos_buckets, g->c.max_rel_pos};
    const int exp[] = {want.hidden_size, want.num_heads, want.intermediate_size, want.num_layers,
                       want.vocab_size, tupe_cfg_emb(pair), want.max_position,
                       d->c.type_vocab_size, d->c.position, d->c.untie_cls,
                       d->c.rel_pos_buckets, d->c.max_rel_pos};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
        if (have[k] != exp[k])
            return tupe_fail(e, TUPE_EDATA, "%s: \"%s\" %d, but a tupe pair's generator with "
                             "this discriminator (%s) has %d", g->cfgpath, keys[k], have[k],
                             d->cfgpath, exp[k]);
    if (g->c.layer_norm_eps != d->c.layer_norm_eps)
        return tupe_fail(e, TUPE_EDATA, "%s: \"layer_norm_eps\" %g, the discriminator's %g: tupe "
                         "gives both networks one", g->cfgpath, g->c.layer_norm_eps,
                         d->c.layer_norm_eps);
    return 0;
}

/* One all-zero token-type row in both (what the export writes): no token types. */
static int zero_types(import_ctx *x, tupe_config *pair, tupe_err *e)
{
    if (x->tupe || pair->type_vocab_size != 1)
        return 0;
    int E = tupe_cfg_emb(pair), zero = 1, rc = 0;
    float *row = malloc((size_t)E * sizeof *row);
    if (!row)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    uint64_t shape[2] = {1, (uint64_t)E};
    for (int k = 0; k < 2 && !rc; k++)
        if (tupe_tset_find(x->n[k].s, TT) >= 0 && !(rc = tupe_tset_read(x->n[k].s, TT, 2, shape, row, e)))
            for (int i = 0; i < E; i++)
                zero &= row[i] == 0.0f;
    free(row);
    if (!rc && zero)
        pair->type_vocab_size = 0;
    return rc;
}

static int fill(void *ctx, const tupe_param *p, float *dst, tupe_err *e)
{
    import_ctx *x = ctx;
    char hf[TUPE_PARAM_NAME + 16];
    int k = hf_name(p->name, x->tupe, hf, sizeof hf);
    if (k < 0)
        return tupe_fail(e, TUPE_EFAIL, "parameter '%s' has no Hugging Face name", p->name);
    uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
    return tupe_tset_read(x->n[k == NET_G ? NET_G : NET_D].s, hf, p->ndim, shape, dst, e);
}

/* The generator's copy of a shared table (and its tied output layer) equal to the model's. */
static int check_copy(import_ctx *x, tupe_model *m, const char *hf, const char *ours, tupe_err *e)
{
    tupe_tset *s = x->n[NET_G].s;
    long i = tupe_tset_find(s, hf);
    if (i < 0)
        return 0;
    int same;
    int rc = tupe_import_same(s, hf, m, ours, &same, e);
    if (!rc && !same)
        rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(s, (size_t)i), hf, "differs from the "
                              "discriminator's: a tupe pair shares its embeddings (and ties the "
                              "generator's output layer to the word table)");
    return rc;
}

static int shared_copies(import_ctx *x, tupe_model *m, const tupe_config *pair, tupe_err *e)
{
    tupe_layout lay;
    int rc = tupe_electra_layout(&lay, pair, e);
    for (size_t i = 0; !rc && i < lay.count; i++) {
        char hf[TUPE_PARAM_NAME + 16];
        if (hf_name(lay.t[i].name, x->tupe, hf, sizeof hf) == NET_BOTH)
            rc = check_copy(x, m, hf, lay.t[i].name, e);
    }
    tupe_layout_free(&lay);
    if (!rc)
        rc = check_copy(x, m, x->tupe ? "cls.predictions.decoder.weight" : "generator_lm_head.weight",
                        "embeddings.word_embeddings.weight", e);
    for (int k = 0; !rc && k < 2; k++) {
        long t = tupe_tset_find(x->n[k].s, TT), u;
        if (t >= 0 && pair->type_vocab_size == 0) /* the zero row: read, nothing to keep */
            tupe_tset_use(x->n[k].s, (size_t)t);
        if ((u = tupe_tset_unused(x->n[k].s)) >= 0)
            rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x->n[k].s, (size_t)u),
                                  tupe_tset_orig(x->n[k].s, (size_t)u), "no place for it in a "
                                  "tupe ELECTRA pair (%s, %s)", tupe_position_name(pair->position),
                                  k == NET_D ? "discriminator" : "generator");
    }
    return rc;
}

int tupe_hfelectra_import(const char *src, const char *ckpt, const tupe_hf_import_opts *o,
                          tupe_err *e)
{
    import_ctx x;
    memset(&x, 0, sizeof x);
    tupe_model *m = NULL;
    tupe_config pair;
    char *state = NULL;
    int gt = 0;
    int rc = read_net(&x.n[NET_D], src, NET_D, &x.tupe, e);
    if (!rc)
        rc = read_net(&x.n[NET_G], src, NET_G, &gt, e);
    if (!rc && gt != x.tupe)
        rc = tupe_fail(e, TUPE_EDATA, "%s: model_type \"%s\", the discriminator's \"%s\"",
                       x.n[NET_G].cfgpath, gt ? "tupe" : "electra", x.tupe ? "tupe" : "electra");
    if (!rc && !(rc = pair_config(&x, &pair, e)) && !(rc = zero_types(&x, &pair, e)) &&
        !(rc = tupe_config_check(&pair, 1, e)) &&
        !(rc = tupe_import_build(&m, &pair, o->seed, fill, &x, e)) &&
        !(rc = shared_copies(&x, m, &pair, e))) {
        json_t *st = json_pack("{s:s,s:s,s:s}", "imported_from", "hf", "source", src,
                               "model_type", x.tupe ? "tupe" : "electra");
        state = st ? json_dumps(st, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
        json_decref(st);
        rc = state ? tupe_ckpt_save(ckpt, m, NULL, state, e) : tupe_fail(e, TUPE_EFAIL, "out of memory");
        if (!rc)
            tupe_note(o->note, o->note_ctx, TUPE_NOTE_DETAIL, "%s: an ELECTRA pair (%s), %zu "
                      "parameters", ckpt, tupe_position_name(pair.position),
                      tupe_model_layout(m)->nparams);
    }
    free(state);
    tupe_import_free(m);
    for (int k = 0; k < 2; k++) {
        tupe_tset_close(x.n[k].s);
        json_decref(x.n[k].j);
    }
    return rc;
}
