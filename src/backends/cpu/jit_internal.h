/* The compiler driver's two halves: running the compiler (jit_compile.c) and finding or
 * loading the result (jit.c). */
#ifndef KILN_BACKENDS_CPU_JIT_INTERNAL_H
#define KILN_BACKENDS_CPU_JIT_INTERNAL_H

#include <stddef.h>

#include "kiln/status.h"

/* File names inside a compile's private directory. */
#define KN_JIT_SOURCE_NAME "kernel.c"
#define KN_JIT_OBJECT_NAME "kernel.so"

/* The CPU as the compiler targets it ("x86_64", and with -march=native the compiler's own
 * expansion of it), a part of every key. Computed once per process. */
const char *kn_jit_arch(void);

/* Compiles source into a shared object in a fresh private directory, whose path goes to dir
 * (size bytes); the object is dir/KN_JIT_OBJECT_NAME. Fails (and leaves no directory) when
 * the directory cannot be made, the compiler cannot run, or it rejects the source: then the
 * error names the compiler and its first error lines. */
kn_status kn_jit_compile(const char *source, char *dir, size_t size);
/* Deletes a directory kn_jit_compile made, with its files. */
void kn_jit_remove_dir(const char *dir);

#endif
