/* A compiled step's input guards (include/kiln/compile.h): what each call's inputs must match
 * for the step to be the program an earlier call was. */
#ifndef KILN_EXEC_COMPILED_GUARD_H
#define KILN_EXEC_COMPILED_GUARD_H

#include <stddef.h>
#include <stdint.h>

#include "kiln/compile.h"
#include "kiln/stats.h"

/* Per input: dtype, device type and index, rank, then each size (-1 for a dynamic dimension
 * within its bound). */
typedef struct kn_step_guard {
    int64_t *v;
    int len;
    uint64_t hash;
} kn_step_guard;

/* The guard of inputs[0..n) under the dynamic dims dyn[0..n_dyn). KN_ERR_ARG (naming it) when
 * a dynamic dim names a dimension its input lacks; KN_ERR_OOM. */
kn_status kn_step_guard_make(kn_step_guard *g, kn_tensor *const *inputs, int n, const kn_compile_dim *dyn, int n_dyn,
                             const char *step);
/* The first difference between two guards, as a reason and a phrase ("input 1's size [4, 65]
 * (was [4, 64])"). */
kn_recompile_reason kn_step_guard_diff(const kn_step_guard *was, const kn_step_guard *now, char *why, size_t size);
void kn_step_guard_free(kn_step_guard *g);

#endif
