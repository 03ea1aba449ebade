/* Single-precision transcendental functions written so that compilers can vectorize loops
 * that call them: static inline, no libm calls, no errno, no branches (special cases are
 * selects), bit manipulation through memcpy. Range reduction follows Cephes/fdlibm; the
 * polynomials are minimax-style fits. Accuracy bounds (docs/vector-math.md) are checked
 * against libm's double results in tests/test_vector_math.c. */
#ifndef KILN_OPS_VECTOR_MATH_H
#define KILN_OPS_VECTOR_MATH_H

/* Forced inline: a call left in a loop keeps the loop scalar, and gcc's size heuristics
 * otherwise inline these into the strided loop but not the contiguous one. */
#if defined(__GNUC__)
#define KN_VM_INLINE static inline __attribute__((always_inline))
#else
#define KN_VM_INLINE static inline
#endif

#include <stdint.h>
#include <string.h>

KN_VM_INLINE uint32_t kn_vm_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}
KN_VM_INLINE float kn_vm_float(uint32_t u) {
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}
KN_VM_INLINE float kn_vm_copysign(float mag, float sign) {
    return kn_vm_float((kn_vm_bits(mag) & 0x7fffffffu) | (kn_vm_bits(sign) & 0x80000000u));
}
KN_VM_INLINE float kn_vm_abs(float x) { return kn_vm_float(kn_vm_bits(x) & 0x7fffffffu); }

/* c ? a : b through bit masks. Both arms are computed anyway; written as a conditional, the
 * compiler would move each arm's arithmetic under a branch and then (floating point may trap)
 * refuse to if-convert the loop for vectorization. c must be 0 or 1. */
KN_VM_INLINE uint32_t kn_vm_selu(int c, uint32_t a, uint32_t b) {
    uint32_t m = 0u - (uint32_t)c;
    return (a & m) | (b & ~m);
}
KN_VM_INLINE float kn_vm_sel(int c, float a, float b) {
    return kn_vm_float(kn_vm_selu(c, kn_vm_bits(a), kn_vm_bits(b)));
}
KN_VM_INLINE double kn_vm_seld(int c, double a, double b) {
    uint64_t ua, ub, m = 0ull - (uint64_t)c;
    memcpy(&ua, &a, sizeof ua);
    memcpy(&ub, &b, sizeof ub);
    ua = (ua & m) | (ub & ~m);
    memcpy(&a, &ua, sizeof a);
    return a;
}

/* Fused multiply-add where the target has it (one rounding), else a product and a sum; the
 * error bounds hold either way. */
#if defined(__FMA__) || defined(__FP_FAST_FMAF)
#define KN_VM_FMA(a, b, c) __builtin_fmaf((a), (b), (c))
#else
#define KN_VM_FMA(a, b, c) ((a) * (b) + (c))
#endif

#define KN_VM_INF (__builtin_inff())
#define KN_VM_NAN (__builtin_nanf(""))

/* 2^n for integer n in [-252, 254] as the product of two normal scale factors. */
KN_VM_INLINE float kn_vm_scale(float p, int32_t n) {
    int32_t n1 = n >> 1, n2 = n - n1;
    float s1 = kn_vm_float((uint32_t)(n1 + 127) << 23), s2 = kn_vm_float((uint32_t)(n2 + 127) << 23);
    return p * s1 * s2;
}

/* Rounds x*log2(e) to an integer n (returned as a float and through *ni) and gives
 * r = x - n*ln2 in two steps (Cody-Waite). The integer comes from the bits of a shifted sum,
 * so no float-to-int conversion sees a NaN. */
KN_VM_INLINE float kn_vm_exp_reduce(float x, float *nf, int32_t *ni) {
    const float shifter = 12582912.0f; /* 1.5 * 2^23 */
    float t = KN_VM_FMA(x, 1.44269504088896341f, shifter);
    *ni = (int32_t)(kn_vm_bits(t) - kn_vm_bits(shifter));
    *nf = t - shifter;
    float r = KN_VM_FMA(*nf, -0.693359375f, x);
    return KN_VM_FMA(*nf, 2.12194440e-4f, r);
}

