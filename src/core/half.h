/* Inline f16/bf16 <-> f32 conversions (round-to-nearest-even), for kernels' inner loops. */
#ifndef KILN_CORE_HALF_H
#define KILN_CORE_HALF_H

#include <stdint.h>
#include <string.h>

static inline uint32_t kn_f32_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float kn_bits_f32(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* c ? a : b on bits. The conversions to f16 and bf16 compute every case and select, so that
 * loops converting them stay branch-free and vectorize. c must be 0 or 1. */
static inline uint32_t kn_half_select(uint32_t c, uint32_t a, uint32_t b) {
    uint32_t m = 0u - c;
    return (a & m) | (b & ~m);
}

static inline uint16_t kn_half_from_f32_bf16(float f) {
    uint32_t u = kn_f32_bits(f);
    uint32_t quiet_nan = (u >> 16) | 0x40u;
    uint32_t nearest_even = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    return (uint16_t)kn_half_select((u & 0x7fffffffu) > 0x7f800000u, quiet_nan, nearest_even);
}

static inline float kn_half_to_f32_bf16(uint16_t h) { return kn_bits_f32((uint32_t)h << 16); }

static inline uint16_t kn_half_from_f32_f16(float f) {
    uint32_t u = kn_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    /* Inf or NaN (kept quiet). */
    uint32_t special = 0x7c00u | kn_half_select(a > 0x7f800000u, 0x200u | ((a >> 13) & 0x3ffu), 0);
    /* Subnormal or zero: adding 0.5 makes the FPU round to a multiple of 2^-24. */
    uint32_t sub = kn_f32_bits(kn_bits_f32(a & 0x3fffffffu) + 0.5f) - 0x3f000000u;
    /* Normal: rebias the exponent and round the mantissa to nearest even. */
    uint32_t normal = (a + ((uint32_t)(15 - 127) << 23) + 0xfffu + ((a >> 13) & 1u)) >> 13;
    uint32_t h = kn_half_select(a < 0x38800000u, sub, normal);
    h = kn_half_select(a >= 0x477ff000u, 0x7c00u, h); /* rounds past 65504: Inf */
    h = kn_half_select(a >= 0x7f800000u, special, h);
    return (uint16_t)(sign | h);
}

static inline float kn_half_to_f32_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    uint32_t special = 0x7f800000u | (m << 13);
    uint32_t sub = kn_f32_bits((float)m * 5.9604644775390625e-8f); /* m * 2^-24 exactly */
    uint32_t normal = ((e + 112u) << 23) | (m << 13);
    uint32_t bits = kn_half_select(e == 0, sub, kn_half_select(e == 0x1f, special, normal));
    return kn_bits_f32(sign | bits);
}

#endif
