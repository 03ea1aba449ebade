/* Atomic replacement of a file: readers see the old file or the whole new one. Part of the
 * core (the compilation cache and the checkpoints both write through it); kiln/io.h includes it. */
#ifndef KILN_ATOMIC_FILE_H
#define KILN_ATOMIC_FILE_H

#include <stddef.h>
#include <stdio.h>

#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- atomic writes ---------------------------------------------------------------------------
 * The bytes go to a temporary file beside `path`, which is flushed and fsync'd, renamed over
 * `path`, and the directory fsync'd: readers see the old file or the whole new one, and on
 * any failure the temporary file is removed and the old file is left as it was. */
KN_API kn_status kn_write_file_atomic(const char *path, const void *data, size_t n);

/* The streaming form, for writers that produce their bytes piece by piece:
 *
 *     kn_atomic_file *a = kn_atomic_file_open(path);
 *     if (!a) return kn_last_status();
 *     fprintf(kn_atomic_file_stream(a), ...);      // any stdio writes
 *     return kn_atomic_file_commit(a);             // or kn_atomic_file_abort(a)
 *
 * commit checks the stream for write errors, makes the file durable and replaces `path`;
 * commit and abort both free `a`. */
typedef struct kn_atomic_file kn_atomic_file;
KN_API kn_atomic_file *kn_atomic_file_open(const char *path);
KN_API FILE *kn_atomic_file_stream(kn_atomic_file *a);
KN_API kn_status kn_atomic_file_commit(kn_atomic_file *a);
KN_API void kn_atomic_file_abort(kn_atomic_file *a);   /* NULL is ignored */

#ifdef __cplusplus
}
#endif
#endif
