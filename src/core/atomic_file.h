/* What the runtime (not the public API) may do with an atomic file before committing it. */
#ifndef KILN_CORE_ATOMIC_FILE_H
#define KILN_CORE_ATOMIC_FILE_H

#include "kiln/atomic_file.h"

/* The temporary file's descriptor (its stream is not a plain file stream, so fileno gives
 * -1), for setting its mode before commit; -1 for NULL. Never close it. */
int kn_atomic_file_fd(kn_atomic_file *a);

#endif
