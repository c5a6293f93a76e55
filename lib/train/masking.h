/* Dynamic masking for masked-LM pre-training, as fairseq/RoBERTa do it (tupe-spec §6):
 *
 *   count = floor(prob · len + u), u uniform in [0, 1)   (probabilistic rounding)
 *   positions chosen uniformly without replacement over the whole sample ([CLS]/[SEP] too)
 *   each chosen position: 80% [MASK], 10% a random token, 10% left unchanged
 *   target = the original token at every chosen position
 *
 * The random numbers come from Philox keyed by the seed, with the stream named by
 * (epoch, sample index): any rank, thread or resumed run draws the same masks for the same
 * sample in the same epoch, and a new epoch gives new masks. */
#ifndef TUPE_MASKING_H
#define TUPE_MASKING_H

#include <stddef.h>
#include <stdint.h>

typedef struct tupe_mask_cfg {
    uint64_t seed;
    double prob;               /* 0.15 */
    double mask_frac;          /* 0.8: of the chosen positions, replaced by mask_id */
    double random_frac;        /* 0.1: replaced by a random token; the rest stay unchanged */
    int32_t mask_id;
    const int32_t *random_ids; /* the ids random replacements are drawn from (uniformly) */
    size_t n_random;
} tupe_mask_cfg;

/* The epoch used for evaluation masks: fixed, so that validation losses are comparable
 * across checkpoints and variants. */
#define TUPE_MASK_EVAL_EPOCH 0xFFFFFFFFu

/* Mask ids[0..len) in place. Writes the chosen positions (ascending) to pos and their
 * original ids to label; both need room for len entries. Returns the number chosen. */
int tupe_mask_sample(const tupe_mask_cfg *cfg, uint32_t epoch, uint64_t sample, int32_t *ids,
                     int len, int32_t *pos, int32_t *label);

/* ELECTRA's masking (google-research/electra pretrain_helpers.mask; shared/docs/electra.md §1.3):
 *
 *   candidates = every position whose id is none of the `nspecial` ids (ELECTRA's: [CLS],
 *                [SEP], [MASK]; tupe-pretrain adds [PAD])
 *   count      = max(1, min(cap, round(prob · len), candidates)), len counting the specials,
 *                rounded half to even as tf.round
 *   positions  drawn uniformly WITHOUT replacement (ELECTRA draws with replacement and keeps
 *              the duplicates, about 1.3 per sequence of 128: a duplicate counts twice in the
 *              MLM loss and its two samples are averaged into a token id by scatter_update, a
 *              quirk of TF's integer scatter; drawn without replacement every chosen position
 *              is one prediction and one replacement, and the rate is the 15% asked for)
 *   each chosen position: mask_frac (0.85) [MASK], the rest unchanged; no random tokens
 *
 * Streams as tupe_mask_sample's (another purpose tag): the same (seed, epoch, sample) gives
 * the same positions on every rank and on resume. cap <= 0: no cap. */
int tupe_mask_electra(const tupe_mask_cfg *cfg, const int32_t *special, int nspecial, int cap,
                      uint32_t epoch, uint64_t sample, int32_t *ids, int len, int32_t *pos,
                      int32_t *label);

#endif
