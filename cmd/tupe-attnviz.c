/* tupe-attnviz: what the positions learned. The content-free positional terms of TUPE and
 * relative-bias models (lib/viz/poscorr.c), attention maps of real input (lib/viz/inspect.c),
 * and the word/position decomposition of an absolute-position BERT (lib/viz/decomp.c), drawn
 * and saved by lib/viz/vizset.c. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "cli/cli.h"
#include "viz/attnstats.h"
#include "viz/colormap.h"
#include "viz/decomp.h"
#include "viz/inspect.h"
#include "viz/poscorr.h"
#include "viz/seqinput.h"
#include "viz/vizset.h"

enum {
    O_CKPT = 1, O_OUT, O_FORMAT, O_NPY, O_TERM, O_HEADS, O_SCALE, O_CELL, O_MAXPOS, O_VIEW,
    O_VOCAB, O_TEXT, O_INPUT, O_DATA, O_LAYERS, O_CASED, O_MAXLEN, O_MAXIN, O_DECOMP, O_PERHEAD,
    O_MEASURES, O_WINDOW
};

#define COMMON_OPTS \
    {O_CKPT, "checkpoint", 'c', TUPE_REQARG, "DIR", "the checkpoint (or give it as the argument CKPT)", "dir"}, \
    {O_OUT, "output", 'o', TUPE_REQARG, "PATH", "directory for the figures (default: .), or one\nfile (.png, .svg, or - for stdout) when one figure is drawn", "into:file"}, \
    {O_FORMAT, "format", 0, TUPE_REQARG, "FMT", "png (default), svg or both", "list:png svg both"}, \
    {O_NPY, "npy", 0, TUPE_REQARG, "DIR", "also save every matrix drawn as .npy in DIR, with\nmeta.json describing them", "into:dir"}, \
    {O_TERM, "term", 0, TUPE_NOARG, NULL, "preview the figures on stdout with ANSI colours\n(no figure files unless -o is given)", NULL}, \
    {O_HEADS, "heads", 0, TUPE_REQARG, "LIST", "heads to draw, e.g. 0,3,5-7 (default: all)", NULL}, \
    {O_SCALE, "scale", 0, TUPE_REQARG, "HOW", "colour limits: global (one for the figure,\ndefault) or head (one per panel)", "list:global head"}, \
    {O_CELL, "cell", 0, TUPE_REQARG, "PX", "pixels per matrix cell (default: a panel is\nabout 384 pixels wide)", NULL}

static const tupe_opt pos_opts[] = {
    COMMON_OPTS,
    {O_MAXPOS, "max-pos", 'n', TUPE_REQARG, "N", "positions 0..N-1 (default: 128, or the model's\nmaximum when smaller)", NULL},
    {O_VIEW, "view", 0, TUPE_REQARG, "LIST", "abs, rel, bias, softmax or all (default), comma-\nseparated", "list:all abs rel bias softmax"},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

#define TEXT_OPTS \
    {O_VOCAB, "vocab", 0, TUPE_REQARG, "PATH", "the model's vocabulary: vocab.txt or a BPE\ndirectory (for --text and --input)", "file"}, \
    {O_CASED, "cased", 0, TUPE_NOARG, NULL, "the vocabulary is cased (do not lowercase)", NULL}

static const tupe_opt attn_opts[] = {
    COMMON_OPTS,
    TEXT_OPTS,
    {O_TEXT, "text", 't', TUPE_REQARG, "TEXT", "the sentence ([CLS] and [SEP] are added)", NULL},
    {O_INPUT, "input", 'i', TUPE_REQARG, "FILE", "the sentence: the first line of FILE that is not\nblank (- for stdin)", "file"},
    {O_LAYERS, "layers", 0, TUPE_REQARG, "LIST", "layers to draw, e.g. 0,11 (default: all)", NULL},
    {O_MAXLEN, "max-len", 0, TUPE_REQARG, "N", "cut the input to N tokens (default: the model's\nmaximum)", NULL},
    {O_MEASURES, "measures", 0, TUPE_REQARG, "FILE", "write the locality and symmetry of every drawn\nmap as JSON (- for stdout)", "file"},
    {O_WINDOW, "window", 0, TUPE_REQARG, "K", "the measures' local share counts keys within +-K\nof the query (default: 2)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static const tupe_opt decomp_opts[] = {
    COMMON_OPTS,
    TEXT_OPTS,
    {O_TEXT, "text", 't', TUPE_REQARG, "TEXT", "an input sentence (repeatable)", NULL},
    {O_INPUT, "input", 'i', TUPE_REQARG, "FILE", "input sentences, one per line (- for stdin)", "file"},
    {O_DATA, "data", 'd', TUPE_REQARG, "DIR", "input sequences from a shard directory (its\nvalidation split)", "dir"},
    {O_MAXIN, "max-inputs", 0, TUPE_REQARG, "N", "use at most N inputs (default: 256)", NULL},
    {O_MAXLEN, "max-len", 0, TUPE_REQARG, "N", "cut inputs to N tokens (default: 128, or the\nmodel's maximum when smaller)", NULL},
    {O_DECOMP, "decomp", 0, TUPE_REQARG, "MODE", "paper (raw embedding rows, the paper's Eq. 6;\ndefault) or exact (LayerNorm split per token, and\na fifth term so that the five sum to the scores)", "list:paper exact"},
    {O_PERHEAD, "per-head", 0, TUPE_NOARG, NULL, "one figure per term with a panel per head\n(default: one figure, terms averaged over heads)", NULL},
    {0, NULL, 0, 0, NULL, NULL, NULL}};

static int cmd_pos(tupe_cli *c, void *opts);
static int cmd_attn(tupe_cli *c, void *opts);
static int cmd_decomp(tupe_cli *c, void *opts);

static const tupe_cmd cmds[] = {
    {"pos", "[CKPT]", "the content-free positional term of every head",
     "TUPE-A and TUPE-R: the untied absolute correlation V_h with its [CLS] row and column\n"
     "(abs), the relative bias R_h (rel, TUPE-R), their sum (bias, TUPE-R) and its softmax over\n"
     "keys (softmax). BERT-R: rel and softmax. BERT-Ad: its position-position term (abs) and\n"
     "softmax. ALiBi: its fixed bias -m_h |i - j| (rel) and softmax. One figure per view, one\n"
     "panel per head. BERT-A has no such term: use decomp; RoPE (whose rotation acts on the\n"
     "content's queries and keys) and NoPE neither: use attn.",
     pos_opts, "dir", cmd_pos},
    {"attn", "[CKPT]", "attention probabilities of a sentence, per layer and head",
     "One figure per layer (a panel per head; rows = queries, columns = keys, labelled with\n"
     "the tokens). --npy writes attn.npy [layers, heads, T, T] in the layout Hugging Face\n"
     "returns with output_attentions (what bertviz reads), and tokens.txt. Each map's\n"
     "locality and symmetry (mean distance attended, share within +-K, forward balance,\n"
     "symmetry <A, A^T>/<A, A>) go to --measures as JSON, to measures.json beside the .npy\n"
     "files, and, per layer averaged over heads, to the notes (not with -q).", attn_opts, "dir", cmd_attn},
    {"decomp", "[CKPT]", "word/position decomposition of the first layer's scores",
     "For an absolute-position model (BERT-A, BERT-R, a BERT imported by tupe-convert): the\n"
     "word-word, word-position, position-word and position-position terms of layer 0's\n"
     "attention scores, averaged over the inputs aligned by position, as in the paper's\n"
     "Figure 2.", decomp_opts, "dir", cmd_decomp},
    {NULL, NULL, NULL, NULL, NULL, NULL, NULL}};

static const tupe_prog prog = {"tupe-attnviz", "draw what the positions learned", cmds, NULL};

typedef struct args {
    const char *ckpt, *out, *npy, *vocab, *input, *data, *heads, *layers, *views, *measures;
    const char **texts;
    int ntexts, format, term, per_panel, cell, cased, decomp, per_head;
    long max_pos, max_len, max_in, window;
} args;

/* "0,3,5-7" -> a sorted list of distinct values in [0, n); "all" or NULL: all of them. */
static int parse_list(tupe_cli *c, const char *opt, const char *s, int n, int *out, int *count)
{
    char *seen = calloc((size_t)n, 1);
    if (!seen)
        return tupe_cli_usage(c, "out of memory");
    if (!s || strcmp(s, "all") == 0)
        memset(seen, 1, (size_t)n);
    else {
        char *dup = strdup(s), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            char *dash = strchr(t, '-');
            long a, b;
            if (dash)
                *dash = 0;
            if (tupe_parse_long(t, 0, n - 1, &a) ||
                (dash ? tupe_parse_long(dash + 1, a, n - 1, &b) : (b = a, 0))) {
                free(dup), free(seen);
                return tupe_cli_usage(c, "--%s: expected numbers from 0 to %d (a list such as "
                                      "0,3,5-7), got '%s'", opt, n - 1, s);
            }
            for (long k = a; k <= b; k++)
                seen[k] = 1;
        }
        free(dup);
    }
    *count = 0;
    for (int k = 0; k < n; k++)
        if (seen[k])
            out[(*count)++] = k;
    free(seen);
    return *count ? 0 : tupe_cli_usage(c, "--%s: empty list", opt);
}