/* e^r - 1 - r for |r| <= ln2/2, as r^2 times a polynomial (Cephes expf). */
KN_VM_INLINE float kn_vm_expm1_poly(float r) {
    float p = 1.9875691500e-4f;
    p = KN_VM_FMA(p, r, 1.3981999507e-3f);
    p = KN_VM_FMA(p, r, 8.3334519073e-3f);
    p = KN_VM_FMA(p, r, 4.1665795894e-2f);
    p = KN_VM_FMA(p, r, 1.6666665459e-1f);
    p = KN_VM_FMA(p, r, 5.0000001201e-1f);
    return p * r * r;
}

KN_VM_INLINE float kn_expf(float x) {
    /* Beyond these e^x is Inf or below half the smallest subnormal; NaN fails both tests. */
    x = kn_vm_sel(x > 89.0f, 89.0f, x);
    x = kn_vm_sel(x < -104.0f, -104.0f, x);
    float nf;
    int32_t n;
    float r = kn_vm_exp_reduce(x, &nf, &n);
    float p = 1.0f + (r + kn_vm_expm1_poly(r));
    return kn_vm_scale(p, n);
}

KN_VM_INLINE float kn_expm1f(float x) {
    float xc = kn_vm_sel(x > 89.0f, 89.0f, x);
    xc = kn_vm_sel(xc < -30.0f, -30.0f, xc); /* e^-30 is below half an ulp of -1 */
    float nf;
    int32_t n;
    float r = kn_vm_exp_reduce(xc, &nf, &n);
    float u = r + kn_vm_expm1_poly(r); /* e^r - 1 */
    /* e^x - 1 = 2 * (t*u + (t - 1/2)) with t = 2^(n-1), which stays finite for n = 128. */
    float t = kn_vm_float((uint32_t)(n - 1 + 127) << 23);
    float y = 2.0f * KN_VM_FMA(t, u, t - 0.5f);
    y = kn_vm_sel(x >= 88.72283935546875f, KN_VM_INF, y);
    /* Below 2^-24, e^x - 1 rounds to x (keeping -0 and the subnormals the halving t*u loses). */
    return kn_vm_sel(kn_vm_abs(x) < 0x1p-24f, x, y);
}

/* log(1 + f) - f + f^2/2 given f in [sqrt(1/2) - 1, sqrt(2) - 1] (fdlibm's logf kernel):
 * returns s*(hfsq + R) where s = f/(2+f). */
KN_VM_INLINE float kn_vm_log_tail(float f, float hfsq) {
    float s = f / (2.0f + f);
    float z = s * s, w = z * z;
    float t1 = w * KN_VM_FMA(w, 0.24279078841f, 0.40000972152f);
    float t2 = z * KN_VM_FMA(w, 0.28498786688f, 0.66666662693f);
    return s * (hfsq + (t1 + t2));
}

/* Splits positive finite x into 2^k * m with m in [sqrt(1/2), sqrt(2)); returns f = m - 1.
 * Subnormals are scaled into the normal range first. */
KN_VM_INLINE float kn_vm_log_split(float x, float *kf) {
    int sub = x < 1.17549435e-38f;
    float xs = kn_vm_sel(sub, x * 8388608.0f, x); /* 2^23 */
    uint32_t ix = kn_vm_bits(xs) + (0x3f800000u - 0x3f3504f3u);
    int32_t k = (int32_t)(ix >> 23) - 127 - 23 * sub;
    *kf = (float)k;
    return kn_vm_float((ix & 0x007fffffu) + 0x3f3504f3u) - 1.0f;
}

