/* Measurement (measure.cu): per-operation timing with CUDA events, and the emulated GPU's
 * counters of the device's work. */
#ifndef TUPE_KERNELS_MEASURE_CUH
#define TUPE_KERNELS_MEASURE_CUH

#include "common.cuh"

/* Frees the timing's events (the backend's destruction). */
void measure_destroy(cu_priv *pr);

#endif
