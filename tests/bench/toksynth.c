/* Benchmark input: a token stream of a given size made from real English text.
 *
 *   toksynth VOCAB.txt BYTES OUT.tok < text
 *
 * Each whitespace-separated word of the text (lower-cased) becomes the id of that word in
 * VOCAB.txt when it is there, else an id chosen by hashing the word into the non-special part
 * of the vocabulary; a blank line ends a document. So the ids follow the frequencies and
 * repetitions of English words (not WordPiece pieces: no tokenizer is involved). A document
 * that reaches 50,000 ids ends at its next line break (the corpus holds a whole dictionary as
 * one "document"; encyclopedia articles are far shorter). The text is
 * read once into memory and replayed until the stream holds BYTES bytes; each replay adds one
 * to a small offset on the ids, so replays are not byte-identical to earlier ones. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/checksum.h"
#include "base/fileio.h"
#include "text/tokstream.h"

typedef struct ent {
    uint64_t h;
    uint32_t id;
} ent;

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: toksynth VOCAB.txt BYTES OUT.tok < text\n");
        return 2;
    }
    tupe_err e;
    char *vb, *text;
    size_t vlen, tlen;
    if (tupe_read_file(argv[1], &vb, &vlen, (size_t)1 << 28, &e) ||
        tupe_read_file("-", &text, &tlen, (size_t)1 << 33, &e)) {
        fprintf(stderr, "toksynth: %s\n", e.msg);
        return 1;
    }
    uint64_t target = strtoull(argv[2], NULL, 10);
    /* vocabulary: open-addressing table of token hashes */
    uint32_t nv = 0;
    for (size_t i = 0; i < vlen; i++)
        nv += vb[i] == '\n';
    size_t cap = 1;
    while (cap < 4 * (size_t)nv)
        cap *= 2;
    ent *tab = calloc(cap, sizeof *tab);
    uint32_t id = 0;
    for (char *p = vb; *p; id++) {
        char *nl = strchr(p, '\n');
        size_t k = nl ? (size_t)(nl - p) : strlen(p);
        uint64_t h = tupe_hash64(p, k) | 1;
        size_t s = h & (cap - 1);
        while (tab[s].h)
            s = (s + 1) & (cap - 1);
        tab[s] = (ent){h, id};
        p += k + (nl ? 1 : 0);
    }
    tupe_tok_header hd;
    tupe_tok_header_init(&hd, nv, tupe_hash64(vb, vlen));
    hd.special[TUPE_SP_PAD] = 0;
    hd.special[TUPE_SP_UNK] = 100;
    hd.special[TUPE_SP_CLS] = 101;
    hd.special[TUPE_SP_SEP] = 102;
    hd.special[TUPE_SP_MASK] = 103;
    tupe_tokw *w;
    if (tupe_tokw_open(&w, argv[3], &hd, &e)) {
        fprintf(stderr, "toksynth: %s\n", e.msg);
        return 1;
    }
    uint32_t *doc = malloc(sizeof(uint32_t) << 24);
    size_t n = 0;
    uint64_t bytes = TUPE_TOK_HEADER;
    char word[256];
    for (uint32_t rep = 0; bytes < target; rep++) {
        size_t i = 0;
        int nl_run = 0;
        while (i < tlen && bytes < target) {
            if (text[i] == '\n') {
                if ((++nl_run >= 2 || n >= 50000) && n > 0) {
                    if (tupe_tokw_doc(w, doc, n, &e))
                        goto fail;
                    bytes += 8 + 2 * n;
                    n = 0;
                }
                i++;
                continue;
            }
            if (isspace((unsigned char)text[i])) {
                i++;
                continue;
            }
            nl_run = 0;
            size_t k = 0;
            while (i < tlen && !isspace((unsigned char)text[i])) {
                if (k < sizeof word)
                    word[k++] = (char)tolower((unsigned char)text[i]);
                i++;
            }
            uint64_t h = tupe_hash64(word, k) | 1;
            size_t s = h & (cap - 1);
            uint32_t v = 0;
            for (; tab[s].h; s = (s + 1) & (cap - 1))
                if (tab[s].h == h) {
                    v = tab[s].id;
                    break;
                }
            if (!tab[s].h)
                v = 1000 + (uint32_t)(h % (nv - 1000));
            else if (rep)
                v = 1000 + (v + rep) % (nv - 1000);
            doc[n++] = v;
            if (n == (1u << 24) - 1) {
                if (tupe_tokw_doc(w, doc, n, &e))
                    goto fail;
                bytes += 8 + 2 * n;
                n = 0;
            }
        }
    }
    if ((n && tupe_tokw_doc(w, doc, n, &e)) || tupe_tokw_close(w, &e)) {
        fprintf(stderr, "toksynth: %s\n", e.msg);
        return 1;
    }
    free(doc);
    free(tab);
    free(vb);
    free(text);
    return 0;
fail:
    fprintf(stderr, "toksynth: %s\n", e.msg);
    tupe_tokw_abort(w);
    return 1;
}