/* The special values shared by the logarithms, given the argument of log. */
KN_VM_INLINE float kn_vm_log_special(float x, float y) {
    y = kn_vm_sel(x < 0.0f, KN_VM_NAN, y);
    y = kn_vm_sel(x == 0.0f, -KN_VM_INF, y);
    y = kn_vm_sel(x == KN_VM_INF, KN_VM_INF, y);
    return kn_vm_sel(x != x, x, y);
}

KN_VM_INLINE float kn_logf(float x) {
    float k;
    float f = kn_vm_log_split(x, &k);
    float hfsq = 0.5f * f * f;
    float tail = kn_vm_log_tail(f, hfsq);
    float y = KN_VM_FMA(k, 6.9313812256e-01f, -((hfsq - (tail + k * 9.0580006145e-06f)) - f));
    return kn_vm_log_special(x, y);
}

KN_VM_INLINE float kn_log2f(float x) {
    float k;
    float f = kn_vm_log_split(x, &k);
    float hfsq = 0.5f * f * f;
    float tail = kn_vm_log_tail(f, hfsq);
    /* hi + lo = log(1 + f) with hi holding 12 bits, so hi * ivln2hi is exact. */
    float hi = kn_vm_float(kn_vm_bits(f - hfsq) & 0xfffff000u);
    float lo = (f - hi) - hfsq + tail;
    float y = (lo + hi) * -1.7605285393e-04f + lo * 1.4428710938e+00f + hi * 1.4428710938e+00f + k;
    return kn_vm_log_special(x, y);
}

KN_VM_INLINE float kn_log1pf(float x) {
    float u = 1.0f + x;
    float k;
    float fu = kn_vm_log_split(u, &k);
    /* With k = 0 the reduced argument is x itself (exact); otherwise u was rounded and
     * c/u restores what the rounding lost. */
    int k0 = k == 0.0f;
    float f = kn_vm_sel(k0, x, fu);
    float c = kn_vm_sel(k >= 2.0f, 1.0f - (u - x), x - (u - 1.0f));
    c = kn_vm_sel(k0, 0.0f, c / u);
    float hfsq = 0.5f * f * f;
    float tail = kn_vm_log_tail(f, hfsq);
    float y = KN_VM_FMA(k, 6.9313812256e-01f, -((hfsq - (tail + (k * 9.0580006145e-06f + c))) - f));
    y = kn_vm_log_special(u, y);
    y = kn_vm_sel(x < -1.0f, KN_VM_NAN, y);
    return kn_vm_sel((x == 0.0f) | (x != x), x, y); /* keeps -0 and the NaN payload */
}

/* sin and cos: reduction by pi/2 in double (fdlibm's medium-size path, exact enough for
 * |x| < 2^28 * pi/2), then fdlibm's double kernels, which round once to float. */
#define KN_VM_TRIG_MAX 421657428.0f /* 2^28 * pi/2 */

KN_VM_INLINE double kn_vm_sin_kernel(double r) {
    double z = r * r, w = z * z;
    double p = -0x1a00f9e2cae774.0p-65 + z * 0x16cd878c3b46a7.0p-71;
    double s = z * r;
    return (r + s * (-0x15555554cbac77.0p-55 + z * 0x111110896efbb2.0p-59)) + s * w * p;
}
KN_VM_INLINE double kn_vm_cos_kernel(double r) {
    double z = r * r, w = z * z;
    double p = -0x16c087e80f1e27.0p-62 + z * 0x199342e0ee5069.0p-68;
    return ((1.0 + z * -0x1ffffffd0c5e81.0p-54) + w * 0x155553e1053a42.0p-57) + (w * z) * p;
}

/* Payne-Hanek reduction for |x| >= 2^28 * pi/2, where x = m * 2^k is an integer: the 96 bits
 * of 2/pi that matter for m * 2^k * 2/pi mod 4 are picked by selects (no table gather), and
 * 32x32-bit products give the fraction. Returns r in [-pi/4, pi/4] and the quadrant of |x|. */
