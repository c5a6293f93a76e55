/* Dropout's keep bits, made once per site and pass (dropout.cuh): one Philox call per block
 * of 8 elements, one bit per element, kept per (site, size) so that the backward pass reads
 * the bits its forward pass made. The bits are a pure function of the stream (seed, step,
 * site, p) and the elements, so a kept buffer is either the right one or made again. */
#include "common.cuh"

struct drop_mask {
    uint64_t seed, base, n;
    uint32_t step, site, thr;
    int made;
    uint8_t *buf;
    size_t cap;
};

struct drop_masks {
    drop_mask *v;
    int n, cap;
};

/* m[k] = keep bits of block (base >> 3) + k, k < nb. */
__global__ void k_drop_bits(uint8_t *m, dropk d, size_t nb)
{
    dpar(d);
    size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (k < nb)
        m[k] = (uint8_t)keep8(d, (d.base >> 3) + k);
}

static drop_mask *slot_of(cu_priv *pr, uint32_t site, uint64_t n)
{
    drop_masks *s = pr->dm;
    if (!s) {
        s = (drop_masks *)calloc(1, sizeof *s);
        if (!s) {
            set_err(pr, "%s%s", "out of memory (dropout bits)", "");
            return NULL;
        }
        pr->dm = s;
    }
    for (int i = 0; i < s->n; i++)
        if (s->v[i].site == site && s->v[i].n == n)
            return &s->v[i];
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 16;
        drop_mask *v = (drop_mask *)realloc(s->v, (size_t)cap * sizeof *v);
        if (!v) {
            set_err(pr, "%s%s", "out of memory (dropout bits)", "");
            return NULL;
        }
        s->v = v;
        s->cap = cap;
    }
    drop_mask *m = &s->v[s->n++];
    memset(m, 0, sizeof *m);
    m->site = site;
    m->n = n;
    return m;
}

dropk drop_bits(cu_priv *pr, const tupe_drop *d, size_t n)
{
    dropk k = mkdrop(d);
    if (!k.on || n == 0 || pr->err)
        return k;
    drop_mask *m = slot_of(pr, d->site, n);
    if (!m)
        return k;
    if (m->made && m->seed == k.seed && m->step == k.step && m->thr == k.thr &&
        m->base == k.base) {
        k.km = m->buf;
        return k;
    }
    size_t nb = (size_t)(((k.base + n - 1) >> 3) - (k.base >> 3) + 1);
    m->made = 0;
    if (m->cap < nb) {
        /* The old bits may still be read by queued work. Room for the most blocks n elements
         * can touch, wherever they start: base moves with the step, and a step's work must
         * not wait for the device (a captured step holds no host wait). */
        size_t want = (n + 7) / 8 + 1;
        if (m->buf && (SYNC(pr) || CK(cudaFree(m->buf))))
            return k;
        m->buf = NULL;
        m->cap = 0;
        if (CK(cudaMalloc((void **)&m->buf, want)))
            return k;
        m->cap = want;
    }
    k_drop_bits<<<nblocks(nb, 256), 256, 0, pr->s>>>(m->buf, k, nb);
    if (LAUNCHED("k_drop_bits"))
        return k;
    m->seed = k.seed, m->step = k.step, m->thr = k.thr, m->base = k.base;
    m->made = 1;
    k.km = m->buf;
    return k;
}

void drop_bits_free(cu_priv *pr)
{
    drop_masks *s = pr->dm;
    if (!s)
        return;
    for (int i = 0; i < s->n; i++)
        if (s->v[i].buf)
            cudaFree(s->v[i].buf);
    free(s->v);
    free(s);
    pr->dm = NULL;
}
