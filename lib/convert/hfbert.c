#include "convert/hfbert.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "base/outdir.h"
#include "base/version.h"
#include "convert/hfdeberta.h"
#include "convert/hfelectra.h"
#include "convert/hftokenizer.h"
#include "convert/tensorfile.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"
#include "model/posenc.h"
#include "text/vocab.h"

#define HF_MODEL "model.safetensors"
#define HF_INDEX "model.safetensors.index.json"
#define HF_CONFIG "config.json"
#define TT_NAME "bert.embeddings.token_type_embeddings.weight"
/* RoFormer's table of sines and cosines (a frozen parameter it saves), under our "bert." names. */
#define SIN_NAME "bert.encoder.embed_positions.weight"
#define ROFORMER_BASE 10000.0

/* Prefix pairs, ours -> Hugging Face; the first match wins. */
static const struct { const char *ours, *hf; } prefixes[] = {
    {"embeddings.", "bert.embeddings."},
    {"encoder.", "bert.encoder."},
    {"position.embeddings.", "bert.tupe.pos."},
    {"position.LayerNorm.", "bert.tupe.pos_ln."},
    {"position.query.", "bert.tupe.pos_q."},
    {"position.key.", "bert.tupe.pos_k."},
    {"position.relative_bias.", "bert.tupe.rel_bias."},
    /* DeBERTa's shared relative table and its LayerNorm (DebertaV2Encoder's; the rest of a
     * deberta model is named as BERT's, "bert." then read as "deberta.": hfdeberta.c) */
    {"position.rel_embeddings.LayerNorm.", "deberta.encoder.LayerNorm."},
    {"position.rel_embeddings.", "deberta.encoder.rel_embeddings."},
    {"classifier.dense.", "bert.pooler.dense."},
    {"classifier.out_proj.", "classifier."},
    {"cls.predictions.", "cls.predictions."},
};

int tupe_hf_name(const char *ours, char *hf, size_t cap)
{
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        size_t n = strlen(prefixes[i].ours);
        if (strncmp(ours, prefixes[i].ours, n) == 0) {
            snprintf(hf, cap, "%s%s", prefixes[i].hf, ours + n);
            return 0;
        }
    }
    return -1;
}

/* The scale factor of the content scores as the fairseq code names it: 1/sqrt(d * factor). */
static int scale_factor(const tupe_config *c)
{
    return tupe_cfg_tupe(c) ? 2 : c->position == TUPE_POS_BERT_AD ? 4 : 1;
}

/* ---- RoFormer -------------------------------------------------------------------------------- */

/* A RoFormer holds BERT's tensors under "roformer." where a BERT has "bert.": the names are
 * mapped through the BERT ones (hf of tupe_hf_name, rewritten in place). */
static void roformer_name(char *hf, size_t cap)
{
    size_t n = strlen(hf);
    if (strncmp(hf, "bert.", 5) == 0 && n + 5 <= cap) {
        memmove(hf + 9, hf + 5, n - 4);
        memcpy(hf, "roformer.", 9);
    }
}

/* RoFormer's sinusoidal table [P, d] as RoFormerSinusoidalPositionalEmbedding makes it: the
 * sines of the d/2 angles of every position, then their cosines. */
static void roformer_table(float *out, int P, int d)
{
    for (int p = 0; p < P; p++)
        for (int t = 0; t < d / 2; t++) {
            double a = tupe_rope_angle(ROFORMER_BASE, d, t, p);
            out[(size_t)p * d + t] = (float)sin(a);
            out[(size_t)p * d + d / 2 + t] = (float)cos(a);
        }
}

/* 1 for the query and key projections, whose rows (output columns) RoPE rotates. */
static int rotated_param(const char *name)
{
    return strstr(name, ".attention.self.query.") || strstr(name, ".attention.self.key.");
}

/* The half-split layout as RoFormer's interleaved one: within every head of d columns, column
 * t (t < d/2) goes to 2t and column t + d/2 to 2t + 1. Both layouts give pair t the same angle,
 * so with the query and key rows permuted alike the scores are the same. `row` floats a row. */
static void half_to_interleaved(const float *in, float *out, int rows, int d, size_t row)
{
    for (int r = 0; r < rows; r++) {
        int h = r / d, t = r % d;
        int to = h * d + (t < d / 2 ? 2 * t : 2 * (t - d / 2) + 1);
        memcpy(out + (size_t)to * row, in + (size_t)r * row, row * sizeof *out);
    }
}

/* ---- JSON output ----------------------------------------------------------------------------- */

/* 15 significant digits print 0.1 as "0.1"; 17 are used only when some value needs them. */
static int needs17(const json_t *v)
{
    if (json_is_real(v)) {
        char b[40];
        snprintf(b, sizeof b, "%.15g", json_real_value(v));
        return strtod(b, NULL) != json_real_value(v);
    }
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, x)
            if (needs17(x))
                return 1;
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x)
            if (needs17(x))
                return 1;
    }
    return 0;
}

int tupe_hf_write_json(const char *path, const json_t *v, tupe_err *e)
{
    char *s = json_dumps(v, JSON_INDENT(2) | JSON_SORT_KEYS |
                                JSON_REAL_PRECISION(needs17(v) ? 17 : 15));
    if (!s)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t n = strlen(s);
    tupe_out *o;
    int rc = tupe_out_open(&o, path, e);
    if (!rc) {
        rc = tupe_out_write(o, s, n, e);
        if (!rc)
            rc = tupe_out_write(o, "\n", 1, e);
        rc = rc ? (tupe_out_abort(o), rc) : tupe_out_commit(o, e);
    }
    free(s);
    return rc;
}

/* ---- export ---------------------------------------------------------------------------------- */

typedef struct export_ctx {
    const tupe_hf_export_opts *o;
    tupe_tset *s;         /* the checkpoint, checked */
    tupe_layout lay;
    tupe_config cfg;
    const tupe_config *c;
    json_t *state;        /* training state, or NULL */
    tupe_vocab *v;
    int bert;             /* model_type "bert" */
    int roformer;         /* model_type "roformer" (RoPE) */
    int deberta;          /* model_type "deberta-v2" (hfdeberta.h) */
} export_ctx;

/* `data` is reused: every tensor gets a private copy. */
static int add_tensor(tupe_stw *w, const char *name, int dtype, int ndim, const uint64_t *shape,
                      const float *data, tupe_err *e)
{
    return dtype == TUPE_F32 ? tupe_stw_add_copy(w, name, dtype, ndim, shape, data, e)
                             : tupe_stw_add_f32(w, name, dtype, ndim, shape, data, e);
}

