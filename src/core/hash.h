/* The hash kiln keys its in-memory tables with (attributes, graph values): XXH3-64, chained
 * through its seed. The compilation cache's keys on disk are XXH3-128 (cache/cache_key.c). */
#ifndef KILN_CORE_HASH_H
#define KILN_CORE_HASH_H

#include <stddef.h>
#include <stdint.h>
#include <xxhash.h>

#define KN_HASH_SEED 0x6b696c6e5f763200ull /* "kiln_v2" */

/* h folded with the n bytes at p. */
static inline uint64_t kn_hash_bytes(uint64_t h, const void *p, size_t n) { return XXH3_64bits_withSeed(p, n, h); }

#endif