/* The heads of --heads as a malloc'd list; 0, or the usage error's code. */
static int heads_of(tupe_cli *c, const args *a, const tupe_config *cfg, int **heads, int *nh)
{
    *heads = malloc((size_t)cfg->num_heads * sizeof **heads);
    if (!*heads)
        return tupe_cli_usage(c, "out of memory");
    int rc = parse_list(c, "heads", a->heads, cfg->num_heads, *heads, nh);
    if (rc) {
        free(*heads);
        *heads = NULL;
    }
    return rc;
}

/* --max-pos / --max-len: the value given, or 128 (the model's positions when fewer). */
static int positions(tupe_cli *c, const char *opt, long given, const tupe_config *cfg, long *n)
{
    *n = given ? given : (cfg->max_position < 128 ? cfg->max_position : 128);
    if (*n > cfg->max_position)
        return tupe_cli_usage(c, "--%s %ld: the model has %d positions", opt, *n, cfg->max_position);
    return 0;
}

static int term_cells(void)
{
    const char *cols = getenv("COLUMNS");
    long w = 80;
    if (cols)
        tupe_parse_long(cols, 20, 100000, &w);
    return (int)(w - 8) / 2;
}

static void report(const tupe_cli *c, const tupe_vizset *s)
{
    for (size_t i = 0; i < tupe_vizset_count(s); i++)
        tupe_cli_note(c, "wrote %s", tupe_vizset_path(s, i));
}

