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

static inline uint16_t kn_half_from_f32_bf16(float f) {
    uint32_t u = kn_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
    u += 0x7fffu + ((u >> 16) & 1u);                                          /* nearest even */
    return (uint16_t)(u >> 16);
}

static inline float kn_half_to_f32_bf16(uint16_t h) { return kn_bits_f32((uint32_t)h << 16); }

static inline uint16_t kn_half_from_f32_f16(float f) {
    uint32_t u = kn_f32_bits(f);
    uint32_t sign = (u >> 16) & 0x8000u;
    uint32_t a = u & 0x7fffffffu;
    if (a >= 0x7f800000u) /* Inf or NaN (kept quiet) */
        return (uint16_t)(sign | 0x7c00u | (a > 0x7f800000u ? 0x200u | ((a >> 13) & 0x3ffu) : 0));
    if (a >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* rounds past 65504: Inf */
    if (a < 0x38800000u) {
        /* Subnormal or zero: adding 0.5 makes the FPU round to a multiple of 2^-24. */
        float r = kn_bits_f32(a) + 0.5f;
        return (uint16_t)(sign | (kn_f32_bits(r) - 0x3f000000u));
    }
    uint32_t mant_odd = (a >> 13) & 1u;
    a += ((uint32_t)(15 - 127) << 23) + 0xfffu + mant_odd;
    return (uint16_t)(sign | (a >> 13));
}

static inline float kn_half_to_f32_f16(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
    if (e == 0x1f) return kn_bits_f32(sign | 0x7f800000u | (m << 13));
    if (e == 0) { /* zero or subnormal: m * 2^-24 exactly */
        float r = (float)m * 5.9604644775390625e-8f;
        return sign ? -r : r;
    }
    return kn_bits_f32(sign | ((e + 112u) << 23) | (m << 13));
}

#endif
