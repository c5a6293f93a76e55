#include "convert/hfdeberta.h"

#include <stdio.h>
#include <string.h>

#include "base/fileio.h"

/* The attention's three projections, BERT's spelling then DebertaV2's. */
static const char *const proj[3][2] = {{".attention.self.query.", ".attention.self.query_proj."},
                                       {".attention.self.key.", ".attention.self.key_proj."},
                                       {".attention.self.value.", ".attention.self.value_proj."}};

/* `s` with the first `from` replaced by `to`, into out. */
static void replace(const char *s, const char *from, const char *to, char *out, size_t cap)
{
    const char *p = strstr(s, from);
    if (!p) {
        snprintf(out, cap, "%s", s);
        return;
    }
    snprintf(out, cap, "%.*s%s%s", (int)(p - s), s, to, p + strlen(from));
}

void tupe_hfdeb_name(char *hf, size_t cap)
{
    char a[512], b[512];
    if (strncmp(hf, "bert.", 5) != 0)
        return; /* deberta.encoder.rel_embeddings / LayerNorm, cls.predictions.* */
    snprintf(a, sizeof a, "deberta.%s", hf + 5);
    for (int k = 0; k < 3; k++) {
        replace(a, proj[k][0], proj[k][1], b, sizeof b);
        memcpy(a, b, sizeof a);
    }
    snprintf(hf, cap, "%s", a);
}

void tupe_hfdeb_to_bert(const char *name, char *out, size_t cap)
{
    static const char *const head[][2] = {
        {"lm_predictions.lm_head.dense.", "cls.predictions.transform.dense."},
        {"lm_predictions.lm_head.LayerNorm.", "cls.predictions.transform.LayerNorm."},
        {"lm_predictions.lm_head.bias", "cls.predictions.bias"}};
    for (size_t k = 0; k < sizeof head / sizeof head[0]; k++)
        if (strncmp(name, head[k][0], strlen(head[k][0])) == 0) {
            snprintf(out, cap, "%s%s", head[k][1], name + strlen(head[k][0]));
            return;
        }
    const char *rest = strncmp(name, "deberta.", 8) == 0 ? name + 8 : name;
    if (strncmp(rest, "encoder.rel_embeddings.", 23) == 0 ||
        strncmp(rest, "encoder.LayerNorm.", 18) == 0) {
        snprintf(out, cap, "deberta.%s", rest);
        return;
    }
    if (strncmp(rest, "embeddings.", 11) != 0 && strncmp(rest, "encoder.", 8) != 0) {
        snprintf(out, cap, "%s", name);
        return;
    }
    char a[512], b[512];
    snprintf(a, sizeof a, "bert.%s", rest);
    for (int k = 0; k < 3; k++) {
        replace(a, proj[k][1], proj[k][0], b, sizeof b);
        memcpy(a, b, sizeof a);
    }
    snprintf(out, cap, "%s", a);
}

static int refuse(const char *cfgpath, const char *key, const char *want, tupe_err *e)
{
    return tupe_fail(e, TUPE_EDATA, "%s: \"%s\" must be %s", cfgpath, key, want);
}

/* A boolean field: def when absent. -1 when present and not a boolean. */
static int boolean(const json_t *j, const char *key, int def)
{
    json_t *v = json_object_get(j, key);
    return !v ? def : json_is_boolean(v) ? json_is_true(v) : -1;
}

/* pos_att_type: "p2c|c2p" (any order and spacing) or ["p2c", "c2p"]: 1 when it is exactly
 * both. */
static int both_terms(const json_t *v)
{
    int c2p = 0, p2c = 0, other = 0;
    char buf[128];
    if (json_is_string(v)) {
        snprintf(buf, sizeof buf, "%s", json_string_value(v));
        for (char *save = NULL, *t = strtok_r(buf, "|", &save); t; t = strtok_r(NULL, "|", &save)) {
            while (*t == ' ')
                t++;
            size_t n = strlen(t);
            while (n && t[n - 1] == ' ')
                t[--n] = 0;
            c2p += strcmp(t, "c2p") == 0, p2c += strcmp(t, "p2c") == 0;
            other += strcmp(t, "c2p") && strcmp(t, "p2c");
        }
    } else if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x) {
            const char *s = json_string_value(x);
            c2p += s && strcmp(s, "c2p") == 0, p2c += s && strcmp(s, "p2c") == 0;
            other += !s || (strcmp(s, "c2p") && strcmp(s, "p2c"));
        }
    }
    return c2p == 1 && p2c == 1 && !other;
}

