/* Fused mode (DESIGN.md, "One pipeline for every mode"): recorded nodes wait in a window
 * until a value is read, an op needs its inputs on the host, the mode changes or the window
 * is full; then the scheduler groups chains of elementwise ops into generated kernels and
 * launches everything in record order. The window is fused mode's scheduler (exec/scheduler.h). */
#ifndef KILN_EXEC_FUSED_H
#define KILN_EXEC_FUSED_H

#include "backends/backend.h"

/* The scheduler: launches nodes[0..n) (consumed; the arrays are reordered) in record order,
 * fused where it can. */
kn_status kn_fused_schedule(kn_node **nodes, kn_backend **backends, int n);
/* Its planning half: merges common subexpressions (graph/cse.h) and replaces each fusable run of nodes by
 * one `fused` node (kernels built or taken from the cache), in place; returns the new count,
 * the nodes in launch order, none launched. *error: a recompile-storm refusal, else KN_OK
 * (the group it refused runs op by op). source (NULL: not wanted) gets the generated source
 * of the kernels the new nodes run (malloc'd; NULL when there are none). */
int kn_fused_rewrite(kn_node **nodes, kn_backend **backends, int n, kn_status *error, char **source);

/* Whether KILN_RECOMPILE=error: a recompile storm (fused mode) or any recompile of a compiled
 * step is an error. */
bool kn_recompile_is_error(void);

/* Recompile bookkeeping for one kernel about to be built: counts a new variant of its call
 * site with the reason, warns once about a storm, and returns an error for a storm when
 * KILN_RECOMPILE=error. */
kn_status kn_fused_note_variant(const kn_fused_ir *ir);

#endif
