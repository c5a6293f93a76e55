/* Checks the collectives of lib/train/comm.c from inside a job: run it under `mpirun -np N`, as
 * a loop of processes with a rendezvous (RANK, WORLD_SIZE, MASTER_ADDR...), or alone. Every rank
 * computes what each collective must return and exits 1 on a mismatch.
 *
 *   tupe-commtest                       the host collectives, and the gradients' path through
 *                                       host copies (CPU backend): each rank prints the bytes
 *                                       it sent and received for the all-reduce of N floats and
 *                                       for that path (over TCP; 0 under MPI)
 *   tupe-commtest gpu-bench [MIB [N]]   on GPUs (the rank's LOCAL_RANK): N all-reduces of MIB
 *                                       MiB of fp32 through NCCL, and N times the gradients'
 *                                       own path (tupe_comm_dev_reduce, then _gather), timed;
 *                                       rank 0 prints one line for each (tests/gpu/run.sh)
 *   tupe-commtest gpu-path MIB          the gradients' path once, untimed, printing nothing (its
 *                                       bytes, as cuemu's NCCL counts them: check-cuemu) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "base/progress.h"
#include "train/comm.h"
#if defined(TUPE_HAVE_CUDA)
#include "backend/backend_cuda.h"
#endif

/* The gradients' path on CPU ranks (host copies): W pieces of `piece` floats, slot s's piece
 * holding integers made from (s, rank), reduced then gathered; every sum is exact, so every
 * element must equal its formula. 0, or the check that failed. */
static int host_path(tupe_comm *c, size_t piece, uint64_t *sent, uint64_t *recvd)
{
    tupe_err e;
    tupe_backend *be = NULL;
    int r = tupe_comm_rank(c), w = tupe_comm_world(c), bad = 0;
    size_t n = piece * (size_t)w;
    float *h = malloc(n * sizeof *h);
    tupe_dev *buf = NULL;
    if (!h || tupe_backend_create(&be, "cpu", 1, &e) || tupe_comm_dev_open(c, be, TUPE_REDUCE_TREE, &e) ||
        !(buf = be->alloc(be, n * sizeof *h)))
        bad = 9;
    for (size_t i = 0; i < n && !bad; i++)
        h[i] = (float)((i * 7 + (size_t)r * 13) % 1001);
    uint64_t s0 = 0, r0 = 0, s1 = 0, r1 = 0;
    tupe_comm_bytes(c, &s0, &r0);
    if (!bad) {
        be->upload(be, buf, h, n, TUPE_F32);
        if (tupe_comm_dev_reduce(c, be, buf, piece, &e) || tupe_comm_dev_gather(c, be, buf, piece, 0, &e))
            bad = 10;
    }
    tupe_comm_bytes(c, &s1, &r1);
    if (!bad) {
        be->download(be, h, buf, n, TUPE_F32);
        for (size_t i = 0; i < n && !bad; i++) {
            double want = 0;
            for (int q = 0; q < w; q++)
                want += (double)((i * 7 + (size_t)q * 13) % 1001);
            if (h[i] != (float)want)
                bad = 11;
        }
    }
    if (bad == 9 || bad == 10)
        fprintf(stderr, "tupe-commtest: rank %d: %s\n", r, e.msg);
    *sent = s1 - s0;
    *recvd = r1 - r0;
    if (buf)
        be->free(be, buf);
    if (be)
        tupe_backend_destroy(be);
    free(h);
    return bad;
}

#if defined(TUPE_HAVE_CUDA)
/* Seconds per operation of op (after one untimed), with the host waiting for the GPUs. */
typedef int (*bench_op)(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e);

static int op_allreduce(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e)
{
    (void)c;
    return tupe_backend_cuda_allreduce(be, buf, n, e);
}

static int op_gradpath(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t n, tupe_err *e)
{
    size_t piece = n / (size_t)tupe_comm_world(c);
    return tupe_comm_dev_reduce(c, be, buf, piece, e) || tupe_comm_dev_gather(c, be, buf, piece, 0, e);
}

