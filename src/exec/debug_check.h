/* Debug mode: run a node synchronously and name it if it turns finite inputs into NaN/Inf. */
#ifndef KILN_EXEC_DEBUG_CHECK_H
#define KILN_EXEC_DEBUG_CHECK_H

#include "backends/backend.h"

/* Launches n on b, waits, and checks its float outputs. Consumes n. */
kn_status kn_debug_run(kn_backend *b, kn_node *n);

#endif
