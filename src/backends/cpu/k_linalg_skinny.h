/* Few-row products against a weight stored [N, K] (k_linalg_skinny.c). */
#ifndef KILN_BACKENDS_CPU_K_LINALG_SKINNY_H
#define KILN_BACKENDS_CPU_K_LINALG_SKINNY_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/dtype.h"

/* Rows at most this many go through kn_cpu_skinny. */
#define KN_SKINNY_MAX_ROWS 8

/* The vector tiles, narrowest first: kn_cpu_skinny runs the widest the CPU has, at most the
 * limit (the widest by default; tests lower it to check each tile on a CPU that has several). */
typedef enum { KN_SKINNY_PORTABLE, KN_SKINNY_AVX2, KN_SKINNY_AVX512, KN_SKINNY_AVX512_BF16 } kn_skinny_tile;
/* Whether the CPU (and this build) has tile t. */
bool kn_cpu_skinny_has(kn_skinny_tile t);
void kn_cpu_skinny_limit(kn_skinny_tile t);

/* c [M, N] (contiguous, dtype dt) = a [M, K] (strides ars, acs) times w^T, for w [N, K]
 * stored with row stride ldw (elements); dt is KN_F32, KN_BF16 or KN_F16 for all three.
 * False: out of memory. */
bool kn_cpu_skinny(kn_dtype dt, const void *a, int64_t ars, int64_t acs, const void *w, int64_t ldw, void *c,
                   int64_t M, int64_t N, int64_t K);

#endif
