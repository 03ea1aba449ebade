/* CPU kernels of the layout family (see src/ops/defs/layout.def). */
#include "backends/cpu/cpu_kernels.h"

const kn_kernel_reg kn_cpu_kernels_layout[] = {
    {0},
};
