/* A checkpoint opened for inspection (tupe-attnviz): its model on the CPU backend, run in
 * evaluation mode (no dropout); its tensors as host copies in double precision; the attention
 * probabilities of one input; and the two dense helpers the inspection modules share (rows
 * through a linear layer, LayerNorm of rows), computed in double precision so that what is
 * drawn does not depend on summation order or thread count beyond rounding. */
#ifndef TUPE_INSPECT_H
#define TUPE_INSPECT_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "base/error.h"
#include "model/config.h"
#include "model/model.h"

typedef struct tupe_inspect {
    tupe_backend *be;
    tupe_model *m;
    tupe_config cfg;        /* the checkpoint's configuration (num_labels set to 0: MLM head) */
    char *train_state;      /* the stored training state (JSON text), or NULL */
    const char *path;       /* as given */
} tupe_inspect;

/* Load the checkpoint at `path` (its directory or its model file) into a model that runs one
 * sequence of up to `seq` tokens at a time (0: max_position_embeddings; 1 when only the
 * parameters are read; more than the model's positions: TUPE_EUSAGE). Head tensors are optional, so pre-trained and fine-tuned checkpoints
 * both load; the encoder must be complete. threads 0 = the default. */
int tupe_inspect_open(tupe_inspect *in, const char *path, int threads, int seq, tupe_err *e);
void tupe_inspect_close(tupe_inspect *in);

/* A vocabulary (or token ids made with one: a shard directory), named `what`, must be the
 * model's: the same size, and the same hash when the checkpoint's training state records one
 * (tupe-pretrain does). TUPE_EDATA otherwise, naming both. */
int tupe_inspect_check_vocab(const tupe_inspect *in, uint32_t size, uint64_t hash,
                             const char *what, tupe_err *e);

/* A parameter (a name of the model contract) as a malloc'd array of its numel doubles;
 * *n (when not NULL) receives numel. A NaN or infinity in it is TUPE_EDATA naming the tensor:
 * nothing non-finite is drawn. */
int tupe_inspect_tensor(tupe_inspect *in, const char *name, double **out, size_t *n, tupe_err *e);

/* One forward pass over ids[0..len) (len <= the `seq` given at open; token types 0) and the
 * attention probabilities of every layer: probs[L, H, len, len], row = query, in the layout
 * Hugging Face returns with output_attentions=True (what bertviz reads). Probabilities that
 * are not finite are TUPE_EDATA naming the parameter they come from (or the layer). */
int tupe_inspect_attn(tupe_inspect *in, const int32_t *ids, int len, float *probs, tupe_err *e);

/* y[r] = W x[r] + b for rows r < rows: x [rows, nin], W [nout, nin] (PyTorch's layout),
 * b [nout] or NULL, y [rows, nout]. */
void tupe_rows_linear(const double *x, int rows, int nin, const double *w, const double *b,
                      int nout, double *y);
/* y[r] = g * (x[r] - mean) / sqrt(var + eps) + b, per row (biased variance, as LayerNorm). */
void tupe_rows_layernorm(const double *x, int rows, int n, const double *g, const double *b,
                         double eps, double *y);

#endif