static int open_set(tupe_cli *c, const args *a, int nfig, tupe_vizset **s, const tupe_inspect *in)
{
    tupe_vizopts o = {a->out, a->format, a->per_panel, a->cell, a->term ? stdout : NULL,
                      term_cells(), a->npy};
    if (!o.out && !a->term)
        o.out = ".";
    tupe_err e;
    if (tupe_vizset_new(s, &o, nfig, &e))
        return tupe_cli_error(c, &e);
    tupe_vizset_note(*s, "program", "tupe-attnviz");
    tupe_vizset_note(*s, "command", c->cmd->name);
    tupe_vizset_note(*s, "checkpoint", a->ckpt);
    tupe_vizset_note(*s, "position", tupe_position_name(in->cfg.position));
    tupe_vizset_note_bool(*s, "untie_cls", in->cfg.untie_cls);
    return 0;
}

/* Draw a view; with -v, say what its colours span. */
static int draw(const tupe_cli *c, const args *a, tupe_vizset *s, const tupe_view *v, tupe_err *e)
{
    if (c->verbose) {
        double lo, hi;
        tupe_view_limits(v, a->per_panel, 0, &lo, &hi);
        tupe_cli_note(c, "%s: %d panel%s of %d x %d, colours from %.4g to %.4g%s", v->name,
                      v->npanels, v->npanels > 1 ? "s" : "", v->rows, v->cols, lo, hi,
                      a->per_panel && v->npanels > 1 ? " in the first panel" : "");
    }
    return tupe_vizset_draw(s, v, e);
}

static int finish(tupe_cli *c, tupe_vizset *s, int rc, tupe_err *e)
{
    if (!rc && tupe_vizset_finish(s, e))
        rc = e->code;
    if (rc)
        tupe_cli_error(c, e);
    else
        report(c, s);
    tupe_vizset_free(s);
    return rc;
}

/* ---- pos ------------------------------------------------------------------------------------ */

enum { V_ABS, V_REL, V_BIAS, V_SOFTMAX, NVIEWS };
static const char *const view_names[NVIEWS] = {"abs", "rel", "bias", "softmax"};