static int write_tensors(export_ctx *x, const char *path, tupe_err *e)
{
    const tupe_layout *lay = &x->lay;
    const tupe_config *c = x->c;
    int to = x->o->dtype;
    tupe_stw *w = tupe_stw_new();
    int d = c->hidden_size / c->num_heads;
    size_t most = (size_t)c->hidden_size;
    if (x->roformer && (size_t)c->max_position * d > most)
        most = (size_t)c->max_position * d;
    for (size_t i = 0; i < lay->count; i++)
        most = lay->t[i].numel > most ? lay->t[i].numel : most;
    float *buf = malloc(most * sizeof *buf);
    /* the half-split layout's query and key rows, permuted */
    int permute = x->roformer && c->rope_layout == TUPE_ROPE_HALF;
    float *perm = permute ? malloc(most * sizeof *perm) : NULL;
    int rc = 0;
    if (!w || !buf || (permute && !perm)) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    if ((rc = tupe_stw_meta(w, "format", "pt", e)))
        goto out;
    for (size_t i = 0; i < lay->count && !rc; i++) {
        const tupe_param *p = &lay->t[i];
        char hf[TUPE_PARAM_NAME + 16];
        if (tupe_hf_name(p->name, hf, sizeof hf)) {
            rc = tupe_fail(e, TUPE_EFAIL, "parameter '%s' has no Hugging Face name", p->name);
            break;
        }
        if (x->roformer)
            roformer_name(hf, sizeof hf);
        if (x->deberta)
            tupe_hfdeb_name(hf, sizeof hf);
        uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
        int dt;
        const void *data = tupe_tset_raw(x->s, p->name, p->ndim, shape, &dt, e);
        if (!data) {
            rc = e->code;
            break;
        }
        if (permute && rotated_param(p->name)) {
            tupe_to_f32(dt, data, buf, p->numel);
            half_to_interleaved(buf, perm, p->shape[0], d, p->ndim == 2 ? (size_t)p->shape[1] : 1);
            rc = add_tensor(w, hf, to, p->ndim, shape, perm, e);
        } else if (dt == to) {
            /* Already in the target precision: written straight from the mapped checkpoint. */
            rc = tupe_stw_add(w, hf, dt, p->ndim, shape, data, e);
        } else {
            tupe_to_f32(dt, data, buf, p->numel);
            rc = add_tensor(w, hf, to, p->ndim, shape, buf, e);
        }
    }
    if (!rc && (x->bert || x->roformer) && c->type_vocab_size == 0) {
        /* BertEmbeddings (and RoFormer's) always add a token-type row: one of zeros adds
         * nothing. */
        char tt[64] = TT_NAME;
        if (x->roformer)
            roformer_name(tt, sizeof tt);
        uint64_t shape[2] = {1, (uint64_t)c->hidden_size};
        memset(buf, 0, (size_t)c->hidden_size * sizeof *buf);
        rc = add_tensor(w, tt, to, 2, shape, buf, e);
    }
    if (!rc && x->roformer) {
        /* transformers would make the same table if it were missing, with a warning that the
         * weights lack it: it is written, in the precision of the rest. */
        char sn[64] = SIN_NAME;
        roformer_name(sn, sizeof sn);
        uint64_t shape[2] = {(uint64_t)c->max_position, (uint64_t)d};
        roformer_table(buf, c->max_position, d);
        rc = add_tensor(w, sn, to, 2, shape, buf, e);
    }
    if (!rc)
        rc = tupe_stw_write(w, path, e);
out:
    free(buf);
    free(perm);
    tupe_stw_free(w);
    return rc;
}

static const char *dtype_torch(int dt)
{
    return dt == TUPE_BF16 ? "bfloat16" : dt == TUPE_F16 ? "float16" : "float32";
}

static const char *export_type(const export_ctx *x)
{
    return x->bert ? "bert" : x->roformer ? "roformer" : x->deberta ? "deberta-v2" : "tupe";
}

void tupe_hf_config_fields(json_t *j, const tupe_config *c, const tupe_vocab *v, int dtype,
                           int zero_type_row)
{
    json_object_set_new(j, "vocab_size", json_integer(c->vocab_size));
    json_object_set_new(j, "hidden_size", json_integer(c->hidden_size));
    json_object_set_new(j, "num_hidden_layers", json_integer(c->num_layers));
    json_object_set_new(j, "num_attention_heads", json_integer(c->num_heads));
    json_object_set_new(j, "intermediate_size", json_integer(c->intermediate_size));
    json_object_set_new(j, "hidden_act", json_string("gelu"));
    json_object_set_new(j, "hidden_dropout_prob", json_real(c->hidden_dropout));
    json_object_set_new(j, "attention_probs_dropout_prob", json_real(c->attention_dropout));
    json_object_set_new(j, "classifier_dropout", json_real(c->classifier_dropout));
    json_object_set_new(j, "max_position_embeddings", json_integer(c->max_position));
    json_object_set_new(j, "type_vocab_size", json_integer(zero_type_row ? 1 : c->type_vocab_size));
    json_object_set_new(j, "initializer_range", json_real(c->initializer_range));
    json_object_set_new(j, "layer_norm_eps", json_real(c->layer_norm_eps));
    int32_t pad = v->special[TUPE_SP_PAD];
    json_object_set_new(j, "pad_token_id", pad >= 0 ? json_integer(pad) : json_null());
    json_object_set_new(j, "tie_word_embeddings", json_true());
    json_object_set_new(j, "dtype", json_string(dtype_torch(dtype)));
    json_object_set_new(j, "tupe_version", json_string(tupe_version()));
}

void tupe_hf_tupe_fields(json_t *j, const tupe_config *c)
{
    json_object_set_new(j, "position_embedding_type", json_string(tupe_position_name(c->position)));
    json_object_set_new(j, "untie_cls", json_boolean(c->untie_cls));
    json_object_set_new(j, "attn_scale_factor", json_integer(scale_factor(c)));
    json_object_set_new(j, "rel_pos_buckets", json_integer(c->rel_pos_buckets));
    json_object_set_new(j, "max_rel_pos", json_integer(c->max_rel_pos));
    json_object_set_new(j, "activation_dropout", json_real(c->activation_dropout));
}

