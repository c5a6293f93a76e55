/* Whole-file conversions: casts round to nearest even and report what they lost (fp16
 * overflow and underflow counted, bf16 within 2^-8), keep the metadata and recompute a
 * checkpoint's hashes so that it still loads; .npy export of every dtype; the info summary. */
#include "base/fileio.h"
#include "base/rng.h"
#include "convert/import.h"
#include "convert/tensorfile.h"
#include "formats/npy.h"
#include "formats/safetensors.h"
#include "model/checkpoint.h"
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

static const tupe_cast_stat *stat_of(const tupe_cast_report *r, const char *name)
{
    for (size_t i = 0; i < r->n; i++)
        if (strcmp(r->t[i].name, name) == 0)
            return &r->t[i];
    return NULL;
}

static void fp16_overflow_and_underflow_counted(void)
{
    static const float v[8] = {1e5f, -7e4f, 65504.0f, 65519.0f, 65520.0f, 1e-9f, 0.1f, 0.0f};
    static const int64_t ids[3] = {1, 2, 3};
    uint64_t s8[1] = {8}, s3[2] = {1, 3};
    tupe_err e;
    tupe_stw *w = tupe_stw_new();
    tupe_stw_meta(w, "format", "pt", &e);
    tupe_stw_meta(w, "note", "kept", &e);
    tupe_stw_add(w, "x", TUPE_F32, 1, s8, v, &e);
    tupe_stw_add(w, "ids", TUPE_I64, 2, s3, ids, &e);
    write_st(unit_path("a.safetensors"), w);

    tupe_cast_report r;
    CHECK_INT(tupe_tf_cast(unit_path("a.safetensors"), unit_path("b.safetensors"), TUPE_F16, &r, &e), 0);
    const tupe_cast_stat *x = stat_of(&r, "x"), *i = stat_of(&r, "ids");
    CHECK(x && i);
    /* 1e5, -7e4 and 65520 (the midpoint to 65536, rounded to even: infinity) overflow;
     * 65519 rounds down to 65504. 1e-9 is below half the smallest subnormal. */
    CHECK_INT(x->overflow, 3);
    CHECK_INT(x->underflow, 1);
    CHECK_INT(x->from, TUPE_F32);
    CHECK_INT(x->to, TUPE_F16);
    CHECK_NEAR(x->max_abs, 15.0, 0);         /* 65519 -> 65504 */
    CHECK(x->max_rel == 1.0);                /* 1e-9 -> 0 */
    CHECK_INT(i->to, TUPE_I64);
    tupe_cast_free(&r);

    tupe_st *st;
    CHECK_INT(tupe_st_open(&st, unit_path("b.safetensors"), &e), 0);
    CHECK_STR(tupe_st_meta(st, "note"), "kept");
    const tupe_st_tensor *t = tupe_st_find(st, "x");
    CHECK(t && t->dtype == TUPE_F16);
    float back[8];
    tupe_to_f32(TUPE_F16, t->data, back, 8);
    CHECK(isinf(back[0]) && back[0] > 0 && isinf(back[1]) && back[1] < 0);
    CHECK(back[2] == 65504.0f && back[3] == 65504.0f && isinf(back[4]) && back[5] == 0.0f);
    t = tupe_st_find(st, "ids");
    CHECK(t && t->dtype == TUPE_I64 && memcmp(t->data, ids, sizeof ids) == 0);
    tupe_st_close(st);
}