static int draw_pos(tupe_cli *c, const args *a, tupe_inspect *in)
{
    const tupe_config *cfg = &in->cfg;
    int has_abs = tupe_poscorr_has_abs(cfg), has_rel = tupe_poscorr_has_rel(cfg);
    if (!has_abs && !has_rel && cfg->position == TUPE_POS_BERT_A)
        return tupe_cli_usage(c, "%s is a BERT-A model: its positions are added to the word "
                              "embeddings before layer 0, so it has no content-free positional "
                              "term; 'tupe-attnviz decomp' separates its word and position terms",
                              a->ckpt);
    if (!has_abs && !has_rel)
        return tupe_cli_usage(c, "%s is a %s model: it has no content-free positional term (%s); "
                              "'tupe-attnviz attn' draws its attention maps", a->ckpt,
                              tupe_position_name(cfg->position),
                              tupe_cfg_rope(cfg)      ? "its rotation acts on the content's "
                                                        "queries and keys"
                              : tupe_cfg_deberta(cfg) ? "its relative terms are scores of the "
                                                        "content's queries and keys"
                                                      : "it has no positions at all");
    int have[NVIEWS] = {has_abs, has_rel, has_abs && has_rel, 1}, want[NVIEWS] = {0};
    if (!a->views || strcmp(a->views, "all") == 0)
        memcpy(want, have, sizeof want);
    else {
        char *dup = strdup(a->views), *save = NULL;
        for (char *t = strtok_r(dup, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
            int k = tupe_parse_choice(t, "abs|rel|bias|softmax");
            if (k < 0 || !have[k]) {
                int rc = k < 0 ? tupe_cli_usage(c, "--view: expected abs, rel, bias, softmax or all, got '%s'", t)
                               : tupe_cli_usage(c, "--view %s: a %s model has no such term", t,
                                                tupe_position_name(cfg->position));
                free(dup);
                return rc;
            }
            want[k] = 1;
        }
        free(dup);
        int any = 0;
        for (int k = 0; k < NVIEWS; k++)
            any |= want[k];
        if (!any)
            return tupe_cli_usage(c, "--view: empty list");
    }
    long n;
    int *heads, nh;
    if (positions(c, "max-pos", a->max_pos, cfg, &n) || heads_of(c, a, cfg, &heads, &nh))
        return TUPE_EUSAGE;
    tupe_err e;
    tupe_poscorr pc;
    if (tupe_poscorr_compute(in, (int)n, &pc, &e)) {
        free(heads);
        return tupe_cli_error(c, &e);
    }
    int nfig = 0;
    for (int k = 0; k < NVIEWS; k++)
        nfig += want[k];
    tupe_vizset *s;
    int rc = open_set(c, a, nfig, &s, in);
    if (rc) {
        tupe_poscorr_free(&pc);
        free(heads);
        return rc;
    }
    tupe_vizset_note_num(s, "positions", (double)n);
    tupe_vizset_note_ints(s, "heads", heads, nh);
    size_t nn = (size_t)n * n;
    float *sel = malloc((size_t)nh * nn * sizeof *sel), *soft = malloc((size_t)nh * nn * sizeof *soft);
    char (*titles)[16] = malloc((size_t)nh * sizeof *titles);
    const char **tp = malloc((size_t)nh * sizeof *tp);
    if (!sel || !soft || !titles || !tp)
        rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
    for (int i = 0; !rc && i < nh; i++) {
        snprintf(titles[i], sizeof titles[i], "H%d", heads[i]);
        tp[i] = titles[i];
    }
    const char *vname = tupe_position_name(cfg->position);
    int bertad = cfg->position == TUPE_POS_BERT_AD, alibi = cfg->position == TUPE_POS_ALIBI;
    for (int k = 0; !rc && k < NVIEWS; k++) {
        if (!want[k])
            continue;
        const float *src = k == V_ABS ? pc.abs : k == V_REL ? pc.rel : pc.bias;
        for (int i = 0; i < nh; i++)
            memcpy(sel + (size_t)i * nn, src + (size_t)heads[i] * nn, nn * sizeof *sel);
        if (k == V_SOFTMAX)
            tupe_softmax_rows(sel, soft, (size_t)nh * (size_t)n, (int)n);
        char title[256], name[32], npy[32];
        static const char *const what[NVIEWS] = {
            "absolute positional correlation V_h", "relative bias R_h",
            "positional term V_h + R_h", "softmax over keys of the positional term"};
        const char *term = k == V_ABS && bertad  ? "position-position term"
                           : k == V_REL && alibi ? "fixed linear bias -m_h |i - j|"
                                                 : what[k];
        snprintf(title, sizeof title, "%s: %s (%s, every layer, %ld positions)", a->ckpt, term,
                 vname, n);
        snprintf(name, sizeof name, "pos-%s", view_names[k]);
        snprintf(npy, sizeof npy, "pos_%s", view_names[k]);
        tupe_view v = {name, npy, title, k == V_ABS && bertad ? "position-position term of every layer's score" : term,
                       k == V_SOFTMAX ? TUPE_CMAP_VIRIDIS : TUPE_CMAP_COOLWARM, nh, (int)n, (int)n,
                       k == V_SOFTMAX ? soft : sel, tp, NULL,
                       k == V_SOFTMAX ? "probability" : "logit", 0};
        rc = draw(c, a, s, &v, &e);
    }
    free(sel), free(soft), free(titles), free(tp), free(heads);
    tupe_poscorr_free(&pc);
    return finish(c, s, rc, &e);
}

/* ---- attn ----------------------------------------------------------------------------------- */

static int read_inputs(tupe_cli *c, const args *a, tupe_inspect *in, int max_len, size_t max_in,
                       int first_only, tupe_seqs *seqs, tupe_textenc **enc)
{
    tupe_err e;
    int rc = 0;
    *enc = NULL;
    if (a->vocab) {
        if ((rc = tupe_textenc_new(enc, a->vocab, !a->cased, &e)) ||
            (rc = tupe_inspect_check_vocab(in, tupe_vocab_size(tupe_textenc_vocab(*enc)),
                                           tupe_textenc_vocab(*enc)->hash, a->vocab, &e)))
            return tupe_cli_error(c, &e);
    }
    for (int i = 0; !rc && i < a->ntexts && (!max_in || seqs->n < max_in); i++)
        rc = tupe_seqs_add_text(seqs, *enc, a->texts[i], strlen(a->texts[i]), max_len, &e);
    if (!rc && a->input && (!max_in || seqs->n < max_in))
        rc = tupe_seqs_add_lines(seqs, *enc, a->input, max_len, first_only ? 1 : max_in, &e);
    if (!rc && a->data && (!max_in || seqs->n < max_in)) {
        uint32_t vs;
        uint64_t vh;
        char what[4200];
        snprintf(what, sizeof what, "shard directory %s", a->data);
        if (!(rc = tupe_seqs_add_shards(seqs, a->data, max_len, max_in, &vs, &vh, &e)))
            rc = tupe_inspect_check_vocab(in, vs, vh, what, &e);
    }
    if (rc)
        return tupe_cli_error(c, &e);
    if (seqs->n == 0) {
        tupe_fail(&e, TUPE_EDATA, "%s: no input (it has no line that is not blank)",
                  a->input ? tupe_path_name(a->input) : a->data);
        return tupe_cli_error(c, &e);
    }
    if (seqs->truncated)
        tupe_cli_note(c, "%zu input%s cut to %d tokens", seqs->truncated,
                      seqs->truncated > 1 ? "s" : "", max_len);
    return 0;
}

static char *token_label(const tupe_vocab *v, int32_t id)
{
    char *s = malloc(24 + (v ? tupe_vocab_token_len(v, (uint32_t)id) : 0));
    if (!s)
        return NULL;
    if (v)
        strcpy(s, tupe_vocab_token(v, (uint32_t)id));
    else
        sprintf(s, "%d", id);
    return s;
}

/* head < 0: the mean over heads (no "head" key). */
static json_t *stats_json(int head, const tupe_attn_stats *s)
{
    json_t *j = head >= 0 ? json_pack("{s:i}", "head", head) : json_object();
    json_object_set_new(j, "distance", json_real(s->distance));
    json_object_set_new(j, "local", json_real(s->local));
    json_object_set_new(j, "forward", json_real(s->forward));
    json_object_set_new(j, "symmetry", json_real(s->symmetry));
    return j;
}

/* The measures of the drawn maps sel [nl, nh, T, T]: JSON for --measures and the .npy
 * directory, and a note per layer (the mean over its heads). NULL when out of memory. */
static char *attn_measures(const tupe_cli *c, const args *a, const tupe_config *cfg,
                           const float *sel, int T, const int *layers, int nl, const int *heads,
                           int nh)
{
    int k = (int)a->window;
    double uni = tupe_attn_uniform_distance(T);
    json_t *j = json_pack("{s:s,s:s,s:i,s:i,s:f}", "checkpoint", a->ckpt, "position",
                          tupe_position_name(cfg->position), "tokens", T, "window", k,
                          "uniform_distance", uni);
    json_t *ls = json_array();
    for (int li = 0; li < nl; li++) {
        json_t *hs = json_array();
        tupe_attn_stats m = {0, 0, 0, 0};
        for (int hi = 0; hi < nh; hi++) {
            tupe_attn_stats st;
            tupe_attn_stats_of(sel + ((size_t)li * nh + hi) * T * T, T, k, &st);
            json_array_append_new(hs, stats_json(heads[hi], &st));
            m.distance += st.distance / nh, m.local += st.local / nh;
            m.forward += st.forward / nh, m.symmetry += st.symmetry / nh;
        }
        json_t *l = json_pack("{s:i,s:o,s:o}", "layer", layers[li], "heads", hs, "mean",
                              stats_json(-1, &m));
        json_array_append_new(ls, l);
        tupe_cli_note(c, "layer %d: mean distance %.3f (uniform %.3f), within +-%d %.3f, "
                      "forward %+.3f, symmetry %.3f (means over %d head%s)", layers[li],
                      m.distance, uni, k, m.local, m.forward, m.symmetry, nh, nh > 1 ? "s" : "");
    }
    json_object_set_new(j, "layers", ls);
    char *text = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(9));
    json_decref(j);
    if (text) {
        char *t = realloc(text, strlen(text) + 2);
        if (t)
            strcat(t, "\n");
        else
            free(text);
        text = t;
    }
    return text;
}

