/* Errors are values: status codes and the thread's last error message. */
#ifndef KILN_STATUS_H
#define KILN_STATUS_H

#include "kiln/api.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kn_status {
    KN_OK = 0,
    KN_ERR_NULL,        /* a NULL tensor or pointer where one was required */
    KN_ERR_ARG,         /* an argument out of its domain (negative size, bad mode name...) */
    KN_ERR_SHAPE,       /* shapes that do not fit together */
    KN_ERR_DTYPE,       /* a dtype the op does not take, or mismatched dtypes */
    KN_ERR_INDEX,       /* a dim or an index out of range */
    KN_ERR_VIEW,        /* a view the tensor's strides cannot express */
    KN_ERR_OOM,         /* an allocation failed */
    KN_ERR_DEVICE,      /* a device is missing, or tensors live on different devices */
    KN_ERR_UNSUPPORTED, /* the op has no kernel on this backend for this dtype, or the run would do
                           what a setting forbids (KILN_RECOMPILE=error: a recompile) */
    KN_ERR_NUMERIC,     /* debug mode: an op produced NaN or Inf from finite inputs */
    KN_ERR_IO,          /* reading or writing a file failed */
    KN_ERR_INTERNAL     /* a bug in kiln; please report it */
} kn_status;

/* The status of the most recent failure on this thread (KN_OK if none since the last clear). */
KN_API kn_status kn_last_status(void);
/* Its message, naming the op, the shapes and the dtypes involved; "" if none. */
KN_API const char *kn_last_error(void);
/* Forget the last error. */
KN_API void kn_clear_error(void);
/* Records an error as the thread's last one and returns code: for code built on kiln (models,
 * tools) that reports its own failures the same way. */
KN_API kn_status kn_set_error(kn_status code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* A short name for a status code ("shape error", ...). */
KN_API const char *kn_status_name(kn_status s);

#ifdef __cplusplus
}
#endif
#endif