static int timed(tupe_comm *c, tupe_backend *be, tupe_dev *buf, size_t n, int iters, bench_op op,
                 double *sec, tupe_err *e)
{
    double t0 = 0;
    for (int i = 0; i <= iters; i++) {
        if (i == 1) {
            if (tupe_backend_cuda_comm_wait(be, e) || tupe_comm_barrier(c, e))
                return 1;
            t0 = tupe_now();
        }
        if (op(c, be, buf, n, e))
            return 1;
    }
    if (tupe_backend_cuda_comm_wait(be, e))
        return 1;
    *sec = (tupe_now() - t0) / iters;
    return 0;
}

static int gpu_bench(tupe_comm *c, double mib, int iters)
{
    tupe_err e;
    tupe_backend *be = NULL;
    int r = tupe_comm_rank(c), w = tupe_comm_world(c);
    size_t n = (size_t)(mib * (1 << 20) / 4) / (size_t)w * (size_t)w;
    tupe_dev *buf = NULL;
    double ar = 0, gp = 0;
    int rc = tupe_backend_create_on(&be, "cuda", 1, tupe_backend_local_gpu(), &e);
    if (!rc && (rc = tupe_comm_dev_open(c, be, TUPE_REDUCE_TREE, &e)) == 0 && strcmp(tupe_comm_dev_path(c), "nccl") != 0)
        rc = tupe_fail(&e, TUPE_EUSAGE, "gpu-bench needs NCCL between GPUs (path: %s)", tupe_comm_dev_path(c));
    if (!rc && !(buf = be->alloc(be, n * 4)))
        rc = tupe_fail(&e, TUPE_EFAIL, "out of GPU memory for %.0f MiB", mib);
    if (!rc) {
        be->zero(be, buf, n);
        if (iters == 0) /* gpu-path */
            rc = op_gradpath(c, be, buf, n, &e) || tupe_backend_cuda_comm_wait(be, &e);
        else
            rc = timed(c, be, buf, n, iters, op_allreduce, &ar, &e) ||
                 timed(c, be, buf, n, iters, op_gradpath, &gp, &e);
    }
    if (rc) {
        fprintf(stderr, "tupe-commtest: rank %d: %s\n", r, e.msg);
        tupe_comm_abort(c, e.msg);
    } else if (r == 0 && iters > 0) {
        /* bus bandwidth as nccl-tests defines it: what each rank's link carries, 2(W-1)/W of the
         * buffer, over the time */
        double bytes = (double)n * 4, f = 2.0 * (w - 1) / w;
        printf("ALLREDUCE ranks=%d bytes=%.0f ms=%.3f algbw_GBs=%.2f busbw_GBs=%.2f\n", w, bytes,
               ar * 1e3, bytes / ar / 1e9, bytes * f / ar / 1e9);
        printf("GRADPATH ranks=%d bytes=%.0f ms=%.3f algbw_GBs=%.2f busbw_GBs=%.2f\n", w, bytes,
               gp * 1e3, bytes / gp / 1e9, bytes * f / gp / 1e9);
    }
    if (buf)
        be->free(be, buf);
    tupe_comm_finalize(c);
    if (be)
        tupe_backend_destroy(be);
    return rc ? 1 : 0;
}
#endif

