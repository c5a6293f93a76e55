/* The backend's shared host helpers (common.cuh): errors, scratch buffers, results read back,
 * the error check of the table. */
#include "common.cuh"

void set_err(cu_priv *pr, const char *fmt, const char *a, const char *b)
{
    if (pr->err)
        return;
    pr->err = 1;
    snprintf(pr->msg, sizeof pr->msg, fmt, a, b);
}

int ck(cu_priv *pr, cudaError_t r, const char *what)
{
    if (r == cudaSuccess)
        return 0;
    set_err(pr, "%s: %s", what, cudaGetErrorString(r));
    return 1;
}

int ckb(cu_priv *pr, cublasStatus_t r, const char *what)
{
    if (r == CUBLAS_STATUS_SUCCESS)
        return 0;
    char code[32];
    snprintf(code, sizeof code, "cuBLAS status %d", (int)r);
    set_err(pr, "%s: %s", what, code);
    return 1;
}

void *scratch(cu_priv *pr, int slot, size_t bytes)
{
    if (pr->err)
        return NULL;
    if (bytes == 0)
        bytes = 256;
    if (pr->scr_cap[slot] >= bytes)
        return pr->scr[slot];
    /* The old buffer may still be read by queued work. */
    if (SYNC(pr))
        return NULL;
    if (pr->scr[slot])
        cudaFree(pr->scr[slot]);
    pr->scr[slot] = NULL;
    pr->scr_cap[slot] = 0;
    size_t want = bytes + bytes / 4;
    void *p = NULL;
    if (CK(cudaMalloc(&p, want)))
        return NULL;
    pr->scr[slot] = p;
    pr->scr_cap[slot] = want;
    return p;
}

unsigned *done_count(cu_priv *pr)
{
    if (pr->scr[SC_DONE])
        return (unsigned *)pr->scr[SC_DONE];
    unsigned *p = (unsigned *)scratch(pr, SC_DONE, sizeof(unsigned));
    if (p && CK(cudaMemsetAsync(p, 0, sizeof(unsigned), pr->s)))
        return NULL;
    return p;
}

int fetch_res(cu_priv *pr, int off, int k)
{
    if (CK(cudaMemcpyAsync(pr->hres, pr->dres + off, (size_t)k * sizeof(double),
                           cudaMemcpyDeviceToHost, pr->s)) ||
        SYNC(pr))
        return 1;
    return 0;
}

int cu_check(tupe_backend *be, tupe_err *e)
{
    cu_priv *pr = PR(be);
    if (!pr->err) {
        SYNC(pr);
        CK(cudaGetLastError());
    }
    if (pr->err)
        return tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", pr->dev, pr->msg);
    return 0;
}
