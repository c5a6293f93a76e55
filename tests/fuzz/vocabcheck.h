/* Shared by fuzz_vocab.c and fuzz_dict.c: what a loaded vocabulary must satisfy, and the
 * round trip through its file form. */
#ifndef TUPE_FUZZ_VOCABCHECK_H
#define TUPE_FUZZ_VOCABCHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "fuzz.h"
#include "text/unicode.h"
#include "text/vocab.h"

static void vocab_check(const tupe_vocab *v)
{
    uint32_t n = tupe_vocab_size(v);
    FUZZ_CHECK(n > 0);
    tupe_hasher *h = tupe_hasher_new();
    for (uint32_t id = 0; id < n; id++) {
        const char *s = tupe_vocab_token(v, id);
        uint32_t len = tupe_vocab_token_len(v, id);
        FUZZ_CHECK(len > 0 && !memchr(s, '\n', len));
        /* a dict.txt symbol ends where its line's last space is: it may end in blanks */
        if (v->kind == TUPE_VOCAB_WORDPIECE)
            FUZZ_CHECK(s[len - 1] != ' ' && s[len - 1] != '\t' && s[len - 1] != '\r');
        for (const uint8_t *p = (const uint8_t *)s, *end = p + len; p < end;) {
            uint32_t cp;
            int k = tupe_utf8_decode(p, end, &cp);
            FUZZ_CHECK(k > 0);
            p += k;
        }
        FUZZ_CHECK(tupe_vocab_find(v, s, len) == id);
        tupe_hasher_update(h, s, len);
        tupe_hasher_update(h, "\n", 1);
    }
    FUZZ_CHECK(tupe_hasher_digest(h) == v->hash);
    tupe_hasher_free(h);
    for (int i = 0; i < TUPE_SP_COUNT; i++)
        FUZZ_CHECK(v->special[i] >= -1 && (v->special[i] < 0 || (uint32_t)v->special[i] < n));
}

/* The file form tupe_vocab_save writes, parsed again: the same vocabulary. */
static void vocab_round_trip(const tupe_vocab *v)
{
    char path[4200];
    tupe_err e;
    snprintf(path, sizeof path, "%s/vocab", fuzz_dir());
    FUZZ_CHECK(tupe_vocab_save(v, path, &e) == 0);
    char *buf;
    size_t len;
    FUZZ_CHECK(tupe_read_file(path, &buf, &len, (size_t)1 << 30, &e) == 0);
    tupe_vocab *w;
    FUZZ_CHECK(tupe_vocab_parse(&w, v->kind, buf, len, path, &e) == 0);
    free(buf);
    FUZZ_CHECK(tupe_vocab_size(w) == tupe_vocab_size(v) && w->hash == v->hash);
    FUZZ_CHECK(memcmp(w->special, v->special, sizeof v->special) == 0);
    for (uint32_t id = 0; v->count && id < tupe_vocab_size(v); id++)
        FUZZ_CHECK(w->count[id] == v->count[id]);
    tupe_vocab_free(w);
}

#endif