static json_t *export_config(export_ctx *x)
{
    const tupe_config *c = x->c;
    int cls = c->num_labels > 0;
    json_t *j = json_object();
    char arch[64];
    snprintf(arch, sizeof arch, "%sFor%s",
             x->bert ? "Bert" : x->roformer ? "RoFormer" : x->deberta ? "DebertaV2" : "Tupe",
             cls ? "SequenceClassification" : "MaskedLM");
    json_object_set_new(j, "architectures", json_pack("[s]", arch));
    json_object_set_new(j, "model_type", json_string(export_type(x)));
    tupe_hf_config_fields(j, c, x->v, x->o->dtype, (x->bert || x->roformer) && c->type_vocab_size == 0);
    if (x->bert) {
        json_object_set_new(j, "position_embedding_type", json_string("absolute"));
    } else if (x->roformer) {
        json_object_set_new(j, "embedding_size", json_integer(c->hidden_size));
        json_object_set_new(j, "rotary_value", json_false());
    } else if (x->deberta) {
        tupe_hfdeb_write_config(j, c);
    } else {
        tupe_hf_tupe_fields(j, c);
        /* transformers runs the variants with the code written beside (trust_remote_code). */
        json_object_set_new(j, "auto_map", json_pack(
            "{s:s,s:s,s:s,s:s}", "AutoConfig", "configuration_tupe.TupeConfig", "AutoModel",
            "modeling_tupe.TupeModel", "AutoModelForMaskedLM", "modeling_tupe.TupeForMaskedLM",
            "AutoModelForSequenceClassification", "modeling_tupe.TupeForSequenceClassification"));
    }
    if (cls) {
        json_t *labels = json_object_get(x->state, "labels");
        json_t *id2 = json_object(), *l2id = json_object();
        for (int i = 0; i < c->num_labels; i++) {
            char k[32], def[32];
            snprintf(k, sizeof k, "%d", i);
            snprintf(def, sizeof def, "LABEL_%d", i);
            const char *name = json_array_size(labels) == (size_t)c->num_labels
                                   ? json_string_value(json_array_get(labels, (size_t)i))
                                   : NULL;
            json_object_set_new(id2, k, json_string(name ? name : def));
            json_object_set_new(l2id, name ? name : def, json_integer(i));
        }
        json_object_set_new(j, "id2label", id2);
        json_object_set_new(j, "label2id", l2id);
        json_object_set_new(j, "problem_type", json_string(c->num_labels == 1
                                                               ? "regression"
                                                               : "single_label_classification"));
        const char *task = json_string_value(json_object_get(x->state, "task"));
        if (task)
            json_object_set_new(j, "finetuning_task", json_string(task));
    }
    return j;
}

static int copy_file(const char *from, const char *to, tupe_err *e)
{
    char *buf;
    size_t len;
    int rc = tupe_read_file(from, &buf, &len, (size_t)1 << 31, e);
    if (rc)
        return rc;
    rc = tupe_write_file(to, buf, len, e);
    free(buf);
    return rc;
}

/* The Python that transformers runs for model_type "tupe", from share/tupe/hf/. */
int tupe_hf_write_code(const char *dir, int electra, tupe_err *e)
{
    static const char *const files[] = {"configuration_tupe.py", "modeling_tupe.py",
                                        "modeling_tupe_electra.py"};
    for (size_t i = 0; i < (electra ? 3 : 2); i++) {
        char rel[64], from[PATH_MAX], to[PATH_MAX];
        snprintf(rel, sizeof rel, "hf/%s", files[i]);
        if (tupe_share_path(rel, from, sizeof from))
            return tupe_fail(e, TUPE_ENOINPUT, "%s: not found (tupe's share/tupe/hf is not "
                             "installed beside the program)", from);
        snprintf(to, sizeof to, "%s/%s", dir, files[i]);
        int rc = copy_file(from, to, e);
        if (rc)
            return rc;
    }
    return 0;
}

int tupe_hf_write_tokenizer(const char *dir, const tupe_vocab *v, const tupe_hf_export_opts *o,
                            const json_t *state, int max_position, int types, tupe_err *e)
{
    char path[PATH_MAX];
    int rc;
    json_t *tc = json_object();
    static const char *const keys[TUPE_SP_COUNT] = {"pad_token", "unk_token", "cls_token",
                                                     "sep_token", "mask_token"};
    for (int r = 0; r < TUPE_SP_COUNT; r++)
        if (v->special[r] >= 0)
            json_object_set_new(tc, keys[r], json_string(tupe_vocab_token(v, (uint32_t)v->special[r])));
    json_object_set_new(tc, "model_max_length", json_integer(max_position));
    if (v->kind == TUPE_VOCAB_WORDPIECE) {
        snprintf(path, sizeof path, "%s/vocab.txt", dir);
        rc = tupe_vocab_save(v, path, e);
        int lc = o->lowercase;
        if (lc < 0) {
            json_t *l = json_object_get((json_t *)state, "lowercase");
            lc = json_is_boolean(l) ? json_is_true(l) : 1;
        }
        json_object_set_new(tc, "tokenizer_class", json_string("BertTokenizer"));
        json_object_set_new(tc, "do_lower_case", json_boolean(lc));
        if (!rc) {
            snprintf(path, sizeof path, "%s/tokenizer.json", dir);
            rc = tupe_hf_tokenizer_write(v, lc, types > 0, path, e);
        }
    } else {
        /* transformers has no fastBPE tokenizer: vocab.txt lists the ids' symbols, and the
         * BPE files travel along for tupe-tokenize. */
        tupe_out *out = NULL;
        snprintf(path, sizeof path, "%s/vocab.txt", dir);
        rc = tupe_out_open(&out, path, e);
        for (uint32_t id = 0; !rc && id < tupe_vocab_size(v); id++) {
            rc = tupe_out_write(out, tupe_vocab_token(v, id), tupe_vocab_token_len(v, id), e);
            if (!rc)
                rc = tupe_out_write(out, "\n", 1, e);
        }
        if (!rc)
            rc = tupe_out_commit(out, e);
        else if (out)
            tupe_out_abort(out);
        if (!rc) {
            snprintf(path, sizeof path, "%s/dict.txt", dir);
            rc = tupe_vocab_save(v, path, e);
        }
        char codes[PATH_MAX];
        snprintf(codes, sizeof codes, "%s/codes", o->vocab);
        if (!rc && tupe_path_exists(codes)) {
            snprintf(path, sizeof path, "%s/codes", dir);
            rc = copy_file(codes, path, e);
        }
        json_object_set_new(tc, "tupe_vocabulary", json_string("bpe"));
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
        rc = tupe_hf_write_json(path, tc, e);
    }
    json_decref(tc);
    return rc;
}