KN_VM_INLINE double kn_vm_reduce_huge(float ax, uint32_t *quadrant) {
    static const uint32_t two_over_pi[7] = {0xa2f9836eu, 0x4e441529u, 0xfc2757d1u, 0xf534ddc0u,
                                            0xdb629599u, 0x3c439041u, 0xfe5163abu};
    uint32_t b = kn_vm_bits(ax);
    int32_t k = (int32_t)(b >> 23) - 150;
    k = k < 2 ? 2 : (k > 104 ? 104 : k);
    uint32_t j = (uint32_t)(k - 2), w = j >> 5, sh = j & 31u;
    uint64_t m = (b & 0x007fffffu) | 0x00800000u;
    uint32_t win[4];
    for (int i = 0; i < 4; i++)
        win[i] = kn_vm_selu(w == 0, two_over_pi[i],
                            kn_vm_selu(w == 1, two_over_pi[i + 1],
                                       kn_vm_selu(w == 2, two_over_pi[i + 2], two_over_pi[i + 3])));
    uint32_t f[3];
    for (int i = 0; i < 3; i++) f[i] = (win[i] << sh) | ((win[i + 1] >> 1) >> (31u - sh));
    uint64_t p2 = m * f[2], p1 = m * f[1] + (p2 >> 32), p0 = m * f[0] + (p1 >> 32);
    uint64_t h = ((p0 & 0xffffffffu) << 32) | (p1 & 0xffffffffu); /* frac(|x| * 2/pi / 4) */
    *quadrant = (uint32_t)((h + (1ull << 61)) >> 62);
    uint64_t d = h << 2; /* the signed distance to the nearest quadrant, in 2^-64 units */
    double hi = (double)(int32_t)(uint32_t)(d >> 32), lo = (double)(int32_t)((uint32_t)d ^ 0x80000000u) + 2147483648.0;
    return (hi * 4294967296.0 + lo) * (5.42101086242752217e-20 * 1.57079632679489661923);
}

/* sin(x + quarter * pi/2). */
KN_VM_INLINE float kn_vm_sincos(float x, uint32_t quarter) {
    double d = (double)x;
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52 */
    double t = d * 6.36619772367581382433e-01 + shifter;
    double q = t - shifter;
    uint64_t tb;
    memcpy(&tb, &t, sizeof tb);
    uint32_t quadrant = (uint32_t)tb + quarter;
    double r = (d - q * 1.57079631090164184570e+00) - q * 1.58932547735281966916e-08;
    /* Huge |x|: reduce |x|, then sin(-a + quarter*pi/2) = -sin(a + (4 - quarter)*pi/2). */
    uint32_t hq;
    double hr = kn_vm_reduce_huge(kn_vm_abs(x), &hq);
    int neg = x < 0.0f;
    hq += kn_vm_selu(neg, 4u - quarter, quarter);
    int huge = kn_vm_abs(x) >= KN_VM_TRIG_MAX;
    quadrant = kn_vm_selu(huge, hq + 2u * (uint32_t)neg, quadrant);
    r = kn_vm_seld(huge, hr, r);
    double s = kn_vm_sin_kernel(r), c = kn_vm_cos_kernel(r);
    double v = kn_vm_seld((int)(quadrant & 1u), c, s);
    v = kn_vm_seld((int)((quadrant >> 1) & 1u), -v, v);
    float y = (float)v;
    return kn_vm_sel(x != x, x, kn_vm_sel(kn_vm_abs(x) == KN_VM_INF, KN_VM_NAN, y));
}

KN_VM_INLINE float kn_sinf(float x) { return kn_vm_sel(x == 0.0f, x, kn_vm_sincos(x, 0)); }
KN_VM_INLINE float kn_cosf(float x) { return kn_vm_sincos(x, 1); }

