#include "backend.h"

#include <string.h>

#include "backend_cpu.h"

int tupe_backend_create(tupe_backend **be, const char *name, int threads, tupe_err *e)
{
    *be = NULL;
    if (!name || strcmp(name, "auto") == 0 || strcmp(name, "cpu") == 0)
        return tupe_backend_cpu_create(be, 4, threads, e);
    if (strcmp(name, "cpu64") == 0)
        return tupe_backend_cpu_create(be, 8, threads, e);
    if (strcmp(name, "cuda") == 0)
        return tupe_fail(e, TUPE_EUSAGE, "device 'cuda': this build has no CUDA backend");
    return tupe_fail(e, TUPE_EUSAGE, "unknown device '%s' (expected auto, cpu or cuda)", name);
}

void tupe_backend_destroy(tupe_backend *be)
{
    if (be)
        be->destroy(be);
}
