/* The CUDA backend (lib/backend/backend.h, lib/backend/backend_cuda.h): `cuda` (fp32 storage)
 * and `cuda-bf16` (bf16 real buffers, fp32 wide buffers). The kernels are written once over the
 * storage type T (float or __nv_bfloat16); arithmetic inside them is fp32, reductions that
 * return a value to the host are double. Every matrix product goes through cuBLASLt with fp32
 * accumulation.
 *
 * Semantics follow lib/backend/backend_cpu.c operation by operation (the CPU backend is the
 * reference): the same accumulate-or-overwrite rules, the same dropout decisions (pointwise.h,
 * indexed by the same logical element numbers), padded keys masked, [CLS] reset, bucket
 * gathers. Where the CPU computes only the unmasked part of a product (keys j < length), this
 * backend computes the whole T x T product and the softmax writes exact zeros at the masked
 * entries, so the products that follow get the same values.
 *
 * Determinism: no floating-point atomics. Column sums run in two passes (fixed row chunks,
 * then the chunks in order); scatters into embedding rows and relative-bucket gradients go
 * through a stable radix sort by destination row, then each destination is summed in token
 * order by one thread. sumsq, xent_fwd and mse_fwd reduce in a fixed tree.
 *
 * This file makes the backend and wires the operations into its table; the kernels are in
 * files by operation (kernels/README.md says which file holds what). */
#include "adamw.cuh"
#include "attention.cuh"
#include "buffers.cuh"
#include "collectives.cuh"
#include "common.cuh"
#include "disentangled.cuh"
#include "embedding.cuh"
#include "layernorm.cuh"
#include "loss.cuh"
#include "matmul.cuh"
#include "measure.cuh"
#include "norm.cuh"
#include "position.cuh"
#include "disentangled.cuh"

/* ---- creation, destruction ------------------------------------------------------------------ */

static void cu_destroy(tupe_backend *be)
{
    if (!be)
        return;
    cu_priv *pr = PR(be);
    if (pr) {
        cudaSetDevice(pr->dev);
        if (pr->s)
            SYNC(pr);
        nccl_destroy(pr); /* before anything it may still use is freed */
        measure_destroy(pr);
        stage_destroy(pr);
        drop_bits_free(pr);
        for (int i = 0; i < pr->nplans; i++)
            destroy_plan(&pr->plans[i]);
        for (int i = 0; i < SC_N; i++)
            if (pr->scr[i])
                cudaFree(pr->scr[i]);
        if (pr->ws)
            cudaFree(pr->ws);
        if (pr->dres)
            cudaFree(pr->dres);
        if (pr->hres)
            cudaFreeHost(pr->hres);
        if (pr->hsums)
            cudaFreeHost(pr->hsums);
        if (pr->lt)
            cublasLtDestroy(pr->lt);
        if (pr->blas)
            cublasDestroy(pr->blas);
        if (pr->s)
            cudaStreamDestroy(pr->s);
        free(pr);
    }
    free(be);
}

extern "C" int tupe_backend_cuda_devices(char *why, size_t cap)
{
    int drv = 0, rt = 0, n = 0;
    cudaDriverGetVersion(&drv);
    cudaRuntimeGetVersion(&rt);
    if (drv == 0) {
        if (cap)
            snprintf(why, cap, "no NVIDIA driver found");
        cudaGetLastError();
        return 0;
    }
    cudaError_t r = cudaGetDeviceCount(&n);
    if (r != cudaSuccess) {
        if (cap)
            snprintf(why, cap, "%s; driver supports CUDA %d.%d, this build needs %d.%d",
                     cudaGetErrorString(r), drv / 1000, drv % 1000 / 10, rt / 1000,
                     rt % 1000 / 10);
        cudaGetLastError();
        return 0;
    }
    if (n <= 0 && cap)
        snprintf(why, cap, "no CUDA device found");
    return n > 0 ? n : 0;
}

