/* The token stream reader (tokstream.h): header, records, end marker, concatenated streams.
 * Each input is read twice: as it is, and with every checksum it carries recomputed, so that
 * mutations reach the structure behind the checks. A stream read to its end must have been
 * consumed exactly, and its counts must add up; every id must be inside the vocabulary. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/byteorder.h"
#include "base/checksum.h"
#include "base/fileio.h"
#include "fuzz.h"
#include "text/tokstream.h"

/* Recompute the checks of a buffer laid out as a token stream, as far as its layout goes. */
static void fix_checks(unsigned char *d, size_t n)
{
    size_t at = 0;
    uint32_t w = 2;
    while (at + TUPE_TOK_HEADER <= n) {
        tupe_put32le(d + at + 60, tupe_hash32(d + at, 60));
        w = tupe_get32le(d + at + 12) == 4 ? 4 : 2;
        at += TUPE_TOK_HEADER;
        for (;;) {
            if (at + 8 > n)
                return;
            uint32_t cnt = tupe_get32le(d + at);
            if (cnt == TUPE_TOK_END) {
                if (at + 24 > n)
                    return;
                tupe_put32le(d + at + 4, tupe_hash32(d + at + 8, 16));
                at += 24;
                break;
            }
            uint64_t bytes = (uint64_t)cnt * w;
            if (bytes > n - at - 8)
                return;
            tupe_put32le(d + at + 4, (uint32_t)tupe_hash64_seed(d + at + 8, (size_t)bytes, cnt));
            at += 8 + (size_t)bytes;
        }
    }
}

static void read_all(const uint8_t *data, size_t size)
{
    char path[64];
    int fd = fuzz_memfile(data, size, path, sizeof path);
    tupe_in *in;
    tupe_err e;
    FUZZ_CHECK(tupe_in_fdopen(&in, fd, path, 1, &e) == 0);
    tupe_tokr *r;
    if (tupe_tokr_from(&r, in, &e) == 0) {
        const tupe_tok_header *h = tupe_tokr_header(r);
        FUZZ_CHECK(h->id_bytes == 2 || h->id_bytes == 4);
        const uint32_t *ids;
        size_t n;
        uint64_t docs = 0, tokens = 0;
        int got;
        while ((got = tupe_tokr_next(r, &ids, &n, &e)) == 1) {
            FUZZ_CHECK(n <= TUPE_TOK_MAX_DOC);
            for (size_t i = 0; i < n; i++)
                FUZZ_CHECK(ids[i] < h->vocab_size);
            docs++;
            tokens += n;
        }
        if (got == 0) {
            FUZZ_CHECK(tupe_tokr_offset(r) == size);
            FUZZ_CHECK(tupe_tokr_docs(r) == docs && tupe_tokr_tokens(r) == tokens);
        } else {
            FUZZ_ERR(&e);
        }
        tupe_tokr_close(r);
    } else {
        FUZZ_ERR(&e);
    }
    tupe_in_close(in);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    read_all(data, size);
    unsigned char *d = malloc(size ? size : 1);
    memcpy(d, data, size);
    fix_checks(d, size);
    if (memcmp(d, data, size) != 0)
        read_all(d, size);
    free(d);
    return 0;
}
