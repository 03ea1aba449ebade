/* Pieces the loss family's CPU kernel files share: the dropout draw, contiguous operands and
 * the kernels that live in their own files. */
#ifndef KILN_BACKENDS_CPU_K_LOSS_H
#define KILN_BACKENDS_CPU_K_LOSS_H

#include <stdatomic.h>

#include "backends/cpu/cpu_kernels.h"
#include "core/philox.h"
#include "kiln/op_enums.h"

/* The keep threshold of drop probability p: a 32-bit draw at or above it keeps its element
 * (p = 1 gives 2^32, which keeps nothing). */
static inline uint64_t kn_dropout_threshold(double p) { return (uint64_t)(p * 4294967296.0); }

/* Whether element e of a dropout draw is kept: word e % 4 of Philox counter offset + e / 4. */
static inline bool kn_dropout_keep(uint64_t seed, uint64_t offset, uint64_t e, uint64_t threshold) {
    return kn_philox(seed, offset + e / 4).v[e % 4] >= threshold;
}

/* Records p as the first bad position (*first: -1 for none) unless an earlier one is there:
 * chunks of rows call it from any thread, and the kernel raises the error after the loop. */
static inline void kn_note_first_bad(atomic_llong *first, int64_t p) {
    long long seen = atomic_load_explicit(first, memory_order_relaxed);
    while ((seen < 0 || p < seen) && !atomic_compare_exchange_weak(first, &seen, (long long)p)) {
    }
}

/* t's data as a contiguous array of dtype: t's own, or a copy in *scratch (freed by the caller). */
kn_status kn_cpu_loss_contiguous(kn_tensor *t, kn_dtype dtype, const char *op, kn_tensor **scratch, const void **data);

kn_status kn_cpu_attention_kernel(kn_node *n);
kn_status kn_cpu_attention_backward_kernel(kn_node *n);   /* k_attention_grad.c */
kn_status kn_cpu_cross_entropy_backward_kernel(kn_node *n); /* k_loss_grad.c */

#endif
