/* ELECTRA (Clark et al., ICLR 2020; shared/docs/electra.md): a generator and a discriminator
 * trained together, as one model of model.h whose configuration has generator_hidden_size > 0.
 *
 * The configuration is the discriminator's. The generator has the same depth, positional
 * encoding and embedding width, and is narrower: hidden = round(hidden_size x
 * generator_hidden_size), heads = max(1, hidden / 64), FFN 4 x hidden (ELECTRA's
 * get_generator_config). The two share the word, position and token-type tables and the
 * embedding LayerNorm (ELECTRA's one `electra/embeddings` scope); each network projects them
 * to its width (`embeddings_project`) where the widths differ. The positional terms of the
 * encoder (TUPE's table, LayerNorm, U^Q and U^K, the relative bias; BERT-Ad's) are each
 * network's own: at different widths they cannot be shared, and the paper does not say.
 *
 * One flat buffer (params.h) holds the discriminator's tensors with the names of a plain
 * model plus `discriminator_predictions.*` (Hugging Face's ElectraForPreTraining), then the
 * generator's under `generator.` with its head as `generator_predictions.*` and
 * `generator_lm_head.bias` (its decoder is the shared word table): one optimizer, one
 * all-reduce, one checkpoint for both.
 *
 * A forward pass (training or evaluation):
 *   1. the generator's masked-LM loss at the masked positions, over the masked input;
 *   2. at each masked position a token drawn from the generator's softmax by Gumbel-max at
 *      temperature 1, u from Philox named by (noise_seed, noise_step, the sequence's key,
 *      position, vocabulary index), g = -log(-log(u + 1e-9) + 1e-9) as ELECTRA computes it;
 *      no gradient flows through the sample;
 *   3. the discriminator reads the original sequence with every masked position replaced by
 *      its sample; label 1 where the sample differs from the original (a correct sample is
 *      "real"), and its sigmoid loss is over every non-padding token;
 *   4. loss = MLM / loss_norm + rtd_weight x RTD / rtd_norm.
 * The backward pass runs the generator's, then the discriminator's; both add into the shared
 * tables' gradients. */
#ifndef TUPE_ELECTRA_H
#define TUPE_ELECTRA_H

#include <stddef.h>

#include "model/model.h"

#define TUPE_ELECTRA_RTD_WEIGHT 50.0   /* lambda of ELECTRA's total loss */

typedef struct tupe_electra tupe_electra;

/* The two networks' configurations (generator_hidden_size 0 in both; the discriminator's
 * with the replaced-token head). */
void tupe_electra_configs(const tupe_config *pair, tupe_config *gen, tupe_config *disc);
/* ELECTRA's default generator fraction for a discriminator of this width: 1/3 for 768 (Base),
 * 1/4 otherwise (Small, Large). */
double tupe_electra_default_fraction(int hidden_size);

/* The pair's layout (model.c calls it for a pair configuration). */
int tupe_electra_layout(tupe_layout *lay, const tupe_config *pair, tupe_err *e);
/* The two networks over the model m's buffers (model.c, once they exist). */
int tupe_electra_create(tupe_electra **p, tupe_model *m, const tupe_capacity *cap, tupe_err *e);
void tupe_electra_free(tupe_electra *p);
int tupe_electra_forward(tupe_electra *p, const tupe_batch *b, const tupe_step *st,
                         tupe_fwd_out *out, tupe_err *e);
int tupe_electra_backward(tupe_electra *p, tupe_err *e);
void tupe_electra_grad_target(tupe_electra *p, tupe_dev *dst);
void tupe_electra_on_grad_ready(tupe_electra *p, tupe_grad_ready_fn fn, void *ctx);
size_t tupe_electra_grad_groups(const tupe_electra *p, size_t *lo, size_t cap);

/* The pair of a model made from a pair configuration (NULL otherwise), and its networks. */
tupe_electra *tupe_model_pair(tupe_model *m);
tupe_model *tupe_electra_generator(tupe_electra *p);
tupe_model *tupe_electra_discriminator(tupe_electra *p);
/* What the last forward pass drew and scored, [B*T] each (valid until the next forward):
 * the discriminator's input, its labels, and its logit at every position (0 for padding). */
const int32_t *tupe_electra_corrupted(const tupe_electra *p);
const int32_t *tupe_electra_labels(const tupe_electra *p);
int tupe_electra_scores(tupe_electra *p, float *dst, size_t n, tupe_err *e);

/* Gumbel-max over one row of logits [V] with the noise of (seed, step, key, pos): the
 * generator's sample (exposed for the tests). */
int tupe_electra_sample(const float *logits, int V, uint64_t seed, uint32_t step, uint64_t key,
                        int pos);

#endif
