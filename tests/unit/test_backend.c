/* Choosing a backend: names, --device/--precision combinations, the fallback notice of
 * "auto", the GPU of a launcher's local rank, and the real/wide element sizes. Runs on any
 * machine: where a GPU is present the "no GPU" expectations are skipped. */
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "unit.h"

static int have_gpu(void)
{
    char why[256];
    return tupe_cuda_devices(why, sizeof why) > 0;
}

static void names(void)
{
    tupe_backend *be;
    tupe_err e;
    CHECK_INT(tupe_backend_create(&be, "cpu", 1, &e), 0);
    CHECK_STR(be->name, "cpu");
    CHECK_INT(be->esize, 4);
    CHECK_INT(be->wsize, 4);
    tupe_backend_destroy(be);
    CHECK_INT(tupe_backend_create(&be, "cpu64", 1, &e), 0);
    CHECK_INT(be->esize, 8);
    CHECK_INT(be->wsize, 8);
    tupe_backend_destroy(be);
    CHECK_INT(tupe_backend_create(&be, "tpu", 1, &e), TUPE_EUSAGE);
    CHECK(be == NULL);
    CHECK_HAS(e.msg, "unknown device 'tpu'");
    if (!have_gpu()) {
        CHECK_INT(tupe_backend_create(&be, "cuda", 1, &e), TUPE_EUSAGE);
        CHECK_HAS(e.msg, "device 'cuda': ");
        CHECK_INT(tupe_backend_create(&be, "cuda-bf16", 1, &e), TUPE_EUSAGE);
        CHECK_INT(tupe_backend_create(&be, "auto", 1, &e), 0);
        CHECK_STR(be->name, "cpu");
        tupe_backend_destroy(be);
    }
}

static void open_device_precision(void)
{
    tupe_backend *be;
    tupe_err e;
    char note[320];
    CHECK_INT(tupe_backend_open(&be, "cpu", "fp32", 1, 0, note, sizeof note, &e), 0);
    CHECK_STR(be->name, "cpu");
    CHECK_STR(note, "");
    tupe_backend_destroy(be);
    CHECK_INT(tupe_backend_open(&be, "cpu", NULL, 1, 0, note, sizeof note, &e), 0);
    CHECK_STR(be->name, "cpu");
    tupe_backend_destroy(be);
    CHECK_INT(tupe_backend_open(&be, "cpu", "bf16", 1, 0, note, sizeof note, &e), TUPE_EUSAGE);
    CHECK(be == NULL);
    CHECK_HAS(e.msg, "precision bf16 needs the CUDA backend");
    CHECK_INT(tupe_backend_open(&be, "cpu", "fp16", 1, 0, note, sizeof note, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "unknown precision 'fp16'");
    CHECK_INT(tupe_backend_open(&be, "gpu", NULL, 1, 0, note, sizeof note, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "unknown device 'gpu'");
    if (have_gpu())
        return;
    CHECK_INT(tupe_backend_open(&be, "auto", NULL, 1, 0, note, sizeof note, &e), 0);
    CHECK_STR(be->name, "cpu");
#if defined(TUPE_HAVE_CUDA)
    CHECK_HAS(note, "no CUDA device (");
    CHECK_HAS(note, "): computing on the CPU");
#else
    CHECK_STR(note, ""); /* nothing to fall back from */
#endif
    tupe_backend_destroy(be);
    CHECK_INT(tupe_backend_open(&be, "cuda", "fp32", 1, 0, note, sizeof note, &e), TUPE_EUSAGE);
    CHECK(be == NULL);
    CHECK_HAS(e.msg, "device 'cuda': ");
    CHECK_INT(tupe_backend_open(&be, "auto", "bf16", 1, 0, note, sizeof note, &e), TUPE_EUSAGE);
    CHECK_HAS(e.msg, "precision bf16 needs the CUDA backend");
}

static void local_gpu(void)
{
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                       "MPI_LOCALRANKID"};
    for (int i = 0; i < 4; i++)
        unsetenv(vars[i]);
    CHECK_INT(tupe_backend_local_gpu(), 0);
    setenv("SLURM_LOCALID", "5", 1);
    CHECK_INT(tupe_backend_local_gpu(), 5);
    setenv("LOCAL_RANK", "3", 1); /* the first variable set wins */
    CHECK_INT(tupe_backend_local_gpu(), 3);
    setenv("LOCAL_RANK", "x", 1); /* not a number: the next one */
    CHECK_INT(tupe_backend_local_gpu(), 5);
    setenv("LOCAL_RANK", "-2", 1);
    CHECK_INT(tupe_backend_local_gpu(), 5);
    for (int i = 0; i < 4; i++)
        unsetenv(vars[i]);
}

static void wide_offsets(void)
{
    tupe_backend b;
    memset(&b, 0, sizeof b);
    b.esize = 2, b.wsize = 4; /* cuda-bf16's sizes */
    char base[64];
    tupe_dev *p = (tupe_dev *)base;
    CHECK((char *)tupe_dev_at(&b, p, 3) == base + 6);
    CHECK((char *)tupe_dev_wat(&b, p, 3) == base + 12);
    CHECK(tupe_dev_at(&b, NULL, 3) == NULL);
    CHECK(tupe_dev_wat(&b, NULL, 3) == NULL);
}

UNIT_MAIN(T(names), T(open_device_precision), T(local_gpu), T(wide_offsets))