int tupe_hf_export(const char *ckpt, const char *dir, const tupe_hf_export_opts *o, tupe_err *e)
{
    export_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    tupe_dirtx *tx = NULL;
    json_t *cfg = NULL;
    if (o->dtype != TUPE_F32 && o->dtype != TUPE_BF16 && o->dtype != TUPE_F16)
        return tupe_fail(e, TUPE_EUSAGE, "export: dtype must be F32, BF16 or F16");
    /* before the work: the directory to replace must be an export or empty */
    int rc = tupe_outdir_check(dir, TUPE_HF_KIND, TUPE_OUTDIR_REPLACE, e);
    if (!rc)
        rc = tupe_import_open_ckpt(&x.s, ckpt, &x.cfg, &x.lay, e);
    if (rc)
        return rc;
    x.c = &x.cfg;
    int pair = tupe_cfg_pair(x.c);
    if (pair && x.c->position >= TUPE_POS_ROPE) {
        rc = tupe_fail(e, TUPE_EUSAGE, "export --to hf: %s: an ELECTRA pair with %s positions: "
                       "transformers' ELECTRA classes compute BERT-A's learned table only, and "
                       "tupe's remote-code model the TUPE paper's variants", ckpt,
                       tupe_position_name(x.c->position));
        goto out;
    }
    x.bert = x.c->position == TUPE_POS_BERT_A;
    x.roformer = x.c->position == TUPE_POS_ROPE;
    x.deberta = x.c->position == TUPE_POS_DEBERTA;
    if (x.deberta && x.c->num_labels > 0) {
        rc = tupe_fail(e, TUPE_EUSAGE, "export --to hf: %s: a deberta model with a "
                       "classification head: DebertaV2ForSequenceClassification's ContextPooler "
                       "applies its dropout before the dense layer and pooler_hidden_act after "
                       "it, not tupe's head; the masked-LM checkpoint exports as "
                       "DebertaV2ForMaskedLM", ckpt);
        goto out;
    }
    if (x.roformer && x.c->rope_base != ROFORMER_BASE) {
        rc = tupe_fail(e, TUPE_EUSAGE, "export --to hf: %s: rope_base %g, but RoFormer, the "
                       "transformers class of a rotary encoder, rotates with base %g only",
                       ckpt, x.c->rope_base, ROFORMER_BASE);
        goto out;
    }
    if (x.roformer && x.c->num_labels > 0) {
        rc = tupe_fail(e, TUPE_EUSAGE, "export --to hf: %s: a rope model with a classification "
                       "head: RoFormerForSequenceClassification applies hidden_act (GELU) between "
                       "its dense layer and the output where tupe's head applies tanh, so no "
                       "transformers class computes it (a masked-LM checkpoint exports as "
                       "RoFormerForMaskedLM)", ckpt);
        goto out;
    }
    if (x.c->position > TUPE_POS_ROPE && !x.deberta) {
        /* modeling_tupe.py computes the paper's five variants; no other is written as it. */
        rc = tupe_fail(e, TUPE_EUSAGE, "export --to hf: %s: a %s model has no Hugging Face form "
                       "here (BERT-A exports as BertForMaskedLM, rope as RoFormerForMaskedLM, "
                       "deberta as DebertaV2ForMaskedLM, the other variants of the TUPE paper as the remote-code model)", ckpt,
                       tupe_position_name(x.c->position));
        goto out;
    }
    const char *ts = tupe_tset_meta(x.s, "train_state");
    if (ts) {
        json_error_t je;
        x.state = json_loads(ts, 0, &je);
    }
    if ((rc = tupe_vocab_load(&x.v, o->vocab, e)))
        goto out;
    if (tupe_vocab_size(x.v) != (uint32_t)x.c->vocab_size) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: %u tokens, but the checkpoint %s has vocab_size %d",
                       o->vocab, tupe_vocab_size(x.v), ckpt, x.c->vocab_size);
        goto out;
    }
    const char *want = json_string_value(json_object_get(x.state, "vocab_hash"));
    char have[22];
    tupe_hash_hex(x.v->hash, have);
    if (want && strcmp(want, have) != 0) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: vocabulary hash %s, but %s was trained with %s",
                       o->vocab, have, ckpt, want);
        goto out;
    }
    if ((rc = tupe_dirtx_begin(&tx, dir, TUPE_HF_KIND, e)))
        goto out;
    char path[PATH_MAX];
    if (pair) {
        if ((rc = tupe_hfelectra_write(tupe_dirtx_tmp(tx), x.s, x.c, x.v, x.state, o, e)))
            goto out;
    } else {
        snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, HF_MODEL));
        if ((rc = write_tensors(&x, path, e)))
            goto out;
        cfg = export_config(&x);
        snprintf(path, sizeof path, "%s", tupe_dirtx_file(tx, HF_CONFIG));
        if ((rc = tupe_hf_write_json(path, cfg, e)) ||
            (rc = tupe_hf_write_tokenizer(tupe_dirtx_tmp(tx), x.v, o, x.state,
                                          x.c->max_position, x.c->type_vocab_size, e)) ||
            (!x.bert && !x.roformer && !x.deberta && (rc = tupe_hf_write_code(tupe_dirtx_tmp(tx), 0, e))))
            goto out;
    }
    rc = tupe_dirtx_commit(tx, e);
    tx = NULL;
    if (!rc)
        tupe_note(o->note, o->note_ctx, TUPE_NOTE_DETAIL, "%s: model_type \"%s\" (%s), %zu parameters, %s",
             dir, !pair ? export_type(&x) : x.bert ? "electra" : "tupe", tupe_position_name(x.c->position),
             x.lay.nparams, dtype_torch(o->dtype));
out:
    tupe_dirtx_abort(tx);
    json_decref(cfg);
    json_decref(x.state);
    tupe_vocab_free(x.v);
    tupe_layout_free(&x.lay);
    tupe_tset_close(x.s);
    return rc;
}

/* ---- import ---------------------------------------------------------------------------------- */

typedef struct import_ctx {
    const tupe_hf_import_opts *o;
    const char *src;
    char cfgpath[PATH_MAX];
    json_t *j;               /* config.json */
    tupe_tset *s;
    tupe_config c;
    int tupe;                /* model_type "tupe" */
    int roformer;            /* model_type "roformer" */
    int deberta;             /* model_type "deberta-v2" (hfdeberta.h) */
    const char *mt;          /* the model_type */
    int head_missing;        /* masked-LM head absent: keep the seeded values */
    int legacy_noted;
    int lowercase;           /* tokenizer_config.json's do_lower_case, or -1 */
} import_ctx;

static int cfg_err(import_ctx *x, tupe_err *e, const char *key, const char *want)
{
    return tupe_fail(e, TUPE_EDATA, "%s: \"%s\" must be %s", x->cfgpath, key, want);
}

static int get_int(import_ctx *x, const char *key, int def, int *out, tupe_err *e)
{
    json_t *v = json_object_get(x->j, key);
    if (!v) {
        *out = def;
        return 0;
    }
    if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT_MAX)
        return cfg_err(x, e, key, "a non-negative integer");
    *out = (int)json_integer_value(v);
    return 0;
}

/* null means `def` too (classifier_dropout: null = hidden_dropout_prob). */
static int get_real(import_ctx *x, const char *key, double def, double *out, tupe_err *e)
{
    json_t *v = json_object_get(x->j, key);
    if (!v || json_is_null(v)) {
        *out = def;
        return 0;
    }
    if (!json_is_number(v))
        return cfg_err(x, e, key, "a number");
    *out = json_number_value(v);
    return 0;
}

