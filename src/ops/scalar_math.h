/* Scalar math for the elementwise expressions of the op table. The eager CPU kernels and the
 * code generators use these same definitions, so every mode computes the same function.
 * Generic over the compute types: float, double, int32_t, int64_t, uint8_t (bool). */
#ifndef KILN_OPS_SCALAR_MATH_H
#define KILN_OPS_SCALAR_MATH_H

#include <math.h>
#include <stdint.h>

#include "ops/vector_math.h"

/* A constant in the expression's compute type (each kernel typedefs kn_ct). */
#define KC(v) ((kn_ct)(v))
/* Kernels declare kn_ct even where an expression uses no constant. */
#if defined(__GNUC__)
#pragma GCC diagnostic ignored "-Wunused-local-typedefs"
#endif

#define KN_FLOAT_GENERIC(x, ff, df) _Generic((x), float: ff, double: df)(x)

#define kn_exp(x) KN_FLOAT_GENERIC(x, kn_expf, exp)
#define kn_expm1(x) KN_FLOAT_GENERIC(x, kn_expm1f, expm1)
#define kn_log(x) KN_FLOAT_GENERIC(x, kn_logf, log)
#define kn_log1p(x) KN_FLOAT_GENERIC(x, kn_log1pf, log1p)
#define kn_log2(x) KN_FLOAT_GENERIC(x, kn_log2f, log2)
#define kn_sqrt(x) KN_FLOAT_GENERIC(x, sqrtf, sqrt)
#define kn_sin(x) KN_FLOAT_GENERIC(x, kn_sinf, sin)
#define kn_cos(x) KN_FLOAT_GENERIC(x, kn_cosf, cos)
#define kn_tanh(x) KN_FLOAT_GENERIC(x, kn_tanhf, tanh)
#define kn_erf(x) KN_FLOAT_GENERIC(x, kn_erff, erf)
/* Rounding to an integer: integers are their own value (PyTorch keeps their dtype). */
static inline int32_t kn_self_i32(int32_t x) { return x; }
static inline int64_t kn_self_i64(int64_t x) { return x; }
#define KN_ROUNDING_GENERIC(x, ff, df) \
    _Generic((x), float: ff, double: df, int32_t: kn_self_i32, int64_t: kn_self_i64)(x)
#define kn_floor(x) KN_ROUNDING_GENERIC(x, floorf, floor)
#define kn_ceil(x) KN_ROUNDING_GENERIC(x, ceilf, ceil)
#define kn_rint(x) KN_ROUNDING_GENERIC(x, rintf, rint) /* halves to even in the default rounding mode */
#define kn_trunc(x) KN_ROUNDING_GENERIC(x, truncf, trunc)
#define kn_sigmoid(x) KN_FLOAT_GENERIC(x, kn_sigmoidf, kn_sigmoid_f64)

static inline double kn_sigmoid_f64(double x) { return 1.0 / (1.0 + exp(-x)); }

/* softplus with beta a and threshold b. The f32 form computes both values and selects, so
 * that the loop stays branch-free and vectorizes. */
static inline float kn_softplus_f32(float x, float a, float b) {
    return kn_vm_sel(x * a > b, x, kn_log1pf(kn_expf(x * a)) / a);
}
static inline double kn_softplus_f64(double x, double a, double b) { return x * a > b ? x : log1p(exp(x * a)) / a; }
#define kn_softplus(x, a, b) _Generic((x), float: kn_softplus_f32, double: kn_softplus_f64)(x, a, b)

static inline int32_t kn_abs_i32(int32_t x) { return x < 0 ? (int32_t)(0u - (uint32_t)x) : x; }
static inline int64_t kn_abs_i64(int64_t x) { return x < 0 ? (int64_t)(0ull - (uint64_t)x) : x; }
#define kn_abs(x) _Generic((x), float: fabsf, double: fabs, int32_t: kn_abs_i32, int64_t: kn_abs_i64)(x)

/* PyTorch's maximum and minimum (and clamp, their composition): NaN if either operand is NaN;
 * of equal operands (-0.0 and 0.0) the first, as PyTorch's scalar loop gives (its vectorized
 * loop, for longer tensors, gives the second). */
