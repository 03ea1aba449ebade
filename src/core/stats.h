/* Internal side of the runtime counters (kiln/stats.h): cheap relaxed atomic adds. */
#ifndef KILN_CORE_STATS_H
#define KILN_CORE_STATS_H

#include <stdatomic.h>

#include "kiln/stats.h"

typedef enum kn_stat {
    KN_STAT_OPS_RECORDED,
    KN_STAT_KERNELS_LAUNCHED,
    KN_STAT_FUSED_KERNELS,
    KN_STAT_OPS_FUSED,
    KN_STAT_COMPILES,
    KN_STAT_COMPILE_NS,
    KN_STAT_CACHE_MEMORY_HITS,
    KN_STAT_CACHE_DISK_HITS,
    KN_STAT_CACHE_MISSES,
    KN_STAT_CACHE_CORRUPT,
    KN_STAT_RECOMPILES,
    KN_STAT_HOST_FALLBACKS,
    KN_STAT_OPS_MERGED,
    KN_STAT_POOL_STALLS,
    KN_STAT_POOL_SOLO_PERIODS,
    KN_STAT_OPS_ELIMINATED,
    KN_STAT_OPS_FOLDED,
    KN_STAT_PROGRAMS,
    KN_STAT_COUNT
} kn_stat;

/* One counter per cache line: the host counts ops recorded while a stream's worker counts
 * kernels launched, and counters that shared a line made each op a cache-line transfer. */
typedef struct kn_stat_counter {
    _Alignas(64) _Atomic int64_t value;
} kn_stat_counter;
extern kn_stat_counter kn_stat_counters[KN_STAT_COUNT];

static inline void kn_stat_add(kn_stat s, int64_t n) {
    atomic_fetch_add_explicit(&kn_stat_counters[s].value, n, memory_order_relaxed);
}

/* Counts a recompile and its reason. */
void kn_stat_recompile(kn_recompile_reason why);
/* Installs the KILN_STATS=1 exit report (called once at start-up). */
void kn_stats_start(void);

#endif
