/* Runtime counters and the KILN_STATS=1 exit line. */
#include "core/stats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kiln/runtime.h"

kn_stat_counter kn_stat_counters[KN_STAT_COUNT];
static _Atomic int64_t recompile_reasons[KN_RECOMPILE_REASON_COUNT];

static const char *const reason_names[KN_RECOMPILE_REASON_COUNT] = {
    "ops", "dtype", "rank", "broadcast", "contiguity", "attrs", "shape", "device",
};

const char *kn_recompile_reason_name(kn_recompile_reason r) {
    return (unsigned)r < KN_RECOMPILE_REASON_COUNT ? reason_names[r] : "?";
}

void kn_stat_recompile(kn_recompile_reason why) {
    kn_stat_add(KN_STAT_RECOMPILES, 1);
    atomic_fetch_add_explicit(&recompile_reasons[why], 1, memory_order_relaxed);
}

static int64_t get(kn_stat s) { return atomic_load_explicit(&kn_stat_counters[s].value, memory_order_relaxed); }

void kn_stats_get(kn_stats *out) {
    memset(out, 0, sizeof *out);
    out->ops_recorded = get(KN_STAT_OPS_RECORDED);
    out->kernels_launched = get(KN_STAT_KERNELS_LAUNCHED);
    out->fused_kernels = get(KN_STAT_FUSED_KERNELS);
    out->ops_fused = get(KN_STAT_OPS_FUSED);
    out->compiles = get(KN_STAT_COMPILES);
    out->compile_seconds = (double)get(KN_STAT_COMPILE_NS) * 1e-9;
    out->cache_memory_hits = get(KN_STAT_CACHE_MEMORY_HITS);
    out->cache_disk_hits = get(KN_STAT_CACHE_DISK_HITS);
    out->cache_misses = get(KN_STAT_CACHE_MISSES);
    out->cache_corrupt = get(KN_STAT_CACHE_CORRUPT);
    out->recompiles = get(KN_STAT_RECOMPILES);
    for (int r = 0; r < KN_RECOMPILE_REASON_COUNT; r++)
        out->recompile_reasons[r] = atomic_load_explicit(&recompile_reasons[r], memory_order_relaxed);
    out->host_fallbacks = get(KN_STAT_HOST_FALLBACKS);
    out->ops_merged = get(KN_STAT_OPS_MERGED);
    out->pool_stalls = get(KN_STAT_POOL_STALLS);
    out->pool_solo_periods = get(KN_STAT_POOL_SOLO_PERIODS);
    out->ops_eliminated = get(KN_STAT_OPS_ELIMINATED);
    out->ops_folded = get(KN_STAT_OPS_FOLDED);
    out->programs = get(KN_STAT_PROGRAMS);
    for (int t = 0; t < KN_DEVICE_TYPE_COUNT; t++) {
        kn_device d = {(kn_device_type)t, 0};
        kn_memory_stats m;
        if (!kn_device_available(d) || kn_memory_stats_get(d, &m) != KN_OK) continue;
        out->bytes_allocated += m.allocated_total_bytes;
        out->peak_bytes += m.peak_allocated_bytes;
    }
}

void kn_stats_reset(void) {
    for (int s = 0; s < KN_STAT_COUNT; s++) atomic_store(&kn_stat_counters[s].value, 0);
    for (int r = 0; r < KN_RECOMPILE_REASON_COUNT; r++) atomic_store(&recompile_reasons[r], 0);
}

int kn_stats_json(char *buf, size_t size) {
    kn_stats s;
    kn_stats_get(&s);
    char reasons[256];
    size_t len = 0;
    reasons[0] = '\0';
    for (int r = 0; r < KN_RECOMPILE_REASON_COUNT; r++)
        if (s.recompile_reasons[r] && len < sizeof reasons)
            len += (size_t)snprintf(reasons + len, sizeof reasons - len, "%s\"%s\":%lld", len ? "," : "",
                                    reason_names[r], (long long)s.recompile_reasons[r]);
    return snprintf(buf, size,
                    "{\"ops_recorded\":%lld,\"kernels_launched\":%lld,\"fused_kernels\":%lld,\"ops_fused\":%lld,"
                    "\"compiles\":%lld,\"compile_seconds\":%.3f,\"cache_memory_hits\":%lld,\"cache_disk_hits\":%lld,"
                    "\"cache_misses\":%lld,\"cache_corrupt\":%lld,\"recompiles\":%lld,\"recompile_reasons\":{%s},"
                    "\"host_fallbacks\":%lld,\"ops_merged\":%lld,\"pool_stalls\":%lld,\"pool_solo_periods\":%lld,"
                    "\"ops_eliminated\":%lld,\"ops_folded\":%lld,\"programs\":%lld,"
                    "\"bytes_allocated\":%lld,\"peak_bytes\":%lld}",
                    (long long)s.ops_recorded, (long long)s.kernels_launched, (long long)s.fused_kernels,
                    (long long)s.ops_fused, (long long)s.compiles, s.compile_seconds, (long long)s.cache_memory_hits,
                    (long long)s.cache_disk_hits, (long long)s.cache_misses, (long long)s.cache_corrupt,
                    (long long)s.recompiles, reasons, (long long)s.host_fallbacks, (long long)s.ops_merged,
                    (long long)s.pool_stalls, (long long)s.pool_solo_periods, (long long)s.ops_eliminated,
                    (long long)s.ops_folded, (long long)s.programs, (long long)s.bytes_allocated,
                    (long long)s.peak_bytes);
}

static void print_at_exit(void) {
    kn_sync();
    char line[1024];
    kn_stats_json(line, sizeof line);
    fprintf(stderr, "kiln-stats: %s\n", line);
}

void kn_stats_start(void) {
    const char *s = getenv("KILN_STATS");
    if (s && *s && strcmp(s, "0") != 0) atexit(print_at_exit);
}
