/* The CPU kernel families registered at start-up. A new family adds one line here. */
#include "backends/cpu/cpu_kernels.h"

const kn_kernel_reg *const kn_cpu_kernel_families[] = {
    kn_cpu_kernels_creation, kn_cpu_kernels_elementwise, kn_cpu_kernels_copy, kn_cpu_kernels_reduce,
    kn_cpu_kernels_linalg,   kn_cpu_kernels_layout,      kn_cpu_kernels_index, kn_cpu_kernels_nn,
    kn_cpu_kernels_loss,     kn_cpu_kernels_optim,       kn_cpu_kernels_fused, kn_cpu_kernels_custom,
    NULL,
};
