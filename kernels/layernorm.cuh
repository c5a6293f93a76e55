/* Layer normalization (layernorm.cu); ln_row is also the embeddings' last step. */
#ifndef TUPE_KERNELS_LAYERNORM_CUH
#define TUPE_KERNELS_LAYERNORM_CUH

#include "common.cuh"

/* The LayerNorm of row r, whose D inputs (fp32) are in buf and sum to s: xhat, rstd, and
 * y = drop(xhat gamma + beta) (dropout here only on the embeddings' output). Every thread of
 * the block calls it. */
template <class T>
__device__ void ln_row(T *y, T *xh, float *rs, int r, const float *buf, float s, const T *g,
                       const T *b, int D, float eps, float *red, const dropk &d)
{
    size_t o = (size_t)r * D;
    float mean = block_sum(s, red) / (float)D;
    float q = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float t = buf[j] - mean;
        q += t * t;
    }
    float var = block_sum(q, red) / (float)D;
    float rsv = 1.0f / sqrtf(var + eps);
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float h = (buf[j] - mean) * rsv;
        stv(xh, o + j, h);
        stv(y, o + j, dropv(d, d.base + o + j, h * ldv(g, j) + ldv(b, j)));
    }
    if (threadIdx.x == 0)
        rs[r] = rsv;
}

/* One block per row; the row's input in shared memory (fp32), D floats.
 * Input v = x (plain LN), or drop(a + bias) + res (post-LN residual). */

static inline size_t ln_smem(int D) { return (size_t)D * sizeof(float); }

/* Whether rows of D features fit the one-block-per-row kernels (else the error is kept). */
int ln_ok(cu_priv *pr, int N, int D);

/* One block per row r < N (rows outside sel left as they are): v = LN'(dy) of the row,
 * dx = beta dx + v, and with dbr, dbr = drop(v). dx may be dy. */
template <class T>
void ln_bwd_rows(cu_priv *pr, T *dx, float beta, T *dbr, const T *dy, const T *xh,
                 const float *rs, const T *g, int N, int D, dropk d, rowsel sel);

void cu_ln_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd, const tupe_dev *x,
               const tupe_dev *gamma, const tupe_dev *beta, int N, int D, double eps);
void cu_resid_ln_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                     const tupe_dev *res, const tupe_dev *a, const tupe_dev *bias,
                     const tupe_dev *gamma, const tupe_dev *beta, int N, int D, double eps,
                     const tupe_drop *drop);
void cu_ln_bwd(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dgamma, tupe_dev *dbeta,
               const tupe_dev *dy, const tupe_dev *xhat, const tupe_dev *rstd,
               const tupe_dev *gamma, int N, int D);
void cu_resid_ln_bwd(tupe_backend *be, tupe_dev *dsum, tupe_dev *dbranch, tupe_dev *dgamma,
                     tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                     const tupe_dev *rstd, const tupe_dev *gamma, int N, int D,
                     const tupe_drop *drop);

#endif
