/* Checks the collectives of lib/train/comm.c from inside a job: run it under `mpirun -np N` (or
 * alone). Every rank computes what each collective must return and exits 1 on a mismatch. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "train/comm.h"

int main(void)
{
    tupe_comm *c;
    tupe_err e;
    if (tupe_comm_init(&c, &e)) {
        fprintf(stderr, "tupe-commtest: %s\n", e.msg);
        return e.code;
    }
    int r = tupe_comm_rank(c), w = tupe_comm_world(c), bad = 0;
    enum { N = 1000003 }; /* not a multiple of anything */
    float *f = malloc(N * sizeof *f);
    for (int i = 0; i < N; i++)
        f[i] = (float)(i % 97) * (float)(r + 1);
    if (tupe_comm_allreduce_f32(c, f, N, &e))
        bad = 1;
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
    tupe_comm_barrier(c, &e);
    printf("rank %d of %d (%s, %s): %s\n", r, w, tupe_comm_backend(c), tupe_comm_launcher(c),
           bad ? "FAIL" : "ok");
    if (bad)
        fprintf(stderr, "tupe-commtest: rank %d: check %d failed\n", r, bad);
    free(f), free(in), free(out), free(all);
    tupe_comm_finalize(c);
    return bad ? 1 : 0;
}
