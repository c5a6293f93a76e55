/* The model's side of tests/bench/model.sh: training-step throughput (zero_grad, forward with
 * the MLM head on 15% of the positions, backward, clipping and AdamW; train mode with the
 * preset's dropout), peak memory, and the OpenBLAS sgemm peak of this machine, as JSON lines
 * in the form of tests/reference/bench_torch.py's:
 *
 *   model --preset small --position tupe-r --batch 16 --seq 128 --threads 2
 *   model --sgemm --threads 2
 */
#include <cblas.h>
#include <getopt.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "backend/backend.h"
#include "base/progress.h"
#include "base/rng.h"
#include "cli/cli.h"
#include "model/model.h"
#include "model/optim.h"

void openblas_set_num_threads(int num_threads);

static double rss_mib(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long a = 0, b = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &a, &b) != 2)
            b = 0;
        fclose(f);
    }
    return (double)b * 4096.0 / (1 << 20);
}

/* CPU time of the process (all threads): with OMP_WAIT_POLICY=passive, the work done,
 * whatever else the machine is running. */
static double cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return x < y ? -1 : x > y;
}

/* Matrix-product FLOPs of one training step (backward = twice the forward). */
static double step_flops(const tupe_config *c, int B, int T, int M)
{
    double N = (double)B * T, D = c->hidden_size, F = c->intermediate_size, H = c->num_heads,
           V = c->vocab_size, dh = D / H;
    double layer = 2 * N * D * 3 * D + 2 * N * D * D + 2 * 2 * N * D * F + 2 * 2 * B * H * T * T * dh;
    double f = c->num_layers * layer + 2.0 * M * D * D + 2.0 * M * D * V;
    if (tupe_cfg_tupe(c))
        f += 2 * 2 * (T + 1.0) * D * D + 2 * H * (T + 1.0) * (T + 1.0) * dh;
    if (c->position == TUPE_POS_BERT_AD)
        f += 2 * 2 * (double)T * D * D;
    return 3 * f;
}

static int sgemm_peak(int threads)
{
    /* OpenBLAS's own threading on one large product: the machine's sgemm peak. */
    openblas_set_num_threads(threads);
    int n = 2048;
    float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n),
          *c = malloc(sizeof(float) * n * n);
    for (long i = 0; i < (long)n * n; i++) {
        a[i] = (float)(i % 13) * 0.01f;
        b[i] = (float)(i % 7) * 0.01f;
    }
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
    /* The best of the products done in 4 seconds: the peak, not the average of a busy box. */
    double best = 0, start = tupe_now();
    while (tupe_now() - start < 4.0) {
        double t0 = tupe_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1, a, n, b, n, 0, c, n);
        double g = 2.0 * n * n * n / (tupe_now() - t0) / 1e9;
        best = g > best ? g : best;
    }
    printf("{\"sgemm_gflops\": %.1f, \"n\": %d, \"threads\": %d}\n", best, n, threads);
    free(a), free(b), free(c);
    return 0;
}

