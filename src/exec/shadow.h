/* The float64 shadow's pieces beyond its interposer (exec/shadow.c), for the compiled mode's
 * check of a whole program (exec/compiled_shadow.h), whose ops run long after their call. */
#ifndef KILN_EXEC_SHADOW_H
#define KILN_EXEC_SHADOW_H

#include "backends/backend.h"

/* Where the op call running now comes from, as the shadow's errors say it:
 * ` at module "h.0.mlp" (MLP) called from train_step+0x1c (program)` (malloc'd; NULL when out
 * of memory). */
char *kn_shadow_origin(void);

/* Runs n's kernel on b now (its outputs must have memory) with the shadow around it, as debug
 * mode runs an op: a divergence from float64 is KN_ERR_NUMERIC naming n's call and `origin`
 * (a kn_shadow_origin text, or NULL for the op call running now). */
kn_status kn_shadow_run_node(kn_node *n, kn_backend *b, const char *origin);

/* got against want (the same shape and dtype) at the dtype's shadow tolerance: a difference is
 * KN_ERR_NUMERIC "shadow: <what>: max abs error ... at index ...". */
kn_status kn_shadow_compare(kn_tensor *got, kn_tensor *want, const char *what);

#endif
