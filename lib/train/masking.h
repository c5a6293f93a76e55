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

#endif
