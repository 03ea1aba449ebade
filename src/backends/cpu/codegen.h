/* The CPU code generator and loader of fused kernels (see codegen.c, codegen_load.c). */
#ifndef KILN_BACKENDS_CPU_CODEGEN_H
#define KILN_BACKENDS_CPU_CODEGEN_H

#include "backends/cpu/jit.h"
#include "graph/fused_ir.h"

/* One translation unit defining the kernel of irs[i] under names[i] (malloc'd; NULL with an
 * error on failure). */
char *kn_cpu_codegen_source(const kn_fused_ir *const *irs, const char *const *names, int n);
/* Kernels for n IRs: those already loaded by this process are looked up, the rest are
 * generated into one translation unit and loaded through the jit and its cache. */
kn_status kn_cpu_fused_compile(const kn_fused_ir *const *irs, int n, kn_fused_fn *fns);
/* The translation unit of irs' kernels under the symbols the loader gives them (malloc'd; NULL
 * with an error): what a dump shows. */
char *kn_cpu_fused_source(const kn_fused_ir *const *irs, int n);

#endif