KN_VM_INLINE float kn_tanhf(float x) {
    float ax = kn_vm_abs(x);
    /* Small |x|: an odd polynomial, tanh(x) = x + x^3 P(x^2). */
    float z = x * x;
    float p = 2.370839007e-03f;
    p = KN_VM_FMA(p, z, -8.410137147e-03f);
    p = KN_VM_FMA(p, z, 2.178834379e-02f);
    p = KN_VM_FMA(p, z, -5.396155268e-02f);
    p = KN_VM_FMA(p, z, 1.333331317e-01f);
    p = KN_VM_FMA(p, z, -3.333333433e-01f);
    float small = KN_VM_FMA(x * z, p, x);
    /* Large |x|: 1 - 2/(e^(2|x|) + 1), which saturates to 1 once e^(2|x|) is Inf. */
    float e = kn_expf(2.0f * kn_vm_sel(ax > 20.0f, 20.0f, ax));
    float large = kn_vm_copysign(1.0f - 2.0f / (e + 1.0f), x);
    float y = kn_vm_sel(ax < 0.6f, small, large);
    return kn_vm_sel((x != x) | (x == 0.0f), x, y); /* keeps NaN payloads and -0 */
}

KN_VM_INLINE float kn_erff(float x) {
    float ax = kn_vm_abs(x);
    /* |x| <= 1: erf(x) = x + x * (c0 - 1 + x^2 P(x^2)), keeping the leading term exact. */
    float z = x * x;
    float p = 7.853858551e-05f;
    p = KN_VM_FMA(p, z, -8.010192541e-04f);
    p = KN_VM_FMA(p, z, 5.188327748e-03f);
    p = KN_VM_FMA(p, z, -2.685381100e-02f);
    p = KN_VM_FMA(p, z, 1.128358543e-01f);
    p = KN_VM_FMA(p, z, -3.761262596e-01f);
    p = KN_VM_FMA(p, z, 0.12837916709551257f);
    float small = KN_VM_FMA(x, p, x);
    /* 1 < |x| < 4: erf = 1 - e^(-x^2) erfcx(|x|), erfcx fitted around 2.5. Past 4 erf
     * rounds to 1. */
    float a = kn_vm_sel(ax > 4.0f, 4.0f, ax);
    float s = a - 2.5f;
    float q = 9.918166199e-08f;
    q = KN_VM_FMA(q, s, -4.251251653e-07f);
    q = KN_VM_FMA(q, s, 1.001917099e-06f);
    q = KN_VM_FMA(q, s, -3.755537364e-06f);
    q = KN_VM_FMA(q, s, 1.605055513e-05f);
    q = KN_VM_FMA(q, s, -5.950478226e-05f);
    q = KN_VM_FMA(q, s, 2.109905909e-04f);
    q = KN_VM_FMA(q, s, -7.331707748e-04f);
    q = KN_VM_FMA(q, s, 2.467028564e-03f);
    q = KN_VM_FMA(q, s, -8.001687005e-03f);
    q = KN_VM_FMA(q, s, 2.493800223e-02f);
    q = KN_VM_FMA(q, s, -7.434733957e-02f);
    q = KN_VM_FMA(q, s, 2.108063698e-01f);
    float large = kn_vm_copysign(1.0f - kn_expf(-a * a) * q, x);
    float y = kn_vm_sel(ax <= 1.0f, small, large);
    return kn_vm_sel(x != x, x, y);
}

/* 1 / (1 + e^-x) through e = e^-|x| <= 1, so nothing overflows and tiny results keep
 * their subnormal precision. The rounding error of 1 + e is recovered exactly (Fast2Sum)
 * and corrected for. */
KN_VM_INLINE float kn_sigmoidf(float x) {
    float e = kn_expf(-kn_vm_abs(x));
    float d = 1.0f + e;
    float dlo = (1.0f - d) + e;
    float q = kn_vm_sel(x < 0.0f, e, 1.0f) / d;
    float y = KN_VM_FMA(-q, dlo / d, q);
    return kn_vm_sel(x != x, x, y);
}

#endif
