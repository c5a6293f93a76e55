/* Checkpoints: a directory holding
 *
 *   model.safetensors      every parameter (fp32, the names of the model contract), with the
 *                          configuration ("config"), the caller's training state
 *                          ("train_state") and a hash of every tensor ("tupe.tensor_xxh3") in
 *                          __metadata__; Python's safetensors loads it as it is
 *   optimizer.safetensors  the AdamW moments ("exp_avg.<name>", "exp_avg_sq.<name>") and the
 *                          optimizer's settings and step count ("optimizer")
 *
 * written under a temporary name and swapped into place in one step (tupe_dirtx), so that a
 * checkpoint directory that exists is complete. Reading checks shapes and hashes and names the
 * tensor that is wrong. */
#ifndef TUPE_CHECKPOINT_H
#define TUPE_CHECKPOINT_H

#include "base/error.h"
#include "model/config.h"
#include "model/model.h"
#include "model/optim.h"

#define TUPE_CKPT_MODEL_FILE "model.safetensors"
#define TUPE_CKPT_OPTIM_FILE "optimizer.safetensors"
/* What its .tupe-kind says (base/outdir.h): written by every program that saves one. */
#define TUPE_CKPT_KIND "checkpoint"

/* Write the checkpoint directory `dir` (replacing one that is there). opt may be NULL (no
 * optimizer file); train_state is a JSON object's text, or NULL. */
int tupe_ckpt_save(const char *dir, tupe_model *m, tupe_adamw *opt, const char *train_state,
                   tupe_err *e);
/* The same with the moments given (exp_avg then exp_avg_sq, the layout's total floats each,
 * on the host; NULL: opt's), for an optimizer sharded over ranks (ZeRO-1) whose moments the
 * caller gathered; opt gives the settings and the step count. */
int tupe_ckpt_save_moments(const char *dir, tupe_model *m, tupe_adamw *opt, const float *moments,
                           const char *train_state, tupe_err *e);

/* The configuration stored in a checkpoint (`path` is the directory or its model file). */
int tupe_ckpt_config(const char *path, tupe_config *c, tupe_err *e);

enum tupe_ckpt_flags {
    /* Head tensors ("cls." and "classifier.") may be missing from the file (they keep their
     * current values) or present without a place in the model (ignored): for fine-tuning a
     * pre-trained model with a new head. The encoder must still match exactly. An ELECTRA
     * pair's checkpoint (model/electra.h) loads its discriminator's encoder: the generator
     * and the replaced-token head count as heads. */
    TUPE_CKPT_HEADS_OPTIONAL = 1
};

/* Load parameters into m; when opt is not NULL, the optimizer state too (its file must be
 * there). *train_state, when not NULL, receives a malloc'd copy of the stored training state
 * (NULL when there is none). The configuration must describe the same encoder as m's. */
int tupe_ckpt_load(const char *path, tupe_model *m, tupe_adamw *opt, char **train_state,
                   int flags, tupe_err *e);

#endif
