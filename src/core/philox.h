/* Philox4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3"): a counter-
 * based generator. Element i of a random op uses counter (offset + i) under key = seed, so
 * the numbers do not depend on threads, backends or modes. */
#ifndef KILN_CORE_PHILOX_H
#define KILN_CORE_PHILOX_H

#include <math.h>
#include <stdint.h>

typedef struct kn_philox4 {
    uint32_t v[4];
} kn_philox4;

static inline kn_philox4 kn_philox(uint64_t seed, uint64_t counter) {
    uint32_t c0 = (uint32_t)counter, c1 = (uint32_t)(counter >> 32), c2 = 0, c3 = 0;
    uint32_t k0 = (uint32_t)seed, k1 = (uint32_t)(seed >> 32);
    for (int r = 0; r < 10; r++) {
        uint64_t p0 = (uint64_t)0xD2511F53u * c0, p1 = (uint64_t)0xCD9E8D57u * c2;
        uint32_t n0 = (uint32_t)(p1 >> 32) ^ c1 ^ k0, n2 = (uint32_t)(p0 >> 32) ^ c3 ^ k1;
        c1 = (uint32_t)p1;
        c3 = (uint32_t)p0;
        c0 = n0;
        c2 = n2;
        k0 += 0x9E3779B9u;
        k1 += 0xBB67AE85u;
    }
    return (kn_philox4){{c0, c1, c2, c3}};
}

/* A uniform double in [0, 1) from 53 random bits. */
static inline double kn_philox_uniform(kn_philox4 r) {
    uint64_t bits = ((uint64_t)r.v[0] << 21) ^ ((uint64_t)r.v[1] >> 11);
    return (double)(bits & ((1ull << 53) - 1)) * 0x1.0p-53;
}

/* A standard normal by Box-Muller from the block's last two words. */
static inline double kn_philox_normal(kn_philox4 r) {
    double u1 = ((double)r.v[2] + 1.0) * 0x1.0p-32; /* (0, 1]: log is finite */
    double u2 = (double)r.v[3] * 0x1.0p-32;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586477 * u2);
}

/* A 64-bit random integer. */
static inline uint64_t kn_philox_u64(kn_philox4 r) { return ((uint64_t)r.v[2] << 32) | r.v[3]; }

#endif
