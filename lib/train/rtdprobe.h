/* A probe of replaced-token detection (ELECTRA, model/electra.h): the corrupted validation
 * sequences a discriminator was scored on, so that another discriminator can be scored on the
 * same corruption (`tupe-pretrain eval --write-probe` / `--probe`; tupe-formats(5) PROBES).
 *
 * Each sequence holds the discriminator's input (the corrupted ids) and its labels (1 =
 * replaced), and the masks: every chosen position with its original token and whether the
 * generator saw [MASK] there or the token kept. The header names the vocabulary and the
 * sampling noise (seed, step; each sequence's key), so that the corruption can be traced
 * back to the run and the noise that drew it.
 *
 * The reader checks everything a discriminator relies on, and says where it is wrong (file
 * and byte): ids inside the vocabulary, distinct masked positions inside the sequence, labels
 * that are ELECTRA's (1 exactly where a masked position's token differs from its original),
 * the checks of every record and the end marker. */
#ifndef TUPE_RTDPROBE_H
#define TUPE_RTDPROBE_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct tupe_rtdprobe_info {
    uint32_t vocab_size;
    uint64_t vocab_hash;         /* of the shards' vocabulary (tupe-formats(5)) */
    uint64_t noise_seed;         /* the masks' and the generator's sampling noise's seed */
    uint32_t noise_step;         /* the noise's step (evaluation: TUPE_MASK_EVAL_EPOCH) */
    int32_t mask_id;             /* [MASK] */
    double mask_prob;
} tupe_rtdprobe_info;

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct tupe_rtdprobe_writer tupe_rtdprobe_writer;

/* Through a temporary file beside `path`, renamed by tupe_rtdprobe_commit. */
int tupe_rtdprobe_create(tupe_rtdprobe_writer **w, const char *path, const tupe_rtdprobe_info *info,
                      tupe_err *e);
/* One sequence of len tokens: the corrupted ids and labels [len]; its m masked positions with
 * their original tokens; gen_ids [len] the generator's input ([MASK] where it was masked). */
int tupe_rtdprobe_add(tupe_rtdprobe_writer *w, uint64_t key, uint32_t len, const int32_t *ids,
                   const int32_t *labels, uint32_t m, const int32_t *pos, const int32_t *orig,
                   const int32_t *gen_ids, tupe_err *e);
/* The end marker, then the rename; frees w. */
int tupe_rtdprobe_commit(tupe_rtdprobe_writer *w, tupe_err *e);
void tupe_rtdprobe_abort(tupe_rtdprobe_writer *w);

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct tupe_rtdprobe {
    tupe_rtdprobe_info info;
    uint64_t count;              /* sequences */
    uint32_t max_len;
    /* sequence i: tokens [tok[i], tok[i] + len[i]) of ids and label; masked positions
     * [msk[i], msk[i] + nmask[i]) of mpos, morig, mkind (1: [MASK] shown to the generator) */
    uint64_t *key;
    uint32_t *len, *nmask;
    size_t *tok, *msk;
    int32_t *ids, *label, *mpos, *morig, *mkind;
} tupe_rtdprobe;

/* Reads and checks the whole file (TUPE_EDATA naming the byte where it is wrong; TUPE_ENOINPUT
 * if it cannot be opened). */
int tupe_rtdprobe_read(tupe_rtdprobe **p, const char *path, tupe_err *e);
void tupe_rtdprobe_free(tupe_rtdprobe *p);

/* Sequence i's generator input into gen [len]: the original ids with [MASK] where it was
 * masked; and the original ids into orig [len] (either may be NULL). */
void tupe_rtdprobe_inputs(const tupe_rtdprobe *p, uint64_t i, int32_t *gen, int32_t *orig);

#endif
