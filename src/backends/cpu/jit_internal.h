/* The compiler driver's two halves: running the compiler (jit_compile.c) and finding or
 * loading the result (jit.c). */
#ifndef KILN_BACKENDS_CPU_JIT_INTERNAL_H
#define KILN_BACKENDS_CPU_JIT_INTERNAL_H

#include <stdbool.h>
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
/* Makes a fresh private directory under $TMPDIR (else /tmp) for one compile or load; its path
 * goes to dir (size bytes). False (errno set) if it cannot; no error is recorded. */
bool kn_jit_make_dir(char *dir, size_t size);
/* Deletes a directory kn_jit_compile or kn_jit_make_dir made, with its files. */
void kn_jit_remove_dir(const char *dir);

/* Whether bytes are a shared object this process can load and whose every segment lies inside
 * them (dlopen would map one that does not, and touching it raises SIGBUS); if not, why (size
 * bytes; NULL when size is 0) names the first problem. */
bool kn_jit_check_object(const void *bytes, size_t n, char *why, size_t size);

#endif
