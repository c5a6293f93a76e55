/* The parameters of a model: names and shapes of the model contract (§2), their places in one
 * flat buffer (parameters, gradients and optimizer moments all share this layout), which ones
 * weight decay may exclude, and BERT initialization drawn from the counter-based RNG. */
#ifndef TUPE_PARAMS_H
#define TUPE_PARAMS_H

#include <stddef.h>
#include <stdint.h>

#include "model/config.h"

enum tupe_init {
    TUPE_INIT_NORMAL = 0,  /* N(0, initializer_range): linear weights, embeddings */
    TUPE_INIT_ZERO,        /* biases, LayerNorm beta */
    TUPE_INIT_ONE,         /* LayerNorm gamma */
    TUPE_INIT_FANIN        /* U(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default Linear
                              init, kept by the classification head (spec §5) */
};

#define TUPE_PARAM_NAME 80
#define TUPE_NONE ((size_t)-1)

typedef struct tupe_param {
    char name[TUPE_PARAM_NAME];
    int ndim;                   /* 1 or 2 */
    int shape[2];
    size_t offset;              /* in elements, from the start of the flat buffer */
    size_t numel;
    int init;                   /* enum tupe_init */
    int fan_in;                 /* for TUPE_INIT_FANIN */
    int no_decay;               /* a bias or LayerNorm parameter ("exclude_ln_bias") */
} tupe_param;

/* Offsets (TUPE_NONE when absent) of the tensors the model code addresses. The query, key and
 * value weights of a layer are adjacent, forming one [3D, D] matrix, and so are their biases. */
typedef struct tupe_layer_offsets {
    size_t qkv_w, qkv_b, o_w, o_b, ln1_g, ln1_b, f1_w, f1_b, f2_w, f2_b, ln2_g, ln2_b;
} tupe_layer_offsets;

typedef struct tupe_layout {
    tupe_param *t;
    size_t count;
    size_t total;               /* elements of the flat buffer (tensors are 16-aligned) */
    int vpad;                   /* the vocabulary padded (tupe_vocab_padded): the logits' ld */
    size_t nparams;             /* sum of numel: the parameter count */
    size_t word, pos_emb, tt_emb, emb_ln_g, emb_ln_b;
    size_t emb_proj_w, emb_proj_b;  /* embedding_size != hidden_size: [D, E] and [D] */
    size_t pos, pos_ln_g, pos_ln_b, pos_q_w, pos_q_b, pos_k_w, pos_k_b, rel;
    size_t drel, drel_ln_g, drel_ln_b;  /* deberta: the shared relative table [2k, D], its LN */
    tupe_layer_offsets *layer;
    size_t mlm_w, mlm_b, mlm_ln_g, mlm_ln_b, mlm_bias;
    size_t cls_w, cls_b, out_w, out_b;
    size_t rtd_w, rtd_b, rtd_out_w, rtd_out_b;  /* replaced-token head: [D, D], [D], [1, D], [1] */
} tupe_layout;

/* The masked-LM logits' leading dimension: the vocabulary rounded up to a multiple of 128
 * (30,522 -> 30,592), so that every logits row starts 256-byte aligned in bf16 and the
 * decoder's product runs in whole 128-column tiles, as llm.c pads GPT-2's (50,257 -> 50,304).
 * The word table and cls.predictions.bias are each followed in the flat buffer by their
 * vpad - V pad rows: zero, in no tensor (so never saved, never initialized, never counted),
 * and kept zero by the optimizer (zero gradient, zero weight); the decoder's product over
 * vpad rows then gives exactly 0 in the pad columns, which no loss reads (backend.h). */
#define TUPE_VOCAB_ALIGN 128
static inline int tupe_vocab_padded(int V)
{
    return (V + TUPE_VOCAB_ALIGN - 1) / TUPE_VOCAB_ALIGN * TUPE_VOCAB_ALIGN;
}

/* The layout of a configuration (vocab_size must be set). */
int tupe_layout_build(tupe_layout *lay, const tupe_config *c, tupe_err *e);
/* The same with the tensors placed from element `base` on and, when shared is not NULL, the
 * embedding tables and their LayerNorm not added but taken from `shared` (whose shapes must be
 * this configuration's): an ELECTRA generator's part of its pair's buffer (model/electra.c).
 * Its tensor list then holds only its own tensors. */
int tupe_layout_build_shared(tupe_layout *lay, const tupe_config *c, const tupe_layout *shared,
                             size_t base, tupe_err *e);
void tupe_layout_free(tupe_layout *lay);
const tupe_param *tupe_layout_find(const tupe_layout *lay, const char *name);

/* Initial values of one tensor (all numel of them) into out. Each tensor draws from its own
 * stream, named by the seed and the tensor's name, in blocks of 65,536 elements: the values
 * do not depend on the thread count or on which other tensors exist. */
void tupe_param_init_values(const tupe_param *p, double init_range, uint64_t seed, float *out);

#endif