#define KN_MIN_MAX(T)                                                                     \
    static inline T kn_max_or_nan_##T(T x, T y) { return ((x < y) | (y != y)) ? y : x; } \
    static inline T kn_min_or_nan_##T(T x, T y) { return ((y < x) | (y != y)) ? y : x; }
KN_MIN_MAX(float)
KN_MIN_MAX(double)
KN_MIN_MAX(int32_t)
KN_MIN_MAX(int64_t)
KN_MIN_MAX(uint8_t)
#undef KN_MIN_MAX
#define kn_max_or_nan(x, y)                                                                             \
    _Generic((x), float: kn_max_or_nan_float, double: kn_max_or_nan_double, int32_t: kn_max_or_nan_int32_t, \
             int64_t: kn_max_or_nan_int64_t, uint8_t: kn_max_or_nan_uint8_t)(x, y)
#define kn_min_or_nan(x, y)                                                                             \
    _Generic((x), float: kn_min_or_nan_float, double: kn_min_or_nan_double, int32_t: kn_min_or_nan_int32_t, \
             int64_t: kn_min_or_nan_int64_t, uint8_t: kn_min_or_nan_uint8_t)(x, y)

/* PyTorch's sign: -1, 0 or 1, and 0 for NaN; a bool is its own sign. */
static inline float kn_signum_f(float x) { return (float)((x > 0) - (x < 0)); }
static inline double kn_signum_d(double x) { return (double)((x > 0) - (x < 0)); }
static inline int64_t kn_signum_i(int64_t x) { return (x > 0) - (x < 0); }
static inline uint8_t kn_signum_b(uint8_t x) { return x; }
#define kn_signum(x)                                                                                     \
    _Generic((x), float: kn_signum_f, double: kn_signum_d, int32_t: kn_signum_i, int64_t: kn_signum_i, \
             uint8_t: kn_signum_b)(x)

/* Whether clamp(y, a, b) passes y's gradient, as PyTorch 2.15's clamp_backward decides: y strictly
 * inside each bound, or that side unbounded (+-inf); never at a bound, a NaN y or a NaN bound. */
#define kn_clamp_passes(y, a, b) \
    (((y) == (y)) & (((y) > (a)) | ((a) == -(kn_ct)INFINITY)) & (((y) < (b)) | ((b) == (kn_ct)INFINITY)))

/* Predicates that are false for integers. */
static inline int kn_isinf_f(float x) { return x == INFINITY || x == -INFINITY; }
static inline int kn_isinf_d(double x) { return x == INFINITY || x == -INFINITY; }
static inline int kn_isfinite_f(float x) { return x - x == 0.0f; }
static inline int kn_isfinite_d(double x) { return x - x == 0.0; }
static inline int kn_int_false(int64_t x) { (void)x; return 0; }
static inline int kn_int_true(int64_t x) { (void)x; return 1; }
#define kn_isinf(x) _Generic((x), float: kn_isinf_f, double: kn_isinf_d, default: kn_int_false)(x)
#define kn_isfinite(x) _Generic((x), float: kn_isfinite_f, double: kn_isfinite_d, default: kn_int_true)(x)

/* Bitwise not: bool flips its one bit. */
#define kn_bitnot(x) _Generic((x), uint8_t: (uint8_t)!(x), default: ~(x))

/* Shifts defined for every amount: out-of-range amounts give 0 (or the sign for >>). */
#define KN_SHIFTS(T, UT, BITS)                                                                   \
    static inline T kn_shl_##T(T x, T y) { return y < 0 || y >= BITS ? 0 : (T)((UT)x << y); }  \
    static inline T kn_shr_##T(T x, T y) { return y < 0 || y >= BITS ? (x < 0 ? -1 : 0) : x >> y; }
KN_SHIFTS(int32_t, uint32_t, 32)
KN_SHIFTS(int64_t, uint64_t, 64)
static inline uint8_t kn_shl_u8(uint8_t x, uint8_t y) { return y ? 0 : x; }
static inline uint8_t kn_shr_u8(uint8_t x, uint8_t y) { return y ? 0 : x; }
#define kn_shl(x, y) _Generic((x), int32_t: kn_shl_int32_t, int64_t: kn_shl_int64_t, uint8_t: kn_shl_u8)(x, y)
#define kn_shr(x, y) _Generic((x), int32_t: kn_shr_int32_t, int64_t: kn_shr_int64_t, uint8_t: kn_shr_u8)(x, y)

