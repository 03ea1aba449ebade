/* Few-row products against a weight stored [N, K] (k_linalg_skinny.c). */
#ifndef KILN_BACKENDS_CPU_K_LINALG_SKINNY_H
#define KILN_BACKENDS_CPU_K_LINALG_SKINNY_H

#include "backends/cpu/cpu_kernels.h"

/* Rows at most this many go through kn_cpu_skinny. */
#define KN_SKINNY_MAX_ROWS 8

/* c [M, N] (contiguous, dtype dt) = a [M, K] (strides ars, acs) times w^T, for w [N, K]
 * stored with row stride ldw (elements); dt is KN_F32, KN_BF16 or KN_F16 for all three.
 * False: out of memory. */
bool kn_cpu_skinny(kn_dtype dt, const void *a, int64_t ars, int64_t acs, const void *w, int64_t ldw, void *c,
                   int64_t M, int64_t N, int64_t K);

#endif
