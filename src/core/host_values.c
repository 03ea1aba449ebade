/* A tensor's values on the host as doubles (core/host_values.h), and kn_item. */
#include "core/host_values.h"

#include <stdlib.h>

#include "core/error.h"

double kn_value_at(const void *p, kn_dtype d, int64_t i) {
    switch (d) {
    case KN_F32: return ((const float *)p)[i];
    case KN_F64: return ((const double *)p)[i];
    case KN_F16: return kn_f16_to_f32(((const uint16_t *)p)[i]);
    case KN_BF16: return kn_bf16_to_f32(((const uint16_t *)p)[i]);
    case KN_I32: return ((const int32_t *)p)[i];
    case KN_I64: return (double)((const int64_t *)p)[i];
    default: return ((const uint8_t *)p)[i] != 0;
    }
}

void *kn_read_raw(const char *who, kn_tensor *t) {
    size_t bytes = (size_t)kn_numel(t) * kn_dtype_size(kn_dtype_of(t));
    void *raw = malloc(bytes ? bytes : 1);
    if (!raw) return kn_error_null(KN_ERR_OOM, "%s: out of host memory reading %zu bytes", who, bytes);
    if (kn_to_host(t, raw, bytes) == KN_OK) return raw;
    free(raw);
    return NULL;
}

double *kn_read_f64(const char *who, kn_tensor *t) {
    int64_t count = kn_numel(t);
    void *raw = kn_read_raw(who, t);
    double *v = raw ? malloc(count ? (size_t)count * sizeof *v : 1) : NULL;
    if (raw && !v) kn_error(KN_ERR_OOM, "%s: out of host memory reading %lld values", who, (long long)count);
    for (int64_t i = 0; v && i < count; i++) v[i] = kn_value_at(raw, kn_dtype_of(t), i);
    free(raw);
    return v;
}

kn_status kn_item(kn_tensor *t, double *out) {
    if (!t) {
        kn_error_null_input("item", 0);
        return kn_last_status();
    }
    if (!out) return kn_error(KN_ERR_NULL, "item: output pointer is NULL");
    char desc[96];
    if (kn_numel(t) != 1)
        return kn_error(KN_ERR_SHAPE, "item: %s has %lld elements, not one", kn_describe(t, desc, sizeof desc),
                        (long long)kn_numel(t));
    unsigned char raw[sizeof(double)];
    kn_status st = kn_to_host(t, raw, sizeof raw);
    if (st == KN_OK) *out = kn_value_at(raw, kn_dtype_of(t), 0);
    return st;
}
