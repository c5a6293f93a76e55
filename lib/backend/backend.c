#include "backend/backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend_cpu.h"
#if defined(TUPE_HAVE_CUDA)
#include "backend/backend_cuda.h"
#endif

int tupe_cuda_devices(char *why, size_t cap)
{
#if defined(TUPE_HAVE_CUDA)
    return tupe_backend_cuda_devices(why, cap);
#else
    if (cap) /* no GPU to miss: "auto" is the CPU without a notice */
        why[0] = 0;
    return 0;
#endif
}

int tupe_backend_local_gpu(void)
{
    static const char *const vars[] = {"LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK", "SLURM_LOCALID",
                                       "MPI_LOCALRANKID"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v && *v ? strtol(v, &end, 10) : -1;
        if (v && *v && !*end && n >= 0 && n < 1 << 20)
            return (int)n;
    }
    return 0;
}

static int cuda_create(tupe_backend **be, int bf16, int gpu, tupe_err *e)
{
#if defined(TUPE_HAVE_CUDA)
    return tupe_backend_cuda_create(be, bf16, gpu, e);
#else
    (void)be, (void)bf16, (void)gpu;
    return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': this build has no CUDA backend (rebuild "
                     "with CUDA=1 where the CUDA toolkit is installed)");
#endif
}

int tupe_backend_create_on(tupe_backend **be, const char *name, int threads, int gpu, tupe_err *e)
{
    *be = NULL;
    if (!name || strcmp(name, "auto") == 0) {
        char why[256];
        if (tupe_cuda_devices(why, sizeof why) > 0)
            return cuda_create(be, 0, gpu, e);
        return tupe_backend_cpu_create(be, 4, threads, e);
    }
    if (strcmp(name, "cpu") == 0)
        return tupe_backend_cpu_create(be, 4, threads, e);
    if (strcmp(name, "cpu64") == 0)
        return tupe_backend_cpu_create(be, 8, threads, e);
    if (strcmp(name, "cuda") == 0)
        return cuda_create(be, 0, gpu, e);
    if (strcmp(name, "cuda-bf16") == 0)
        return cuda_create(be, 1, gpu, e);
    return tupe_fail(e, TUPE_EUSAGE, "unknown device '%s' (expected auto, cpu or cuda)", name);
}

int tupe_backend_create(tupe_backend **be, const char *name, int threads, tupe_err *e)
{
    return tupe_backend_create_on(be, name, threads, 0, e);
}

int tupe_backend_open(tupe_backend **be, const char *device, const char *precision, int threads,
                      int gpu, char *notice, size_t cap, tupe_err *e)
{
    *be = NULL;
    if (cap)
        notice[0] = 0;
    int bf16 = -1; /* -1: the device's default */
    if (precision && strcmp(precision, "fp32") == 0)
        bf16 = 0;
    else if (precision && strcmp(precision, "bf16") == 0)
        bf16 = 1;
    else if (precision)
        return tupe_fail(e, TUPE_EUSAGE, "unknown precision '%s' (expected fp32 or bf16)",
                         precision);
    /* No --device: the environment's choice, so that scripts and test suites can pin one. */
    const char *from = "";
    if (!device && (device = getenv("TUPE_DEVICE")) != NULL && *device)
        from = " (from TUPE_DEVICE)";
    int cuda;
    char why[256] = "";
    if (!device || !*device || strcmp(device, "auto") == 0)
        cuda = tupe_cuda_devices(why, sizeof why) > 0;
    else if (strcmp(device, "cpu") == 0)
        cuda = 0;
    else if (strcmp(device, "cuda") == 0)
        cuda = 1;
    else
        return tupe_fail(e, TUPE_EUSAGE, "unknown device '%s'%s (expected auto, cpu or cuda)",
                         device, from);
    if (!cuda && bf16 == 1)
        return tupe_fail(e, TUPE_EUSAGE, "precision bf16 needs the CUDA backend%s%s%s (the CPU "
                         "backend computes in fp32)", why[0] ? ", and there is none here (" : "",
                         why, why[0] ? ")" : "");
    if (cuda)
        return cuda_create(be, bf16 != 0, gpu, e);
    if (why[0] && cap)
        snprintf(notice, cap, "no CUDA device (%s): computing on the CPU", why);
    return tupe_backend_cpu_create(be, 4, threads, e);
}

void tupe_backend_destroy(tupe_backend *be)
{
    if (be)
        be->destroy(be);
}
