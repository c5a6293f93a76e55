/* Probes of replaced-token detection (train/rtdprobe.h): written and read back, the byte
 * layout of tupe-formats(5) PROBES, and every malformed file refused with the byte named. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/checksum.h"
#include "base/fileio.h"
#include "train/rtdprobe.h"
#include "unit.h"

#define V 50
#define MASK 4
static const tupe_rtdprobe_info INFO = {V, 0x1234abcdull, 7, 0xFFFFFFFFu, MASK, 0.15};

/* One sequence: originals 10..10+n-1; masked positions pos with generator input [MASK] where
 * kind, the samples put in; labels as ELECTRA's. */
typedef struct seq {
    uint32_t n, m;
    int32_t ids[16], lab[16], gen[16], pos[8], orig[8];
} seq;

static void make_seq(seq *s, uint32_t n, uint32_t m, const int *pos, const int *kind,
                     const int *sample)
{
    memset(s, 0, sizeof *s);
    s->n = n, s->m = m;
    for (uint32_t t = 0; t < n; t++)
        s->ids[t] = s->gen[t] = 10 + (int32_t)t;
    for (uint32_t k = 0; k < m; k++) {
        int t = pos[k];
        s->pos[k] = t;
        s->orig[k] = 10 + t;
        s->gen[t] = kind[k] ? MASK : 10 + t;
        s->ids[t] = sample[k];
        s->lab[t] = sample[k] != 10 + t;
    }
}

static int write_probe(const char *path, const seq *s, int count, uint64_t key0)
{
    tupe_err e;
    tupe_rtdprobe_writer *w;
    CHECK_INT(tupe_rtdprobe_create(&w, path, &INFO, &e), 0);
    for (int i = 0; i < count; i++)
        CHECK_INT(tupe_rtdprobe_add(w, key0 + (uint64_t)i, s[i].n, s[i].ids, s[i].lab, s[i].m,
                                    s[i].pos, s[i].orig, s[i].gen, &e), 0);
    return tupe_rtdprobe_commit(w, &e);
}

static void three(seq *s)
{
    static const int p0[] = {2, 5, 1}, k0[] = {1, 0, 1}, s0[] = {33, 15, 11};
    static const int p1[] = {0}, k1[] = {1}, s1[] = {20};
    make_seq(&s[0], 8, 3, p0, k0, s0); /* position 1: the original drawn again, "real" */
    make_seq(&s[1], 3, 1, p1, k1, s1);
    make_seq(&s[2], 5, 0, NULL, NULL, NULL);
}

/* The three sequences written to `name` (keys from key0): the file's path. */
static const char *three_written(seq *s, const char *name, uint64_t key0)
{
    three(s);
    const char *path = unit_path(name);
    CHECK_INT(write_probe(path, s, 3, key0), 0);
    return path;
}

static void roundtrip(void)
{
    seq s[3];
    const char *path = three_written(s, "p.probe", 100);
    tupe_err e;
    tupe_rtdprobe *p;
    CHECK_INT(tupe_rtdprobe_read(&p, path, &e), 0);
    CHECK_U64(p->count, 3);
    CHECK_INT(p->max_len, 8);
    CHECK_U64(p->info.vocab_hash, INFO.vocab_hash);
    CHECK_U64(p->info.noise_seed, 7);
    CHECK_U64(p->info.noise_step, 0xFFFFFFFFu);
    CHECK_INT(p->info.mask_id, MASK);
    CHECK(p->info.mask_prob == 0.15);
    for (int i = 0; i < 3; i++) {
        CHECK_U64(p->key[i], 100 + (uint64_t)i);
        CHECK_INT(p->len[i], s[i].n);
        CHECK_INT(p->nmask[i], s[i].m);
        CHECK(memcmp(p->ids + p->tok[i], s[i].ids, s[i].n * sizeof(int32_t)) == 0);
        CHECK(memcmp(p->label + p->tok[i], s[i].lab, s[i].n * sizeof(int32_t)) == 0);
        int32_t gen[16], orig[16];
        tupe_rtdprobe_inputs(p, (uint64_t)i, gen, orig);
        CHECK(memcmp(gen, s[i].gen, s[i].n * sizeof *gen) == 0);
        for (uint32_t t = 0; t < s[i].n; t++)
            CHECK_INT(orig[t], 10 + (int)t);
    }
    CHECK_INT(p->label[p->tok[0] + 1], 0); /* a sample equal to the original is real */
    tupe_rtdprobe_free(p);
}

/* The file's bytes: 64 header, then per sequence 16 + 5n + 9m + 4, then 16. */
static void layout(void)
{
    seq s[3];
    const char *path = three_written(s, "l.probe", 100);
    size_t len;
    unsigned char *b = (unsigned char *)unit_slurp(path, &len);
    CHECK_INT(len, 64 + (16 + 40 + 27 + 4) + (16 + 15 + 9 + 4) + (16 + 25 + 4) + 16);
    CHECK(memcmp(b, "TUPEPROB", 8) == 0);
    CHECK_INT(b[8], 1);
    CHECK_INT(b[12], V);
    CHECK_INT(b[64], 8);                   /* n of sequence 0 */
    CHECK_INT(b[68], 3);                   /* m */
    CHECK_INT(b[72], 100);                 /* key */
    CHECK_INT(b[80 + 4 * 2], 33);          /* the corrupted id at position 2 */
    CHECK_INT(b[80 + 32 + 2], 1);          /* its label */
    CHECK_INT(b[80 + 40], 2);              /* masked position 0 */
    CHECK_INT(b[80 + 40 + 4], 12);         /* its original */
    CHECK_INT(b[80 + 40 + 8], 1);          /* [MASK] shown */
    CHECK_INT(b[80 + 40 + 9 + 8], 0);      /* position 5: kept */
    CHECK(b[len - 16] == 0xFF && b[len - 13] == 0xFF);
    CHECK_INT(b[len - 12], 3);
    free(b);
}

