/* Layer normalization: forward (plain, and the post-LN residual with its bias and dropout) and
 * backward, one block per row, statistics in fp32; dgamma and dbeta through the column sums of
 * matmul.cu. */
#include "layernorm.cuh"
#include "matmul.cuh"

template <class T>
__global__ void k_ln_fwd(T *y, T *xh, float *rs, const T *x, const T *res, const T *bias,
                         const T *g, const T *b, int D, float eps, dropk d)
{
    dpar(d);
    extern __shared__ float buf[];
    __shared__ float red[32];
    int r = blockIdx.x;
    size_t o = (size_t)r * D;
    float s = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float v;
        if (res) {
            v = dropv(d, d.base + o + j, ldv(x, o + j) + (bias ? ldv(bias, j) : 0.0f));
            v = v + ldv(res, o + j);
        } else {
            v = ldv(x, o + j);
        }
        buf[j] = v;
        s += v;
    }
    dropk none;
    none.on = 0;
    ln_row(y, xh, rs, r, buf, s, g, b, D, eps, red, none);
}

/* One block per row: v = rstd (dy*gamma - mean(dy*gamma) - xhat mean(dy*gamma*xhat));
 * dx = beta dx + v. With dbr: dbr = drop(v) (the branch of a residual). With sel.lens, rows
 * of padding are skipped (left as they are). dx may be dy. */
template <class T>
__global__ void k_ln_bwd(T *dx, float beta, T *dbr, const T *dy, const T *xh, const float *rs,
                         const T *g, int D, dropk d, rowsel sel)
{
    dpar(d);
    __shared__ float red[32];
    int r = blockIdx.x;
    if (!row_in(sel, r))
        return;
    size_t o = (size_t)r * D;
    float sg = 0, sgx = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float gv = ldv(dy, o + j) * ldv(g, j);
        sg += gv;
        sgx += gv * ldv(xh, o + j);
    }
    float mg = block_sum(sg, red) / (float)D;
    float mgx = block_sum(sgx, red) / (float)D;
    float rsv = rs[r];
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float v = rsv * (ldv(dy, o + j) * ldv(g, j) - mg - ldv(xh, o + j) * mgx);
        if (beta != 0.0f)
            v = beta * ldv(dx, o + j) + v;
        stv(dx, o + j, v);
        if (dbr)
            stv(dbr, o + j, dropv(d, d.base + o + j, v));
    }
}

#define LNB_ROWS 32 /* rows per block of the one-kernel backward */

/* The LayerNorm backward and its parameter gradients in one kernel: block c takes rows
 * [c LNB_ROWS, (c + 1) LNB_ROWS), writes each row's dx (and dbr) as k_ln_bwd does, and sums
 * dy xhat and dy of its rows per column, in row order (each thread its own columns, in shared
 * memory), into part[c]; the block that finishes last adds the blocks' sums to dg and db, in
 * block order (the integer count of finished blocks says which is last; the order of the sum
 * is fixed whatever it is). The count returns to 0 for the next launch. Shared memory: 2 D. */
