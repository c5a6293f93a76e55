/* BPE codes (bpe.h): "left right count" lines, then segmentation with them. The codes are
 * read without a dictionary and with one made of every symbol they produce; then every field
 * of the input, taken as a word, is segmented twice (the second time from the cache): the
 * pieces must cover the word in order, carry ids of the dictionary (or <unk>), and be the same
 * both times. */
#include <stdlib.h>
#include <string.h>

#include "text/bpe.h"
#include "fuzz.h"
#include "text/vocab.h"

static void segment_words(const tupe_bpe *b, const tupe_vocab *v, const uint8_t *d, size_t n)
{
    tupe_bpe_cache *c = tupe_bpe_cache_new();
    FUZZ_CHECK(c != NULL);
    uint32_t *ids = malloc((n + 1) * 4 * sizeof *ids), *ends = ids + (n + 1);
    uint32_t *ids2 = ends + (n + 1), *ends2 = ids2 + (n + 1);
    for (size_t i = 0; i < n;) {
        while (i < n && (d[i] == ' ' || d[i] == '\n' || d[i] == '\r'))
            i++;
        size_t j = i;
        while (j < n && d[j] != ' ' && d[j] != '\n' && d[j] != '\r')
            j++;
        if (j == i)
            break;
        size_t unk = 0, unk2 = 0;
        size_t k = tupe_bpe_encode(b, c, d + i, j - i, ids, ends, &unk);
        FUZZ_CHECK(k >= 1 && k <= j - i);
        for (size_t p = 0; p < k; p++) {
            FUZZ_CHECK(ends[p] > (p ? ends[p - 1] : 0));
            if (v)
                FUZZ_CHECK(ids[p] < tupe_vocab_size(v));
        }
        FUZZ_CHECK(ends[k - 1] == j - i && unk <= k);
        size_t k2 = tupe_bpe_encode(b, c, d + i, j - i, ids2, ends2, &unk2);
        FUZZ_CHECK(k2 == k && unk2 == unk);
        FUZZ_CHECK(memcmp(ids, ids2, k * sizeof *ids) == 0 && memcmp(ends, ends2, k * sizeof *ends) == 0);
        i = j;
    }
    free(ids);
    tupe_bpe_cache_free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_bpe *b;
    tupe_err e;
    if (tupe_bpe_parse(&b, (const char *)data, size, "codes", NULL, &e) != 0) {
        FUZZ_ERR(&e);
        return 0;
    }
    FUZZ_CHECK(tupe_bpe_merges(b) > 0);
    /* A segmentation cache is large (tens of MB): segment without a dictionary for half the
     * inputs only. */
    if (size & 1)
        segment_words(b, NULL, data, size);
    tupe_bpe_free(b);

    /* A dictionary of every field of the input, in the form fairseq keeps (final pieces
     * without "</w>", others with "@@"). */
    tupe_vocab *v = tupe_vocab_new(TUPE_VOCAB_BPE);
    FUZZ_CHECK(v != NULL);
    for (size_t i = 0; i < size;) {
        size_t j = i;
        while (j < size && data[j] != ' ' && data[j] != '\n' && data[j] != '\r')
            j++;
        if (j > i) {
            size_t n = j - i;
            if (n >= 4 && memcmp(data + j - 4, "</w>", 4) == 0)
                tupe_vocab_add(v, data + i, n - 4, 1);
            else {
                char *t = malloc(n + 2);
                memcpy(t, data + i, n);
                memcpy(t + n, "@@", 2);
                tupe_vocab_add(v, t, n + 2, 1);
                free(t);
            }
        }
        i = j + 1;
    }
    FUZZ_CHECK(tupe_vocab_finish(v, &e) == 0);
    FUZZ_CHECK(tupe_bpe_parse(&b, (const char *)data, size, "codes", v, &e) == 0);
    segment_words(b, v, data, size);
    tupe_bpe_free(b);
    tupe_vocab_free(v);
    return 0;
}
