/* Vocabularies: the id <-> token mapping, its special tokens, and its hash.
 *
 * Two kinds, told apart by the path (man tupe-formats(5), VOCABULARIES):
 *   WordPiece  a file, vocab.txt: one token per line, id = line number - 1 (Hugging Face and
 *              Google BERT layout). Specials: [PAD] [UNK] [CLS] [SEP] [MASK] wherever they are.
 *   BPE        a directory holding `codes` (fastBPE merges) and `dict.txt` (fairseq dictionary,
 *              "symbol count" lines). Ids follow fairseq: <s>=0 <pad>=1 </s>=2 <unk>=3, then the
 *              dict.txt symbols in file order, then <mask> (added as fairseq's masked-LM task
 *              does). Roles: cls = <s>, sep = </s>.
 * The vocabulary hash is XXH3-64 of the tokens in id order, each followed by a newline. */
#ifndef TUPE_VOCAB_H
#define TUPE_VOCAB_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "base/strtab.h"

/* The special-token roles, in the order the token stream's and the shards' headers record
 * their ids (man tupe-formats(5)). */
enum { TUPE_SP_PAD, TUPE_SP_UNK, TUPE_SP_CLS, TUPE_SP_SEP, TUPE_SP_MASK, TUPE_SP_COUNT };

enum tupe_vocab_kind { TUPE_VOCAB_WORDPIECE = 0, TUPE_VOCAB_BPE = 1 };

#define TUPE_BPE_NHEAD 4 /* <s> <pad> </s> <unk> before the dict.txt symbols */

typedef struct tupe_vocab {
    int kind;
    tupe_strtab tok;                 /* id -> token */
    uint64_t *count;                 /* BPE: dict.txt count per id (0 for the specials) */
    size_t count_cap;
    int mask_appended;               /* BPE: <mask> was not in dict.txt and is the last id */
    int32_t special[TUPE_SP_COUNT];  /* pad unk cls sep mask; -1 if absent */
    uint64_t hash;
    char *path;                      /* where it was loaded from (for messages), or NULL */
} tupe_vocab;

/* A directory is a BPE vocabulary (DIR/dict.txt; DIR/codes is read by bpe.h), a file a
 * WordPiece vocab.txt. Errors: TUPE_ENOINPUT (missing), TUPE_EDATA (malformed, with the
 * line: empty or duplicate tokens, invalid UTF-8, no tokens). */
int tupe_vocab_load(tupe_vocab **v, const char *path, tupe_err *e);
int tupe_vocab_load_wordpiece(tupe_vocab **v, const char *path, tupe_err *e);
/* A fairseq dict.txt; the BPE vocabulary it implies (specials added as described above). */
int tupe_vocab_load_dict(tupe_vocab **v, const char *path, tupe_err *e);
/* The same from bytes in memory: a vocab.txt (TUPE_VOCAB_WORDPIECE) or a dict.txt
 * (TUPE_VOCAB_BPE); `name` stands for the file in messages. */
int tupe_vocab_parse(tupe_vocab **v, int kind, const char *buf, size_t len, const char *name,
                     tupe_err *e);

/* Building one: new, add tokens (a BPE vocabulary starts with its four head specials),
 * finish (finds the specials, appends <mask> to BPE, computes the hash). */
tupe_vocab *tupe_vocab_new(int kind);
/* The new id, -1 if the token is already there, -2 when out of memory. */
int64_t tupe_vocab_add(tupe_vocab *v, const void *tok, size_t n, uint64_t count);
int tupe_vocab_finish(tupe_vocab *v, tupe_err *e);

/* WordPiece: vocab.txt. BPE: dict.txt (the symbols between the head specials and an appended
 * <mask>, with their counts). Written atomically. */
int tupe_vocab_save(const tupe_vocab *v, const char *path, tupe_err *e);

static inline uint32_t tupe_vocab_size(const tupe_vocab *v) { return v->tok.n; }
static inline const char *tupe_vocab_token(const tupe_vocab *v, uint32_t id)
{
    return tupe_strtab_str(&v->tok, id);
}
static inline uint32_t tupe_vocab_token_len(const tupe_vocab *v, uint32_t id)
{
    return tupe_strtab_len(&v->tok, id);
}
static inline int64_t tupe_vocab_find(const tupe_vocab *v, const void *s, size_t n)
{
    return tupe_strtab_find(&v->tok, s, n);
}
/* 1 if the token continues a word: "##..." (WordPiece), or is followed by more of its word:
 * "...@@" (BPE). */
int tupe_vocab_is_continuation(const tupe_vocab *v, uint32_t id);
/* 1 if id is one of the special tokens. */
int tupe_vocab_is_special(const tupe_vocab *v, uint32_t id);
/* Name of a special role ("pad", "unk", "cls", "sep", "mask"). */
const char *tupe_special_role(int role);

void tupe_vocab_free(tupe_vocab *v);

#endif
