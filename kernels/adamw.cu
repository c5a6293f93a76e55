/* AdamW over a flat run of parameters (pointwise.h's update, on the fp32 master in bf16). */
#include "adamw.cuh"

/* AdamW of VE elements per thread (pointwise.h) on the fp32 master when there is one, else on
 * p; p then receives the (rounded) result. 16-byte accesses when vec. */
template <class T>
__global__ void k_adamw(T *p, const T *g, float *m, float *v, float *master, size_t n, float b1,
                        float b2, float eps, float gs, float decay, float step, int vec,
                        const double *sumsq, double clip, int tf, const double *par, double sc,
                        double wd)
{
    if (par) { /* the step's parameter block: the host's doubles, rounded as the host does */
        decay = (float)(par[TUPE_PAR_LR] * sc * wd);
        step = (float)(par[TUPE_PAR_STEP_SIZE] * sc);
    }
    size_t i0 = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) * VE;
    if (i0 >= n)
        return;
    if (sumsq) /* the clipping factor from the norm left on the device: no host wait */
        gs = (float)tupe_clip_scale(sqrt(*sumsq), clip, tf);
    if (vec && i0 + VE <= n) {
        float w[VE], gv[VE], mv[VE], vv[VE];
        if (master)
            ldve(w, master + i0);
        else
            ldve(w, p + i0);
        ldve(gv, g + i0);
        ldve(mv, m + i0);
        ldve(vv, v + i0);
        for (int k = 0; k < VE; k++)
            tupe_adamw_f(&w[k], &mv[k], &vv[k], gv[k] * gs, b1, b2, eps, decay, step);
        stve(m + i0, mv);
        stve(v + i0, vv);
        if (master)
            stve(master + i0, w);
        stve(p + i0, w);
        return;
    }
    for (size_t i = i0; i < n && i < i0 + VE; i++) {
        float w = master ? master[i] : ldv(p, i);
        tupe_adamw_f(&w, m + i, v + i, ldv(g, i) * gs, b1, b2, eps, decay, step);
        if (master)
            master[i] = w;
        stv(p, i, w);
    }
}

void cu_adamw(tupe_backend *be, tupe_dev *p, const tupe_dev *g, tupe_dev *m, tupe_dev *v,
              tupe_dev *master, size_t n, const tupe_adamw_args *a, const tupe_dev *sumsq)
{
    cu_priv *pr = PR(be);
    if (pr->err || n == 0)
        return;
    float b1 = (float)a->beta1, b2 = (float)a->beta2, eps = (float)a->eps, gs = (float)a->gscale;
    float decay = (float)(a->lr * a->wd), step = (float)a->step_size;
    const double *par = (const double *)a->par;
    int vec = al16(p) && al16(g) && al16(m) && al16(v) && (!master || al16(master));
    unsigned nb = nblocks((n + VE - 1) / VE, 256);
    if (pr->bf16)
        k_adamw<bf16><<<nb, 256, 0, pr->s>>>((bf16 *)p, (const bf16 *)g, (float *)m, (float *)v,
                                             (float *)master, n, b1, b2, eps, gs, decay, step,
                                             vec, (const double *)sumsq, a->clip, a->clip_tf,
                                             par, a->sc, a->wd);
    else
        k_adamw<float><<<nb, 256, 0, pr->s>>>((float *)p, (const float *)g, (float *)m,
                                              (float *)v, (float *)master, n, b1, b2, eps, gs,
                                              decay, step, vec, (const double *)sumsq, a->clip,
                                              a->clip_tf, par, a->sc, a->wd);
    LAUNCHED("k_adamw");
}
