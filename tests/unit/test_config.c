/* Model configuration: the presets of share/tupe/models, the JSON round trip, and the errors
 * for bad files (each names the file and what is wrong). */
#include "model/config.h"
#include "unit.h"

static void presets(void)
{
    struct { const char *name; int D, L, H, F; } p[] = {
        {"tiny", 64, 2, 2, 256}, {"small", 256, 4, 4, 1024},
        {"bert-base", 768, 12, 12, 3072}, {"bert-large", 1024, 24, 16, 4096}};
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) {
        tupe_config c;
        tupe_err e;
        int rc = tupe_config_load(&c, p[i].name, &e);
        CHECK_MSG(rc == 0, "%s: %s", p[i].name, e.msg);
        CHECK_INT(c.hidden_size, p[i].D);
        CHECK_INT(c.num_layers, p[i].L);
        CHECK_INT(c.num_heads, p[i].H);
        CHECK_INT(c.intermediate_size, p[i].F);
        CHECK_INT(c.max_position, 512);
        CHECK_INT(c.vocab_size, 0);
        CHECK_INT(c.position, TUPE_POS_TUPE_R);
        CHECK_INT(c.untie_cls, 1);
        CHECK_NEAR(c.layer_norm_eps, 1e-5, 0);
        CHECK_NEAR(c.hidden_dropout, 0.1, 0);
        CHECK_NEAR(c.activation_dropout, 0, 0);
        /* vocab_size must be set before a model is built */
        CHECK_INT(tupe_config_check(&c, 1, &e), TUPE_EDATA);
        CHECK_HAS(e.msg, "vocab_size is not set");
    }
    tupe_config c;
    tupe_err e;
    CHECK_INT(tupe_config_load(&c, "huge", &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "no model preset 'huge'");
    CHECK_INT(tupe_config_load(&c, "Bad Name", &e), TUPE_EUSAGE);
    /* A preset is the same file as share/tupe/models/NAME.json in the source tree. */
    char path[4096];
    snprintf(path, sizeof path, "%s/share/tupe/models/small.json", unit_src());
    tupe_config a;
    CHECK_INT(tupe_config_load(&a, path, &e), 0);
    CHECK_INT(tupe_config_load(&c, "small", &e), 0);
    CHECK(memcmp(&a, &c, sizeof a) == 0);
}

static void json_round_trip(void)
{
    tupe_config c, d;
    tupe_err e;
    tupe_config_default(&c);
    c.position = TUPE_POS_BERT_AD;
    c.untie_cls = 0;
    c.vocab_size = 30522;
    c.hidden_dropout = 0.123456789;
    c.layer_norm_eps = 1e-12;
    c.num_labels = 3;
    c.type_vocab_size = 2;
    for (int indent = 0; indent <= 2; indent += 2) {
        char *s = tupe_config_json(&c, indent);
        int rc = tupe_config_parse(&d, s, strlen(s), "mem", &e);
        CHECK_MSG(rc == 0, "%s: %s", e.msg, s);
        CHECK(memcmp(&c, &d, sizeof c) == 0);
        CHECK_HAS(s, "\"position\"");
        CHECK_HAS(s, "bert-ad");
        free(s);
    }
    /* The presets are written in the same form (2-space indentation, contract field order). */
    tupe_config_load(&c, "tiny", &e);
    char *s = tupe_config_json(&c, 2);
    char path[4096];
    snprintf(path, sizeof path, "%s/share/tupe/models/tiny.json", unit_src());
    size_t n;
    char *f = unit_slurp(path, &n);
    CHECK_STR(s, f);
    free(s);
    free(f);
}

static int parse(const char *json, tupe_err *e)
{
    tupe_config c;
    return tupe_config_parse(&c, json, strlen(json), "m.json", e);
}

