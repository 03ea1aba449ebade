/* CPU kernels of the index family (see src/ops/defs/index.def). */
#include "backends/cpu/cpu_kernels.h"

const kn_kernel_reg kn_cpu_kernels_index[] = {
    {0},
};
