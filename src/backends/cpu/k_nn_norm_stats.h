/* The normalization statistics the CPU norm kernels share (k_nn_norm.c, k_nn_norm_backward.c):
 * one definition, so that a backward kernel recomputing mean and rstd from x gets the forward's
 * values bit for bit. Sums accumulate in double over values shifted by a first one (which
 * keeps x^2 - mean^2 from cancelling). */
#ifndef KILN_BACKENDS_CPU_K_NN_NORM_STATS_H
#define KILN_BACKENDS_CPU_K_NN_NORM_STATS_H

#include <stdint.h>

#include "backends/cpu/reduce_plan.h"

/* Adds the sums of (x - shift) and its square over n contiguous elements, each in lanes (as
 * KN_LANE_SUM) so that one pass vectorizes: the widened block v first, then one statement per
 * loop, the form GCC 12 vectorizes (one loop doing both widening and sums stays scalar). */
#define KN_NORM_ADD_STATS(T)                                                                     \
    static inline void add_stats_##T(const T *restrict x, int64_t n, double shift, double *s, double *ss) { \
        const int64_t full = n / KN_LANES * KN_LANES;                                           \
        double la[KN_LANES] = {0}, lb[KN_LANES] = {0}, a = 0, b = 0;                            \
        for (int64_t i = 0; i < full; i += KN_LANES) {                                          \
            double v[KN_LANES];                                                                 \
            for (int k = 0; k < KN_LANES; k++) v[k] = (double)x[i + k] - shift;                 \
            for (int k = 0; k < KN_LANES; k++) la[k] += v[k];                                   \
            for (int k = 0; k < KN_LANES; k++) lb[k] += v[k] * v[k];                            \
        }                                                                                       \
        for (int64_t i = full; i < n; i++) {                                                    \
            double v = (double)x[i] - shift;                                                    \
            a += v;                                                                             \
            b += v * v;                                                                         \
        }                                                                                       \
        for (int k = 0; k < KN_LANES; k++) a += la[k], b += lb[k];                              \
        *s += a, *ss += b;                                                                      \
    }
KN_NORM_ADD_STATS(float)
KN_NORM_ADD_STATS(double)
#undef KN_NORM_ADD_STATS

#endif