static int draw_attn(tupe_cli *c, const args *a, tupe_inspect *in)
{
    const tupe_config *cfg = &in->cfg;
    int L = cfg->num_layers, H = cfg->num_heads;
    long max_len = a->max_len ? a->max_len : cfg->max_position;
    int *heads = NULL, *layers = malloc((size_t)L * sizeof *layers), nh, nl;
    if (!layers || heads_of(c, a, cfg, &heads, &nh) || parse_list(c, "layers", a->layers, L, layers, &nl)) {
        free(heads), free(layers);
        return TUPE_EUSAGE;
    }
    tupe_seqs seqs = {0};
    tupe_textenc *enc = NULL;
    int rc = read_inputs(c, a, in, (int)max_len, 1, 1, &seqs, &enc);
    tupe_vizset *s = NULL;
    if (!rc)
        rc = open_set(c, a, nl, &s, in);
    if (rc) {
        free(heads), free(layers);
        tupe_seqs_free(&seqs);
        tupe_textenc_free(enc);
        return rc;
    }
    int T = seqs.len[0];
    const int32_t *ids = seqs.ids;
    const tupe_vocab *voc = enc ? tupe_textenc_vocab(enc) : NULL;
    size_t TT = (size_t)T * T;
    float *probs = malloc((size_t)L * H * TT * sizeof *probs);
    float *sel = malloc((size_t)nl * nh * TT * sizeof *sel);
    char **labels = calloc((size_t)T, sizeof *labels);
    char (*titles)[24] = malloc((size_t)nh * sizeof *titles);
    const char **tp = malloc((size_t)nh * sizeof *tp);
    char *tokens = NULL;
    size_t tlen = 0;
    tupe_err e;
    if (!probs || !sel || !labels || !titles || !tp)
        rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
    for (int t = 0; !rc && t < T; t++) {
        if (!(labels[t] = token_label(voc, ids[t])))
            rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
        else {
            size_t k = strlen(labels[t]);
            char *nt = realloc(tokens, tlen + k + 2);
            if (!nt) {
                rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
                break;
            }
            tokens = nt;
            memcpy(tokens + tlen, labels[t], k);
            tokens[tlen + k] = '\n';
            tokens[tlen + k + 1] = 0;
            tlen += k + 1;
        }
    }
    if (!rc)
        rc = tupe_inspect_attn(in, ids, T, probs, &e);
    for (int li = 0; !rc && li < nl; li++) {
        int l = layers[li];
        for (int hi = 0; hi < nh; hi++) {
            memcpy(sel + ((size_t)li * nh + hi) * TT, probs + ((size_t)l * H + heads[hi]) * TT,
                   TT * sizeof *sel);
            snprintf(titles[hi], sizeof titles[hi], "L%d H%d", l, heads[hi]);
            tp[hi] = titles[hi];
        }
        char title[256], name[32];
        snprintf(title, sizeof title, "%s: attention of layer %d (%s, %d tokens)", a->ckpt, l,
                 tupe_position_name(cfg->position), T);
        snprintf(name, sizeof name, "attn-L%d", l);
        tupe_view v = {name, NULL, title, NULL, TUPE_CMAP_VIRIDIS, nh, T, T,
                       sel + (size_t)li * nh * TT, tp, (const char *const *)labels, "probability", 0};
        rc = draw(c, a, s, &v, &e);
    }
    char *meas = NULL;
    if (!rc && !(meas = attn_measures(c, a, cfg, sel, T, layers, nl, heads, nh)))
        rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
    if (!rc && a->measures) {
        tupe_out *o;
        if (!(rc = tupe_out_open(&o, a->measures, &e))) {
            rc = tupe_out_write(o, meas, strlen(meas), &e);
            rc = rc ? (tupe_out_abort(o), rc) : tupe_out_commit(o, &e);
        }
    }
    if (!rc)
        rc = tupe_vizset_text(s, "measures.json", meas, "locality and symmetry of every map "
                              "(tupe-attnviz(1), MEASURES)", &e);
    free(meas);
    if (!rc) {
        uint64_t shape[4] = {(uint64_t)nl, (uint64_t)nh, (uint64_t)T, (uint64_t)T}, st = (uint64_t)T;
        tupe_vizset_note_ints(s, "layers", layers, nl);
        tupe_vizset_note_ints(s, "heads", heads, nh);
        if (!(rc = tupe_vizset_npy(s, "attn", "<f4", 4, shape, sel,
                                   "attention probabilities [layer, head, query, key] (rows sum to 1)", &e)) &&
            !(rc = tupe_vizset_npy(s, "ids", "<i4", 1, &st, ids, "the token ids of the input", &e)))
            rc = tupe_vizset_text(s, "tokens.txt", tokens, "the tokens of the input, one per line", &e);
    }
    for (int t = 0; t < T && labels; t++)
        free(labels[t]);
    free(labels), free(tokens), free(probs), free(sel), free(titles), free(tp), free(heads), free(layers);
    tupe_seqs_free(&seqs);
    tupe_textenc_free(enc);
    return finish(c, s, rc, &e);
}

