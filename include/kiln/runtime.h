/* The runtime: execution modes, synchronization, threads, randomness, memory statistics. */
#ifndef KILN_RUNTIME_H
#define KILN_RUNTIME_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

KN_API const char *kn_version(void);

/* When work runs (DESIGN.md, "One pipeline for every mode"). */
typedef enum kn_mode {
    KN_MODE_STRICT = 0, /* queued on the device's stream; the host runs on until it reads a value */
    KN_MODE_DEBUG,      /* one op at a time, synchronously; NaN/Inf from finite inputs is an error;
                           with a shadow (kn_set_shadow), so is a result that a float64 run disagrees with */
    KN_MODE_FUSED,      /* lazy: windows of recorded ops run as generated, fused, cached kernels */
    KN_MODE_COMPILED,   /* lazy like fused, but a whole step (all between two reads) is one program:
                           dead code dropped, fused across forward and backward, intermediates
                           placed in one arena by a memory plan (kiln/compile.h) */
    KN_MODE_COUNT
} kn_mode;

/* Sets this process's mode (initially $KILN_MODE, else strict). Pending work is finished
 * first. */
KN_API kn_status kn_set_mode(kn_mode mode);
KN_API kn_mode kn_get_mode(void);
KN_API const char *kn_mode_name(kn_mode mode);
KN_API bool kn_mode_parse(const char *name, kn_mode *out);

/* The debug shadow: in debug mode every op also runs on a reference backend in float64, and
 * the first op whose result leaves its dtype's tolerance fails with KN_ERR_NUMERIC, naming
 * the op, its inputs, the element, the nn module and the calling function (README.md,
 * "Finding the first divergent op"). `backend` names a device that holds values ("cpu",
 * "cuda:1"); NULL or "" turns the shadow off. Initially $KILN_SHADOW, which also starts kiln
 * in debug mode unless $KILN_MODE says otherwise. In compiled mode each program is checked
 * whole: its ops run again one by one, each against float64, and what the program hands out is
 * compared with what they made. It has no effect in strict and fused mode. Fails
 * with KN_ERR_ARG for a name that is no backend, KN_ERR_DEVICE for one without values (meta)
 * or not available. */
KN_API kn_status kn_set_shadow(const char *backend);
/* The reference device's name ("cpu"), or NULL when the shadow is off. */
KN_API const char *kn_get_shadow(void);
/* Ops the shadow has compared, and ops it has skipped, since start-up: ops whose output
 * shapes depend on values, whose outputs are not values (empty, argmax...), that run on a
 * backend without values, or that the reference has no float64 kernel for. */
KN_API void kn_shadow_counts(int64_t *checked, int64_t *skipped);

/* Waits for all queued work on every device; returns the first error an asynchronous kernel
 * reported (for example an index out of range), naming the op. */
KN_API kn_status kn_sync(void);

/* CPU threads used by kernels (default: $KILN_THREADS, else the number of cores). */
KN_API void kn_set_num_threads(int n);
KN_API int kn_get_num_threads(void);

/* The global counter-based (Philox) generator: a seed and an offset into its stream. */
KN_API void kn_manual_seed(uint64_t seed);
KN_API void kn_rng_get_state(uint64_t *seed, uint64_t *offset);
KN_API void kn_rng_set_state(uint64_t seed, uint64_t offset);
/* A well-mixed 64-bit hash of x (SplitMix64's finalizer): host-side data generators derive
 * per-item choices from (seed, index) with it, so that what step i reads depends on i alone. */
KN_API uint64_t kn_mix64(uint64_t x);

/* Memory statistics of one device's caching allocator. */
typedef struct kn_memory_stats {
    int64_t allocated_bytes;      /* held by live storages now */
    int64_t peak_allocated_bytes; /* the most ever held at once (since the last reset) */
    int64_t reserved_bytes;       /* allocated plus cached, i.e. taken from the system */
    int64_t cached_bytes;         /* free blocks kept for reuse */
    int64_t allocated_total_bytes; /* handed out since start, in total */
    int64_t alloc_count;          /* allocations served */
    int64_t cache_hits;           /* of those, served from the cache */
    int64_t system_allocs;        /* blocks taken from the system */
} kn_memory_stats;

KN_API kn_status kn_memory_stats_get(kn_device device, kn_memory_stats *out);
KN_API void kn_memory_reset_peak(kn_device device);
/* Returns cached free blocks to the system (after finishing queued work), and compiled mode's
 * arenas with them. */
KN_API void kn_memory_empty_cache(kn_device device);

/* What the meta backend has traced since the last reset: ops recorded, their FLOPs and the
 * bytes their outputs would take. */
typedef struct kn_meta_trace {
    int64_t ops;
    double flops;
    int64_t peak_bytes;
} kn_meta_trace;
KN_API void kn_meta_trace_get(kn_meta_trace *out);
/* Count of ops of one name the meta backend traced. */
KN_API int64_t kn_meta_trace_op_count(const char *op_name);
KN_API void kn_meta_trace_reset(void);

#ifdef __cplusplus
}
#endif
#endif
