/* What this build of libtupe is: its version (the VERSION file, given by the build) and the
 * features compiled in. Recorded in what the library writes (e.g. a Hugging Face export's
 * config.json) and printed by every program's --version. */
#ifndef TUPE_VERSION_H
#define TUPE_VERSION_H

const char *tupe_version(void);
/* Compile-time features, e.g. "openmp cuda mpi". */
const char *tupe_features(void);

#endif