static const char *get_str(import_ctx *x, const char *key, const char *def)
{
    json_t *v = json_object_get(x->j, key);
    return json_is_string(v) ? json_string_value(v) : v ? NULL : def;
}

static int tupe_fields(import_ctx *x, tupe_err *e);

/* The configuration from config.json (transformers' BertConfig defaults for absent fields). */
static int read_config(import_ctx *x, tupe_err *e)
{
    tupe_config *c = &x->c;
    tupe_config_default(c);
    const char *mt = get_str(x, "model_type", NULL);
    if (!mt)
        return cfg_err(x, e, "model_type", "\"bert\", \"roformer\", \"deberta-v2\" or \"tupe\"");
    if (strcmp(mt, "bert") != 0 && strcmp(mt, "tupe") != 0 && strcmp(mt, "roformer") != 0 &&
        strcmp(mt, "deberta-v2") != 0)
        return tupe_fail(e, TUPE_EDATA, "%s: model_type \"%s\" is not supported: expected \"bert\" "
                         "(a BERT), \"roformer\" (a RoFormer), \"deberta-v2\" (DeBERTa v2/v3) or "
                         "\"tupe\" (a tupe-convert export)", x->cfgpath, mt);
    x->mt = mt;
    x->tupe = strcmp(mt, "tupe") == 0;
    x->roformer = strcmp(mt, "roformer") == 0;
    x->deberta = strcmp(mt, "deberta-v2") == 0;
    const char *act = get_str(x, "hidden_act", "gelu");
    if (!act || strcmp(act, "gelu") != 0)
        return cfg_err(x, e, "hidden_act", "\"gelu\" (the exact erf GELU, the only one tupe computes)");
    const char *pet = get_str(x, "position_embedding_type", x->tupe ? NULL : "absolute");
    if (x->deberta) {
        c->position = TUPE_POS_DEBERTA; /* its fields after the sizes: tupe_hfdeb_read_config */
    } else if (x->roformer) {
        /* RoFormerConfig has no position_embedding_type: its rotation is RoPE, interleaved
         * (pairs 2t, 2t + 1), base 10000, on the queries and keys after their biases. */
        json_t *rv = json_object_get(x->j, "rotary_value");
        if (rv && !json_is_boolean(rv))
            return cfg_err(x, e, "rotary_value", "true or false");
        if (json_is_true(rv))
            return cfg_err(x, e, "rotary_value", "false (tupe rotates the queries and keys, "
                           "not the values)");
        c->position = TUPE_POS_ROPE;
        c->rope_layout = TUPE_ROPE_INTERLEAVED;
        c->rope_base = ROFORMER_BASE;
    } else if (x->tupe) {
        int p = pet ? tupe_position_parse(pet) : -1;
        if (p < 0)
            return cfg_err(x, e, "position_embedding_type",
                           "one of bert-a, bert-r, bert-ad, tupe-a, tupe-r in a tupe model");
        c->position = p;
    } else {
        if (!pet || strcmp(pet, "absolute") != 0)
            return cfg_err(x, e, "position_embedding_type",
                           "\"absolute\" (relative_key variants are not BERT-A)");
        c->position = TUPE_POS_BERT_A;
    }
    json_t *dec = json_object_get(x->j, "is_decoder"), *xa = json_object_get(x->j, "add_cross_attention");
    if (json_is_true(dec) || json_is_true(xa))
        return cfg_err(x, e, json_is_true(dec) ? "is_decoder" : "add_cross_attention",
                       "false (tupe models are encoders)");
    int rc;
    if ((rc = get_int(x, "vocab_size", 30522, &c->vocab_size, e)) ||
        (rc = get_int(x, "hidden_size", 768, &c->hidden_size, e)) ||
        (rc = get_int(x, "num_hidden_layers", 12, &c->num_layers, e)) ||
        (rc = get_int(x, "num_attention_heads", 12, &c->num_heads, e)) ||
        (rc = get_int(x, "intermediate_size", 3072, &c->intermediate_size, e)) ||
        (rc = get_int(x, "max_position_embeddings", x->roformer ? 1536 : 512, &c->max_position, e)) ||
        (rc = get_int(x, "type_vocab_size", x->tupe || x->deberta ? 0 : 2, &c->type_vocab_size, e)) ||
        (rc = get_real(x, "hidden_dropout_prob", 0.1, &c->hidden_dropout, e)) ||
        (rc = get_real(x, "attention_probs_dropout_prob", 0.1, &c->attention_dropout, e)) ||
        (rc = get_real(x, "classifier_dropout", c->hidden_dropout, &c->classifier_dropout, e)) ||
        (rc = get_real(x, "layer_norm_eps", x->deberta ? 1e-7 : 1e-12, &c->layer_norm_eps, e)) ||
        (rc = get_real(x, "initializer_range", 0.02, &c->initializer_range, e)))
        return rc;
    if (x->deberta && (rc = tupe_hfdeb_read_config(x->j, x->cfgpath, c, e)))
        return rc;
    if (x->roformer) {
        int es;
        if ((rc = get_int(x, "embedding_size", c->hidden_size, &es, e)))
            return rc;
        if (es != c->hidden_size)
            return tupe_fail(e, TUPE_EDATA, "%s: \"embedding_size\" %d differs from hidden_size "
                             "%d: the projection between them (embeddings_project) is not part "
                             "of a tupe model", x->cfgpath, es, c->hidden_size);
    }
    return x->tupe ? tupe_fields(x, e) : 0;
}

/* The fields of model_type "tupe" beyond BERT's. */
static int tupe_fields(import_ctx *x, tupe_err *e)
{
    tupe_config *c = &x->c;
    int rc;
    {
        json_t *u = json_object_get(x->j, "untie_cls");
        if (u && !json_is_boolean(u))
            return cfg_err(x, e, "untie_cls", "true or false");
        c->untie_cls = u ? json_is_true(u) : 1;
        int f;
        if ((rc = get_real(x, "activation_dropout", 0, &c->activation_dropout, e)) ||
            (rc = get_int(x, "rel_pos_buckets", 32, &c->rel_pos_buckets, e)) ||
            (rc = get_int(x, "max_rel_pos", 128, &c->max_rel_pos, e)) ||
            (rc = get_int(x, "attn_scale_factor", scale_factor(c), &f, e)))
            return rc;
        if (f != scale_factor(c))
            return tupe_fail(e, TUPE_EDATA, "%s: \"attn_scale_factor\" %d does not go with "
                             "position_embedding_type \"%s\" (%d)", x->cfgpath, f,
                             tupe_position_name(c->position), scale_factor(c));
    }
    return 0;
}

