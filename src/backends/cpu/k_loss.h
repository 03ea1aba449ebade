/* Pieces the loss family's CPU kernel files share: the dropout draw, contiguous operands and
 * the kernels that live in their own files. */
#ifndef KILN_BACKENDS_CPU_K_LOSS_H
#define KILN_BACKENDS_CPU_K_LOSS_H

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

/* The max of x[0..C) (elements of storage type loaded by LOAD into compute type CT) and the
 * sum of exp(x - max) in double, into mx and sum. Sixteen independent lanes let the compiler
 * vectorize both sweeps without reassociating one sum (kiln builds without -ffast-math). */
#define KN_ROW_MAX_SUMEXP(CT, LOAD, x, C, mx, sum)                                          \
    do {                                                                                    \
        const int64_t full_ = (C) / 16 * 16;                                                \
        CT top_[16];                                                                        \
        double acc_[16];                                                                    \
        for (int k_ = 0; k_ < 16; k_++) top_[k_] = (CT)-INFINITY, acc_[k_] = 0;             \
        for (int64_t c_ = 0; c_ < full_; c_ += 16)                                          \
            for (int k_ = 0; k_ < 16; k_++) {                                               \
                CT v_ = LOAD((x)[c_ + k_]);                                                 \
                top_[k_] = v_ > top_[k_] ? v_ : top_[k_];                                   \
            }                                                                               \
        (mx) = (CT)-INFINITY;                                                               \
        for (int64_t c_ = full_; c_ < (C); c_++) (mx) = LOAD((x)[c_]) > (mx) ? LOAD((x)[c_]) : (mx); \
        for (int k_ = 0; k_ < 16; k_++) (mx) = top_[k_] > (mx) ? top_[k_] : (mx);          \
        for (int64_t c_ = 0; c_ < full_; c_ += 16)                                          \
            for (int k_ = 0; k_ < 16; k_++) acc_[k_] += (double)kn_exp((CT)(LOAD((x)[c_ + k_]) - (mx))); \
        (sum) = 0;                                                                          \
        for (int64_t c_ = full_; c_ < (C); c_++) (sum) += (double)kn_exp((CT)(LOAD((x)[c_]) - (mx))); \
        for (int k_ = 0; k_ < 16; k_++) (sum) += acc_[k_];                                  \
    } while (0)

/* t's data as a contiguous array of dtype: t's own, or a copy in *scratch (freed by the caller). */
kn_status kn_cpu_loss_contiguous(kn_tensor *t, kn_dtype dtype, const char *op, kn_tensor **scratch, const void **data);

kn_status kn_cpu_attention_kernel(kn_node *n);
kn_status kn_cpu_attention_backward_kernel(kn_node *n);   /* k_attention_grad.c */
kn_status kn_cpu_cross_entropy_backward_kernel(kn_node *n); /* k_loss_grad.c */

#endif