/* A well-checked file whose content breaks a rule: refused, naming the byte. */
static void expect_refused(const seq *s, int count, const char *byte, const char *why)
{
    const char *path = unit_path("bad.probe");
    CHECK_INT(write_probe(path, s, count, 0), 0);
    tupe_err e;
    tupe_rtdprobe *p = NULL;
    CHECK_INT(tupe_rtdprobe_read(&p, path, &e), TUPE_EDATA);
    CHECK(p == NULL);
    CHECK_HAS(e.msg, "bad.probe: ");
    CHECK_HAS(e.msg, byte);
    CHECK_HAS(e.msg, why);
}

static void rules(void)
{
    seq s[3];
    three(s);
    seq t = s[0];
    t.ids[3] = V; /* 80 + 12 */
    expect_refused(&t, 1, "byte 92:", "outside the vocabulary");
    /* bytes the writer never writes: patched, the record's check made again */
    const char *path = unit_path("bad.probe");
    CHECK_INT(write_probe(path, s, 1, 0), 0);
    size_t len;
    unsigned char *b = (unsigned char *)unit_slurp(path, &len);
    tupe_err e;
    tupe_rtdprobe *p;
    static const struct { size_t at; const char *byte, *why; } patch[] = {
        {116, "byte 116:", "neither 0 (real) nor 1 (replaced)"},
        {128, "byte 128:", "neither 0 (kept) nor 1 ([MASK])"},
    };
    for (size_t k = 0; k < sizeof patch / sizeof patch[0]; k++) {
        unsigned char *c = malloc(len);
        memcpy(c, b, len);
        c[patch[k].at] = 2;
        tupe_put32le(c + 147, tupe_hash32(c + 64, 83));
        unit_write(path, c, len);
        CHECK_INT(tupe_rtdprobe_read(&p, path, &e), TUPE_EDATA);
        CHECK_HAS(e.msg, patch[k].byte);
        CHECK_HAS(e.msg, patch[k].why);
        free(c);
    }
    free(b);
    t = s[0];
    t.lab[4] = 1; /* not masked */
    expect_refused(&t, 1, "byte 116:", "not masked");
    t = s[0];
    t.lab[2] = 0; /* replaced (33 != 12) but labelled real */
    expect_refused(&t, 1, "byte 114:", "differs from the original");
    t = s[0];
    t.pos[1] = 8;
    expect_refused(&t, 1, "byte 129:", "outside the sequence");
    t = s[0];
    t.pos[2] = 2;
    expect_refused(&t, 1, "byte 138:", "given twice");
    t = s[0];
    t.orig[0] = 99;
    expect_refused(&t, 1, "byte 124:", "original token outside the vocabulary");
    /* the second sequence's fault: its offset past the first */
    seq u[2] = {s[0], s[1]};
    u[1].ids[0] = -1;
    expect_refused(u, 2, "byte 167:", "sequence 1: a corrupted id outside");
}

/* Every cut and every flipped byte of a good file refused, never a crash. */
static void damage(void)
{
    seq s[3];
    const char *path = three_written(s, "d.probe", 5), *bad = unit_path("d2.probe");
    size_t len;
    unsigned char *b = (unsigned char *)unit_slurp(path, &len);
    tupe_err e;
    tupe_rtdprobe *p;
    for (size_t cut = 0; cut < len; cut++) {
        unit_write(bad, b, cut);
        CHECK_MSG(tupe_rtdprobe_read(&p, bad, &e) == TUPE_EDATA, "cut at %zu: %s", cut, e.msg);
        CHECK_HAS(e.msg, "d2.probe: byte ");
    }
    for (size_t i = 0; i < len; i++) {
        b[i] ^= 0x10;
        unit_write(bad, b, len);
        CHECK_MSG(tupe_rtdprobe_read(&p, bad, &e) == TUPE_EDATA, "byte %zu flipped: %s", i, e.msg);
        b[i] ^= 0x10;
    }
    unsigned char *more = malloc(len + 1);
    memcpy(more, b, len);
    more[len] = 0;
    unit_write(bad, more, len + 1);
    CHECK_INT(tupe_rtdprobe_read(&p, bad, &e), TUPE_EDATA);
    CHECK_HAS(e.msg, "after the end marker");
    free(more);
    free(b);
    CHECK_INT(tupe_rtdprobe_read(&p, unit_path("none.probe"), &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "none.probe");
}

/* Nothing at the path until the commit; an abort leaves nothing. */
static void atomic(void)
{
    seq s[3];
    three(s);
    const char *path = unit_path("a.probe");
    tupe_err e;
    tupe_rtdprobe_writer *w;
    CHECK_INT(tupe_rtdprobe_create(&w, path, &INFO, &e), 0);
    CHECK_INT(tupe_rtdprobe_add(w, 1, s[0].n, s[0].ids, s[0].lab, s[0].m, s[0].pos, s[0].orig,
                                s[0].gen, &e), 0);
    CHECK(access(path, F_OK) != 0);
    tupe_rtdprobe_abort(w);
    CHECK(access(path, F_OK) != 0);
    CHECK_INT(write_probe(path, s, 0, 0), 0); /* no sequence: a valid, empty probe */
    tupe_rtdprobe *p;
    CHECK_INT(tupe_rtdprobe_read(&p, path, &e), 0);
    CHECK_U64(p->count, 0);
    tupe_rtdprobe_free(p);
}

UNIT_MAIN(T(roundtrip), T(layout), T(rules), T(damage), T(atomic))