int tupe_hf_read_config(json_t *j, const char *cfgpath, tupe_config *c, tupe_err *e)
{
    import_ctx x;
    memset(&x, 0, sizeof x);
    x.j = j;
    snprintf(x.cfgpath, sizeof x.cfgpath, "%s", cfgpath);
    int rc = read_config(&x, e);
    *c = x.c;
    return rc;
}

/* Hugging Face spellings into ours: the "bert." prefix of a bare BertModel, and TensorFlow's
 * LayerNorm.gamma/beta. */
static int normalize_names(import_ctx *x, tupe_err *e)
{
    for (size_t i = 0; i < tupe_tset_count(x->s); i++) {
        const char *n = tupe_tset_name(x->s, i);
        char buf[512];
        int bare = strncmp(n, "embeddings.", 11) == 0 || strncmp(n, "encoder.", 8) == 0 ||
                   strncmp(n, "pooler.", 7) == 0;
        /* A RoFormer's "roformer." is a BERT's "bert." (RoFormerModel saves them bare); a
         * DebertaV2's names have their own spelling (hfdeberta.h). */
        if (x->deberta)
            tupe_hfdeb_to_bert(n, buf, sizeof buf);
        else if (x->roformer && strncmp(n, "roformer.", 9) == 0)
            snprintf(buf, sizeof buf, "bert.%s", n + 9);
        else
            snprintf(buf, sizeof buf, "%s%s", bare ? "bert." : "", n);
        size_t len = strlen(buf);
        int legacy = 0;
        if (len > 16 && strcmp(buf + len - 16, ".LayerNorm.gamma") == 0) {
            strcpy(buf + len - 5, "weight");
            legacy = 1;
        } else if (len > 15 && strcmp(buf + len - 15, ".LayerNorm.beta") == 0) {
            strcpy(buf + len - 4, "bias");
            legacy = 1;
        }
        if (legacy && !x->legacy_noted) {
            tupe_note(x->o->note, x->o->note_ctx, TUPE_NOTE_DETAIL, "%s: legacy LayerNorm.gamma/beta names read as "
                 "LayerNorm.weight/bias", tupe_tset_file(x->s, i));
            x->legacy_noted = 1;
        }
        if (legacy && tupe_tset_find(x->s, buf) >= 0)
            return tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x->s, i), tupe_tset_orig(x->s, i),
                                    "'%s' is there too: both spellings of one LayerNorm parameter",
                                    buf);
        int rc = tupe_tset_rename(x->s, i, buf, e);
        if (rc)
            return rc;
    }
    return 0;
}

/* RoFormer's frozen table of sines and cosines must be the one tupe's rotation computes
 * (within the rounding of its dtype); tupe keeps no table, so another could not be honoured. */
static int check_sinusoid(import_ctx *x, tupe_err *e)
{
    long i = tupe_tset_find(x->s, SIN_NAME);
    if (!x->roformer || i < 0)
        return 0;
    int P = x->c.max_position, d = x->c.num_heads > 0 ? x->c.hidden_size / x->c.num_heads : 0;
    const tupe_st_tensor *t = tupe_tset_tensor(x->s, (size_t)i);
    uint64_t shape[2] = {(uint64_t)P, (uint64_t)d};
    if (d <= 0 || t->ndim != 2 || t->shape[0] != shape[0] || t->shape[1] != shape[1]) {
        char sh[64];
        return tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x->s, (size_t)i),
                                tupe_tset_orig(x->s, (size_t)i), "expected %s (max_position_"
                                "embeddings x head size, from %s)",
                                tupe_shape_str(sh, sizeof sh, 2, shape), x->cfgpath);
    }
    double tol = t->dtype == TUPE_BF16 ? 8e-3 : t->dtype == TUPE_F16 ? 1e-3 : 2e-6;
    size_t n = (size_t)P * d;
    float *have = malloc(n * sizeof *have), *want = malloc(n * sizeof *want);
    int rc = have && want ? 0 : tupe_fail(e, TUPE_EFAIL, "out of memory");
    if (!rc)
        rc = tupe_tset_read(x->s, SIN_NAME, 2, shape, have, e);
    if (!rc) {
        roformer_table(want, P, d);
        for (size_t k = 0; k < n; k++)
            if (!(fabs((double)have[k] - want[k]) <= tol)) {
                rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x->s, (size_t)i),
                                      tupe_tset_orig(x->s, (size_t)i), "row %zu column %zu is %g, "
                                      "not %g: not RoFormer's sinusoidal table (base %g), the only "
                                      "rotation a roformer model computes", k / d, k % d,
                                      (double)have[k], (double)want[k], ROFORMER_BASE);
                break;
            }
    }
    free(have);
    free(want);
    return rc;
}

static int hf_fill(void *ctx, const tupe_param *p, float *dst, tupe_err *e)
{
    import_ctx *x = ctx;
    if (x->head_missing && strncmp(p->name, "cls.", 4) == 0)
        return TUPE_IMPORT_KEEP;
    char hf[TUPE_PARAM_NAME + 16];
    if (tupe_hf_name(p->name, hf, sizeof hf))
        return tupe_fail(e, TUPE_EFAIL, "parameter '%s' has no Hugging Face name", p->name);
    uint64_t shape[2] = {(uint64_t)p->shape[0], (uint64_t)p->shape[1]};
    return tupe_tset_read(x->s, hf, p->ndim, shape, dst, e);
}

/* Bound before allocating: the sizes config.json states are held to the weights before any
 * memory is reserved for them. Every layer it counts must be there (a count beyond them
 * would cost the list of their tensors before the first missing one were found); the shapes
 * (vocab_size rows of the word embeddings...) are asked of every tensor by
 * tupe_import_build, before it allocates the model. */
static int check_sizes(import_ctx *x, tupe_err *e)
{
    char pre[64];
    snprintf(pre, sizeof pre, "bert.encoder.layer.%d.", x->c.num_layers - 1);
    if (x->c.num_layers > 0 && !tupe_tset_has_prefix(x->s, pre)) {
        int have = 0;
        for (;; have++) {
            snprintf(pre, sizeof pre, "bert.encoder.layer.%d.", have);
            if (!tupe_tset_has_prefix(x->s, pre))
                break;
        }
        return tupe_fail(e, TUPE_EDATA, "%s: num_hidden_layers %d, but the weights (%s) hold %d "
                         "layer%s (no bert.encoder.layer.%d.*)", x->cfgpath, x->c.num_layers,
                         tupe_tset_file(x->s, 0), have, have == 1 ? "" : "s", have);
    }
    return 0;
}

/* The tokenizer's casing from tokenizer_config.json, when there is one: a file that is not
 * a JSON object, or whose do_lower_case is not a boolean, is an error naming it (its casing
 * would silently be lost); no file, or no do_lower_case, leaves the casing unrecorded. */
