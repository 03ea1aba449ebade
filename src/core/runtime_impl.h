/* Process-wide runtime state: lazy start-up, the mode, threads, the generator. */
#ifndef KILN_CORE_RUNTIME_IMPL_H
#define KILN_CORE_RUNTIME_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/runtime.h"

/* Starts the runtime on first use (reads KILN_MODE, KILN_DEVICE, KILN_THREADS, KILN_SEED).
 * False, with the error set, if the environment names something invalid. */
bool kn_runtime_ready(void);

/* The debug shadow's reference backend and device (kn_set_shadow), or NULL when it is off. */
struct kn_backend *kn_shadow_reference(kn_device *device);

/* The configured CPU thread count (no start-up side effects; backends call it from init). */
int kn_cpu_num_threads(void);

/* Threads a CPU kernel should use for `work` elements of simple work: 1 for small jobs, so
 * tiny ops never pay for a parallel region. */
int kn_cpu_threads_for(int64_t work);

/* Reserves `count` Philox counters from the global generator; returns the seed and the
 * first counter. */
void kn_rng_reserve(uint64_t count, uint64_t *seed, uint64_t *offset);

#endif