static void bf16_within_its_rounding(void)
{
    enum { N = 5000 };
    static float v[N];
    tupe_rng g;
    tupe_rng_init(&g, 5, 0, 0, 0);
    for (int k = 0; k < N; k++)
        v[k] = (float)(tupe_rng_normal(&g) * pow(10.0, (double)(k % 13) - 6));
    uint64_t s[1] = {N};
    tupe_err e;
    tupe_stw *w = tupe_stw_new();
    tupe_stw_add(w, "v", TUPE_F32, 1, s, v, &e);
    write_st(unit_path("c.safetensors"), w);
    tupe_cast_report r;
    CHECK_INT(tupe_tf_cast(unit_path("c.safetensors"), unit_path("d.safetensors"), TUPE_BF16, &r, &e), 0);
    CHECK(r.n == 1 && r.t[0].max_rel > 0 && r.t[0].max_rel <= 1.0 / 256);
    CHECK_INT(r.t[0].overflow, 0);
    tupe_cast_free(&r);
    /* Back to fp32: exact, and each value is the nearest-even bf16 of the original. */
    CHECK_INT(tupe_tf_cast(unit_path("d.safetensors"), unit_path("e.safetensors"), TUPE_F32, &r, &e), 0);
    CHECK(r.t[0].max_abs == 0 && r.t[0].max_rel == 0);
    tupe_cast_free(&r);
    tupe_st *st;
    CHECK_INT(tupe_st_open(&st, unit_path("e.safetensors"), &e), 0);
    const float *y = tupe_st_find(st, "v")->data;
    int bad = 0;
    for (int k = 0; k < N; k++)
        bad += tupe_f32_bits(y[k]) != (uint32_t)tupe_f32_to_bf16(v[k]) << 16;
    CHECK_INT(bad, 0);
    tupe_st_close(st);
}

static int fill_ramp(void *ctx, const tupe_param *p, float *dst, tupe_err *e)
{
    for (size_t i = 0; dst && i < p->numel; i++)
        dst[i] = 0.001f * (float)(i % 997) - 0.3f;
    return 0;
}

static void cast_checkpoint_still_loads(void)
{
    tupe_config c;
    tupe_config_default(&c);
    c.vocab_size = 30, c.hidden_size = 8, c.num_layers = 1, c.num_heads = 2;
    c.intermediate_size = 16, c.max_position = 8;
    tupe_model *m;
    tupe_err e;
    CHECK_INT(tupe_import_build(&m, &c, 1, fill_ramp, NULL, &e), 0);
    CHECK_INT(tupe_ckpt_save(unit_path("ck"), m, NULL, "{\"step\":3}", &e), 0);
    tupe_import_free(m);
    unit_write(unit_path("ck/extra.txt"), "x\n", 2);
    tupe_cast_report r;
    CHECK_INT(tupe_tf_cast(unit_path("ck"), unit_path("ck16"), TUPE_BF16, &r, &e), 0);
    CHECK_INT(r.optimizer_left, 0);
    tupe_cast_free(&r);
    tupe_config c2;
    CHECK_INT(tupe_ckpt_config(unit_path("ck16"), &c2, &e), 0);
    CHECK_INT(tupe_import_build(&m, &c2, 2, fill_ramp, NULL, &e), 0);
    char *ts;
    CHECK_INT(tupe_ckpt_load(unit_path("ck16"), m, NULL, &ts, 0, &e), 0);
    CHECK_STR(ts, "{\"step\":3}");
    free(ts);
    const tupe_param *p = tupe_layout_find(tupe_model_layout(m), "position.query.weight");
    float *got = malloc(p->numel * sizeof *got), *want = malloc(p->numel * sizeof *want);
    tupe_model_get(m, p->name, got, p->numel, &e);
    fill_ramp(NULL, p, want, &e);
    int bad = 0;
    for (size_t i = 0; i < p->numel; i++)
        bad += got[i] != tupe_bf16_to_f32(tupe_f32_to_bf16(want[i]));
    CHECK_INT(bad, 0);
    free(got), free(want);
    tupe_import_free(m);
    CHECK(tupe_path_exists(unit_path("ck16/extra.txt")));
    /* A directory is never cast to stdout. */
    CHECK_INT(tupe_tf_cast(unit_path("ck"), "-", TUPE_BF16, &r, &e), TUPE_EUSAGE);
}

