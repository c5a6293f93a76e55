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

UNIT_MAIN(T(presets), T(json_round_trip), T(errors), T(same_encoder))
