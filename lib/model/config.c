#include "model/config.h"

#include <jansson.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/fileio.h"

static const char *const pos_names[TUPE_POS_COUNT] = {"bert-a", "bert-r", "bert-ad", "tupe-a",
                                                      "tupe-r", "rope",   "alibi",   "nope",
                                                      "deberta"};
#define POS_LIST "bert-a, bert-r, bert-ad, tupe-a, tupe-r, rope, alibi, nope, deberta"

/* Each variant as a composition of positional terms (config.h). */
static const unsigned pos_terms[TUPE_POS_COUNT] = {
    [TUPE_POS_BERT_A] = TUPE_PE_ABS_INPUT,
    [TUPE_POS_BERT_R] = TUPE_PE_ABS_INPUT | TUPE_PE_REL_BUCKET,
    [TUPE_POS_BERT_AD] = TUPE_PE_ABS_QK,
    [TUPE_POS_TUPE_A] = TUPE_PE_UNTIED_ABS,
    [TUPE_POS_TUPE_R] = TUPE_PE_UNTIED_ABS | TUPE_PE_REL_BUCKET,
    [TUPE_POS_ROPE] = TUPE_PE_ROTATION,
    [TUPE_POS_ALIBI] = TUPE_PE_LINEAR_BIAS,
    [TUPE_POS_NOPE] = 0,
    [TUPE_POS_DEBERTA] = TUPE_PE_DISENTANGLED,
};

unsigned tupe_cfg_terms(const tupe_config *c)
{
    return c->position >= 0 && c->position < TUPE_POS_COUNT ? pos_terms[c->position] : 0;
}

static const char *const rope_layouts[2] = {"interleaved", "half"};

const char *tupe_position_name(int position)
{
    return position >= 0 && position < TUPE_POS_COUNT ? pos_names[position] : "?";
}

int tupe_position_parse(const char *name)
{
    for (int i = 0; i < TUPE_POS_COUNT; i++)
        if (strcmp(name, pos_names[i]) == 0)
            return i;
    return -1;
}

void tupe_config_default(tupe_config *c)
{
    memset(c, 0, sizeof *c);
    c->position = TUPE_POS_TUPE_R;
    c->untie_cls = 1;
    c->hidden_size = 768;
    c->num_layers = 12;
    c->num_heads = 12;
    c->intermediate_size = 3072;
    c->max_position = 512;
    c->hidden_dropout = 0.1;
    c->attention_dropout = 0.1;
    c->activation_dropout = 0.0;
    c->classifier_dropout = 0.1;
    c->layer_norm_eps = 1e-5;
    c->initializer_range = 0.02;
    c->rel_pos_buckets = 32;
    c->max_rel_pos = 128;
    c->rope_base = 10000.0;
    c->rope_layout = TUPE_ROPE_INTERLEAVED;
}

double tupe_cfg_score_scale(const tupe_config *c)
{
    double d = (double)c->hidden_size / c->num_heads;
    if (tupe_cfg_tupe(c))
        return 1.0 / sqrt(2.0 * d);
    if (c->position == TUPE_POS_BERT_AD)
        return 1.0 / sqrt(4.0 * d);
    if (tupe_cfg_deberta(c))
        return 1.0 / sqrt(3.0 * d);
    return 1.0 / sqrt(d);
}

/* ---- JSON fields ------------------------------------------------------------------------ */

enum { F_INT, F_REAL, F_BOOL };

typedef struct field {
    const char *key;
    int kind;
    size_t off;
    double min, max;   /* inclusive range for numbers */
} field;

#define FI(k, m, lo, hi) {k, F_INT, offsetof(tupe_config, m), lo, hi}
#define FR(k, m, lo, hi) {k, F_REAL, offsetof(tupe_config, m), lo, hi}