static int read_casing(import_ctx *x, tupe_err *e)
{
    char tc[PATH_MAX];
    snprintf(tc, sizeof tc, "%s/tokenizer_config.json", x->src);
    x->lowercase = -1;
    if (!tupe_path_exists(tc))
        return 0;
    char *buf;
    size_t len;
    int rc = tupe_read_text(tc, &buf, &len, 16u << 20, e);
    if (rc)
        return rc;
    json_error_t je;
    json_t *t = json_loadb(buf, len, 0, &je);
    free(buf);
    if (!t)
        return tupe_fail_linecol(e, TUPE_EDATA, tc, je.line > 0 ? je.line : 1,
                                 je.column > 0 ? je.column : 1, "%s", je.text);
    json_t *lc = json_object_get(t, "do_lower_case");
    if (!json_is_object(t))
        rc = tupe_fail(e, TUPE_EDATA, "%s: expected a JSON object", tc);
    else if (lc && !json_is_boolean(lc))
        rc = tupe_fail(e, TUPE_EDATA, "%s: do_lower_case is not true or false", tc);
    else if (lc)
        x->lowercase = json_is_true(lc);
    json_decref(t);
    return rc;
}

/* A tied tensor that is present must equal the one it is tied to. */
static int check_tied(import_ctx *x, tupe_model *m, const char *name, const char *ours,
                      tupe_err *e)
{
    long i = tupe_tset_find(x->s, name);
    int same;
    if (i < 0)
        return 0;
    int rc = tupe_import_same(x->s, name, m, ours, &same, e);
    if (!rc && !same) {
        char hf[TUPE_PARAM_NAME + 16];
        tupe_hf_name(ours, hf, sizeof hf);
        rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x->s, (size_t)i), name,
                              "differs from '%s': tupe ties the output layer to it", hf);
    }
    return rc;
}

/* One all-zero token-type row is what our BERT-A export writes: it adds nothing. */
static int zero_type_row(import_ctx *x, tupe_err *e)
{
    long i = tupe_tset_find(x->s, TT_NAME);
    if (x->tupe || x->c.type_vocab_size != 1 || i < 0)
        return 0;
    const tupe_st_tensor *t = tupe_tset_tensor(x->s, (size_t)i);
    if (t->ndim != 2 || t->shape[0] != 1 || t->shape[1] != (uint64_t)x->c.hidden_size)
        return 0;
    float *row = malloc((size_t)x->c.hidden_size * sizeof *row);
    if (!row)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    uint64_t shape[2] = {1, (uint64_t)x->c.hidden_size};
    int rc = tupe_tset_read(x->s, TT_NAME, 2, shape, row, e), zero = 1;
    for (int k = 0; !rc && k < x->c.hidden_size; k++)
        zero &= row[k] == 0.0f;
    free(row);
    if (!rc && zero) {
        x->c.type_vocab_size = 0;
        tupe_note(x->o->note, x->o->note_ctx, TUPE_NOTE_DETAIL, "%s: one all-zero token type row: no token-type "
             "embedding", x->src);
    }
    return rc;
}

/* id2label as an array of names in id order, when they are not transformers' defaults. */
static json_t *label_names(import_ctx *x)
{
    json_t *id2 = json_object_get(x->j, "id2label");
    int n = x->c.num_labels, named = 0;
    if (!json_is_object(id2) || json_object_size(id2) != (size_t)n || n < 2)
        return NULL;
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        char k[32], def[32];
        snprintf(k, sizeof k, "%d", i);
        snprintf(def, sizeof def, "LABEL_%d", i);
        const char *s = json_string_value(json_object_get(id2, k));
        if (!s) {
            json_decref(a);
            return NULL;
        }
        named |= strcmp(s, def) != 0;
        json_array_append_new(a, json_string(s));
    }
    if (!named) {
        json_decref(a);
        return NULL;
    }
    return a;
}

static char *import_state(import_ctx *x)
{
    json_t *o = json_object();
    json_object_set_new(o, "imported_from", json_string("hf"));
    json_object_set_new(o, "source", json_string(x->src));
    json_object_set_new(o, "model_type", json_string(x->mt));
    if (x->c.num_labels > 0) {
        json_t *names = label_names(x);
        json_object_set_new(o, "labels", names ? names : json_array());
        json_object_set_new(o, "regression", json_boolean(x->c.num_labels == 1));
        const char *task = get_str(x, "finetuning_task", NULL);
        if (task)
            json_object_set_new(o, "task", json_string(task));
    }
    /* The tokenizer's casing, for tupe-glue. */
    if (x->lowercase >= 0)
        json_object_set_new(o, "lowercase", json_boolean(x->lowercase));
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(o);
    return s;
}

static int open_weights(import_ctx *x, tupe_err *e)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", x->src, HF_MODEL);
    if (tupe_path_exists(path))
        return tupe_tset_open(&x->s, path, e);
    snprintf(path, sizeof path, "%s/%s", x->src, HF_INDEX);
    if (tupe_path_exists(path))
        return tupe_tset_open_index(&x->s, path, e);
    snprintf(path, sizeof path, "%s/pytorch_model.bin", x->src);
    if (tupe_path_exists(path))
        return tupe_fail(e, TUPE_ENOINPUT,
                         "%s: no %s, only pytorch_model.bin (a pickle, which tupe does not read); "
                         "convert it with: python3 -c \"import torch, safetensors.torch as s; "
                         "s.save_file({k: v.clone().contiguous() for k, v in torch.load('%s', "
                         "map_location='cpu', weights_only=True).items()}, '%s/%s', "
                         "metadata={'format': 'pt'})\"",
                         x->src, HF_MODEL, path, x->src, HF_MODEL);
    return tupe_fail(e, TUPE_ENOINPUT, "%s: no %s or %s", x->src, HF_MODEL, HF_INDEX);
}

