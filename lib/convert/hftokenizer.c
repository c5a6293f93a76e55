#include "convert/hftokenizer.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"

static json_t *special_piece(const char *tok, int type_id)
{
    return json_pack("{s:{s:s,s:i}}", "SpecialToken", "id", tok, "type_id", type_id);
}

static json_t *sequence_piece(const char *seq, int type_id)
{
    return json_pack("{s:{s:s,s:i}}", "Sequence", "id", seq, "type_id", type_id);
}

/* [CLS] $A [SEP] and [CLS] $A [SEP] $B [SEP], as tupe-glue frames them (lib/finetune.c). */
static json_t *template(const tupe_vocab *v, int token_types)
{
    int32_t cls = v->special[TUPE_SP_CLS], sep = v->special[TUPE_SP_SEP];
    if (cls < 0 || sep < 0)
        return json_null();
    const char *c = tupe_vocab_token(v, (uint32_t)cls), *s = tupe_vocab_token(v, (uint32_t)sep);
    int b = token_types ? 1 : 0;
    json_t *single = json_pack("[o,o,o]", special_piece(c, 0), sequence_piece("A", 0),
                               special_piece(s, 0));
    json_t *pair = json_pack("[o,o,o,o,o]", special_piece(c, 0), sequence_piece("A", 0),
                             special_piece(s, 0), sequence_piece("B", b), special_piece(s, b));
    json_t *specials = json_object();
    json_object_set_new(specials, c, json_pack("{s:s,s:[i],s:[s]}", "id", c, "ids", cls, "tokens", c));
    json_object_set_new(specials, s, json_pack("{s:s,s:[i],s:[s]}", "id", s, "ids", sep, "tokens", s));
    return json_pack("{s:s,s:o,s:o,s:o}", "type", "TemplateProcessing", "single", single, "pair",
                     pair, "special_tokens", specials);
}

int tupe_hf_tokenizer_write(const tupe_vocab *v, int lowercase, int token_types, const char *path,
                            tupe_err *e)
{
    if (v->kind != TUPE_VOCAB_WORDPIECE)
        return tupe_fail(e, TUPE_EUSAGE, "tokenizer.json is written for WordPiece vocabularies only");
    json_t *added = json_array(), *vocab = json_object();
    int32_t unk = v->special[TUPE_SP_UNK];
    for (uint32_t id = 0; id < tupe_vocab_size(v); id++) {
        const char *t = tupe_vocab_token(v, id);
        json_object_set_new(vocab, t, json_integer(id));
        if (tupe_vocab_is_special(v, id))
            json_array_append_new(added, json_pack("{s:i,s:s,s:b,s:b,s:b,s:b,s:b}", "id", (int)id,
                                                   "content", t, "single_word", 0, "lstrip", 0,
                                                   "rstrip", 0, "normalized", 0, "special", 1));
    }
    json_t *model = json_pack("{s:s,s:s,s:s,s:i,s:o}", "type", "WordPiece", "unk_token",
                              unk >= 0 ? tupe_vocab_token(v, (uint32_t)unk) : "[UNK]",
                              "continuing_subword_prefix", "##", "max_input_chars_per_word", 100,
                              "vocab", vocab);
    json_t *root = json_pack(
        "{s:s,s:n,s:n,s:o,s:{s:s,s:b,s:b,s:n,s:b},s:{s:s},s:o,s:{s:s,s:s,s:b},s:o}", "version",
        "1.0", "truncation", "padding", "added_tokens", added, "normalizer", "type",
        "BertNormalizer", "clean_text", 1, "handle_chinese_chars", 1, "strip_accents", "lowercase",
        lowercase, "pre_tokenizer", "type", "BertPreTokenizer", "post_processor",
        template(v, token_types), "decoder", "type", "WordPiece", "prefix", "##", "cleanup", 1,
        "model", model);
    char *s = root ? json_dumps(root, JSON_INDENT(2)) : NULL;
    json_decref(root);
    if (!s)
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    size_t n = strlen(s);
    s[n] = '\n';   /* json_dumps' terminator becomes the final newline */
    int rc = tupe_write_file(path, s, n + 1, e);
    free(s);
    return rc;
}