static void errors(void)
{
    tupe_err e;
    CHECK_INT(parse("{\"hiden_size\": 10}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "m.json: unknown field \"hiden_size\"");
    CHECK_INT(parse("{\"position\": \"tupe-x\"}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "\"position\" must be one of");
    CHECK_INT(parse("{\"hidden_size\": 100, \"num_attention_heads\": 12}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "hidden_size 100 is not a multiple of num_attention_heads 12");
    CHECK_INT(parse("{\"hidden_dropout_prob\": 1.5}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "\"hidden_dropout_prob\" must be in");
    CHECK_INT(parse("{\"num_hidden_layers\": 2.5}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "must be an integer");
    CHECK_INT(parse("{\"untie_cls\": 1}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "true or false");
    CHECK_INT(parse("{\"hidden_act\": \"relu\"}", &e), TUPE_EDATA);
    CHECK_INT(parse("{\"model_type\": \"bert\"}", &e), TUPE_EDATA);
    CHECK_INT(parse("{\"hidden_size\": 64,\n \"hidden_size\": 64}", &e), TUPE_EDATA);
    CHECK_INT(parse("{\n  \"hidden_size\": ,\n}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "m.json:2:");
    CHECK_INT(parse("[1]", &e), TUPE_EDATA);
    CHECK_INT(parse("{\"rel_pos_buckets\": 30}", &e), TUPE_EDATA);
    CHECK_INT(parse("{\"num_labels\": 3, \"type_vocab_size\": 2, \"vocab_size\": 5}", &e), 0);
    tupe_config c;
    CHECK_INT(tupe_config_load(&c, unit_path("missing.json"), &e), TUPE_ENOINPUT);
}

static void same_encoder(void)
{
    tupe_config a, b;
    char what[64];
    tupe_config_default(&a);
    b = a;
    b.hidden_dropout = 0;
    b.num_labels = 2;
    CHECK(tupe_config_same_encoder(&a, &b, what, sizeof what));
    b.intermediate_size = 1;
    CHECK(!tupe_config_same_encoder(&a, &b, what, sizeof what));
    CHECK_STR(what, "intermediate_size");
    b = a;
    a.position = b.position = TUPE_POS_BERT_A;
    b.untie_cls = 0; /* meaningless for BERT-A */
    CHECK(tupe_config_same_encoder(&a, &b, what, sizeof what));
    CHECK_NEAR(tupe_cfg_score_scale(&a), 0.125, 1e-15);
    a.position = TUPE_POS_TUPE_A;
    CHECK_NEAR(tupe_cfg_score_scale(&a), 1 / sqrt(128.0), 1e-15);
    a.position = TUPE_POS_BERT_AD;
    CHECK_NEAR(tupe_cfg_score_scale(&a), 1.0 / 16, 1e-15);
}

/* The later encodings: their terms, RoPE's fields (round trip, written only for rope,
 * refused elsewhere), and the terms of the paper's variants. */
static void encodings(void)
{
    tupe_config c, d;
    tupe_err e;
    tupe_config_default(&c);
    c.position = TUPE_POS_ROPE;
    c.rope_base = 500;
    c.rope_layout = TUPE_ROPE_HALF;
    for (int indent = 0; indent <= 2; indent += 2) {
        char *s = tupe_config_json(&c, indent);
        int rc = tupe_config_parse(&d, s, strlen(s), "mem", &e);
        CHECK_MSG(rc == 0, "%s: %s", e.msg, s);
        CHECK(memcmp(&c, &d, sizeof c) == 0);
        CHECK_HAS(s, "\"rope_layout\"");
        CHECK_HAS(s, "\"half\"");
        free(s);
    }
    c.position = TUPE_POS_ALIBI;
    char *s = tupe_config_json(&c, 0);
    CHECK(strstr(s, "rope") == NULL);
    free(s);
    CHECK_INT(parse("{\"position\": \"bert-a\", \"rope_base\": 100}", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "\"rope_base\" applies to \"position\": \"rope\" only");
    CHECK_INT(parse("{\"rope_layout\": \"sideways\", \"position\": \"rope\"}", &e), TUPE_EDATA);
    CHECK_INT(parse("{\"position\": \"rope\", \"rope_base\": 1}", &e), TUPE_EDATA);
    CHECK_INT(parse("{\"position\": \"rope\", \"hidden_size\": 36, \"num_attention_heads\": 4}", &e),
              TUPE_EDATA);
    CHECK_HAS(e.msg, "head size 9 must be even");
    CHECK_INT(parse("{\"position\": \"nope\"}", &e), 0);
    static const struct { int pos; unsigned terms; } want[] = {
        {TUPE_POS_BERT_A, TUPE_PE_ABS_INPUT},
        {TUPE_POS_BERT_R, TUPE_PE_ABS_INPUT | TUPE_PE_REL_BUCKET},
        {TUPE_POS_BERT_AD, TUPE_PE_ABS_QK},
        {TUPE_POS_TUPE_A, TUPE_PE_UNTIED_ABS},
        {TUPE_POS_TUPE_R, TUPE_PE_UNTIED_ABS | TUPE_PE_REL_BUCKET},
        {TUPE_POS_ROPE, TUPE_PE_ROTATION},
        {TUPE_POS_ALIBI, TUPE_PE_LINEAR_BIAS},
        {TUPE_POS_NOPE, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        c.position = want[i].pos;
        CHECK_MSG(tupe_cfg_terms(&c) == want[i].terms, "%s", tupe_position_name(want[i].pos));
        CHECK_INT(tupe_position_parse(tupe_position_name(want[i].pos)), want[i].pos);
        if (want[i].pos >= TUPE_POS_ROPE)
            CHECK_NEAR(tupe_cfg_score_scale(&c), 1 / sqrt(64.0), 1e-15);
    }
    tupe_config a, b;
    char what[64];
    tupe_config_default(&a);
    a.position = TUPE_POS_ROPE;
    b = a;
    b.rope_layout = TUPE_ROPE_HALF;
    CHECK(!tupe_config_same_encoder(&a, &b, what, sizeof what));
    CHECK_STR(what, "rope_layout");
}

UNIT_MAIN(T(presets), T(json_round_trip), T(errors), T(same_encoder), T(encodings))