template <class T>
__global__ void k_ln_bwd_fused(T *dx, float beta, T *dbr, T *dg, T *db, float *part,
                               unsigned *count, const T *dy, const T *xh, const float *rs,
                               const T *g, int N, int D, dropk d)
{
    dpar(d);
    extern __shared__ float acc[];
    __shared__ float red[32];
    __shared__ unsigned last;
    float *ag = acc, *ab = acc + D;
    for (int j = threadIdx.x; j < D; j += blockDim.x)
        ag[j] = 0.0f, ab[j] = 0.0f;
    int r1 = min(N, ((int)blockIdx.x + 1) * LNB_ROWS);
    for (int r = blockIdx.x * LNB_ROWS; r < r1; r++) {
        size_t o = (size_t)r * D;
        float sg = 0, sgx = 0;
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            float dv = ldv(dy, o + j), xv = ldv(xh, o + j), gv = dv * ldv(g, j);
            sg += gv;
            sgx += gv * xv;
            ag[j] += dv * xv;
            ab[j] += dv;
        }
        float mg = block_sum(sg, red) / (float)D;
        float mgx = block_sum(sgx, red) / (float)D;
        float rsv = rs[r];
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            float v = rsv * (ldv(dy, o + j) * ldv(g, j) - mg - ldv(xh, o + j) * mgx);
            if (beta != 0.0f)
                v = beta * ldv(dx, o + j) + v;
            stv(dx, o + j, v);
            if (dbr)
                stv(dbr, o + j, dropv(d, d.base + o + j, v));
        }
    }
    float *pg = part + (size_t)blockIdx.x * 2 * D, *pb = pg + D;
    for (int j = threadIdx.x; j < D; j += blockDim.x)
        pg[j] = ag[j], pb[j] = ab[j];
    __threadfence(); /* the sums are visible before the count says this block is done */
    __syncthreads();
    if (threadIdx.x == 0)
        last = atomicAdd(count, 1u) == gridDim.x - 1;
    __syncthreads();
    if (!last)
        return;
    __threadfence();
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float tg = 0, tb = 0;
        for (unsigned c = 0; c < gridDim.x; c++) {
            tg += part[(size_t)c * 2 * D + j];
            tb += part[(size_t)c * 2 * D + D + j];
        }
        stv(dg, j, ldv(dg, j) + tg);
        stv(db, j, ldv(db, j) + tb);
    }
    if (threadIdx.x == 0)
        *count = 0;
}

template <class T>
void ln_bwd_rows(cu_priv *pr, T *dx, float beta, T *dbr, const T *dy, const T *xh,
                 const float *rs, const T *g, int N, int D, dropk d, rowsel sel)
{
    k_ln_bwd<T><<<(unsigned)N, BS, 0, pr->s>>>(dx, beta, dbr, dy, xh, rs, g, D, d, sel);
    LAUNCHED("k_ln_bwd");
}

template void ln_bwd_rows<float>(cu_priv *, float *, float, float *, const float *,
                                 const float *, const float *, const float *, int, int, dropk,
                                 rowsel);
template void ln_bwd_rows<bf16>(cu_priv *, bf16 *, float, bf16 *, const bf16 *, const bf16 *,
                                const float *, const bf16 *, int, int, dropk, rowsel);

template <class T>
static void ln_fwd_t(cu_priv *pr, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd, const tupe_dev *x,
                     const tupe_dev *res, const tupe_dev *bias, const tupe_dev *g,
                     const tupe_dev *b, int N, int D, double eps, const tupe_drop *drop)
{
    dropk dk = drop_bits(pr, drop, (size_t)N * D); /* a launch of its own: not in the arguments */
    k_ln_fwd<T><<<(unsigned)N, BS, ln_smem(D), pr->s>>>(
        (T *)y, (T *)xhat, (float *)rstd, (const T *)x, (const T *)res, (const T *)bias,
        (const T *)g, (const T *)b, D, (float)eps, dk);
    LAUNCHED("k_ln_fwd");
}

int ln_ok(cu_priv *pr, int N, int D)
{
    if (pr->err || N <= 0 || D <= 0)
        return 0;
    /* 48 KiB without the opt-in holds the dynamic buffer and the static red[32] together */
    if (ln_smem(D) + 32 * sizeof(float) > 48 * 1024) {
        set_err(pr, "%s%s", "layer normalization over more than 12256 features", "");
        return 0;
    }
    return 1;
}

void cu_ln_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                      const tupe_dev *x, const tupe_dev *gamma, const tupe_dev *beta, int N, int D,
                      double eps)
{
    cu_priv *pr = PR(be);
    if (!ln_ok(pr, N, D))
        return;
    if (pr->bf16)
        ln_fwd_t<bf16>(pr, y, xhat, rstd, x, NULL, NULL, gamma, beta, N, D, eps, NULL);
    else
        ln_fwd_t<float>(pr, y, xhat, rstd, x, NULL, NULL, gamma, beta, N, D, eps, NULL);
}

