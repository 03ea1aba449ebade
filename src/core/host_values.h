/* A tensor's values on the host as doubles, for printing, kn_item and the debug checks:
 * read through kn_to_host, so they need no op and work on every backend that holds values. */
#ifndef KILN_CORE_HOST_VALUES_H
#define KILN_CORE_HOST_VALUES_H

#include "kiln/tensor.h"

/* Element i of an array of dtype d, as a double (bool as 0 or 1). */
double kn_value_at(const void *p, kn_dtype d, int64_t i);
/* t's values, row-major, in t's own dtype (malloc'd, at least one byte); NULL with the error
 * set. `who` names the caller in an out-of-memory error. */
void *kn_read_raw(const char *who, kn_tensor *t);
/* The same as doubles. */
double *kn_read_f64(const char *who, kn_tensor *t);

#endif
