#include "base/version.h"

#ifndef TUPE_VERSION
#define TUPE_VERSION "0.0.0"
#endif

const char *tupe_version(void) { return TUPE_VERSION; }

const char *tupe_features(void)
{
    return "openmp"
#if defined(TUPE_HAVE_CUDA)
           " cuda"
#endif
#if defined(TUPE_HAVE_MPI)
           " mpi"
#endif
        ;
}