void cu_resid_ln_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                            const tupe_dev *res, const tupe_dev *a, const tupe_dev *bias,
                            const tupe_dev *gamma, const tupe_dev *beta, int N, int D, double eps,
                            const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (!ln_ok(pr, N, D))
        return;
    if (pr->bf16)
        ln_fwd_t<bf16>(pr, y, xhat, rstd, a, res, bias, gamma, beta, N, D, eps, drop);
    else
        ln_fwd_t<float>(pr, y, xhat, rstd, a, res, bias, gamma, beta, N, D, eps, drop);
}

template <class T>
static void ln_bwd_t(cu_priv *pr, tupe_dev *dx, double dx_beta, tupe_dev *dbr, tupe_dev *dg,
                     tupe_dev *db, const tupe_dev *dy, const tupe_dev *xhat, const tupe_dev *rstd,
                     const tupe_dev *g, int N, int D, const tupe_drop *drop)
{
    /* One kernel where the block's column sums fit its shared memory (with red and last). */
    size_t smem = 2 * (size_t)D * sizeof(float);
    if (dx && db && dg && smem + 33 * sizeof(float) <= 48 * 1024) {
        unsigned nb = (unsigned)((N + LNB_ROWS - 1) / LNB_ROWS);
        float *part = (float *)scratch(pr, SC_COL, (size_t)nb * smem);
        unsigned *count = done_count(pr);
        dropk dk = drop_bits(pr, drop, (size_t)N * D); /* it may launch: not in the arguments */
        if (!part || !count || pr->err)
            return;
        k_ln_bwd_fused<T><<<nb, BS, smem, pr->s>>>(
            (T *)dx, (float)dx_beta, (T *)dbr, (T *)dg, (T *)db, part, count, (const T *)dy,
            (const T *)xhat, (const float *)rstd, (const T *)g, N, D, dk);
        LAUNCHED("k_ln_bwd_fused");
        return;
    }
    /* Parameter gradients first: dx may be dy. */
    if (db)
        colsums<T>(pr, (T *)dg, (T *)db, (const T *)dy, (const T *)xhat, N, D, all_rows());
    if (!dx || pr->err)
        return;
    ln_bwd_rows<T>(pr, (T *)dx, (float)dx_beta, (T *)dbr, (const T *)dy, (const T *)xhat,
                   (const float *)rstd, (const T *)g, N, D, drop_bits(pr, drop, (size_t)N * D),
                   all_rows());
}

void cu_ln_bwd(tupe_backend *be, tupe_dev *dx, double dx_beta, tupe_dev *dgamma,
                      tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                      const tupe_dev *rstd, const tupe_dev *gamma, int N, int D)
{
    cu_priv *pr = PR(be);
    if (pr->err || N <= 0 || D <= 0)
        return;
    if (pr->bf16)
        ln_bwd_t<bf16>(pr, dx, dx_beta, NULL, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, NULL);
    else
        ln_bwd_t<float>(pr, dx, dx_beta, NULL, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, NULL);
}

void cu_resid_ln_bwd(tupe_backend *be, tupe_dev *dsum, tupe_dev *dbranch, tupe_dev *dgamma,
                            tupe_dev *dbeta, const tupe_dev *dy, const tupe_dev *xhat,
                            const tupe_dev *rstd, const tupe_dev *gamma, int N, int D,
                            const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (pr->err || N <= 0 || D <= 0)
        return;
    if (pr->bf16)
        ln_bwd_t<bf16>(pr, dsum, 0, dbranch, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, drop);
    else
        ln_bwd_t<float>(pr, dsum, 0, dbranch, dgamma, dbeta, dy, xhat, rstd, gamma, N, D, drop);
}