int tupe_hf_import(const char *src, const char *ckpt, const tupe_hf_import_opts *o, tupe_err *e)
{
    import_ctx x;
    memset(&x, 0, sizeof x);
    x.o = o;
    /* "dir/" and "dir" name the same directory in messages. */
    char srcbuf[PATH_MAX];
    snprintf(srcbuf, sizeof srcbuf, "%s", src);
    for (size_t n = strlen(srcbuf); n > 1 && srcbuf[n - 1] == '/'; n--)
        srcbuf[n - 1] = 0;
    x.src = src = srcbuf;
    tupe_model *m = NULL;
    char *state = NULL;
    /* before the work: the directory to replace must be a checkpoint or empty */
    int rc0 = tupe_outdir_check(ckpt, TUPE_CKPT_KIND, TUPE_OUTDIR_REPLACE, e);
    if (rc0)
        return rc0;
    if (tupe_hfelectra_is_pair(src))
        return tupe_hfelectra_import(src, ckpt, o, e);
    struct stat sb;
    if (stat(src, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return tupe_fail(e, TUPE_ENOINPUT, "%s: not a directory (expected a Hugging Face model "
                         "directory with %s and %s)", src, HF_CONFIG, HF_MODEL);
    if ((size_t)snprintf(x.cfgpath, sizeof x.cfgpath, "%s/%s", src, HF_CONFIG) >= sizeof x.cfgpath)
        return tupe_fail(e, TUPE_ENOINPUT, "%s: path too long", src);
    char *buf;
    size_t len;
    int rc = tupe_read_text(x.cfgpath, &buf, &len, 16u << 20, e);
    if (rc)
        return rc;
    json_error_t je;
    x.j = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    free(buf);
    if (!x.j || !json_is_object(x.j)) {
        rc = x.j ? tupe_fail(e, TUPE_EDATA, "%s: expected a JSON object", x.cfgpath)
                 : tupe_fail_linecol(e, TUPE_EDATA, x.cfgpath, je.line > 0 ? je.line : 1,
                                     je.column > 0 ? je.column : 1, "%s", je.text);
        goto out;
    }
    if ((rc = read_config(&x, e)) || (rc = open_weights(&x, e)) || (rc = normalize_names(&x, e)) ||
        (rc = check_sizes(&x, e)) || (rc = read_casing(&x, e)) || (rc = check_sinusoid(&x, e)))
        goto out;
    if (x.deberta && (tupe_tset_has_prefix(x.s, "classifier.") || tupe_tset_has_prefix(x.s, "pooler."))) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: a DeBERTa classification head (pooler.*, "
                       "classifier.*): its ContextPooler applies dropout before the dense layer "
                       "and pooler_hidden_act after it, not tupe's head, so it has no place in a "
                       "tupe model; import the encoder (DebertaV2Model or DebertaV2ForMaskedLM) "
                       "and fine-tune it with tupe-glue", src);
        goto out;
    }
    if (x.deberta && (rc = tupe_hfdeb_check_vocab(src, e)))
        goto out;
    if (x.deberta)
        tupe_tset_drop(x.s, "mask_predictions.", "DeBERTa's replaced-token head is not used "
                       "(transformers ignores it too)", o->note, o->note_ctx);
    if (x.roformer && tupe_tset_has_prefix(x.s, "classifier.")) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: a RoFormer classification head (classifier.*): it "
                       "applies hidden_act (GELU) between its dense layer and the output, tupe's "
                       "head tanh, so it has no place in a tupe model; import the encoder "
                       "(RoFormerModel or RoFormerForMaskedLM) and fine-tune it with tupe-glue",
                       src);
        goto out;
    }
    char expect[PATH_MAX + 16];
    snprintf(expect, sizeof expect, "(from %s)", x.cfgpath);
    tupe_tset_expect_source(x.s, expect);

    /* The head: a classifier (with the pooler as its dense layer) or the masked-LM head. */
    long ci = tupe_tset_find(x.s, "classifier.weight");
    if (ci >= 0) {
        const tupe_st_tensor *t = tupe_tset_tensor(x.s, (size_t)ci);
        if (t->ndim != 2 || t->shape[0] < 1 || t->shape[0] > (1u << 20)) {
            rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x.s, (size_t)ci), t->name,
                                  "expected a [labels, %d] matrix", x.c.hidden_size);
            goto out;
        }
        x.c.num_labels = (int)t->shape[0];
        json_t *id2 = json_object_get(x.j, "id2label");
        if (json_is_object(id2) && json_object_size(id2) != (size_t)x.c.num_labels) {
            rc = tupe_fail(e, TUPE_EDATA, "%s: id2label has %zu labels, but classifier.weight "
                           "has %d rows", x.cfgpath, json_object_size(id2), x.c.num_labels);
            goto out;
        }
        tupe_tset_drop(x.s, "cls.", "a classification model has no masked-LM head", o->note,
                       o->note_ctx);
    } else {
        x.c.num_labels = 0;
        x.head_missing = !tupe_tset_has_prefix(x.s, "cls.predictions.");
        tupe_tset_drop(x.s, "bert.pooler.", "a pooler without a classifier is not part of a "
                       "masked-LM model", o->note, o->note_ctx);
    }
    tupe_tset_drop(x.s, "cls.seq_relationship.", "the next-sentence head is not used", o->note,
                   o->note_ctx);
    tupe_tset_drop(x.s, "bert.embeddings.position_ids", "a buffer, not a parameter", o->note,
                   o->note_ctx);
    tupe_tset_drop(x.s, "bert.embeddings.token_type_ids", "a buffer, not a parameter", o->note,
                   o->note_ctx);
    if ((rc = zero_type_row(&x, e)))
        goto out;
    if ((rc = tupe_config_check(&x.c, 1, e))) {
        tupe_err_wrap(e, "%s", x.cfgpath);
        goto out;
    }
    if ((rc = tupe_import_build(&m, &x.c, o->seed, hf_fill, &x, e)))
        goto out;
    if (x.c.num_labels == 0 &&
        ((rc = check_tied(&x, m, "cls.predictions.decoder.weight", "embeddings.word_embeddings.weight", e)) ||
         (rc = check_tied(&x, m, "cls.predictions.decoder.bias", "cls.predictions.bias", e))))
        goto out;
    long u = tupe_tset_unused(x.s);
    if (u >= 0) {
        rc = tupe_fail_tensor(e, TUPE_EDATA, tupe_tset_file(x.s, (size_t)u), tupe_tset_orig(x.s, (size_t)u),
                              "no place for it in a %s model (%s, %s)", x.mt,
                              tupe_position_name(x.c.position),
                              x.c.num_labels ? "classification head" : "masked-LM head");
        goto out;
    }
    if (x.head_missing)
        tupe_note(o->note, o->note_ctx, TUPE_NOTE_INFO, "%s: no masked-LM head (cls.predictions.*): initialized "
             "from seed %llu", src, (unsigned long long)o->seed);
    if (!(state = import_state(&x))) {
        rc = tupe_fail(e, TUPE_EFAIL, "out of memory");
        goto out;
    }
    /* Every tensor is in the model: unmapping the source now keeps its pages out of the peak. */
    tupe_tset_close(x.s);
    x.s = NULL;
    rc = tupe_ckpt_save(ckpt, m, NULL, state, e);
    if (!rc)
        tupe_note(o->note, o->note_ctx, TUPE_NOTE_DETAIL, "%s: %s, %zu parameters, %s head", ckpt,
             tupe_position_name(x.c.position), tupe_model_layout(m)->nparams,
             x.c.num_labels ? "classification" : "masked-LM");
out:
    free(state);
    tupe_import_free(m);
    tupe_tset_close(x.s);
    json_decref(x.j);
    return rc;
}