int main(int argc, char **argv)
{
    const char *preset = "small", *position = "tupe-r";
    int untie = 1, B = 16, T = 128, steps = 5, warmup = 2, V = 32769, threads = 2, sgemm = 0;
    double mask_rate = 0.15;
    static const struct option opts[] = {
        {"preset", 1, 0, 'p'}, {"position", 1, 0, 'o'}, {"tie", 0, 0, 'i'}, {"batch", 1, 0, 'b'},
        {"seq", 1, 0, 's'}, {"steps", 1, 0, 'n'}, {"warmup", 1, 0, 'w'}, {"vocab-size", 1, 0, 'V'},
        {"threads", 1, 0, 't'}, {"mask-rate", 1, 0, 'm'}, {"sgemm", 0, 0, 'g'}, {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        switch (ch) {
        case 'p': preset = optarg; break;
        case 'o': position = optarg; break;
        case 'i': untie = 0; break;
        case 'b': B = atoi(optarg); break;
        case 's': T = atoi(optarg); break;
        case 'n': steps = atoi(optarg); break;
        case 'w': warmup = atoi(optarg); break;
        case 'V': V = atoi(optarg); break;
        case 't': threads = atoi(optarg); break;
        case 'm': mask_rate = atof(optarg); break;
        case 'g': sgemm = 1; break;
        default:
            fprintf(stderr, "usage: model [--preset P] [--position V] [--tie] [--batch B] [--seq T] "
                            "[--steps N] [--warmup N] [--vocab-size V] [--threads N] [--sgemm]\n");
            return 2;
        }
    }
    tupe_threads_apply(threads);
    if (sgemm)
        return sgemm_peak(threads);
    double base = rss_mib();
    tupe_err e;
    tupe_config c;
    if (tupe_config_load(&c, preset, &e) || (c.position = tupe_position_parse(position)) < 0) {
        fprintf(stderr, "model: %s\n", c.position < 0 ? "bad position" : e.msg);
        return 1;
    }
    c.untie_cls = untie;
    c.vocab_size = V;
    int M = (int)lround(mask_rate * B * T);
    if (M < 1)
        M = 1;
    tupe_backend *be;
    tupe_model *m;
    tupe_adamw *o;
    tupe_capacity cap = {B, T, M};
    tupe_adamw_cfg oc;
    tupe_adamw_defaults(&oc);
    if (tupe_backend_create(&be, "cpu", threads, &e) || tupe_model_create(&m, &c, be, &cap, &e) ||
        tupe_model_init(m, 1, &e) || tupe_adamw_create(&o, m, &oc, &e)) {
        fprintf(stderr, "model: %s\n", e.msg);
        return 1;
    }
    int32_t *ids = malloc(sizeof(int32_t) * B * T), *len = malloc(sizeof(int32_t) * B);
    int32_t *pos = malloc(sizeof(int32_t) * B * T), *lab = malloc(sizeof(int32_t) * M);
    tupe_rng r;
    tupe_rng_init(&r, 1, 0, 0, TUPE_RNG_USER);
    for (int i = 0; i < B * T; i++) {
        ids[i] = 7 + (int32_t)tupe_rng_below(&r, (uint32_t)(V - 7));
        pos[i] = i;
    }
    for (int i = 0; i < B; i++) {
        len[i] = T;
        ids[i * T] = 0;
    }
    /* M distinct positions, ascending */
    tupe_rng_shuffle_u32(&r, (uint32_t *)pos, (size_t)B * T);
    qsort(pos, (size_t)M, sizeof *pos, cmp_i32);
    for (int i = 0; i < M; i++)
        lab[i] = 7 + (int32_t)tupe_rng_below(&r, (uint32_t)(V - 7));
    tupe_batch b = {B, T, ids, len, NULL, M, pos, lab, NULL, NULL, 0, 0};
    tupe_schedule sch = {1e-4, 0, 10000, 1000000, 1};
    double *times = malloc(sizeof(double) * (size_t)(steps > 0 ? steps : 1));
    double cpu0 = 0;
    for (int s = 0; s < warmup + steps; s++) {
        if (s == warmup)
            cpu0 = cpu_seconds();
        double t0 = tupe_now();
        tupe_step st = {1, (uint32_t)s};
        tupe_model_zero_grad(m);
        if (tupe_model_forward(m, &b, &st, NULL, &e) || tupe_model_backward(m, &e)) {
            fprintf(stderr, "model: %s\n", e.msg);
            return 1;
        }
        tupe_adamw_step(o, tupe_lr_at(&sch, s + 1), -1);
        if (s >= warmup)
            times[s - warmup] = tupe_now() - t0;
    }
    double cpu = (cpu_seconds() - cpu0) / steps;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double peak = (double)ru.ru_maxrss / 1024.0;
    double mn = times[0];
    for (int s = 1; s < steps; s++)
        mn = times[s] < mn ? times[s] : mn;
    qsort(times, (size_t)steps, sizeof *times, cmp_d);
    double med = times[steps / 2];
    double fl = step_flops(&c, B, T, M);
    char variant[32];
    snprintf(variant, sizeof variant, "%s%s", position,
             tupe_cfg_tupe(&c) && !untie ? "-tie" : "");
    printf("{\"preset\": \"%s\", \"variant\": \"%s\", \"batch\": %d, \"seq\": %d, \"threads\": %d, "
           "\"steps\": %d, \"step_s\": %.4f, \"step_s_min\": %.4f, \"tokens_per_s\": %.1f, "
           "\"tokens_per_s_best\": %.1f, \"peak_rss_mib\": %.1f, \"base_rss_mib\": %.1f, "
           "\"params\": %zu, \"gflop_per_step\": %.1f, \"gflops\": %.1f, \"gflops_best\": %.1f, "
           "\"cpu_s\": %.4f}\n",
           preset, variant, B, T, threads, steps, med, mn, B * T / med, B * T / mn, peak, base,
           tupe_model_layout(m)->nparams, fl / 1e9, fl / med / 1e9, fl / mn / 1e9, cpu);
    free(times), free(ids), free(len), free(pos), free(lab);
    tupe_adamw_free(o);
    tupe_model_free(m);
    tupe_backend_destroy(be);
    return 0;
}