int main(int argc, char **argv)
{
    tupe_comm *c;
    tupe_err e;
    int path = argc > 2 && strcmp(argv[1], "gpu-path") == 0;
    int bench = path || (argc > 1 && strcmp(argv[1], "gpu-bench") == 0);
    int iters = path ? 0 : argc > 3 ? atoi(argv[3]) : 20;
    if ((argc > 1 && !bench) || iters < 0 || (!path && argc > 3 && iters == 0)) {
        fprintf(stderr, "usage: tupe-commtest [gpu-bench [MIB [N]] | gpu-path MIB]\n");
        return 2;
    }
#if !defined(TUPE_HAVE_CUDA)
    if (bench) {
        fprintf(stderr, "tupe-commtest: %s: this build has no CUDA backend\n", argv[1]);
        return 2;
    }
#endif
    if (tupe_comm_init(&c, NULL, NULL, &e)) {
        fprintf(stderr, "tupe-commtest: %s\n", e.msg);
        return e.code;
    }
#if defined(TUPE_HAVE_CUDA)
    if (bench)
        return gpu_bench(c, argc > 2 ? atof(argv[2]) : 256, iters);
#endif
    int r = tupe_comm_rank(c), w = tupe_comm_world(c), bad = 0;
    enum { N = 1000003 }; /* not a multiple of anything */
    float *f = malloc(N * sizeof *f);
    for (int i = 0; i < N; i++)
        f[i] = (float)(i % 97) * (float)(r + 1);
    uint64_t s0, r0, s1, r1;
    tupe_comm_bytes(c, &s0, &r0);
    if (tupe_comm_allreduce_f32(c, f, N, &e))
        bad = 1;
    tupe_comm_bytes(c, &s1, &r1);
    float s = (float)(w * (w + 1) / 2);
    for (int i = 0; i < N && !bad; i++)
        if (f[i] != (float)(i % 97) * s)
            bad = 2;
    double d[3] = {r + 0.5, 1.0, -r};
    tupe_comm_allreduce_f64(c, d, 3, &e);
    if (d[0] != w * (w - 1) / 2.0 + 0.5 * w || d[1] != w)
        bad = 3;
    uint64_t u = (uint64_t)1 << 40;
    tupe_comm_allreduce_u64(c, &u, 1, &e);
    if (u != ((uint64_t)w << 40))
        bad = 4;
    int32_t m = r == w - 1 ? 7 : 0;
    tupe_comm_allmax_i32(c, &m, 1, &e);
    if (m != 7)
        bad = 5;
    size_t shard = 5;
    float *in = malloc((size_t)w * shard * sizeof *in), *out = malloc(shard * sizeof *out);
    float *all = malloc((size_t)w * shard * sizeof *all);
    for (size_t i = 0; i < (size_t)w * shard; i++)
        in[i] = (float)i;
    tupe_comm_reduce_scatter_f32(c, in, out, shard, &e);
    for (size_t i = 0; i < shard; i++)
        if (out[i] != (float)((size_t)r * shard + i) * (float)w)
            bad = 6;
    tupe_comm_allgather_f32(c, out, all, shard, &e);
    for (size_t i = 0; i < (size_t)w * shard; i++)
        if (all[i] != (float)i * (float)w)
            bad = 7;
    char msg[32] = "";
    if (r == 0)
        snprintf(msg, sizeof msg, "hello from rank 0");
    tupe_comm_bcast(c, msg, sizeof msg, 0, &e);
    if (strcmp(msg, "hello from rank 0") != 0)
        bad = 8;
    uint64_t ps = 0, pr = 0;
    if (!bad)
        bad = host_path(c, 250007, &ps, &pr);
    tupe_comm_barrier(c, &e);
    printf("rank %d of %d (%s, %s): %s\n", r, w, tupe_comm_backend(c), tupe_comm_launcher(c),
           bad ? "FAIL" : "ok");
    printf("rank %d bytes: allreduce of %zu sent %llu received %llu; gradient path of %zu sent %llu "
           "received %llu\n", r, (size_t)N * 4, (unsigned long long)(s1 - s0),
           (unsigned long long)(r1 - r0), (size_t)250007 * 4 * (size_t)w, (unsigned long long)ps,
           (unsigned long long)pr);
    if (bad)
        fprintf(stderr, "tupe-commtest: rank %d: check %d failed\n", r, bad);
    free(f), free(in), free(out), free(all);
    tupe_comm_finalize(c);
    return bad ? 1 : 0;
}
