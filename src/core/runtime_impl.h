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

/* Reserves `count` Philox counters from the global generator; returns the seed and the
 * first counter. */
void kn_rng_reserve(uint64_t count, uint64_t *seed, uint64_t *offset);

#endif
