#include "cli/devicearg.h"

#include <string.h>

#include "backend/blas.h"

int tupe_devicearg_device(tupe_cli *c, const char *arg, const char **device)
{
    static const char *const names[] = {"auto", "cpu", "cuda"};
    int k;
    if (tupe_cli_choice(c, arg, "auto|cpu|cuda", &k))
        return TUPE_EUSAGE;
    *device = names[k];
    return 0;
}

int tupe_devicearg_precision(tupe_cli *c, const char *arg, const char **precision)
{
    int k;
    if (tupe_cli_choice(c, arg, "fp32|bf16", &k))
        return TUPE_EUSAGE;
    *precision = k ? "bf16" : "fp32";
    return 0;
}

int tupe_devicearg_open(tupe_cli *c, const char *device, const char *precision,
                        tupe_backend **be)
{
    char notice[320];
    tupe_err e;
    if (tupe_backend_open(be, device, precision, c->threads, tupe_backend_local_gpu(), notice,
                          sizeof notice, &e))
        return tupe_cli_error(c, &e);
    if (notice[0])
        tupe_cli_note(c, "%s", notice);
    /* BLAS kernels that failed their start-up check and were replaced (CPU backend) */
    const tupe_blas_info *bi = tupe_blas_info_get();
    if (bi && bi->notice[0] && strncmp((*be)->name, "cpu", 3) == 0)
        tupe_cli_note(c, "%s", bi->notice);
    return 0;
}
