/* safetensors: files written by Python's `safetensors` load here, files written here are
 * byte-identical to Python's for the same tensors, and malformed headers are refused with a
 * message that names the place. Fixtures: tests/reference/make_base_fixtures.py. */
#include "base/dtype.h"
#include "formats/safetensors.h"
#include "unit.h"

static double fval(int i) { return (i * 7 % 23) - 11 + 0.25 * (i % 4); }
static long ival(int i) { return (i * 7 % 23) - 11; }

static char fixture[4096];
static const char *fix(const char *name)
{
    snprintf(fixture, sizeof fixture, "%s/tests/fixtures/safetensors/%s", unit_src(), name);
    return fixture;
}

static void reads_python_file(void)
{
    tupe_st *st;
    tupe_err e;
    int rc = tupe_st_open(&st, fix("python.safetensors"), &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (rc)
        return;
    CHECK_INT(tupe_st_count(st), 9);
    CHECK_STR(tupe_st_meta(st, "format"), "pt");
    const tupe_st_tensor *t = tupe_st_find(st, "emb.weight");
    CHECK(t && t->dtype == TUPE_F32 && t->ndim == 2 && t->shape[0] == 4 && t->shape[1] == 6);
    float buf[24];
    uint64_t shp[3] = {2, 3, 4};
    CHECK_INT(tupe_st_read_f32(st, "cube", 3, shp, buf, 24, &e), 0);
    for (int i = 0; i < 24; i++)
        CHECK_NEAR(buf[i], fval(i), 0);
    uint64_t s6[1] = {6};
    CHECK_INT(tupe_st_read_f32(st, "ln.bias", 1, s6, buf, 6, &e), 0);   /* F16 */
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(buf[i], fval(i), 0);
    CHECK_INT(tupe_st_read_f32(st, "ln.weight", 1, s6, buf, 6, &e), 0); /* BF16 */
    for (int i = 0; i < 6; i++)
        CHECK_NEAR(buf[i], fval(i), 0);
    CHECK_INT(tupe_st_read_f32(st, "scalar", 0, NULL, buf, 1, &e), 0);  /* F64, shape [] */
    CHECK_NEAR(buf[0], fval(0), 0);
    t = tupe_st_find(st, "ids");
    CHECK(t && t->dtype == TUPE_I64 && t->numel == 5);
    if (t)
        for (int i = 0; i < 5; i++) {
            int64_t v;
            memcpy(&v, (const char *)t->data + 8 * i, 8);
            CHECK_INT(v, ival(i));
        }
    t = tupe_st_find(st, "flags");
    CHECK(t && t->dtype == TUPE_BOOL && ((const unsigned char *)t->data)[0] == 1 &&
          ((const unsigned char *)t->data)[1] == 0);
    /* Wrong shape and wrong dtype are named. */
    CHECK_INT(tupe_st_read_f32(st, "cube", 1, s6, buf, 6, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'cube': shape [2, 3, 4], expected [6]");
    CHECK_INT(tupe_st_read_f32(st, "count", -1, NULL, buf, 3, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'count': dtype I32 is not a floating-point type");
    CHECK_INT(tupe_st_read_f32(st, "nope", -1, NULL, buf, 3, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "tensor 'nope': missing");
    tupe_st_close(st);

    rc = tupe_st_open(&st, fix("python-meta.safetensors"), &e);
    CHECK_MSG(rc == 0, "%s", e.msg);
    if (!rc) {
        CHECK_STR(tupe_st_meta(st, "note"), "h\xc3\xa9llo \"quoted\" \\ tab\t");
        t = tupe_st_find(st, "empty");
        CHECK(t && t->numel == 0 && t->begin == t->end);
        tupe_st_close(st);
    }
}

/* The same tensors as the Python fixture, through our writer: the bytes must be identical. */
static void writes_what_python_writes(void)
{
    tupe_stw *w = tupe_stw_new();
    tupe_err e;
    float f24[24];
    for (int i = 0; i < 24; i++)
        f24[i] = (float)fval(i);
    float f6[6];
    for (int i = 0; i < 6; i++)
        f6[i] = (float)fval(i);
    double sc = fval(0);
    int64_t ids[5];
    for (int i = 0; i < 5; i++)
        ids[i] = ival(i);
    int32_t cnt[3];
    for (int i = 0; i < 3; i++)
        cnt[i] = (int32_t)ival(i);
    uint8_t by[7];
    for (int i = 0; i < 7; i++)
        by[i] = (uint8_t)(i * 7 % 23);
    uint8_t fl[3] = {1, 0, 1};
    uint64_t s46[2] = {4, 6}, s6[1] = {6}, s5[1] = {5}, s3[1] = {3}, s7[1] = {7}, s234[3] = {2, 3, 4};
    /* Added in an order unlike the file's, to exercise the writer's ordering. */
    CHECK_INT(tupe_stw_add(w, "cube", TUPE_F32, 3, s234, f24, &e), 0);
    CHECK_INT(tupe_stw_add_f32(w, "ln.weight", TUPE_BF16, 1, s6, f6, &e), 0);
    CHECK_INT(tupe_stw_add(w, "flags", TUPE_BOOL, 1, s3, fl, &e), 0);
    CHECK_INT(tupe_stw_add(w, "emb.weight", TUPE_F32, 2, s46, f24, &e), 0);
    CHECK_INT(tupe_stw_add_f32(w, "ln.bias", TUPE_F16, 1, s6, f6, &e), 0);
    CHECK_INT(tupe_stw_add(w, "scalar", TUPE_F64, 0, NULL, &sc, &e), 0);
    CHECK_INT(tupe_stw_add(w, "ids", TUPE_I64, 1, s5, ids, &e), 0);
    CHECK_INT(tupe_stw_add(w, "count", TUPE_I32, 1, s3, cnt, &e), 0);
    CHECK_INT(tupe_stw_add_copy(w, "bytes", TUPE_U8, 1, s7, by, &e), 0);
    CHECK_INT(tupe_stw_add(w, "bytes", TUPE_U8, 1, s7, by, &e), TUPE_EFAIL); /* duplicate */
    CHECK_INT(tupe_stw_meta(w, "format", "pt", &e), 0);
    const char *out = unit_path("ours.safetensors");
    CHECK_INT(tupe_stw_write(w, out, &e), 0);
    tupe_stw_free(w);
    size_t a, b;
    char *ours = unit_slurp(out, &a), *theirs = unit_slurp(fix("python.safetensors"), &b);
    CHECK_INT(a, b);
    CHECK_MSG(a == b && memcmp(ours, theirs, a) == 0, "files differ; ours: %.200s", ours + 8);
    free(ours), free(theirs);
}

static void checksum_metadata(void)
{
    tupe_stw *w = tupe_stw_new();
    tupe_err e;
    float v[1000];
    for (int i = 0; i < 1000; i++)
        v[i] = (float)i;
    uint64_t s[1] = {1000};
    tupe_stw_add(w, "v", TUPE_F32, 1, s, v, &e);
    tupe_stw_set_checksum(w, 1);
    const char *p = unit_path("c.safetensors");
    CHECK_INT(tupe_stw_write(w, p, &e), 0);
    tupe_stw_free(w);
    tupe_st *st;
    CHECK_INT(tupe_st_open(&st, p, &e), 0);
    CHECK(tupe_st_meta(st, TUPE_ST_CHECK_KEY) != NULL);
    CHECK_INT(tupe_st_verify(st, &e), 0);
    tupe_st_close(st);
    size_t n;
    char *buf = unit_slurp(p, &n);
    buf[n - 100] ^= 4;
    unit_write(p, buf, n);
    CHECK_INT(tupe_st_open(&st, p, &e), 0);
    CHECK_INT(tupe_st_verify(st, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "data checksum mismatch");
    tupe_st_close(st);
    free(buf);
}

/* A file made of an 8-byte length, the given header, and `data` zero bytes. */
static int parse_raw(const char *hdr, uint64_t claimed, size_t data, tupe_err *e)
{
    size_t hl = strlen(hdr);
    size_t n = 8 + hl + data;
    unsigned char *buf = calloc(1, n);
    uint64_t len = claimed ? claimed : hl;
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(len >> (8 * i));
    memcpy(buf + 8, hdr, hl);
    tupe_st *st = NULL;
    int rc = tupe_st_parse(&st, buf, n, "bad.safetensors", e);
    tupe_st_close(st);
    free(buf);
    return rc;
}

#define BAD(hdr, claimed, data, sub) do { tupe_err e_; \
    int rc_ = parse_raw(hdr, claimed, data, &e_); \
    CHECK_MSG(rc_ == TUPE_EDATA, "accepted: %s", hdr); \
    if (rc_ == TUPE_EDATA) { CHECK_HAS(e_.msg, "bad.safetensors"); CHECK_HAS(e_.msg, sub); } \
    kinds++; } while (0)

static void rejects_malformed_headers(void)
{
    int kinds = 0;
    tupe_err e;
    tupe_st *st;
    CHECK_INT(tupe_st_parse(&st, "\x05\0\0", 3, "bad.safetensors", &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "too short");
    kinds++;
    BAD("{}", 1000, 0, "runs past the end of the file");
    BAD("{}", 200000000, 0, "exceeds the limit");
    BAD("[1, 2]", 0, 0, "does not start with '{'");
    BAD("{\"a\": {\"dtype\": \"F32\"", 0, 0, "invalid JSON header");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8, "duplicate");
    BAD("{\"a\":{\"dtype\":\"F33\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, "tensor 'a': unknown dtype \"F33\"");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", 0, 4, "\"shape\"[0] is not a non-negative integer");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1.5],\"data_offsets\":[0,4]}}", 0, 4, "\"shape\"[0] is not a non-negative integer");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4,8]}}", 0, 8, "not an array of two integers");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,4]}}", 0, 4, "hold 4 bytes, but F32 [2] needs 8");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8, "overlaps tensor 'a'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[8,12]}}", 0, 12, "gap of 4 bytes after tensor 'a'");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[4,8]}}", 0, 8, "starts with 4 bytes that belong to no tensor");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 10, "6 bytes after the last tensor belong to no tensor");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 10, "past the end of the data section");
    BAD("{\"__metadata__\":{\"format\":1}}", 0, 0, "__metadata__ value of 'format' is not a string");
    BAD("{\"__metadata__\":[1]}", 0, 0, "__metadata__ is not an object");
    BAD("{\"a\":{\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, "tensor 'a': missing \"dtype\"");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[4,0]}}", 0, 4, "end before they begin");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,4]}}", 0, 4, "too many elements");
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}", 0, 4, "17 dimensions");
    BAD("{\"a\":{\"dtype\":\"F4\",\"shape\":[3],\"data_offsets\":[0,2]}}", 0, 2, "do not fill whole bytes");
    BAD("{\"a\":7}", 0, 0, "tensor 'a': header entry is not an object");
    BAD("{\"a\xff\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, "invalid JSON header");
    CHECK(kinds >= 10);
    /* And the good ones around them still parse: padding, empty file body, zero-size tensors. */
    CHECK_INT(parse_raw("{}      ", 0, 0, &e), 0);
    CHECK_INT(parse_raw("{\"z\":{\"dtype\":\"I32\",\"shape\":[0,3],\"data_offsets\":[0,0]},"
                        "\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}", 0, 4, &e), 0);
}

static void missing_file(void)
{
    tupe_st *st;
    tupe_err e;
    CHECK_INT(tupe_st_open(&st, unit_path("absent.safetensors"), &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "absent.safetensors: No such file or directory");
}

UNIT_MAIN(T(reads_python_file), T(writes_what_python_writes), T(checksum_metadata),
          T(rejects_malformed_headers), T(missing_file))
