/* The CPU backend's compiler driver: C source -> shared object (through the compilation
 * cache) -> loaded functions. Used by the fused-mode code generator and by custom ops whose
 * kernel is a source string. */
#ifndef KILN_BACKENDS_CPU_JIT_H
#define KILN_BACKENDS_CPU_JIT_H

#include "kiln/status.h"

/* Header text every generated translation unit may start with: kiln's scalar math
 * (ops/scalar_math.h, ops/vector_math.h) and half-precision conversions (core/half.h),
 * embedded at build time so that generated code needs no installed headers. */
extern const char kn_jit_prelude[];

/* Compiles `source` (a whole translation unit) or finds it in the cache, and returns the
 * address of each of the n symbols in fns. The key is the source, the compiler and its flags,
 * the CPU architecture and kiln's version. In-memory hits cost a hash lookup; disk hits a
 * read, the entry's checks (trailer, key, ELF) and a dlopen of a private copy; misses, and
 * entries that fail a check or lack a symbol (deleted), run the system C compiler ($KILN_CC,
 * else cc). Failure (no compiler, a compile error, a damaged compiler output, a missing
 * symbol) is an error naming the compiler's first message or the problem. Thread-safe. */
kn_status kn_jit_load(const char *source, int n, const char *const *symbols, void **fns);

/* The compiler command and flags that make part of the key ("cc -O3 -march=native ..."). */
const char *kn_jit_compiler_id(void);

#endif