/* Python's floor division and modulo (the result takes the divisor's sign). Integer division
 * by zero sets *bad instead of trapping. */
#define KN_INT_DIVMOD(T, MINV)                                                            \
    static inline T kn_floordiv_##T(T x, T y, int *bad) {                                 \
        if (y == 0) { *bad = 1; return 0; }                                               \
        if (y == -1) return (T)(0 - (uint64_t)x); /* MIN / -1 wraps as PyTorch does */  \
        T q = x / y;                                                                      \
        return (x % y != 0 && ((x < 0) != (y < 0))) ? q - 1 : q;                          \
    }                                                                                     \
    static inline T kn_remainder_##T(T x, T y, int *bad) {                                \
        if (y == 0) { *bad = 1; return 0; }                                               \
        if (y == -1) return 0;                                                            \
        T r = x % y;                                                                      \
        return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;                              \
    }
KN_INT_DIVMOD(int32_t, INT32_MIN)
KN_INT_DIVMOD(int64_t, INT64_MIN)
/* Float floor division is PyTorch's (c10's div_floor_floating, after CPython): (x - fmod(x, y)) / y,
 * corrected to the floor, so that x == floordiv * y + remainder holds as closely as rounding
 * allows; x / y for y == 0, NaN for an infinite x, and the sign of x / y on a zero quotient. */
#define KN_FLOAT_FLOORDIV(T, FMOD, FLOOR, COPYSIGN)               \
    static inline T kn_floordiv_##T(T x, T y, int *bad) {          \
        (void)bad;                                                 \
        if (y == 0) return x / y;                                  \
        T mod = FMOD(x, y);                                        \
        T div = (x - mod) / y;                                     \
        if (mod != 0 && (y < 0) != (mod < 0)) div -= 1;            \
        if (div == 0) return COPYSIGN(0, x / y);                   \
        T fl = FLOOR(div);                                         \
        return div - fl > (T)0.5 ? fl + 1 : fl;                    \
    }
KN_FLOAT_FLOORDIV(float, fmodf, floorf, copysignf)
KN_FLOAT_FLOORDIV(double, fmod, floor, copysign)
#undef KN_FLOAT_FLOORDIV
static inline float kn_remainder_float(float x, float y, int *bad) {
    (void)bad;
    float r = fmodf(x, y);
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
static inline double kn_remainder_double(double x, double y, int *bad) {
    (void)bad;
    double r = fmod(x, y);
    return (r != 0 && ((r < 0) != (y < 0))) ? r + y : r;
}
#define kn_floordiv(x, y, bad)                                                                      \
    _Generic((x), float: kn_floordiv_float, double: kn_floordiv_double, int32_t: kn_floordiv_int32_t, \
             int64_t: kn_floordiv_int64_t)(x, y, bad)
#define kn_remainder(x, y, bad)                                                                        \
    _Generic((x), float: kn_remainder_float, double: kn_remainder_double, int32_t: kn_remainder_int32_t, \
             int64_t: kn_remainder_int64_t)(x, y, bad)

/* Integer powers by squaring (wrapping as PyTorch's do). A negative exponent gives what
 * PyTorch gives: 1 for base 1, +-1 for base -1 (by the exponent's parity), else 0 (0 too). */
#define KN_INT_POW(T)                                                                  \
    static inline T kn_pow_##T(T x, T y, int *bad) {                                   \
        (void)bad;                                                                     \
        if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? -1 : 1) : 0;               \
        uint64_t r = 1, b = (uint64_t)x;                                               \
        for (T e = y; e; e >>= 1) { if (e & 1) r *= b; b *= b; }                       \
        return (T)r;                                                                   \
    }
KN_INT_POW(int32_t)
KN_INT_POW(int64_t)
static inline float kn_pow_float(float x, float y, int *bad) { (void)bad; return powf(x, y); }
static inline double kn_pow_double(double x, double y, int *bad) { (void)bad; return pow(x, y); }
#define kn_pow(x, y, bad) \
    _Generic((x), float: kn_pow_float, double: kn_pow_double, int32_t: kn_pow_int32_t, int64_t: kn_pow_int64_t)(x, y, bad)

