/* fairseq dictionaries (vocab.h, dict.txt): "symbol count" lines. As fuzz_vocab.c, plus the
 * fairseq layout: <s> <pad> </s> <unk> first, <mask> last unless listed, counts kept. */
#include "vocabcheck.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tupe_vocab *v;
    tupe_err e;
    if (tupe_vocab_parse(&v, TUPE_VOCAB_BPE, (const char *)data, size, "dict.txt", &e)) {
        FUZZ_ERR(&e);
        return 0;
    }
    vocab_check(v);
    FUZZ_CHECK(tupe_vocab_size(v) > TUPE_BPE_NHEAD);
    FUZZ_CHECK(v->special[TUPE_SP_CLS] == 0 && v->special[TUPE_SP_PAD] == 1 &&
               v->special[TUPE_SP_SEP] == 2 && v->special[TUPE_SP_UNK] == 3);
    FUZZ_CHECK(v->special[TUPE_SP_MASK] >= TUPE_BPE_NHEAD);
    if (v->mask_appended)
        FUZZ_CHECK((uint32_t)v->special[TUPE_SP_MASK] == tupe_vocab_size(v) - 1);
    vocab_round_trip(v);
    tupe_vocab_free(v);
    return 0;
}
