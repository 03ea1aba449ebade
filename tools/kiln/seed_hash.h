/* A 64-bit mixing function (splitmix64's finalizer) for deriving per-item random choices
 * from (seed, index) pairs, so that what a step reads depends on its index alone (resume). */
#ifndef KILN_TOOLS_SEED_HASH_H
#define KILN_TOOLS_SEED_HASH_H

#include <stdint.h>

static inline uint64_t seed_hash(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

#endif