/* In the order of the contract (and of the JSON we write). */
static const field fields[] = {
    {"untie_cls", F_BOOL, offsetof(tupe_config, untie_cls), 0, 1},
    FI("vocab_size", vocab_size, 0, 1 << 24),
    FI("hidden_size", hidden_size, 1, 65536),
    FI("num_hidden_layers", num_layers, 1, 1024),
    FI("num_attention_heads", num_heads, 1, 1024),
    FI("intermediate_size", intermediate_size, 1, 1 << 20),
    FI("max_position_embeddings", max_position, 1, 65536),
    FI("type_vocab_size", type_vocab_size, 0, 65536),
    FR("hidden_dropout_prob", hidden_dropout, 0, 0.999),
    FR("attention_probs_dropout_prob", attention_dropout, 0, 0.999),
    FR("activation_dropout", activation_dropout, 0, 0.999),
    FR("classifier_dropout", classifier_dropout, 0, 0.999),
    FR("layer_norm_eps", layer_norm_eps, 1e-30, 1),
    FR("initializer_range", initializer_range, 0, 10),
    FI("rel_pos_buckets", rel_pos_buckets, 4, 1024),
    FI("max_rel_pos", max_rel_pos, 2, 1 << 20),
    FI("num_labels", num_labels, 0, 1 << 20),
    FI("embedding_size", embedding_size, 0, 65536),
    FR("generator_hidden_size", generator_hidden_size, 0, 1),
};
/* The fields written only when set (their 0 is the plain model's default), so that the
 * configurations of plain models read as before. */
static int optional_field(const field *f, const tupe_config *c)
{
    if (f->off == offsetof(tupe_config, embedding_size))
        return c->embedding_size == 0 || c->embedding_size == c->hidden_size;
    if (f->off == offsetof(tupe_config, generator_hidden_size))
        return c->generator_hidden_size == 0;
    return 0;
}
#define NFIELDS (sizeof fields / sizeof fields[0])

static int cfg_fail(tupe_err *e, const char *name, const char *fmt, ...) TUPE_PRINTF(3, 4);
static int cfg_fail(tupe_err *e, const char *name, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return tupe_fail(e, TUPE_EDATA, "%s: %s", tupe_path_name(name), msg);
}

int tupe_config_parse(tupe_config *c, const char *json, size_t len, const char *name, tupe_err *e)
{
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return tupe_fail_linecol(e, TUPE_EDATA, tupe_path_name(name), je.line > 0 ? je.line : 1,
                                 je.column > 0 ? je.column : 1, "%s", je.text);
    int rc = 0;
    tupe_config cfg;
    tupe_config_default(&cfg);
    if (!json_is_object(root)) {
        rc = tupe_fail(e, TUPE_EDATA, "%s: a model configuration is a JSON object",
                       tupe_path_name(name));
        goto out;
    }
    const char *key, *rope_given = NULL;
    json_t *v;
    json_object_foreach(root, key, v) {
        if (strcmp(key, "model_type") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "tupe") != 0) {
                rc = cfg_fail(e, name, "\"model_type\" must be \"tupe\"");
                goto out;
            }
            continue;
        }
        if (strcmp(key, "hidden_act") == 0) {
            if (!json_is_string(v) || strcmp(json_string_value(v), "gelu") != 0) {
                rc = cfg_fail(e, name, "\"hidden_act\" must be \"gelu\" (exact erf GELU, the only one)");
                goto out;
            }
            continue;
        }
        if (strcmp(key, "position") == 0) {
            int p = json_is_string(v) ? tupe_position_parse(json_string_value(v)) : -1;
            if (p < 0) {
                rc = cfg_fail(e, name, "\"position\" must be one of " POS_LIST);
                goto out;
            }
            cfg.position = p;
            continue;
        }
        if (strcmp(key, "rope_layout") == 0) {
            const char *lv = json_is_string(v) ? json_string_value(v) : "";
            int k = strcmp(lv, "interleaved") == 0 ? TUPE_ROPE_INTERLEAVED
                    : strcmp(lv, "half") == 0      ? TUPE_ROPE_HALF
                                                   : -1;
            if (k < 0) {
                rc = cfg_fail(e, name, "\"rope_layout\" must be \"interleaved\" or \"half\"");
                goto out;
            }
            cfg.rope_layout = k;
            rope_given = "rope_layout";
            continue;
        }
        if (strcmp(key, "rope_base") == 0) {
            double x = json_is_number(v) ? json_number_value(v) : 0;
            if (!(x > 1 && x <= 1e12)) {
                rc = cfg_fail(e, name, "\"rope_base\" must be a number in (1, 1e12]");
                goto out;
            }
            cfg.rope_base = x;
            rope_given = "rope_base";
            continue;
        }
        const field *f = NULL;
        for (size_t i = 0; i < NFIELDS; i++)
            if (strcmp(key, fields[i].key) == 0)
                f = &fields[i];
        if (!f) {
            rc = cfg_fail(e, name, "unknown field \"%s\"", key);
            goto out;
        }
        char *dst = (char *)&cfg + f->off;
        if (f->kind == F_BOOL) {
            if (!json_is_boolean(v)) {
                rc = cfg_fail(e, name, "\"%s\" must be true or false", key);
                goto out;
            }
            *(int *)dst = json_is_true(v);
            continue;
        }
        if (f->kind == F_INT ? !json_is_integer(v) : !json_is_number(v)) {
            rc = cfg_fail(e, name, "\"%s\" must be %s", key,
                         f->kind == F_INT ? "an integer" : "a number");
            goto out;
        }
        double x = json_number_value(v);
        if (!(x >= f->min && x <= f->max)) {
            char range[128];
            snprintf(range, sizeof range, "in [%g, %g]", f->min, f->max);
            rc = cfg_fail(e, name, "\"%s\" must be %s", key, range);
            goto out;
        }
        if (f->kind == F_INT)
            *(int *)dst = (int)json_integer_value(v);
        else
            *(double *)dst = x;
    }
    if (rope_given && !tupe_cfg_rope(&cfg)) {
        rc = cfg_fail(e, name, "\"%s\" applies to \"position\": \"rope\" only, not %s",
                      rope_given, tupe_position_name(cfg.position));
        goto out;
    }
    rc = tupe_config_check(&cfg, 0, e);
    if (rc)
        tupe_err_wrap(e, "%s", tupe_path_name(name));
    else
        *c = cfg;
