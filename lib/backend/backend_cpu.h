/* The CPU backend: fp32 (the reference and the fast path) and double precision (for the
 * finite-difference gradient checks), from one source. Matrix products go to OpenBLAS,
 * called single-threaded from inside OpenMP teams that split the work (so BLAS threads and
 * OpenMP threads never compete for the cores); everything else is OpenMP loops over the
 * per-element math of pointwise.h. */
#ifndef TUPE_BACKEND_CPU_H
#define TUPE_BACKEND_CPU_H

#include "backend/backend.h"

/* precision_bytes: 4 (fp32) or 8 (double). threads 0 = the OpenMP default. Sets OpenBLAS to
 * one thread for the whole process (it is called from OpenMP threads). */
int tupe_backend_cpu_create(tupe_backend **be, int precision_bytes, int threads, tupe_err *e);

#endif
