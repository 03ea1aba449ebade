/* Debug mode's shadow (kn_set_shadow, KILN_SHADOW): each op runs again on a reference backend
 * in float64, and the first op whose result leaves its dtype's tolerance is an error. */
#ifndef KILN_EXEC_SHADOW_H
#define KILN_EXEC_SHADOW_H

#include "backends/backend.h"

typedef struct kn_shadow kn_shadow;

/* Before n runs on b: copies its inputs, and the outputs it writes in place, to the reference
 * device (floats as f64), so the reference starts from the values n starts from. *out is NULL
 * when the shadow is off or skips n (counted). Fails only when a copy does. */
kn_status kn_shadow_begin(const kn_backend *b, const kn_node *n, kn_shadow **out);
/* After n ran with status `real`: frees s and returns `real` if it failed; else runs the
 * reference and compares every output of n with it. A divergence is KN_ERR_NUMERIC with a
 * message naming `op_call` ("gelu(f32[4, 8])"), the element, the nn module and the caller. */
kn_status kn_shadow_end(kn_shadow *s, kn_status real, const char *op_call);
/* Counts an op the shadow never sees (ops with data-dependent shapes run outside debug mode's
 * path), if the shadow is on. */
void kn_shadow_skip(void);

#endif
