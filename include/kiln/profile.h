/* The kernel profile: how long each op's kernels ran, measured on the stream that ran them
 * (so in strict mode it is kernel time, not the host's recording time), summed per op.
 * `KILN_PROFILE=1` profiles the whole run and prints the table at exit on stderr, one line
 * per op prefixed "kiln-profile: "; the functions below profile a region of a program. */
#ifndef KILN_PROFILE_H
#define KILN_PROFILE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "kiln/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kn_profile_row {
    const char *op;     /* the op's name; generated kernels of fused mode are "fused" */
    int64_t calls;
    double total_ms;    /* summed kernel time */
} kn_profile_row;

/* Clears the counts and starts timing every kernel from now on (waits for queued work first). */
KN_API void kn_profile_start(void);
/* Waits for queued work and stops timing; the counts stay readable. */
KN_API void kn_profile_stop(void);
/* Up to max rows, the ops that ran, most total time first; returns how many ops ran. */
KN_API int kn_profile_rows(kn_profile_row *rows, int max);
/* The table as text ("op calls total_ms mean_us share" per line, then the kernels' total and
 * the wall time the profile covered), into buf (truncated to size); returns the length it
 * wanted. */
KN_API size_t kn_profile_report(char *buf, size_t size);
/* The report on out, each line after line_prefix (nothing if out of memory). */
KN_API void kn_profile_print(FILE *out, const char *line_prefix);

#ifdef __cplusplus
}
#endif

#endif
