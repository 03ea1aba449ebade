/* Single-precision transcendental functions written so that compilers can vectorize loops
 * that call them (static inline, no libm calls, no errno). Accuracy against libm's double
 * results is tested in tests/test_vector_math.c. */
#ifndef KILN_OPS_VECTOR_MATH_H
#define KILN_OPS_VECTOR_MATH_H

#include <math.h>

/* Baseline: libm. Replaced by polynomial kernels of the same names. */
static inline float kn_expf(float x) { return expf(x); }
static inline float kn_expm1f(float x) { return expm1f(x); }
static inline float kn_logf(float x) { return logf(x); }
static inline float kn_log1pf(float x) { return log1pf(x); }
static inline float kn_log2f(float x) { return log2f(x); }
static inline float kn_sinf(float x) { return sinf(x); }
static inline float kn_cosf(float x) { return cosf(x); }
static inline float kn_tanhf(float x) { return tanhf(x); }
static inline float kn_erff(float x) { return erff(x); }
static inline float kn_sigmoidf(float x) { return 1.0f / (1.0f + kn_expf(-x)); }

#endif
