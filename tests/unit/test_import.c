/* Importing tensors: the tensor set reads with shapes and dtypes checked and names what is
 * wrong, refuses two names for one tensor, follows a Hugging Face index across shards and
 * verifies a checkpoint's hashes; the Hugging Face name of every parameter of every variant
 * is distinct and the documented one. */
#include "base/fileio.h"
#include "convert/hfbert.h"
#include "convert/import.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"
#include "model/params.h"
#include "unit.h"

static void write_st(const char *path, tupe_stw *w)
{
    tupe_err e;
    if (tupe_stw_write(w, path, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    tupe_stw_free(w);
}

static void reads_checked(void)
{
    float a[6] = {1, 2, 3, 4, 5, 6};
    uint16_t h[2] = {0x3c00, 0x4000};
    int32_t i[2] = {1, 2};
    uint64_t s23[2] = {2, 3}, s2[1] = {2};
    tupe_err e;
    tupe_stw *w = tupe_stw_new();
    tupe_stw_add(w, "a.LayerNorm.gamma", TUPE_F32, 2, s23, a, &e);
    tupe_stw_add(w, "a.LayerNorm.weight", TUPE_F32, 2, s23, a, &e);
    tupe_stw_add(w, "h", TUPE_F16, 1, s2, h, &e);
    tupe_stw_add(w, "i", TUPE_I32, 1, s2, i, &e);
    write_st(unit_path("t.safetensors"), w);
    tupe_tset *s;
    CHECK_INT(tupe_tset_open(&s, unit_path("t.safetensors"), &e), 0);
    CHECK_INT(tupe_tset_count(s), 4);
    float out[6];
    CHECK_INT(tupe_tset_read(s, "h", 1, s2, out, &e), 0);
    CHECK(out[0] == 1.0f && out[1] == 2.0f);
    CHECK_INT(tupe_tset_read(s, "i", 1, s2, out, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'i': dtype I32, expected a floating-point type");
    tupe_tset_expect_source(s, "(from config.json)");
    CHECK_INT(tupe_tset_read(s, "a.LayerNorm.weight", 1, s2, out, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'a.LayerNorm.weight': shape [2, 3], expected [2] (from config.json)");
    CHECK_INT(tupe_tset_read(s, "zz", 2, s23, out, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'zz': missing: expected a tensor of shape [2, 3]");
    /* Used: h only (failed reads do not count). */
    CHECK(tupe_tset_unused(s) >= 0);
    long g = tupe_tset_find(s, "a.LayerNorm.gamma");
    CHECK_INT(tupe_tset_rename(s, (size_t)g, "a.LayerNorm.weight", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "means the same as 'a.LayerNorm.weight'");
    CHECK_INT(tupe_tset_rename(s, (size_t)g, "b", &e), 0);
    CHECK_STR(tupe_tset_orig(s, (size_t)g), "a.LayerNorm.gamma");
    CHECK_INT(tupe_tset_find(s, "b"), g);
    for (size_t k = 0; k < tupe_tset_count(s); k++)
        tupe_tset_use(s, k);
    CHECK_INT(tupe_tset_unused(s), -1);
    tupe_tset_close(s);
}

static void shards_follow_the_index(void)
{
    float a[2] = {1, 2}, b[3] = {3, 4, 5};
    uint64_t s2[1] = {2}, s3[1] = {3};
    tupe_err e;
    tupe_stw *w = tupe_stw_new();
    tupe_stw_add(w, "a", TUPE_F32, 1, s2, a, &e);
    write_st(unit_path("m-1.safetensors"), w);
    w = tupe_stw_new();
    tupe_stw_add(w, "b", TUPE_F32, 1, s3, b, &e);
    tupe_stw_add(w, "c", TUPE_F32, 1, s2, a, &e);
    write_st(unit_path("m-2.safetensors"), w);
    const char *idx = "{\"metadata\":{\"total_size\":28},\"weight_map\":{\"a\":\"m-1.safetensors\","
                      "\"b\":\"m-2.safetensors\",\"c\":\"m-2.safetensors\"}}";
    unit_write(unit_path("index.json"), idx, strlen(idx));
    tupe_tset *s;
    CHECK_INT(tupe_tset_open_path(&s, unit_path("index.json"), &e), 0);
    CHECK_INT(tupe_tset_count(s), 3);
    CHECK_INT(tupe_tset_nfiles(s), 2);
    float out[3];
    CHECK_INT(tupe_tset_read(s, "b", 1, s3, out, &e), 0);
    CHECK(out[2] == 5.0f);
    tupe_tset_close(s);
    /* A shard tensor the index does not list, and a listed one that is not there. */
    const char *idx2 = "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"b\":\"m-2.safetensors\"}}";
    unit_write(unit_path("index.json"), idx2, strlen(idx2));
    CHECK_INT(tupe_tset_open_index(&s, unit_path("index.json"), &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'c': not listed for this shard");
    const char *idx3 = "{\"weight_map\":{\"a\":\"m-1.safetensors\",\"b\":\"m-2.safetensors\","
                       "\"c\":\"m-2.safetensors\",\"d\":\"m-1.safetensors\"}}";
    unit_write(unit_path("index.json"), idx3, strlen(idx3));
    CHECK_INT(tupe_tset_open_index(&s, unit_path("index.json"), &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'd': missing");
    const char *idx4 = "{\"weight_map\":{\"a\":\"../m-1.safetensors\"}}";
    unit_write(unit_path("index.json"), idx4, strlen(idx4));
    CHECK_INT(tupe_tset_open_index(&s, unit_path("index.json"), &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "expected a shard file name");
}

static int ramp(void *ctx, const tupe_param *p, float *dst, tupe_err *e)
{
    for (size_t i = 0; dst && i < p->numel; i++)
        dst[i] = (float)i * 0.01f;
    return strncmp(p->name, "cls.", 4) == 0 ? TUPE_IMPORT_KEEP : 0;
}

static void hashes_verified(void)
{
    tupe_config c;
    tupe_config_default(&c);
    c.vocab_size = 20, c.hidden_size = 8, c.num_layers = 1, c.num_heads = 2;
    c.intermediate_size = 16, c.max_position = 8;
    tupe_model *m;
    tupe_err e;
    CHECK_INT(tupe_import_build(&m, &c, 1, ramp, NULL, &e), 0);
    float w[8];
    CHECK_INT(tupe_model_get(m, "encoder.layer.0.output.LayerNorm.weight", w, 8, &e), 0);
    CHECK(w[3] == 0.03f);
    CHECK_INT(tupe_model_get(m, "cls.predictions.transform.LayerNorm.weight", w, 8, &e), 0);
    CHECK(w[3] == 1.0f);                     /* kept: the seeded initialization */
    CHECK_INT(tupe_ckpt_save(unit_path("ck"), m, NULL, NULL, &e), 0);
    tupe_import_free(m);
    tupe_tset *s;
    size_t k;
    CHECK_INT(tupe_tset_open_path(&s, unit_path("ck"), &e), 0);
    CHECK_INT(tupe_tset_verify(s, &k, &e), 0);
    CHECK_INT(k, tupe_tset_count(s));
    const tupe_st_tensor *t = tupe_tset_tensor(s, (size_t)tupe_tset_find(s, "position.key.bias"));
    size_t len;
    char *buf = unit_slurp(unit_path("ck/model.safetensors"), &len);
    const tupe_st *st = tupe_tset_st(s, 0);
    size_t at = (size_t)(8 + tupe_st_header_size(st) + t->begin + 4);
    tupe_tset_close(s);
    buf[at] ^= 1;
    unit_write(unit_path("ck/model.safetensors"), buf, len);
    free(buf);
    CHECK_INT(tupe_tset_open_path(&s, unit_path("ck"), &e), 0);
    CHECK_INT(tupe_tset_verify(s, &k, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'position.key.bias': checksum mismatch");
    tupe_tset_close(s);
    CHECK_INT(tupe_tset_open_path(&s, unit_path("nothing"), &e), TUPE_ENOINPUT);
}

static void hf_names(void)
{
    char n[128];
    static const char *pairs[][2] = {
        {"embeddings.word_embeddings.weight", "bert.embeddings.word_embeddings.weight"},
        {"encoder.layer.3.attention.self.key.bias", "bert.encoder.layer.3.attention.self.key.bias"},
        {"position.embeddings.weight", "bert.tupe.pos.weight"},
        {"position.LayerNorm.bias", "bert.tupe.pos_ln.bias"},
        {"position.query.weight", "bert.tupe.pos_q.weight"},
        {"position.key.bias", "bert.tupe.pos_k.bias"},
        {"position.relative_bias.weight", "bert.tupe.rel_bias.weight"},
        {"classifier.dense.weight", "bert.pooler.dense.weight"},
        {"classifier.out_proj.bias", "classifier.bias"},
        {"cls.predictions.bias", "cls.predictions.bias"}};
    for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++) {
        CHECK_INT(tupe_hf_name(pairs[i][0], n, sizeof n), 0);
        CHECK_STR(n, pairs[i][1]);
    }
    CHECK_INT(tupe_hf_name("nothing.weight", n, sizeof n), -1);
    /* Every parameter of every variant and head has a name, and no two share one. */
    for (int pos = 0; pos < TUPE_POS_COUNT; pos++)
        for (int labels = 0; labels <= 3; labels += 3) {
            tupe_config c;
            tupe_config_default(&c);
            c.position = pos, c.vocab_size = 10, c.hidden_size = 8, c.num_layers = 2;
            c.num_heads = 2, c.intermediate_size = 8, c.max_position = 8, c.num_labels = labels;
            c.type_vocab_size = 2;
            tupe_layout lay;
            tupe_err e;
            CHECK_INT(tupe_layout_build(&lay, &c, &e), 0);
            char (*names)[128] = calloc(lay.count, sizeof *names);
            for (size_t i = 0; i < lay.count; i++) {
                CHECK_MSG(tupe_hf_name(lay.t[i].name, names[i], sizeof names[i]) == 0, "%s has no name",
                          lay.t[i].name);
                for (size_t j = 0; j < i; j++)
                    CHECK_MSG(strcmp(names[i], names[j]) != 0, "%s and %s both map to %s",
                              lay.t[i].name, lay.t[j].name, names[i]);
            }
            free(names);
            tupe_layout_free(&lay);
        }
}

UNIT_MAIN(T(reads_checked), T(shards_follow_the_index), T(hashes_verified), T(hf_names))
