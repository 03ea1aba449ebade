/* The thread's last error: a code and a message naming the op, shapes and dtypes. */
#include "core/error.h"

#include <stdio.h>
#include <string.h>

#define KN_ERROR_MAX 1024

static _Thread_local kn_status last_status = KN_OK;
static _Thread_local char last_message[KN_ERROR_MAX];

kn_status kn_verror(kn_status code, const char *fmt, va_list ap) {
    last_status = code;
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    return code;
}

kn_status kn_error(kn_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kn_verror(code, fmt, ap);
    va_end(ap);
    return code;
}

void *kn_error_null(kn_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kn_verror(code, fmt, ap);
    va_end(ap);
    return NULL;
}

void kn_error_null_input(const char *op, int index) {
    if (last_status == KN_OK)
        kn_error(KN_ERR_NULL, "%s: input %d is NULL", op, index);
}

kn_status kn_last_status(void) { return last_status; }
const char *kn_last_error(void) { return last_status == KN_OK ? "" : last_message; }

void kn_clear_error(void) {
    last_status = KN_OK;
    last_message[0] = '\0';
}

const char *kn_status_name(kn_status s) {
    static const char *const names[] = {
        [KN_OK] = "ok", [KN_ERR_NULL] = "null argument", [KN_ERR_ARG] = "invalid argument",
        [KN_ERR_SHAPE] = "shape error", [KN_ERR_DTYPE] = "dtype error",
        [KN_ERR_INDEX] = "index out of range", [KN_ERR_VIEW] = "invalid view",
        [KN_ERR_OOM] = "out of memory", [KN_ERR_DEVICE] = "device error",
        [KN_ERR_UNSUPPORTED] = "unsupported", [KN_ERR_NUMERIC] = "non-finite value",
        [KN_ERR_IO] = "I/O error", [KN_ERR_INTERNAL] = "internal error",
    };
    return (unsigned)s < sizeof names / sizeof names[0] ? names[s] : "unknown status";
}

kn_status kn_set_error(kn_status code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kn_status st = kn_verror(code, fmt, ap);
    va_end(ap);
    return st;
}
