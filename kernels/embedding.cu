/* Embeddings: word + position + token type, LayerNorm and dropout in one kernel per row; the
 * backward into the tables (word rows through the sorted scatter-add of scatter.cu); gathers
 * and scatters of rows (the MLM head's masked rows). */
#include "embedding.cuh"
#include "layernorm.cuh"
#include "matmul.cuh"
#include "scatter.cuh"

template <class T>
__global__ void k_embed_fwd(T *y, T *xh, float *rs, const int32_t *ids, const int32_t *types,
                            const int32_t *lens, const T *word, const T *pos, const T *tt,
                            const T *g, const T *b, int T_, int D, float eps, dropk d)
{
    dpar(d);
    extern __shared__ float buf[];
    __shared__ float red[32];
    int r = blockIdx.x, bi = r / T_, t = r % T_;
    size_t o = (size_t)r * D;
    if (t >= lens[bi]) {
        for (int j = threadIdx.x; j < D; j += blockDim.x) {
            stv(y, o + j, 0.0f);
            stv(xh, o + j, 0.0f);
        }
        if (threadIdx.x == 0)
            rs[r] = 0;
        return;
    }
    size_t wo = (size_t)ids[r] * D, to = (size_t)(types ? types[r] : 0) * D;
    float s = 0;
    for (int j = threadIdx.x; j < D; j += blockDim.x) {
        float v = ldv(word, wo + j);
        if (pos)
            v += ldv(pos, (size_t)t * D + j);
        if (tt)
            v += ldv(tt, to + j);
        buf[j] = v;
        s += v;
    }
    ln_row(y, xh, rs, r, buf, s, g, b, D, eps, red, d);
}

template <class T>
static void embed_fwd_t(cu_priv *pr, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                        const int32_t *ids, const int32_t *types, const int32_t *lengths,
                        const tupe_dev *word, const tupe_dev *pos, const tupe_dev *tt,
                        const tupe_dev *gamma, const tupe_dev *beta, int B, int T_, int D,
                        double eps, const tupe_drop *drop)
{
    dropk dk = drop_bits(pr, drop, (size_t)B * T_ * D); /* a launch: not in the arguments */
    k_embed_fwd<T><<<(unsigned)(B * T_), BS, ln_smem(D), pr->s>>>(
        (T *)y, (T *)xhat, (float *)rstd, ids, types, lengths, (const T *)word, (const T *)pos,
        (const T *)tt, (const T *)gamma, (const T *)beta, T_, D, (float)eps, dk);
    LAUNCHED("k_embed_fwd");
}

void cu_embed_fwd(tupe_backend *be, tupe_dev *y, tupe_dev *xhat, tupe_dev *rstd,
                         const int32_t *ids, const int32_t *types, const int32_t *lengths,
                         const tupe_dev *word, const tupe_dev *pos, const tupe_dev *tt,
                         const tupe_dev *gamma, const tupe_dev *beta, int B, int T, int D,
                         double eps, const tupe_drop *drop)
{
    cu_priv *pr = PR(be);
    if (!ln_ok(pr, B * T, D))
        return;
    if (pr->bf16)
        embed_fwd_t<bf16>(pr, y, xhat, rstd, ids, types, lengths, word, pos, tt, gamma, beta, B,
                          T, D, eps, drop);
    else
        embed_fwd_t<float>(pr, y, xhat, rstd, ids, types, lengths, word, pos, tt, gamma, beta, B,
                           T, D, eps, drop);
}

/* s = drop(dy) on tokens, 0 on padding. */
template <class T>
__global__ void k_embed_s(T *s, const T *dy, const int32_t *lens, int T_, int D, size_t n,
                          dropk d)
{
    dpar(d);
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    int r = (int)(i / (size_t)D);
    if (r % T_ >= lens[r / T_])
        stv(s, i, 0.0f);
    else
        stv(s, i, dropv(d, d.base + i, ldv(dy, i)));
}

/* Sort keys of the rows: the destination row, or `none` for rows that add nothing. */
__global__ void k_embed_keys(unsigned *keys, unsigned *vals, const int32_t *ids,
                             const int32_t *lens, int T_, int N, int V)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= N)
        return;
    int id = ids[r];
    bool use = r % T_ < lens[r / T_] && id >= 0 && id < V;
    keys[r] = use ? (unsigned)id : (unsigned)V;
    vals[r] = (unsigned)r;
}

template <class T> __global__ void k_dpos(T *dpos, const T *s, int B, int T_, int D)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (size_t)T_ * D)
        return;
    float acc = ldv(dpos, i);
    for (int b = 0; b < B; b++)
        acc += ldv(s, (size_t)b * T_ * D + i);
    stv(dpos, i, acc);
}

