/* The compute backend: the tensor operations the model is made of, behind one interface so
 * that the same model code runs on the CPU (`cpu`: fp32, OpenBLAS sgemm for every matrix
 * product, OpenMP for the rest; backend_cpu.c) and on an NVIDIA GPU (`cuda` and `cuda-bf16`:
 * cuBLASLt for every product, the kernels of kernels/ for the rest).
 *
 * Device memory is opaque to the caller: buffers are `tupe_dev *`, which the model never
 * dereferences; it only offsets them with tupe_dev_at() and moves data with upload/download.
 * Integer buffers (token ids, lengths, positions, labels, bucket tables) are int32 on every
 * backend; the model uploads them (TUPE_I32) and passes them to the operations as
 * `const int32_t *`, which are device pointers like the others.
 *
 * Two kinds of real-valued buffers:
 *   real  elements of `esize` bytes: parameters, gradients, activations. 4 (fp32) on `cpu`
 *         and `cuda`; 8 on `cpu64` (double precision, for the finite-difference gradient
 *         checks); 2 (bfloat16) on `cuda-bf16`.
 *   wide  elements of `wsize` bytes, never less precise than fp32: LayerNorm statistics
 *         (rstd), the log-sum-exp of the cross-entropy, regression targets, the positional
 *         bias of the attention scores and its gradient accumulator (spec §10 keeps them in
 *         fp32), the AdamW moments and the fp32 master weights. wsize == esize except on
 *         `cuda-bf16` (2 and 4). The operations below say which arguments are wide.
 *
 * Mixed precision (`cuda-bf16`): activations, weights and gradients are bf16; every product
 * reads bf16 and accumulates in fp32 (cuBLASLt, CUBLAS_COMPUTE_32F); softmax, LayerNorm and
 * loss arithmetic is fp32 inside the kernels, and their statistics are stored wide. Because
 * the parameters are a bf16 copy, the model keeps an fp32 master copy of them (wide, same
 * layout) whenever wsize > esize: tupe_model_set/get and checkpoints go through the master,
 * and adamw updates the master from the bf16 gradient with fp32 moments, then writes the bf16
 * copy. On every other backend the parameters are their own master and `master` is NULL.
 *
 * Matrices are row-major. A linear layer y = x W^T + b keeps W as [out, in] (PyTorch's
 * layout). Gradient outputs accumulate (+=) unless a parameter says otherwise, so that
 * gradient accumulation over micro-batches is a matter of not zeroing.
 *
 * Dropout everywhere follows pointwise.h: a tupe_drop names the stream; p = 0 is the identity. */
#ifndef TUPE_BACKEND_H
#define TUPE_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "backend/pointwise.h"
#include "base/dtype.h"
#include "base/error.h"

typedef struct tupe_dev tupe_dev;   /* device memory (never dereferenced outside a backend) */

typedef struct tupe_drop {
    double p;           /* drop probability; 0 = off */
    uint64_t seed;
    uint32_t step;      /* training step (names the stream together with site) */
    uint32_t site;      /* which tensor: see model.c */
    uint64_t base;      /* index of this buffer's element 0 in the site's logical tensor */
    /* A step's parameter block (below), or NULL: a device backend's kernels then read step and
     * base from it (base = block[TUPE_PAR_OFFSET + slot] x per), equal to the two above, so
     * that the same work serves every step. The CPU reads the values above. */
    const tupe_dev *par;
    int slot;
    uint64_t per;
} tupe_drop;

/* The per-step parameter block: device doubles (TUPE_DBL) that hold what a training step's
 * kernels would otherwise take by value and that changes from step to step, written by one
 * upload at the step's start (a captured step replays with the next step's values; integers
 * below 2^53 are exact in a double). Then one sample offset per micro-batch of the step. */
