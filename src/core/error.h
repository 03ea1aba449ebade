/* Setting the thread's last error. Every fallible internal path goes through these. */
#ifndef KILN_CORE_ERROR_H
#define KILN_CORE_ERROR_H

#include <stdarg.h>

#include "kiln/status.h"

#if defined(__GNUC__)
#define KN_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define KN_PRINTF(a, b)
#endif

/* Records code and a formatted message as this thread's last error; returns code. */
kn_status kn_error(kn_status code, const char *fmt, ...) KN_PRINTF(2, 3);
kn_status kn_verror(kn_status code, const char *fmt, va_list ap);
/* Same, but returns NULL so that `return kn_error_null(...)` reads naturally. */
void *kn_error_null(kn_status code, const char *fmt, ...) KN_PRINTF(2, 3);
/* Records "op: input N is NULL" unless an earlier error is already kept (DESIGN.md: a NULL
 * input passes the first error through). */
void kn_error_null_input(const char *op, int index);

#endif
