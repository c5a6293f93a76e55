/* AdamW over a flat run of parameters (pointwise.h's update, on the fp32 master in bf16). */
#include "adamw.cuh"

/* AdamW of one element (pointwise.h) on the fp32 master when there is one, else on p; p then
 * receives the (rounded) result. */
template <class T>
__global__ void k_adamw(T *p, const T *g, float *m, float *v, float *master, size_t n, float b1,
                        float b2, float eps, float gs, float decay, float step)
{
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    float w = master ? master[i] : ldv(p, i);
    tupe_adamw_f(&w, m + i, v + i, ldv(g, i) * gs, b1, b2, eps, decay, step);
    if (master)
        master[i] = w;
    stv(p, i, w);
}

void cu_adamw(tupe_backend *be, tupe_dev *p, const tupe_dev *g, tupe_dev *m, tupe_dev *v,
                     tupe_dev *master, size_t n, const tupe_adamw_args *a)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    float b1 = (float)a->beta1, b2 = (float)a->beta2, eps = (float)a->eps, gs = (float)a->gscale;
    float decay = (float)(a->lr * a->wd), step = (float)a->step_size;
    if (pr->bf16)
        k_adamw<bf16><<<nblocks(n, 256), 256, 0, pr->s>>>((bf16 *)p, (const bf16 *)g, (float *)m,
                                                          (float *)v, (float *)master, n, b1, b2,
                                                          eps, gs, decay, step);
    else
        k_adamw<float><<<nblocks(n, 256), 256, 0, pr->s>>>((float *)p, (const float *)g,
                                                           (float *)m, (float *)v,
                                                           (float *)master, n, b1, b2, eps, gs,
                                                           decay, step);
    LAUNCHED("k_adamw");
}
