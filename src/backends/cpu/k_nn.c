/* CPU kernels of the nn family (see src/ops/defs/nn.def). */
#include "backends/cpu/cpu_kernels.h"

const kn_kernel_reg kn_cpu_kernels_nn[] = {
    {0},
};
