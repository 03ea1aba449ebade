/* The modes as schedulers: the dispatcher hands every recorded node to the current mode's
 * scheduler, which decides when it runs (DESIGN.md, "One pipeline for every mode"). Pending
 * work is realized through kn_realize, the one entry point core reaches (core/hooks.h). */
#ifndef KILN_EXEC_SCHEDULER_H
#define KILN_EXEC_SCHEDULER_H

#include "backends/backend.h"

typedef struct kn_scheduler {
    const char *name;
    /* Takes node n (consumed), whose kernel b has. Returns an error it found now (debug: the
     * kernel's); errors of queued work surface at the next sync. */
    kn_status (*submit)(kn_backend *b, kn_node *n);
    /* Launches everything it holds, in record order; the first error. NULL for a scheduler
     * that holds nothing. */
    kn_status (*realize)(void);
    /* Whether the outputs it is handed get their memory only when their node is launched (fused
     * mode: an intermediate a fused kernel never stores gets none). */
    bool defers_storage;
} kn_scheduler;

/* strict: queued on the device's stream. debug: run at once and waited for (the checks are
 * interposers). fused: kept in a window (exec/fused.h). compiled: kept until a read, then run
 * as one planned program (exec/compiled.c). */
extern const kn_scheduler kn_strict_scheduler, kn_debug_scheduler, kn_fused_scheduler, kn_compiled_scheduler;

/* The scheduler of a mode that can be set (kn_set_mode refuses the others). */
const kn_scheduler *kn_scheduler_for(kn_mode mode);

/* Launches the recorded work t's value depends on, or all recorded work for t == NULL;
 * returns the first error. Every recorded node is launched today whatever t is: t narrows
 * it once values are deferred (issue 13's graph values). */
kn_status kn_realize(kn_tensor *t);

#endif