extern "C" int tupe_backend_cuda_create(tupe_backend **out, int bf16_, int gpu, tupe_err *e)
{
    *out = NULL;
    char why[256] = "";
    int n = tupe_backend_cuda_devices(why, sizeof why);
    if (n <= 0)
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': no usable GPU (%s)", why);
    int dev = (gpu < 0 ? 0 : gpu) % n;
    cudaDeviceProp prop;
    cudaError_t r = cudaSetDevice(dev);
    if (r == cudaSuccess)
        r = cudaGetDeviceProperties(&prop, dev);
    if (r != cudaSuccess) {
        cudaGetLastError();
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': GPU %d: %s", dev, cudaGetErrorString(r));
    }
    if (prop.major < 8)
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': GPU %d (%s) has compute capability "
                         "%d.%d; this build needs 8.0 or later", dev, prop.name, prop.major,
                         prop.minor);
    tupe_backend *be = (tupe_backend *)calloc(1, sizeof *be);
    cu_priv *pr = (cu_priv *)calloc(1, sizeof *pr);
    if (!be || !pr) {
        free(be);
        free(pr);
        return tupe_fail(e, TUPE_EFAIL, "out of memory");
    }
    be->priv = pr;
    pr->dev = dev;
    pr->bf16 = bf16_ != 0;
    const char *tf = getenv("TUPE_CUDA_TF32");
    pr->tf32 = tf && strcmp(tf, "1") == 0;
    /* the flash attention unless the materialised one is asked for (the reference, probes) */
    const char *at = getenv("TUPE_ATTN");
    be->attn_flash = !(at && strcmp(at, "materialised") == 0);
    pr->ws_bytes = (size_t)32 << 20;
    CK(cudaStreamCreateWithFlags(&pr->s, cudaStreamNonBlocking));
    CKB(cublasLtCreate(&pr->lt));
    if (!CKB(cublasCreate(&pr->blas)))
        CKB(cublasSetStream(pr->blas, pr->s));
    CK(cudaMalloc(&pr->ws, pr->ws_bytes));
    CK(cudaMalloc((void **)&pr->dres, (RED_PARTS + 8) * sizeof(double)));
    CK(cudaMallocHost((void **)&pr->hres, 8 * sizeof(double)));
    if (pr->err) {
        int rc = tupe_fail(e, TUPE_EFAIL, "CUDA backend (GPU %d): %s", dev, pr->msg);
        cu_destroy(be);
        return rc;
    }
    be->name = pr->bf16 ? "cuda-bf16" : "cuda";
    be->esize = pr->bf16 ? 2 : 4;
    be->wsize = 4;
    be->nthreads = 1;
    be->alloc = cu_alloc;
    be->free = cu_free;
    be->upload = cu_upload;
    be->download = cu_download;
    be->upload_ahead = cu_upload_ahead;
    be->ahead_take = cu_ahead_take;
    be->zero = cu_zero;
    be->scale = cu_scale;
    be->sumsq = cu_sumsq;
    be->sumsq_parts = cu_sumsq_parts;
    be->add = cu_add;
    be->gemm = cu_gemm;
    be->linear_fwd = cu_linear_fwd;
    be->linear_bwd = cu_linear_bwd;
    be->act_fwd = cu_act_fwd;
    be->act_bwd = cu_act_bwd;
    be->ln_fwd = cu_ln_fwd;
    be->ln_bwd = cu_ln_bwd;
    be->resid_ln_fwd = cu_resid_ln_fwd;
    be->resid_ln_bwd = cu_resid_ln_bwd;
    be->embed_fwd = cu_embed_fwd;
    be->embed_bwd = cu_embed_bwd;
    be->attn_fwd = cu_attn_fwd;
    be->attn_bwd = cu_attn_bwd;
    be->attn_scratch = cu_attn_scratch;
    be->pos_bias_fwd = cu_pos_bias_fwd;
    be->pos_bias_bwd = cu_pos_bias_bwd;
    be->qk_pos_add = cu_qk_pos_add;
    be->qk_pos_grad = cu_qk_pos_grad;
    be->rope = cu_rope;
    be->dis_bias_fwd = cu_dis_bias_fwd;
    be->dis_bias_bwd = cu_dis_bias_bwd;
    be->gather_rows = cu_gather_rows;
    be->scatter_rows = cu_scatter_rows;
    be->xent_fwd = cu_xent_fwd;
    be->xent_bwd = cu_xent_bwd;
    be->xent_fused = cu_xent_fused;
    be->mse_fwd = cu_mse_fwd;
    be->mse_bwd = cu_mse_bwd;
    be->adamw = cu_adamw;
    be->check = cu_check;
    be->destroy = cu_destroy;
    *out = be;
    return 0;
}

extern "C" void *tupe_backend_cuda_stream(tupe_backend *be)
{
    if (!be || !be->name || strncmp(be->name, "cuda", 4) != 0)
        return NULL;
    return (void *)PR(be)->s;
}

extern "C" int tupe_backend_cuda_device(tupe_backend *be)
{
    if (!be || !be->name || strncmp(be->name, "cuda", 4) != 0)
        return -1;
    return PR(be)->dev;
}

extern "C" void tupe_backend_cuda_gemm_counts(tupe_backend *be, long long *lt,
                                              long long *legacy, char *first, size_t cap)
{
    int cuda = be && be->name && strncmp(be->name, "cuda", 4) == 0;
    *lt = cuda ? PR(be)->gemm_lt : 0;
    *legacy = cuda ? PR(be)->gemm_legacy : 0;
    if (cap)
        snprintf(first, cap, "%s", cuda ? PR(be)->legacy_shape : "");
}