/* ---- decomp --------------------------------------------------------------------------------- */

/* "0-6: 100, 7: 98, ..." : the inputs behind each position, runs of equal counts joined. */
static void print_counts(const tupe_cli *c, const int64_t *count, int n, size_t ninputs)
{
    if (c->quiet)
        return;
    fprintf(stderr, "tupe-attnviz: lengths differ: cell (i, j) averages the inputs longer than "
                    "max(i, j):");
    for (int k = 0; k < n;) {
        int j = k;
        while (j + 1 < n && count[j + 1] == count[k])
            j++;
        if (j > k)
            fprintf(stderr, " %d-%d: %lld%s", k, j, (long long)count[k], j + 1 < n ? "," : "");
        else
            fprintf(stderr, " %d: %lld%s", k, (long long)count[k], j + 1 < n ? "," : "");
        k = j + 1;
    }
    fprintf(stderr, " (of %zu)\n", ninputs);
}

static int draw_decomp(tupe_cli *c, const args *a, tupe_inspect *in)
{
    const tupe_config *cfg = &in->cfg;
    if (!tupe_cfg_abs_input(cfg))
        return tupe_cli_usage(c, "%s is a %s model: %s; 'tupe-attnviz pos' draws its %s", a->ckpt,
                              tupe_position_name(cfg->position),
                              cfg->position == TUPE_POS_BERT_AD
                                  ? "its positions enter every layer through their own "
                                    "projections, not through its input"
                                  : "it computes the word and the position correlations apart, "
                                    "with no word-position terms",
                              cfg->position == TUPE_POS_BERT_AD ? "position-position term"
                                                                : "positional term");
    long max_len;
    int H = cfg->num_heads, *heads, nh;
    if (positions(c, "max-len", a->max_len, cfg, &max_len) || heads_of(c, a, cfg, &heads, &nh))
        return TUPE_EUSAGE;
    tupe_seqs seqs = {0};
    tupe_textenc *enc = NULL;
    int rc = read_inputs(c, a, in, (int)max_len, (size_t)a->max_in, 0, &seqs, &enc);
    tupe_textenc_free(enc);
    if (rc) {
        free(heads);
        tupe_seqs_free(&seqs);
        return rc;
    }
    int n = seqs.maxlen, K = tupe_decomp_nterms(a->decomp);
    size_t nn = (size_t)n * n;
    tupe_err e;
    tupe_decomp *d = NULL;
    rc = tupe_decomp_new(&d, in, a->decomp, n, &e);
    for (size_t i = 0; !rc && i < seqs.n; i++)
        rc = tupe_decomp_add(d, seqs.ids + seqs.off[i], seqs.len[i], &e);
    float *mean = malloc((size_t)K * H * nn * sizeof *mean);
    float *sel = malloc((size_t)K * nh * nn * sizeof *sel), *avg = calloc((size_t)K * nn, sizeof *avg);
    int64_t *count = malloc((size_t)n * sizeof *count);
    char (*titles)[32] = malloc((size_t)(nh > K ? nh : K) * sizeof *titles);
    const char **tp = malloc((size_t)(nh > K ? nh : K) * sizeof *tp);
    if (!rc && (!mean || !sel || !avg || !count || !titles || !tp))
        rc = tupe_fail(&e, TUPE_EFAIL, "out of memory");
    tupe_vizset *s = NULL;
    if (!rc) {
        tupe_decomp_mean(d, mean, count);
        for (int t = 0; t < K; t++)
            for (int hi = 0; hi < nh; hi++) {
                const float *src = mean + ((size_t)t * H + heads[hi]) * nn;
                memcpy(sel + ((size_t)t * nh + hi) * nn, src, nn * sizeof *sel);
                for (size_t k = 0; k < nn; k++)
                    avg[(size_t)t * nn + k] += src[k] / (float)nh;
            }
        if (count[n - 1] != count[0])
            print_counts(c, count, n, seqs.n);
        rc = open_set(c, a, a->per_head ? K : 1, &s, in);
        if (rc) {
            tupe_decomp_free(d);
            free(mean), free(sel), free(avg), free(count), free(titles), free(tp), free(heads);
            tupe_seqs_free(&seqs);
            return rc;
        }
        tupe_vizset_note(s, "decomp", a->decomp == TUPE_DECOMP_EXACT ? "exact" : "paper");
        tupe_vizset_note_num(s, "layer", 0);
        tupe_vizset_note_num(s, "inputs", (double)seqs.n);
        tupe_vizset_note_num(s, "positions", n);
        tupe_vizset_note_ints(s, "heads", heads, nh);
    }
    const char *mode = a->decomp == TUPE_DECOMP_EXACT ? "exact" : "paper";
    if (!rc && !a->per_head) {
        for (int t = 0; t < K; t++) {
            snprintf(titles[t], sizeof titles[t], "L0 %s", tupe_decomp_term_name(t));
            tp[t] = titles[t];
        }
        char title[300];
        snprintf(title, sizeof title, "%s: layer 0 scores, mean over %d head%s and %zu input%s "
                 "(%s, --decomp %s)", a->ckpt, nh, nh > 1 ? "s" : "", seqs.n, seqs.n > 1 ? "s" : "",
                 tupe_position_name(cfg->position), mode);
        tupe_view v = {"decomp", "decomp_mean", title,
                       "terms [ww, wp, pw, pp(, rest)] averaged over the heads, [term, query, key]",
                       TUPE_CMAP_COOLWARM, K, n, n, avg, tp, NULL, "logit", K};
        rc = draw(c, a, s, &v, &e);
    }
    for (int t = 0; !rc && t < K; t++) {
        char name[32], npy[32], what[128], title[300];
        snprintf(name, sizeof name, "decomp-%s", tupe_decomp_term_key(t));
        snprintf(npy, sizeof npy, "decomp_%s", tupe_decomp_term_key(t));
        snprintf(what, sizeof what, "%s term of layer 0's scores per head, [head, query, key]",
                 tupe_decomp_term_name(t));
        if (a->per_head) {
            for (int hi = 0; hi < nh; hi++) {
                snprintf(titles[hi], sizeof titles[hi], "L0 H%d", heads[hi]);
                tp[hi] = titles[hi];
            }
            snprintf(title, sizeof title, "%s: layer 0, %s term, mean over %zu input%s (%s, "
                     "--decomp %s)", a->ckpt, tupe_decomp_term_name(t), seqs.n, seqs.n > 1 ? "s" : "",
                     tupe_position_name(cfg->position), mode);
            tupe_view v = {name, npy, title, what, TUPE_CMAP_COOLWARM, nh, n, n,
                           sel + (size_t)t * nh * nn, tp, NULL, "logit", 0};
            rc = draw(c, a, s, &v, &e);
        } else {
            uint64_t shape[3] = {(uint64_t)nh, (uint64_t)n, (uint64_t)n};
            rc = tupe_vizset_npy(s, npy, "<f4", 3, shape, sel + (size_t)t * nh * nn, what, &e);
        }
    }
    if (!rc) {
        uint64_t sn = (uint64_t)n;
        rc = tupe_vizset_npy(s, "decomp_count", "<i8", 1, &sn, count,
                             "inputs longer than k: cell (i, j) averages count[max(i, j)] inputs", &e);
    }
    tupe_decomp_free(d);
    free(mean), free(sel), free(avg), free(count), free(titles), free(tp), free(heads);
    tupe_seqs_free(&seqs);
    if (!s) {
        tupe_cli_error(c, &e);
        return e.code;
    }
    return finish(c, s, rc, &e);
}