/* a * b + c, rounded once for floats: PyTorch's CPU kernels fuse these (lerp explicitly,
 * addcmul by the compiler), so kiln spells the fused multiply-add where they have one. */
static inline int32_t kn_fma_i32(int32_t a, int32_t b, int32_t c) { return a * b + c; }
static inline int64_t kn_fma_i64(int64_t a, int64_t b, int64_t c) { return a * b + c; }
#define kn_fma(a, b, c) _Generic((a), float: fmaf, double: fma, int32_t: kn_fma_i32, int64_t: kn_fma_i64)(a, b, c)

/* torch.lerp's formula as its CPU kernel computes it (lerp_vec): from the nearer end, with
 * |w| < 0.5 choosing start, in one fused multiply-add; exact at both ends. */
#define kn_lerp(x, y, w) \
    (kn_abs(w) < KC(0.5) ? kn_fma((w), (y) - (x), (x)) : kn_fma((w) - KC(1), (y) - (x), (y)))

/* Derivatives of the activations, for the backward ops (defs/elementwise_backward.def).
 * Branch-free and always inlined (too big for the compiler to inline by itself), so that
 * the kernels' loops vectorize. */
#define KN_ACTIVATION_GRADS(T, SEL)                                                                 \
    KN_VM_INLINE T kn_gelu_grad_##T(T x) { /* Phi(x) + x phi(x) */                                  \
        T cdf = (T)0.5 * ((T)1 + kn_erf(x * (T)0.70710678118654752440));                            \
        return cdf + x * (T)0.39894228040143267794 * kn_exp((T)-0.5 * x * x);                       \
    }                                                                                               \
    KN_VM_INLINE T kn_gelu_tanh_grad_##T(T x) { /* u = k (x + c x^3), d/dx of x/2 (1 + tanh u) */   \
        T x2 = x * x, t = kn_tanh((T)0.79788456080286535588 * x * ((T)1 + (T)0.044715 * x2));       \
        T du = (T)0.79788456080286535588 * ((T)1 + (T)(3 * 0.044715) * x2);                         \
        return (T)0.5 * ((T)1 + t) + (T)0.5 * x * ((T)1 - t * t) * du;                              \
    }                                                                                               \
    KN_VM_INLINE T kn_silu_grad_##T(T x) {                                                          \
        T s = kn_sigmoid(x);                                                                        \
        return s * ((T)1 + x * ((T)1 - s));                                                         \
    }                                                                                               \
    KN_VM_INLINE T kn_softplus_grad_##T(T x, T beta, T threshold) { /* linear above threshold */    \
        return SEL(x * beta > threshold, (T)1, kn_sigmoid(x * beta));                               \
    }
KN_ACTIVATION_GRADS(float, kn_vm_sel)
KN_ACTIVATION_GRADS(double, kn_vm_seld)
#undef KN_ACTIVATION_GRADS
#define kn_gelu_grad(x) _Generic((x), float: kn_gelu_grad_float, double: kn_gelu_grad_double)(x)
#define kn_gelu_tanh_grad(x) _Generic((x), float: kn_gelu_tanh_grad_float, double: kn_gelu_tanh_grad_double)(x)
#define kn_silu_grad(x) _Generic((x), float: kn_silu_grad_float, double: kn_silu_grad_double)(x)
#define kn_softplus_grad(x, a, b) \
    _Generic((x), float: kn_softplus_grad_float, double: kn_softplus_grad_double)(x, a, b)

/* Attribute (a double) to a compute type: integers saturate, NaN becomes 0. */
static inline float kn_attr_float(double v) { return (float)v; }
static inline double kn_attr_double(double v) { return v; }
static inline int32_t kn_attr_int32(double v) {
    return v != v ? 0 : v >= 2147483647.0 ? INT32_MAX : v <= -2147483648.0 ? INT32_MIN : (int32_t)v;
}
static inline int64_t kn_attr_int64(double v) {
    return v != v ? 0 : v >= 9.2233720368547758e18 ? INT64_MAX : v <= -9.2233720368547758e18 ? INT64_MIN : (int64_t)v;
}
static inline uint8_t kn_attr_bool(double v) { return v != 0; }

#endif
