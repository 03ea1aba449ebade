/* The normalization statistics the CPU norm kernels share (k_nn_norm.c, k_nn_norm_backward.c):
 * one definition, so that a backward kernel recomputing mean and rstd from x gets the forward's
 * values bit for bit. Sums accumulate in double over values shifted by a first one (which
 * keeps x^2 - mean^2 from cancelling). */
#ifndef KILN_BACKENDS_CPU_K_NN_NORM_STATS_H
#define KILN_BACKENDS_CPU_K_NN_NORM_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "backends/cpu/reduce_plan.h"

/* The sums of (x - shift) and its square over `runs` runs of n contiguous elements, `step`
 * apart from x, into sums[0] and sums[1] (layer and rms norm: one run a row). They add up in
 * KN_LANES lanes (as KN_LANE_SUM), the widened block v first and then one statement per loop,
 * the form GCC 12 vectorizes (one loop doing both widening and sums stays scalar); the lanes
 * carry across the runs, so short runs (batch_norm of small images: 16 or 49 per run) still
 * vectorize. run_sums_grad_T also sums g (laid out as x) and g * (x - shift) into sums[2] and
 * sums[3] (batch_norm's backward) in the same pass, with sums[0..1] bit for bit run_sums_T's.
 * WITH_G is a constant, so that each form is a plain loop (GCC 12 vectorizes neither form of
 * one loop testing g at run time). */
#define KN_NORM_RUN_SUMS(T, NAME, WITH_G)                                                        \
    static inline void NAME(const T *x, const T *g, int64_t runs, int64_t n, int64_t step, double shift, \
                            double sums[]) {                                                    \
        const int64_t full = n / KN_LANES * KN_LANES;                                           \
        double la[KN_LANES] = {0}, lb[KN_LANES] = {0}, lc[KN_LANES] = {0}, ld[KN_LANES] = {0};  \
        double a = 0, b = 0, c = 0, d = 0;                                                      \
        for (int64_t r = 0; r < runs; r++) {                                                    \
            const T *restrict xr = x + r * step, *restrict gr = WITH_G ? g + r * step : NULL;   \
            for (int64_t i = 0; i < full; i += KN_LANES) {                                      \
                double v[KN_LANES], gv[KN_LANES];                                               \
                for (int k = 0; k < KN_LANES; k++) v[k] = (double)xr[i + k] - shift;            \
                for (int k = 0; k < KN_LANES; k++) la[k] += v[k];                               \
                for (int k = 0; k < KN_LANES; k++) lb[k] += v[k] * v[k];                        \
                if (!WITH_G) continue;                                                          \
                for (int k = 0; k < KN_LANES; k++) gv[k] = (double)gr[i + k];                   \
                for (int k = 0; k < KN_LANES; k++) lc[k] += gv[k];                              \
                for (int k = 0; k < KN_LANES; k++) ld[k] += gv[k] * v[k];                       \
            }                                                                                   \
            for (int64_t i = full; i < n; i++) {                                                \
                double v = (double)xr[i] - shift;                                               \
                a += v;                                                                         \
                b += v * v;                                                                     \
                if (WITH_G) c += (double)gr[i], d += (double)gr[i] * v;                         \
            }                                                                                   \
        }                                                                                       \
        for (int k = 0; k < KN_LANES; k++) a += la[k], b += lb[k], c += lc[k], d += ld[k];      \
        sums[0] = a, sums[1] = b;                                                               \
        if (WITH_G) sums[2] = c, sums[3] = d;                                                   \
    }
KN_NORM_RUN_SUMS(float, run_sums_float, 0)
KN_NORM_RUN_SUMS(double, run_sums_double, 0)
KN_NORM_RUN_SUMS(float, run_sums_grad_float, 1)
KN_NORM_RUN_SUMS(double, run_sums_grad_double, 1)
#undef KN_NORM_RUN_SUMS

/* The mean and (biased, clamped at 0) variance of count values from their sums about shift
 * (run_sums' sums[0..1]). */
static inline void stats_from_sums(const double sums[2], double count, double shift, double *mean, double *var) {
    double m = count ? sums[0] / count : 0, v = count ? sums[1] / count - m * m : 0;
    *mean = shift + m;
    *var = v > 0 ? v : 0;
}

#endif
