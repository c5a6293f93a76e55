/* WordPiece vocabularies (vocab.h, vocab.txt): one token per line. What is accepted has
 * non-empty, unique, valid UTF-8 tokens without line breaks or trailing blanks, specials inside
 * it, the hash of its tokens, and reads back the same from what tupe_vocab_save writes. */
#include "vocabcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_vocab *v;
    tupe_err e;
    if (tupe_vocab_parse(&v, TUPE_VOCAB_WORDPIECE, (const char *)data, size, "vocab.txt", &e)) {
        FUZZ_ERR(&e);
        return 0;
    }
    vocab_check(v);
    vocab_round_trip(v);
    tupe_vocab_free(v);
    return 0;
}