out:
    json_decref(root);
    return rc;
}

int tupe_config_check(const tupe_config *c, int need_vocab, tupe_err *e)
{
    if (c->position < 0 || c->position >= TUPE_POS_COUNT)
        return tupe_fail(e, TUPE_EDATA, "unknown position variant %d", c->position);
    if (c->hidden_size <= 0 || c->num_heads <= 0 || c->num_layers <= 0 ||
        c->intermediate_size <= 0 || c->max_position <= 0)
        return tupe_fail(e, TUPE_EDATA, "sizes must be positive");
    if (c->hidden_size % c->num_heads != 0)
        return tupe_fail(e, TUPE_EDATA,
                         "hidden_size %d is not a multiple of num_attention_heads %d",
                         c->hidden_size, c->num_heads);
    if (tupe_cfg_deberta(c) && c->rel_pos_buckets < 2)
        return tupe_fail(e, TUPE_EDATA, "deberta: rel_pos_buckets %d (DeBERTa's position_buckets) "
                         "must be at least 2", c->rel_pos_buckets);
    if (!tupe_cfg_deberta(c) && (c->rel_pos_buckets % 4 != 0 || c->rel_pos_buckets < 4))
        return tupe_fail(e, TUPE_EDATA,
                         "rel_pos_buckets %d must be a positive multiple of 4 (two directions, "
                         "each half exact and half logarithmic)", c->rel_pos_buckets);
    if (!tupe_cfg_deberta(c) && c->max_rel_pos <= c->rel_pos_buckets / 4)
        return tupe_fail(e, TUPE_EDATA, "max_rel_pos %d must exceed rel_pos_buckets/4 = %d",
                         c->max_rel_pos, c->rel_pos_buckets / 4);
    /* DeBERTa's log buckets: log((max_relative_positions - 1) / (k/2)) must be positive */
    if (tupe_cfg_deberta(c) && c->max_rel_pos - 1 <= c->rel_pos_buckets / 2)
        return tupe_fail(e, TUPE_EDATA, "deberta: max_rel_pos %d must exceed rel_pos_buckets/2 "
                         "+ 1 = %d (DeBERTa's max_relative_positions and position_buckets)",
                         c->max_rel_pos, c->rel_pos_buckets / 2 + 1);
    if (!(c->layer_norm_eps > 0))
        return tupe_fail(e, TUPE_EDATA, "layer_norm_eps must be positive");
    if (tupe_cfg_rope(c) && (c->hidden_size / c->num_heads) % 2 != 0)
        return tupe_fail(e, TUPE_EDATA, "rope: the head size %d must be even (pairs of columns "
                         "are rotated)", c->hidden_size / c->num_heads);
    if (tupe_cfg_rope(c) && (c->rope_layout < 0 || c->rope_layout > 1 || !(c->rope_base > 1)))
        return tupe_fail(e, TUPE_EDATA, "rope: bad rope_layout or rope_base");
    double p[4] = {c->hidden_dropout, c->attention_dropout, c->activation_dropout,
                   c->classifier_dropout};
    for (int i = 0; i < 4; i++)
        if (!(p[i] >= 0 && p[i] < 1))
            return tupe_fail(e, TUPE_EDATA, "dropout probabilities must be in [0, 1)");
    if (c->vocab_size < 0 || c->type_vocab_size < 0 || c->num_labels < 0)
        return tupe_fail(e, TUPE_EDATA, "sizes must not be negative");
    if (c->embedding_size < 0 || !(c->generator_hidden_size >= 0 && c->generator_hidden_size <= 1))
        return tupe_fail(e, TUPE_EDATA, "embedding_size must not be negative and "
                         "generator_hidden_size must be in [0, 1]");
    if (tupe_cfg_pair(c)) {
        if (c->num_labels != 0 || c->rtd_head)
            return tupe_fail(e, TUPE_EDATA, "an ELECTRA pair (generator_hidden_size %g) has its "
                             "pre-training heads: num_labels must be 0", c->generator_hidden_size);
        int g = (int)lround(c->hidden_size * c->generator_hidden_size);
        int gh = g / 64 > 1 ? g / 64 : 1;
        if (g < 1 || g % gh != 0)
            return tupe_fail(e, TUPE_EDATA, "generator_hidden_size %g gives a generator %d wide, "
                             "which %d heads (width / 64) do not divide", c->generator_hidden_size,
                             g, gh);
    }
    if (need_vocab && c->vocab_size <= 0)
        return tupe_fail(e, TUPE_EDATA,
                         "vocab_size is not set (presets take it from the vocabulary)");
    /* Keep every tensor's element count within 32-bit BLAS dimensions: each table of rows of
     * hidden_size (words, positions with TUPE's two extra, token types, classes, the fused
     * [3 hidden, hidden] query-key-value matrix, the feed-forward layers). */
    double rows[] = {c->vocab_size, c->intermediate_size, (double)c->max_position + 2,
                     c->type_vocab_size, c->num_labels, 3.0 * c->hidden_size};
    double width = tupe_cfg_emb(c) > c->hidden_size ? tupe_cfg_emb(c) : c->hidden_size;
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        if (rows[i] * width > (double)INT_MAX)
            return tupe_fail(e, TUPE_EDATA, "model too large for 32-bit matrix dimensions");
    return 0;
}