enum {
    TUPE_PAR_STEP,      /* dropout's step */
    TUPE_PAR_LR,        /* AdamW's learning rate (before a tensor's scale) */
    TUPE_PAR_STEP_SIZE, /* AdamW's step size, bias corrections in (tupe_adamw_args) */
    TUPE_PAR_LOSS_NORM, /* the masked-LM loss's divisor (the step's masked positions) */
    TUPE_PAR_OFFSET     /* + micro-batch: its sequence 0's global index (dropout's base) */
};

enum tupe_act { TUPE_ACT_NONE = 0, TUPE_ACT_GELU, TUPE_ACT_TANH };

typedef struct tupe_backend tupe_backend;

struct tupe_backend {
    const char *name;   /* "cpu", "cpu64", "cuda", "cuda-bf16" */
    int esize;          /* bytes per real element */
    int wsize;          /* bytes per wide element (>= 4; == esize but on cuda-bf16) */
    int nthreads;       /* CPU threads the backend uses */
    void *priv;

    /* ---- memory ---- */
    tupe_dev *(*alloc)(tupe_backend *be, size_t bytes);      /* zeroed; NULL when out of memory */
    void (*free)(tupe_backend *be, tupe_dev *p);
    /* Host <-> device; host_dtype is TUPE_F32 or TUPE_F64 for real buffers (converted to or from
     * the backend's precision), the same | TUPE_WIDE for wide buffers, or TUPE_I32 for integer
     * buffers. On an asynchronous backend an upload may return before the copy is done (the
     * host buffer may be reused at once); a download returns when the data is there. */
    void (*upload)(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int host_dtype);
    void (*download)(tupe_backend *be, void *dst, const tupe_dev *src, size_t n, int host_dtype);
    /* The next step's inputs, uploaded while this step computes (train/pretrain.c): upload_ahead
     * is an upload into a buffer of the caller's, on a copy stream of its own, after the device
     * has done the ahead_take calls queued so far (so it never overwrites what a take still
     * reads); ahead_take copies `bytes` from such a buffer to another device buffer in the
     * order of the operations, after every upload_ahead so far (so it never reads a
     * half-written upload). The inputs the operations read keep their addresses (CUDA graphs
     * capture them). On the CPU both are plain copies. */
    void (*upload_ahead)(tupe_backend *be, tupe_dev *dst, const void *src, size_t n, int host_dtype);
    void (*ahead_take)(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, size_t bytes);
    void (*zero)(tupe_backend *be, tupe_dev *x, size_t n);
    void (*scale)(tupe_backend *be, tupe_dev *x, size_t n, double s);
    /* Sum of squares, accumulated in double in a fixed order (independent of thread count;
     * deterministic on every backend). */
    double (*sumsq)(tupe_backend *be, const tupe_dev *x, size_t n);
    /* The same for each run of `part` elements of x (the last one may be shorter), into
     * out[ceil(n / part)] on the host; each run's sum depends on its values only, not on where
     * it lies, so that ranks holding different runs of a buffer agree with one holding it all. */
    void (*sumsq_parts)(tupe_backend *be, const tupe_dev *x, size_t n, size_t part, double *out);
    /* y = x (accumulate 0) or y = y + x (accumulate 1) over n real elements, each sum rounded
     * once to the real type: partial gradients summed in an order of the caller's. */
    void (*add)(tupe_backend *be, tupe_dev *y, const tupe_dev *x, size_t n, int accumulate);

    /* ---- matrix products ---- */
    /* C = alpha op(A) op(B) + beta C; op(X) = X^T when tX. Row-major, leading dimensions given. */
    void (*gemm)(tupe_backend *be, int ta, int tb, int M, int N, int K, double alpha,
                 const tupe_dev *A, int lda, const tupe_dev *B, int ldb, double beta,
                 tupe_dev *C, int ldc);
    /* y[N,out] = x[N,in] W^T + b (b may be NULL); with act: a[N,out] = drop(act(y)), y keeps the
     * pre-activation. */
    void (*linear_fwd)(tupe_backend *be, tupe_dev *y, tupe_dev *a, const tupe_dev *x,
                       const tupe_dev *W, const tupe_dev *b, int N, int in, int out, int act,
                       const tupe_drop *drop);
    /* dW += dy^T x; db += column sums of dy (db may be NULL); dx = dx_beta dx + dy W (dx may be
     * NULL). dx is written last, so it may be the buffer x itself. */
    void (*linear_bwd)(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dW, tupe_dev *db,
                       const tupe_dev *dy, const tupe_dev *x, const tupe_dev *W, int N, int in,
                       int out);