/* ---- main ----------------------------------------------------------------------------------- */

/* The checks every subcommand shares, then the checkpoint opened for `fn`. */
static int with_checkpoint(tupe_cli *c, args *a, int (*fn)(tupe_cli *, const args *, tupe_inspect *))
{
    int rc = 0;
    int attn = fn == draw_attn, decomp = fn == draw_decomp;
    if (c->nargs > (a->ckpt ? 0 : 1))
        rc = tupe_cli_usage(c, "unexpected argument '%s'", c->args[a->ckpt ? 0 : 1]);
    else if (!a->ckpt && c->nargs == 0)
        rc = tupe_cli_usage(c, "a checkpoint is required (CKPT or --checkpoint)");
    else if (a->term && a->out && strcmp(a->out, "-") == 0)
        rc = tupe_cli_usage(c, "--term and -o - would both write to standard output");
    else if (a->measures && strcmp(a->measures, "-") == 0 &&
             (a->term || (a->out && strcmp(a->out, "-") == 0)))
        rc = tupe_cli_usage(c, "--measures - and %s would both write to standard output",
                            a->term ? "--term" : "-o -");
    else if (attn && a->ntexts + (a->input != NULL) != 1)
        rc = tupe_cli_usage(c, "give one sentence: --text TEXT or --input FILE");
    else if (decomp && !a->ntexts && !a->input && !a->data)
        rc = tupe_cli_usage(c, "no inputs: give --text, --input or --data");
    else if ((attn || decomp) && (a->ntexts || a->input) && !a->vocab)
        rc = tupe_cli_usage(c, "--vocab is required to encode --text and --input");
    else if (decomp && a->vocab && !a->ntexts && !a->input)
        rc = tupe_cli_usage(c, "--vocab encodes --text and --input; --data is already encoded");
    if (rc)
        return rc;
    if (!a->ckpt)
        a->ckpt = c->args[0];
    tupe_threads_apply(c->threads);
    tupe_inspect in;
    tupe_err e;
    /* attn runs the model on its input; the others read parameters only. */
    if (tupe_inspect_open(&in, a->ckpt, c->threads, attn ? (int)a->max_len : 1, &e))
        return tupe_cli_error(c, &e);
    rc = fn(c, a, &in);
    tupe_inspect_close(&in);
    return rc;
}