int tupe_config_same_encoder(const tupe_config *a, const tupe_config *b, char *what, size_t cap)
{
#define SAME(m, k) \
    if (a->m != b->m) { \
        snprintf(what, cap, "%s", k); \
        return 0; \
    }
    SAME(position, "position");
    if (tupe_cfg_tupe(a))
        SAME(untie_cls, "untie_cls");
    SAME(vocab_size, "vocab_size");
    SAME(hidden_size, "hidden_size");
    SAME(num_layers, "num_hidden_layers");
    SAME(num_heads, "num_attention_heads");
    SAME(intermediate_size, "intermediate_size");
    SAME(max_position, "max_position_embeddings");
    SAME(type_vocab_size, "type_vocab_size");
    SAME(layer_norm_eps, "layer_norm_eps");
    if (tupe_cfg_emb(a) != tupe_cfg_emb(b)) {
        snprintf(what, cap, "embedding_size");
        return 0;
    }
    SAME(generator_hidden_size, "generator_hidden_size");
    SAME(rtd_head, "rtd_head");
    if (tupe_cfg_rel(a) || tupe_cfg_deberta(a)) {
        SAME(rel_pos_buckets, "rel_pos_buckets");
        SAME(max_rel_pos, "max_rel_pos");
    }
    if (tupe_cfg_rope(a)) {
        SAME(rope_base, "rope_base");
        SAME(rope_layout, "rope_layout");
    }
#undef SAME
    return 1;
}

/* Shortest decimal that reads back as the same double, always with a '.' or exponent so
 * that it stays a JSON real. */
static void fmt_real(char *dst, size_t cap, double x)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(dst, cap, "%.*g", prec, x);
        if (strtod(dst, NULL) == x)
            break;
    }
    /* "1e-05" -> "1e-5", as the presets write it */
    char *ex = strchr(dst, 'e');
    if (ex) {
        char *d = ex + 1 + (ex[1] == '-' || ex[1] == '+');
        char *z = d;
        while (*z == '0' && z[1])
            z++;
        memmove(d, z, strlen(z) + 1);
    }
    if (!strpbrk(dst, ".eEn"))
        strncat(dst, ".0", cap - strlen(dst) - 1);
}

