/* The kernel profile's hook in exec (include/kiln/profile.h is its public side). */
#ifndef KILN_EXEC_PROFILE_H
#define KILN_EXEC_PROFILE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "ops/op_table.h"

extern atomic_bool kn_profiling;

/* The monotonic clock in ns. */
int64_t kn_profile_now(void);
/* Counts one kernel of op that ran for ns (any stream's thread). */
void kn_profile_add(kn_op_id op, int64_t ns);

#endif
