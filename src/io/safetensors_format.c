/* The safetensors dtype names and message helpers shared by the reader and the writer. */
#include "io/safetensors_format.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"

static const char *const dtype_names[KN_DTYPE_COUNT] = {
    [KN_F32] = "F32", [KN_F64] = "F64", [KN_F16] = "F16",   [KN_BF16] = "BF16",
    [KN_I32] = "I32", [KN_I64] = "I64", [KN_BOOL] = "BOOL",
};

const char *kn_st_dtype_name(kn_dtype d) { return kn_dtype_valid(d) ? dtype_names[d] : "?"; }

bool kn_st_dtype_parse(const char *name, kn_dtype *out) {
    for (int d = 0; d < KN_DTYPE_COUNT; d++)
        if (strcmp(name, dtype_names[d]) == 0) {
            *out = (kn_dtype)d;
            return true;
        }
    return false;
}

char *kn_st_describe(kn_dtype d, kn_shape s, char *buf, size_t n) {
    size_t at = (size_t)snprintf(buf, n, "%s[", kn_st_dtype_name(d));
    for (int i = 0; i < s.n && at < n; i++)
        at += (size_t)snprintf(buf + at, n - at, "%s%" PRId64, i ? ", " : "", s.v[i]);
    if (at < n) snprintf(buf + at, n - at, "]");
    return buf;
}

kn_status kn_st_prefix_error(const char *path, const char *name) {
    char inner[512]; /* a copy: the message is formatted into the buffer it came from */
    snprintf(inner, sizeof inner, "%s", kn_last_error());
    kn_status st = kn_last_status() != KN_OK ? kn_last_status() : KN_ERR_INTERNAL;
    return kn_error(st, "%s: tensor '%s': %s", path, name, inner);
}