char *tupe_config_json(const tupe_config *c, int indent)
{
    size_t cap = 2048, n = 0;
    char *s = malloc(cap);
    if (!s)
        return NULL;
    const char *nl = indent > 0 ? "\n" : "";
    char pad[16] = "";
    if (indent > 0)
        snprintf(pad, sizeof pad, "%*s", indent > 8 ? 8 : indent, "");
    const char *sep = indent > 0 ? ": " : ":";
    n += (size_t)snprintf(s + n, cap - n, "{%s%s\"model_type\"%s\"tupe\",%s%s\"position\"%s\"%s\",%s",
                          nl, pad, sep, nl, pad, sep, tupe_position_name(c->position), nl);
    size_t last = 0;
    for (size_t i = 0; i < NFIELDS; i++)
        if (!optional_field(&fields[i], c))
            last = i;
    for (size_t i = 0; i < NFIELDS; i++) {
        const field *f = &fields[i];
        const char *src = (const char *)c + f->off;
        if (optional_field(f, c))
            continue;
        char val[64];
        if (f->kind == F_BOOL)
            snprintf(val, sizeof val, "%s", *(const int *)src ? "true" : "false");
        else if (f->kind == F_INT)
            snprintf(val, sizeof val, "%d", *(const int *)src);
        else
            fmt_real(val, sizeof val, *(const double *)src);
        n += (size_t)snprintf(s + n, cap - n, "%s\"%s\"%s%s%s%s", pad, f->key, sep, val,
                              (i < last || tupe_cfg_rope(c)) ? "," : "", nl);
        if (strcmp(f->key, "type_vocab_size") == 0)
            n += (size_t)snprintf(s + n, cap - n, "%s\"hidden_act\"%s\"gelu\",%s", pad, sep, nl);
    }
    if (tupe_cfg_rope(c)) {
        /* Only where they apply, so that the other variants' JSON stays as it was. */
        char base[64];
        if (c->rope_base == floor(c->rope_base) && c->rope_base < 1e15)
            snprintf(base, sizeof base, "%.1f", c->rope_base); /* 10000.0, not 1e+4 */
        else
            fmt_real(base, sizeof base, c->rope_base);
        n += (size_t)snprintf(s + n, cap - n, "%s\"rope_base\"%s%s,%s%s\"rope_layout\"%s\"%s\"%s",
                              pad, sep, base, nl, pad, sep,
                              rope_layouts[c->rope_layout == TUPE_ROPE_HALF], nl);
    }
    snprintf(s + n, cap - n, "}%s", nl);
    return s;
}

/* ---- presets ------------------------------------------------------------------------------ */

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int tupe_share_path(const char *rel, char *dst, size_t cap)
{
    char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) {
        snprintf(dst, cap, "share/tupe/%s", rel);
        return is_file(dst) ? 0 : -1;
    }
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    if (slash)
        *slash = 0;
    /* Installed: PREFIX/bin -> PREFIX/share. Build tree: build/CFG/{bin,tests,bench} -> top. */
    static const char *const up[] = {"/../share/tupe/", "/../../../share/tupe/"};
    for (size_t i = 0; i < sizeof up / sizeof up[0]; i++) {
        snprintf(dst, cap, "%s%s%s", exe, up[i], rel);
        if (is_file(dst))
            return 0;
    }
    return -1;
}

int tupe_config_preset_path(const char *name, char *dst, size_t cap)
{
    char rel[1024];
    snprintf(rel, sizeof rel, "models/%s.json", name);
    return tupe_share_path(rel, dst, cap);
}

int tupe_config_load(tupe_config *c, const char *name_or_path, tupe_err *e)
{
    const char *path = name_or_path;
    char preset[4200];
    size_t len = strlen(name_or_path);
    int looks_like_path = strchr(name_or_path, '/') != NULL ||
                          (len > 5 && strcmp(name_or_path + len - 5, ".json") == 0) ||
                          is_file(name_or_path);
    if (!looks_like_path) {
        if (len == 0 || strspn(name_or_path, "abcdefghijklmnopqrstuvwxyz0123456789-_.") != len)
            return tupe_fail(e, TUPE_EUSAGE, "bad model name '%s'", name_or_path);
        if (tupe_config_preset_path(name_or_path, preset, sizeof preset) != 0)
            return tupe_fail(e, TUPE_ENOINPUT,
                             "no model preset '%s' (looked for %s; the presets are tiny, small, "
                             "bert-base, bert-large)", name_or_path, preset);
        path = preset;
    }
    char *buf;
    size_t n;
    int rc = tupe_read_text(path, &buf, &n, 1 << 20, e);
    if (rc)
        return rc;
    rc = tupe_config_parse(c, buf, n, path, e);
    free(buf);
    return rc;
}
