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
/* Its planning half: merges common subexpressions and replaces each fusable run of nodes by
 * one `fused` node (kernels built or taken from the cache), in place; returns the new count,
 * the nodes in launch order, none launched. *error: a recompile-storm refusal, else KN_OK
 * (the group it refused runs op by op). */
int kn_fused_rewrite(kn_node **nodes, kn_backend **backends, int n, kn_status *error);

/* Whether something outside nodes[first .. first + count) can still see t, a value one of
 * them makes: another reference than the producing node's and those nodes' uses, or another
 * tensor on its storage (a view) that is not merely a handle those nodes hold to the same
 * elements (an op's API function may hand its node a fresh handle of an input). */
bool kn_fused_escapes(kn_node *const *nodes, int first, int count, kn_tensor *t);

/* Common subexpressions (exec/fused_cse.c): drops each node of nodes[0..n) that computes what
 * an earlier one computes (kn_node_same), where no one outside the window can see its values;
 * the window's later readers read the earlier node's values instead. Returns the new count
 * (the arrays are compacted, record order kept). */
int kn_fused_merge_common(kn_node **nodes, kn_backend **backends, int n);

/* Recompile bookkeeping for one kernel about to be built: counts a new variant of its call
 * site with the reason, warns once about a storm, and returns an error for a storm when
 * KILN_RECOMPILE=error. */
kn_status kn_fused_note_variant(const kn_fused_ir *ir);

#endif
