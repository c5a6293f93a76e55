/* cuemu: the CUDA runtime on the CPU (see cuemu.h). */
#include "cuemu.h"
