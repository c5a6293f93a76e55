/* Input sequences: sentences framed [CLS] ... [SEP] with the checkpoint's vocabulary (lowercased,
 * unknown words [UNK]), cut to max_len with [SEP] kept; one sequence per line that is not
 * blank, up to a limit; errors name the file. */
#include "viz/seqinput.h"
#include "unit.h"

static tupe_textenc *enc(int lowercase)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/fixtures/attnviz/vocab.txt", unit_src());
    tupe_textenc *t;
    tupe_err e;
    if (tupe_textenc_new(&t, path, lowercase, &e)) {
        printf("# %s\n", e.msg);
        exit(1);
    }
    return t;
}

static void text(void)
{
    tupe_textenc *t = enc(1);
    tupe_seqs s = {0};
    tupe_err e;
    const char *x = "W5 zzz w6";
    CHECK_INT(tupe_seqs_add_text(&s, t, x, strlen(x), 64, &e), 0);
    /* vocab: [PAD] [UNK] [CLS] [SEP] [MASK] w5 ... : w5 = 5, w6 = 6 */
    int32_t want[5] = {2, 5, 1, 6, 3};
    CHECK(s.n == 1 && s.len[0] == 5 && memcmp(s.ids, want, sizeof want) == 0);
    x = "w7 w8 w9 w10";
    CHECK_INT(tupe_seqs_add_text(&s, t, x, strlen(x), 4, &e), 0);
    int32_t cut[4] = {2, 7, 8, 3};
    CHECK(s.n == 2 && s.len[1] == 4 && memcmp(s.ids + s.off[1], cut, sizeof cut) == 0);
    CHECK_INT(s.truncated, 1);
    CHECK_INT(s.maxlen, 5);
    CHECK_INT(tupe_seqs_add_text(&s, t, "", 0, 64, &e), 0);
    CHECK_INT(s.len[2], 2);
    CHECK_INT(tupe_seqs_add_text(&s, t, "w5", 2, 1, &e), TUPE_EUSAGE);
    tupe_seqs_free(&s);
    tupe_textenc_free(t);
    /* Cased: W5 is not in the vocabulary. */
    t = enc(0);
    CHECK_INT(tupe_seqs_add_text(&s, t, "W5 w5", 5, 64, &e), 0);
    CHECK(s.ids[1] == 1 && s.ids[2] == 5);
    tupe_seqs_free(&s);
    tupe_textenc_free(t);
}

static void lines(void)
{
    tupe_textenc *t = enc(1);
    const char *p = unit_path("in.txt");
    const char *body = "w5 w6\n\n   \t\nw7\r\nw8 w9 w10\nw11\n";
    unit_write(p, body, strlen(body));
    tupe_seqs s = {0};
    tupe_err e;
    CHECK_INT(tupe_seqs_add_lines(&s, t, p, 64, 0, &e), 0);
    CHECK_INT(s.n, 4);
    CHECK(s.len[0] == 4 && s.len[1] == 3 && s.len[2] == 5 && s.ids[s.off[1] + 1] == 7);
    tupe_seqs_free(&s);
    CHECK_INT(tupe_seqs_add_lines(&s, t, p, 64, 2, &e), 0);
    CHECK_INT(s.n, 2);
    tupe_seqs_free(&s);
    CHECK_INT(tupe_seqs_add_lines(&s, t, unit_path("missing.txt"), 64, 0, &e), TUPE_ENOINPUT);
    CHECK_HAS(e.msg, "missing.txt");
    tupe_textenc_free(t);
    tupe_textenc *u;
    CHECK_INT(tupe_textenc_new(&u, unit_path("nope.txt"), 1, &e), TUPE_ENOINPUT);
}

UNIT_MAIN(T(text), T(lines))
