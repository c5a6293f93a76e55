/* The programs' --device and --precision options (tupe-pretrain, tupe-glue): parsing, and
 * opening the backend they name with the one-line notice of a CPU fallback. */
#ifndef TUPE_DEVICEARG_H
#define TUPE_DEVICEARG_H

#include "backend/backend.h"
#include "cli/cli.h"

/* Their rows in a program's option table, defined once for every program (the ids are the
 * program's own). */
#define TUPE_DEVICEARG_OPTS(device_id, precision_id)                                              \
    {(device_id), "device", 0, TUPE_REQARG, "DEV", "auto, cpu or cuda (default: $TUPE_DEVICE, else auto)", \
     "list:auto cpu cuda"},                                                                      \
    {(precision_id), "precision", 0, TUPE_REQARG, "P", "fp32 or bf16 (default: bf16 on cuda, fp32 on cpu)", \
     "list:fp32 bf16"}

/* --device auto|cpu|cuda: *device becomes the name (left NULL when the option is absent, which
 * tupe_backend_open reads as $TUPE_DEVICE or auto). Usage error otherwise. */
int tupe_devicearg_device(tupe_cli *c, const char *arg, const char **device);
/* --precision fp32|bf16. */
int tupe_devicearg_precision(tupe_cli *c, const char *arg, const char **precision);
/* The backend for them, on the GPU of this process's local rank; errors printed, status
 * returned. */
int tupe_devicearg_open(tupe_cli *c, const char *device, const char *precision,
                        tupe_backend **be);

#endif