static int cmd_pos(tupe_cli *c, void *opts) { return with_checkpoint(c, opts, draw_pos); }
static int cmd_attn(tupe_cli *c, void *opts) { return with_checkpoint(c, opts, draw_attn); }
static int cmd_decomp(tupe_cli *c, void *opts) { return with_checkpoint(c, opts, draw_decomp); }

int main(int argc, char **argv)
{
    tupe_cli c;
    if (tupe_cli_begin(&c, &prog, argc, argv))
        return c.exit_code;
    args a;
    memset(&a, 0, sizeof a);
    a.max_in = 256;
    a.window = 2;
    const char *arg;
    int id, rc = 0, fmt;
    while ((id = tupe_cli_next(&c, &arg)) > 0) {
        switch (id) {
        case O_CKPT: a.ckpt = arg; break;
        case O_OUT: a.out = arg; break;
        case O_FORMAT:
            rc = tupe_cli_choice(&c, arg, "png|svg|both", &fmt);
            a.format = fmt == 0 ? TUPE_VIZ_PNG : fmt == 1 ? TUPE_VIZ_SVG : TUPE_VIZ_BOTH;
            break;
        case O_NPY: a.npy = arg; break;
        case O_TERM: a.term = 1; break;
        case O_HEADS: a.heads = arg; break;
        case O_LAYERS: a.layers = arg; break;
        case O_SCALE: rc = tupe_cli_choice(&c, arg, "global|head", &a.per_panel); break;
        case O_CELL: {
            long v;
            rc = tupe_cli_long(&c, arg, 1, 64, &v);
            a.cell = (int)v;
            break;
        }
        case O_MAXPOS: rc = tupe_cli_long(&c, arg, 1, 1 << 20, &a.max_pos); break;
        case O_VIEW: a.views = arg; break;
        case O_VOCAB: a.vocab = arg; break;
        case O_CASED: a.cased = 1; break;
        case O_TEXT: {
            if (!arg[strspn(arg, " \t\r\n")]) { /* as --input skips blank lines */
                rc = tupe_cli_usage(&c, "--text: the sentence is blank");
                break;
            }
            const char **t = realloc(a.texts, (size_t)(a.ntexts + 1) * sizeof *t);
            if (!t) {
                rc = tupe_cli_usage(&c, "out of memory");
                break;
            }
            a.texts = t;
            a.texts[a.ntexts++] = arg;
            break;
        }
        case O_INPUT: a.input = arg; break;
        case O_DATA: a.data = arg; break;
        case O_MAXLEN: rc = tupe_cli_long(&c, arg, 2, 1 << 20, &a.max_len); break;
        case O_MAXIN: rc = tupe_cli_long(&c, arg, 1, 1L << 40, &a.max_in); break;
        case O_DECOMP: rc = tupe_cli_choice(&c, arg, "paper|exact", &a.decomp); break;
        case O_PERHEAD: a.per_head = 1; break;
        case O_MEASURES: a.measures = arg; break;
        case O_WINDOW: rc = tupe_cli_long(&c, arg, 0, 1 << 20, &a.window); break;
        }
        if (rc)
            break;
    }
    if (id < 0 || rc) {
        free(a.texts);
        tupe_cli_end(&c);
        return id < 0 ? c.exit_code : rc;
    }
    if (!a.term)
        tupe_cli_default(&c, "output", "."); /* the figures' directory when -o is not given */
    rc = tupe_cli_run(&c, &a);
    free(a.texts);
    tupe_cli_end(&c);
    return rc;
}
