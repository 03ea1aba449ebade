/* Runtime counters (issue 4): what ran, what fused, what compiled and why. `KILN_STATS=1`
 * prints them at exit as one line on stderr: "kiln-stats: " followed by kn_stats_json's
 * object. */
#ifndef KILN_STATS_H
#define KILN_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/api.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Why something compiled again: the first part that differs between two compiles of one
 * fused call site's kernel, or of one compiled step (kiln/compile.h: ops for its structure,
 * then its inputs' shape, dtype, rank or device). */
typedef enum kn_recompile_reason {
    KN_RECOMPILE_OPS,        /* a different chain of ops */
    KN_RECOMPILE_DTYPE,
    KN_RECOMPILE_RANK,
    KN_RECOMPILE_BROADCAST,  /* which operands broadcast along which dims */
    KN_RECOMPILE_CONTIGUITY, /* which operands are contiguous */
    KN_RECOMPILE_ATTRS,      /* attributes baked into the kernel */
    KN_RECOMPILE_SHAPE,      /* a compiled step's input size that is not dynamic (or past its bound) */
    KN_RECOMPILE_DEVICE,     /* a compiled step's input device */
    KN_RECOMPILE_REASON_COUNT
} kn_recompile_reason;

typedef struct kn_stats {
    int64_t ops_recorded;        /* op calls that reached the dispatcher */
    int64_t kernels_launched;    /* kernels run: prebuilt ones and generated ones */
    int64_t fused_kernels;       /* of those, generated fused kernels */
    int64_t ops_fused;           /* ops that ran inside a generated kernel */
    int64_t compiles;            /* translation units compiled by the system C compiler */
    double compile_seconds;      /* wall time of those compiles */
    int64_t cache_memory_hits;   /* kernels found already loaded in this process */
    int64_t cache_disk_hits;     /* kernels loaded from the on-disk cache */
    int64_t cache_misses;        /* kernels that had to be compiled */
    int64_t cache_corrupt;       /* on-disk entries found damaged, swapped or not loadable (rebuilt) */
    int64_t recompiles;          /* compiles of a fused call site that already had a variant, and calls of
                                    a compiled step that matched no earlier call (kiln/compile.h) */
    int64_t recompile_reasons[KN_RECOMPILE_REASON_COUNT];
    int64_t host_fallbacks;      /* ops run on the host because a backend lacked them */
    int64_t ops_merged;          /* fused mode: ops not run because an earlier op of the window computed
                                    the same values, which no one else could see (common subexpressions) */
    int64_t pool_stalls;         /* parallel loops whose owner waited out a worker that was not running
                                    (another process held its core; core/thread_pool.h) */
    int64_t pool_solo_periods;   /* times the thread pool ran its loops on their owners alone for a while
                                    after such stalls */
    int64_t ops_eliminated;      /* compiled mode: ops dropped as dead code (their values read by no one) */
    int64_t ops_folded;          /* compiled mode: elementwise ops on constants replaced by a fill of their
                                    value (constant folding) */
    int64_t programs;            /* compiled mode: programs planned and launched (one per step, plus one per
                                    graph break: a read of a value inside a step) */
    int64_t bytes_allocated;     /* bytes handed out by the caching allocators, in total */
    int64_t peak_bytes;          /* the most held at once, summed over devices */
} kn_stats;

KN_API void kn_stats_get(kn_stats *out);
/* Zeroes the counters (not the allocators' peaks: see kn_memory_reset_peak). */
KN_API void kn_stats_reset(void);
/* The counters as one JSON object; returns the length snprintf would write. */
KN_API int kn_stats_json(char *buf, size_t size);
KN_API const char *kn_recompile_reason_name(kn_recompile_reason r);

#ifdef __cplusplus
}
#endif
#endif