    /* ---- element-wise ---- */
    /* a = drop(act(y)) over n elements (the recomputation behind linear_fwd's a). */
    void (*act_fwd)(tupe_backend *be, tupe_dev *a, const tupe_dev *y, size_t n, int act,
                    const tupe_drop *drop);
    /* d <- d * dropmask * act'(y), y the pre-activation; when a is not NULL, also
     * a = drop(act(y)) (the activation, recomputed in the same pass). */
    void (*act_bwd)(tupe_backend *be, tupe_dev *d, tupe_dev *a, const tupe_dev *y, size_t n,
                    int act, const tupe_drop *drop);

    /* ---- layer normalization (rows of D; xhat and rstd are kept for the backward; rstd is
     * wide in every operation below) ---- */
    void (*ln_fwd)(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                   const tupe_dev *x, const tupe_dev *gamma, const tupe_dev *beta, int N, int D,
                   double eps);
    /* dx = dx_beta dx + LN'(dy); dgamma, dbeta accumulate (here and in resid_ln_bwd and
     * embed_bwd both are required: no backend computes one without the other). */
    void (*ln_bwd)(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dgamma,
                   tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat, const tupe_dev *rstd,
                   const tupe_dev *gamma, int N, int D);
    /* Post-LN residual: y = LN(res + drop(a + bias)). */
    void (*resid_ln_fwd)(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                         const tupe_dev *res, const tupe_dev *a, const tupe_dev *bias,
                         const tupe_dev *gamma, const tupe_dev *beta, int N, int D, double eps,
                         const tupe_drop *drop);
    /* dsum = LN'(dy) (the gradient of res), dbranch = dsum * dropmask (the gradient of a). */
    void (*resid_ln_bwd)(tupe_backend *be, tupe_dev *dsum, tupe_dev *dbranch, tupe_dev *dgamma,
                         tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                         const tupe_dev *rstd, const tupe_dev *gamma, int N, int D,
                         const tupe_drop *drop);

    /* ---- embeddings ---- */
    /* y[b,t] = drop(LN(word[ids] + pos[t] + tt[types])) for t < lengths[b], 0 for padding.
     * pos, tt, types may be NULL. */
    void (*embed_fwd)(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                      const int32_t *ids, const int32_t *types, const int32_t *lengths,
                      const tupe_dev *word, const tupe_dev *pos, const tupe_dev *tt,
                      const tupe_dev *gamma, const tupe_dev *beta, int B, int T, int D,
                      double eps, const tupe_drop *drop);
    /* Backward of embed_fwd into the table gradients; `scratch` holds N*D reals. */
    void (*embed_bwd)(tupe_backend *be, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt,
                      tupe_dev *dgamma, tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                      const tupe_dev *rstd, const tupe_dev *gamma, const int32_t *ids,
                      const int32_t *types, const int32_t *lengths, int B, int T, int D, int V,
                      int ntypes, const tupe_drop *drop, tupe_dev *scratch);

