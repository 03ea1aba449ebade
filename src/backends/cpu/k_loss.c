/* CPU kernels of the loss family (see src/ops/defs/loss.def). */
#include "backends/cpu/cpu_kernels.h"

const kn_kernel_reg kn_cpu_kernels_loss[] = {
    {0},
};