static void npy_of_every_dtype(void)
{
    uint16_t h[3] = {0x3c00, 0xc000, 0x7bff};      /* fp16 1, -2, 65504 */
    uint16_t b[2] = {0x3f80, 0x4049};              /* bf16 1, 3.140625 */
    int32_t i[4] = {1, -2, 3, -4};
    double d[2] = {0.1, -1e300};
    uint64_t s3[1] = {3}, s2[1] = {2}, s22[2] = {2, 2};
    tupe_err e;
    tupe_stw *w = tupe_stw_new();
    tupe_stw_add(w, "h", TUPE_F16, 1, s3, h, &e);
    tupe_stw_add(w, "b", TUPE_BF16, 1, s2, b, &e);
    tupe_stw_add(w, "i", TUPE_I32, 2, s22, i, &e);
    tupe_stw_add(w, "d", TUPE_F64, 1, s2, d, &e);
    write_st(unit_path("n.safetensors"), w);
    size_t n;
    CHECK_INT(tupe_tf_npy(unit_path("n.safetensors"), NULL, unit_path("npy"), 0, &n, &e), 0);
    CHECK_INT(n, 4);
    tupe_npy a;
    CHECK_INT(tupe_npy_read(unit_path("npy/h.npy"), &a, &e), 0);
    CHECK_STR(a.descr, "<f4");
    CHECK(((float *)a.data)[1] == -2.0f && ((float *)a.data)[2] == 65504.0f);
    tupe_npy_free(&a);
    CHECK_INT(tupe_npy_read(unit_path("npy/b.npy"), &a, &e), 0);
    CHECK(strcmp(a.descr, "<f4") == 0 && ((float *)a.data)[1] == 3.140625f);
    tupe_npy_free(&a);
    CHECK_INT(tupe_npy_read(unit_path("npy/i.npy"), &a, &e), 0);
    CHECK(strcmp(a.descr, "<i4") == 0 && a.ndim == 2 && ((int32_t *)a.data)[3] == -4);
    tupe_npy_free(&a);
    CHECK_INT(tupe_npy_read(unit_path("npy/d.npy"), &a, &e), 0);
    CHECK(strcmp(a.descr, "<f8") == 0 && ((double *)a.data)[1] == -1e300);
    tupe_npy_free(&a);
    CHECK_INT(tupe_tf_npy(unit_path("n.safetensors"), "b", unit_path("b.npy"), 1, &n, &e), 0);
    CHECK_INT(tupe_npy_read(unit_path("b.npy"), &a, &e), 0);
    CHECK(strcmp(a.descr, "<u2") == 0 && ((uint16_t *)a.data)[1] == 0x4049);
    tupe_npy_free(&a);
    CHECK_INT(tupe_tf_npy(unit_path("n.safetensors"), NULL, "-", 0, &n, &e), TUPE_EUSAGE);
    CHECK_INT(tupe_tf_npy(unit_path("n.safetensors"), "zz", unit_path("z.npy"), 0, &n, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'zz': not in this file");
}

static void info_summary(void)
{
    json_t *j;
    tupe_err e;
    CHECK_INT(tupe_tf_info(unit_path("n.safetensors"), &j, &e), TUPE_ENOINPUT);  /* fresh tmpdir */
    uint64_t s[2] = {2, 3};
    float v[6] = {0};
    tupe_stw *w = tupe_stw_new();
    tupe_stw_meta(w, "config", "{\"a\":1}", &e);
    tupe_stw_add(w, "w", TUPE_F32, 2, s, v, &e);
    write_st(unit_path("i.safetensors"), w);
    CHECK_INT(tupe_tf_info(unit_path("i.safetensors"), &j, &e), 0);
    CHECK_INT(json_integer_value(json_object_get(j, "parameters")), 6);
    CHECK_INT(json_integer_value(json_object_get(json_object_get(j, "metadata"), "config") ?
              json_object_get(json_object_get(json_object_get(j, "metadata"), "config"), "a") : NULL), 1);
    CHECK_STR(json_string_value(json_object_get(j, "hashes")), "absent");
    json_decref(j);
}

UNIT_MAIN(T(fp16_overflow_and_underflow_counted), T(bf16_within_its_rounding),
          T(cast_checkpoint_still_loads), T(npy_of_every_dtype), T(info_summary))