    /* ---- attention ---- */
    /* qkv[B*T, 3D] holds Q | K | V; head h uses columns [h*dh, (h+1)*dh) of each. Per (b, h):
     * S = alpha Q K^T + bias (wide, or NULL: sequence b's [H,T,T] at bias + b * bias_bstride
     * wide elements, bias_bstride 0 when the sequences share one), keys j >= lengths[b]
     * masked, P = softmax(S), ctx = drop(P) V. What the backward pass needs is kept in one of
     * two forms: probs[B,H,T,T] = P (masked entries 0; the materialised attention, which every
     * backend has), or, with probs NULL, lse[B,H,T] (wide), the log-sum-exp of each row's
     * scores: the flash attention, where attn_flash is 1, whose memory grows linearly with T.
     * scratch: attn_scratch() reals (materialised only). */
    int attn_flash;
    void (*attn_fwd)(tupe_backend *be, tupe_dev *ctx, tupe_dev *probs, tupe_dev *lse,
                     const tupe_dev *qkv, const tupe_dev *bias, size_t bias_bstride,
                     const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                     const tupe_drop *drop, tupe_dev *scratch);
    /* Writes dqkv (overwriting), from the forward pass's probs (then replaced by dS, the
     * gradient of the scores) or, with probs NULL, its lse and ctx (and bias). With G (wide)
     * not NULL, the bias gradient: G[h] += dS[0,h] + dS[1,h] + ... in the order of b when
     * bias_bstride is 0, else G[b,h] += dS[b,h] at G + b * bias_bstride. */
    void (*attn_bwd)(tupe_backend *be, tupe_dev *dqkv, tupe_dev *G, tupe_dev *probs,
                     const tupe_dev *lse, const tupe_dev *ctx, const tupe_dev *dctx,
                     const tupe_dev *qkv, const tupe_dev *bias, size_t bias_bstride,
                     const int32_t *lengths, int B, int T, int H, int dh, double alpha,
                     const tupe_drop *drop, tupe_dev *scratch);
    size_t (*attn_scratch)(tupe_backend *be, int T);

    /* ---- positional terms ---- */
    /* bias[h,i,j] (T x T, wide) from the absolute correlation A[h] ((T+1) x (T+1), NULL for none):
     * with reset, row 0 = A[h,0,0], column 0 (i >= 1) = A[h,1,1], else A[h,i+1,j+1]; plus
     * rel[buckets[i*ldb + j], h] when rel is not NULL. */
    void (*pos_bias_fwd)(tupe_backend *be, tupe_dev *bias, const tupe_dev *A, const tupe_dev *rel,
                         const int32_t *buckets, int ldb, int T, int H, int reset);
    /* The transpose of pos_bias_fwd: dA (overwritten; NULL for none) and drel (+=) from G (wide). */
    void (*pos_bias_bwd)(tupe_backend *be, tupe_dev *dA, tupe_dev *drel, const tupe_dev *G,
                         const int32_t *buckets, int ldb, int T, int H, int reset);
    /* BERT-Ad: qkv[b,t, 0:D] += pq[t], qkv[b,t, D:2D] += pk[t]; and the gradient (+=). */
    void (*qk_pos_add)(tupe_backend *be, tupe_dev *qkv, const tupe_dev *pq, const tupe_dev *pk,
                       int B, int T, int D);
    void (*qk_pos_grad)(tupe_backend *be, tupe_dev *dpq, tupe_dev *dpk, const tupe_dev *dqkv,
                        int B, int T, int D);
    /* RoPE: the query and key columns of qkv[B*T, 3D] rotated in place, head by head (dh
     * columns each): pair t of position p by the angle whose cosine and sine are rot[p*dh + t]
     * and rot[p*dh + dh/2 + t] (wide); the pairs are (x_2t, x_2t+1) when interleaved, else
     * (x_t, x_t+dh/2). inverse: by minus the angle (the transpose: the gradient's way back). */
    void (*rope)(tupe_backend *be, tupe_dev *qkv, const tupe_dev *rot, int B, int T, int D,
                 int dh, int interleaved, int inverse);

