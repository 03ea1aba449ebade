/* Source kernels of custom ops on the CPU: the op's scalar expression, generated into a C
 * translation unit per dtype and compiled through the compiler driver and its cache. */
#ifndef KILN_BACKENDS_CPU_CUSTOM_SOURCE_H
#define KILN_BACKENDS_CPU_CUSTOM_SOURCE_H

#include "backends/cpu/cpu_kernels.h"

/* Compiles (or finds) op id's kernel for dtype, once per process; the backend's
 * custom_prepare hook. A compile failure is an error with the compiler's message. */
kn_status kn_cpu_custom_prepare(int id, kn_dtype dtype);
/* The kernel prepared for (id, dtype): an inner loop of the elementwise engine, operand 0
 * the output; NULL if it was never prepared. */
kn_ew_inner_fn kn_cpu_custom_source_fn(int id, kn_dtype dtype);

#endif