template <class T>
static void embed_bwd_t(cu_priv *pr, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt,
                        tupe_dev *dg, tupe_dev *db, const tupe_dev *dy, const tupe_dev *xhat,
                        const tupe_dev *rstd, const tupe_dev *g, const int32_t *ids,
                        const int32_t *types, const int32_t *lengths, int B, int T_, int D, int V,
                        int ntypes, const tupe_drop *drop, tupe_dev *scr)
{
    int N = B * T_;
    size_t n = (size_t)N * D;
    T *s = (T *)scr;
    dropk dk = drop_bits(pr, drop, n);
    k_embed_s<T><<<nblocks(n, 256), 256, 0, pr->s>>>(s, (const T *)dy, lengths, T_, D, n, dk);
    LAUNCHED("k_embed_s");
    colsums<T>(pr, (T *)dg, (T *)db, s, (const T *)xhat, N, D, all_rows());
    rowsel tok = {lengths, T_, NULL, -1};
    if (pr->err)
        return;
    dropk none = mkdrop(NULL);
    ln_bwd_rows<T>(pr, s, 0.0f, NULL, s, (const T *)xhat, (const float *)rstd, (const T *)g, N, D,
                   none, tok);
    if (dword) {
        unsigned *k1 = (unsigned *)scratch(pr, SC_K1, (size_t)N * 4);
        unsigned *v1 = (unsigned *)scratch(pr, SC_V1, (size_t)N * 4);
        unsigned *k2, *v2;
        if (!k1 || !v1)
            return;
        k_embed_keys<<<nblocks((size_t)N, 256), 256, 0, pr->s>>>(k1, v1, ids, lengths, T_, N, V);
        LAUNCHED("k_embed_keys");
        if (sort_pairs(pr, k1, v1, &k2, &v2, N, bits_for((unsigned)V)))
            return;
        seg_sums<T, T>(pr, (T *)dword, s, (size_t)D, 1, k2, v2, N, D, (unsigned)V);
    }
    if (dtt)
        for (int ty = 0; ty < ntypes; ty++) {
            rowsel sel = {lengths, T_, types, ty};
            colsums<T>(pr, NULL, (T *)dtt + (size_t)ty * D, s, NULL, N, D, sel);
        }
    if (dpos) {
        k_dpos<T><<<nblocks((size_t)T_ * D, 256), 256, 0, pr->s>>>((T *)dpos, s, B, T_, D);
        LAUNCHED("k_dpos");
    }
}

void cu_embed_bwd(tupe_backend *be, tupe_dev *dword, tupe_dev *dpos, tupe_dev *dtt,
                         tupe_dev *dgamma, tupe_dev *dbeta, const tupe_dev *dy,
                         const tupe_dev *xhat, const tupe_dev *rstd, const tupe_dev *gamma,
                         const int32_t *ids, const int32_t *types, const int32_t *lengths, int B,
                         int T, int D, int V, int ntypes, const tupe_drop *drop,
                         tupe_dev *scratch_)
{
    cu_priv *pr = PR(be);
    if (pr->err || B * T <= 0 || D <= 0)
        return;
    if (pr->bf16)
        embed_bwd_t<bf16>(pr, dword, dpos, dtt, dgamma, dbeta, dy, xhat, rstd, gamma, ids, types,
                          lengths, B, T, D, V, ntypes, drop, scratch_);
    else
        embed_bwd_t<float>(pr, dword, dpos, dtt, dgamma, dbeta, dy, xhat, rstd, gamma, ids,
                           types, lengths, B, T, D, V, ntypes, drop, scratch_);
}

template <class T>
__global__ void k_rows(T *dst, const T *src, const int32_t *idx, int M, int D, int scatter)
{
    size_t x = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (x >= (size_t)M * D)
        return;
    int m = (int)(x / D), j = (int)(x % D);
    if (idx[m] < 0) { /* a padding row (backend.h): a row of 0, or nothing added */
        if (!scatter)
            stv(dst, x, 0.0f);
        return;
    }
    size_t r = (size_t)idx[m] * D + j;
    if (scatter) /* indices are distinct: no two threads write one element */
        stv(dst, r, ldv(dst, r) + ldv(src, x));
    else
        dst[x] = src[r];
}

static void rows_op(tupe_backend *be, tupe_dev *dst, const tupe_dev *src, const int32_t *idx,
                    int M, int D, int scatter)
{
    cu_priv *pr = PR(be);
    size_t n = (size_t)M * D;
    if (pr->err || n == 0)
        return;
    if (pr->bf16)
        k_rows<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)dst, (const bf16 *)src, idx, M,
                                                          D, scatter);
    else
        k_rows<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)dst, (const float *)src, idx,
                                                           M, D, scatter);
    LAUNCHED("k_rows");
}

void cu_gather_rows(tupe_backend *be, tupe_dev *dst, const tupe_dev *src,
                           const int32_t *idx, int M, int D)
{
    rows_op(be, dst, src, idx, M, D, 0);
}

void cu_scatter_rows(tupe_backend *be, tupe_dev *dst, const tupe_dev *src,
                            const int32_t *idx, int M, int D)
{
    rows_op(be, dst, src, idx, M, D, 1);
}

/* One block per row: lse = max + log sum exp; loss[m] = lse - logit[label]; ok[m] = the first
 * maximal logit is the label. */