    /* DeBERTa's disentangled terms as the attention's per-sequence bias (wide, [B,H,T,T]):
     * bias[b,h,i,j] = s (c2p[h, b*T+i, idx[i*T+j]] + p2c[h, b*T+j, idx[i*T+j]]), where
     * c2p[h] = Q_h PK_h^T and p2c[h] = K_h PQ_h^T ([H, B*T, W] real) are the content's scores
     * against the W relative rows in use and idx (int32 [T*T], in [0, W)) the row of (i, j). */
    void (*dis_bias_fwd)(tupe_backend *be, tupe_dev *bias, const tupe_dev *c2p,
                         const tupe_dev *p2c, const int32_t *idx, int B, int T, int H, int W,
                         double s);
    /* Its transpose, overwriting dc2p and dp2c ([H, B*T, W]) from G ([B,H,T,T], wide):
     * dc2p[h, b*T+i, c] = s sum of G[b,h,i,j] over the j whose idx is c, in the order of j;
     * dp2c[h, b*T+j, c] the same over i. */
    void (*dis_bias_bwd)(tupe_backend *be, tupe_dev *dc2p, tupe_dev *dp2c, const tupe_dev *G,
                         const int32_t *idx, int B, int T, int H, int W, double s);

    /* ---- heads and losses ---- */
    /* dst[m] = src[idx[m]]; idx[m] < 0: a padding row (the masked-LM head over a fixed number
     * of rows, model.h's tupe_batch.rows), dst[m] = 0. */
    void (*gather_rows)(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx,
                        int M, int D);
    /* dst[idx[m]] += src[m] (indices >= 0 distinct; a row whose index is < 0 is skipped: the
     * padding rows would otherwise all add to one row, a race on a parallel device). */
    void (*scatter_rows)(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx,
                         int M, int D);
    /* Cross-entropy of rows of logits[M, V] against labels; lse[M] (wide) kept. Row m starts at
     * logits + m * ld (ld >= V: the masked-LM head's rows are padded, model/params.h); columns
     * [V, ld) are never read. Adds the summed loss (natural log) to *loss and the number of
     * rows whose first maximal logit is the label to *correct (NULL: not counted). A label < 0
     * marks an ignored row (a padding row of the masked-LM head): loss 0, never correct, lse
     * 0, and in xent_bwd and xent_fused a gradient row of 0 (its logits unread). Device
     * doubles (TUPE_DBL), so that a step's scalars stay on the device until the host reads
     * them, once per logging interval (no wait here). */
    void (*xent_fwd)(tupe_backend *be, tupe_dev *lse, const tupe_dev *logits,
                     const int32_t *labels, int M, int V, int ld, tupe_dev *loss,
                     tupe_dev *correct);
    /* dlogits = scale (softmax(logits) - onehot) over columns [0, V) of rows of ld, and 0 in
     * columns [V, ld) (so that the products of the backward pass may run over ld columns); may
     * be computed in place (dlogits == logits). */
    void (*xent_bwd)(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                     const tupe_dev *lse, const int32_t *labels, int M, int V, int ld,
                     double scale);
    /* xent_fwd and xent_bwd of one training step in one pass over each row, the fused
     * classifier: *loss and *correct added to as xent_fwd's, and dlogits as xent_bwd's (pad
     * columns 0), with no lse kept; dlogits may be logits, which are then replaced by their
     * gradient. Results the same as xent_fwd's then xent_bwd's. snorm: NULL, or a device
     * double (a step's parameter block) holding norm with scale = 1.0 / norm, from which a
     * device backend takes the scale (the CPU takes `scale`). */
    void (*xent_fused)(tupe_backend *be, tupe_dev *dlogits, const tupe_dev *logits,
                       const int32_t *labels, int M, int V, int ld, double scale,
                       const tupe_dev *snorm, tupe_dev *loss, tupe_dev *correct);
    /* Adds the summed squared error of pred[M] against target[M] (wide) to *loss (a device
     * double, as above); and dpred = scale 2 (pred - target). */
    void (*mse_fwd)(tupe_backend *be, const tupe_dev *pred, const tupe_dev *target, int M,
                    tupe_dev *loss);
    void (*mse_bwd)(tupe_backend *be, tupe_dev *dpred, const tupe_dev *pred,
                    const tupe_dev *target, int M, double scale);