int tupe_hfdeb_read_config(const json_t *j, const char *cfgpath, tupe_config *c, tupe_err *e)
{
    c->position = TUPE_POS_DEBERTA;
    if (boolean(j, "relative_attention", 0) != 1)
        return refuse(cfgpath, "relative_attention", "true (tupe's deberta is DeBERTa's relative "
                      "attention; without it a DeBERTa has no positions but absolute ones)", e);
    if (!both_terms(json_object_get(j, "pos_att_type")))
        return refuse(cfgpath, "pos_att_type", "\"p2c|c2p\" (both terms, as DeBERTa v2/v3; "
                      "tupe computes no other combination)", e);
    if (boolean(j, "share_att_key", 0) != 1)
        return refuse(cfgpath, "share_att_key", "true (the relative table through each layer's "
                      "own query and key projections, as DeBERTa v3; separate pos_key_proj / "
                      "pos_query_proj are not part of a tupe model)", e);
    if (boolean(j, "position_biased_input", 1) != 0)
        return refuse(cfgpath, "position_biased_input", "false (absolute positions at the input "
                      "besides the relative terms are not part of a tupe deberta model)", e);
    json_t *nr = json_object_get(j, "norm_rel_ebd");
    if (!json_is_string(nr) || !strstr(json_string_value(nr), "layer_norm"))
        return refuse(cfgpath, "norm_rel_ebd", "\"layer_norm\" (the relative table's LayerNorm, "
                      "as DeBERTa v2/v3)", e);
    json_t *k = json_object_get(j, "position_buckets"), *m = json_object_get(j, "max_relative_positions");
    if (!json_is_integer(k) || json_integer_value(k) < 2 || json_integer_value(k) > (1 << 20))
        return refuse(cfgpath, "position_buckets", "an integer >= 2 (DeBERTa v2/v3's log buckets; "
                      "the linear table of v1-style relative positions is not computed)", e);
    if (m && !json_is_integer(m))
        return refuse(cfgpath, "max_relative_positions", "an integer", e);
    long long mx = m ? json_integer_value(m) : -1;
    c->rel_pos_buckets = (int)json_integer_value(k);
    c->max_rel_pos = mx < 1 ? c->max_position : mx > (1 << 24) ? -1 : (int)mx;
    json_t *ck = json_object_get(j, "conv_kernel_size");
    if (ck && !(json_is_integer(ck) && json_integer_value(ck) == 0))
        return refuse(cfgpath, "conv_kernel_size", "0 or absent (the convolution beside the first "
                      "layer is not part of a tupe model)", e);
    json_t *es = json_object_get(j, "embedding_size");
    if (es && !json_is_null(es) && !(json_is_integer(es) && json_integer_value(es) == c->hidden_size))
        return refuse(cfgpath, "embedding_size", "the hidden size or absent (DebertaV2's "
                      "embed_proj is not part of a tupe deberta model)", e);
    json_t *ah = json_object_get(j, "attention_head_size");
    if (ah && !json_is_null(ah) && c->num_heads > 0 &&
        !(json_is_integer(ah) && json_integer_value(ah) * c->num_heads == c->hidden_size))
        return refuse(cfgpath, "attention_head_size", "hidden_size / num_attention_heads or "
                      "absent", e);
    if (c->max_rel_pos < 0 || c->max_rel_pos - 1 <= c->rel_pos_buckets / 2)
        return refuse(cfgpath, "max_relative_positions", "more than position_buckets / 2 + 1", e);
    return 0;
}

void tupe_hfdeb_write_config(json_t *j, const tupe_config *c)
{
    json_object_set_new(j, "relative_attention", json_true());
    json_object_set_new(j, "pos_att_type", json_pack("[s,s]", "p2c", "c2p"));
    json_object_set_new(j, "share_att_key", json_true());
    json_object_set_new(j, "norm_rel_ebd", json_string("layer_norm"));
    json_object_set_new(j, "position_biased_input", json_false());
    json_object_set_new(j, "position_buckets", json_integer(c->rel_pos_buckets));
    json_object_set_new(j, "max_relative_positions", json_integer(c->max_rel_pos));
    json_object_set_new(j, "legacy", json_true());
}

int tupe_hfdeb_check_vocab(const char *dir, tupe_err *e)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/vocab.txt", dir);
    if (tupe_path_exists(p))
        return 0;
    static const char *const spm[] = {"spm.model", "spiece.model", "tokenizer.model"};
    for (size_t i = 0; i < sizeof spm / sizeof spm[0]; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, spm[i]);
        if (tupe_path_exists(p))
            return tupe_fail(e, TUPE_EDATA, "%s: a SentencePiece vocabulary (DeBERTa v3's "
                             "tokenizer), which tupe-tokenize does not read: tupe reads WordPiece "
                             "vocabularies (vocab.txt) only, so the model could not be given "
                             "text", p);
    }
    return 0;
}