    /* ---- optimizer ---- */
    /* AdamW on n elements: p (real) and g (real), moments m and v (wide). With master (wide)
     * not NULL the update is made on the master and p receives its rounded copy. sumsq: the
     * gradient's global sum of squares, a device double (TUPE_DBL), from which the device
     * computes the clipping factor (tupe_clip_scale of its root, a->clip, a->clip_tf) without a
     * host wait; NULL: the factor is a->gscale. */
    void (*adamw)(tupe_backend *be, tupe_dev *p, const tupe_dev *g, tupe_dev *m, tupe_dev *v,
                  tupe_dev *master, size_t n, const tupe_adamw_args *a, const tupe_dev *sumsq);

    /* Asynchronous backends: 0, or the first device error since the backend was made (the
     * operations cannot return one); later operations are skipped. NULL on the CPU. */
    int (*check)(tupe_backend *be, tupe_err *e);
    void (*destroy)(tupe_backend *be);
};

/* Transfer flag: the device buffer is wide (upload, download). */
#define TUPE_WIDE 0x100
/* Transfer type: the device buffer holds doubles on every backend (a step's scalars: loss sums,
 * counts, the gradient's sum of squares), copied as they are; host_dtype TUPE_DBL alone. Such a
 * buffer is zeroed with zero(be, x, k * tupe_dbl_reals(be)) for k doubles. */
#define TUPE_DBL 0x200

/* "cpu" (fp32), "cpu64" (double precision, for gradient checks), "cuda" (fp32 on the GPU) or
 * "cuda-bf16" (bf16 mixed precision); "auto" is "cuda" when this build has the CUDA backend
 * and a GPU is present, else "cpu". threads 0 = the OpenMP default (OMP_NUM_THREADS or all
 * cores). The CUDA backends use GPU number `gpu` modulo the GPUs present (a launcher's local
 * rank). */
int tupe_backend_create(tupe_backend **be, const char *name, int threads, tupe_err *e);
int tupe_backend_create_on(tupe_backend **be, const char *name, int threads, int gpu, tupe_err *e);
void tupe_backend_destroy(tupe_backend *be);

/* The backend for the programs' --device and --precision: device "auto" (CUDA when this build
 * has it and a GPU is present, else the CPU), "cpu" or "cuda"; NULL (no --device) takes
 * $TUPE_DEVICE when it is set and not empty, else "auto"; precision "fp32", "bf16" or
 * NULL (bf16 on CUDA, fp32 on the CPU). When "auto" falls back to the CPU, notice (cap bytes)
 * receives a one-line reason, else "". Errors: TUPE_EUSAGE for an impossible choice (cuda
 * without a GPU or without the CUDA backend in this build, bf16 on the CPU). */
int tupe_backend_open(tupe_backend **be, const char *device, const char *precision, int threads,
                      int gpu, char *notice, size_t cap, tupe_err *e);

/* Number of CUDA devices usable by this process; 0 with the reason in why (cap bytes; "" in a
 * build without the CUDA backend). */
int tupe_cuda_devices(char *why, size_t cap);

/* The GPU of this process among the node's: the launcher's local rank (LOCAL_RANK,
 * OMPI_COMM_WORLD_LOCAL_RANK, SLURM_LOCALID or MPI_LOCALRANKID), else 0. */
int tupe_backend_local_gpu(void);

/* p + n real elements. */
static inline tupe_dev *tupe_dev_at(const tupe_backend *be, const tupe_dev *p, size_t n)
{
    return p ? (tupe_dev *)((char *)p + n * (size_t)be->esize) : NULL;
}

/* p + n doubles (TUPE_DBL buffers). */
static inline tupe_dev *tupe_dev_dat(const tupe_dev *p, size_t n)
{
    return p ? (tupe_dev *)((char *)p + n * sizeof(double)) : NULL;
}

/* Real elements of one double: what zero() is given per double of a TUPE_DBL buffer. */
static inline size_t tupe_dbl_reals(const tupe_backend *be)
{
    return sizeof(double) / (size_t)be->esize;
}

/* p + n wide elements. */
static inline tupe_dev *tupe_dev_wat(const tupe_backend *be, const tupe_dev *p, size_t n)
{
    return p ? (tupe_dev *)((char *)p + n * (size_t)be->wsize) : NULL;
}

#endif
