/* Devices: names, the backend registry, the default device, memory statistics. */
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "core/error.h"
#include "core/hooks.h"
#include "core/runtime_impl.h"

static _Thread_local bool default_set;
static _Thread_local kn_device thread_default;
static kn_device process_default = {KN_DEVICE_CPU, 0};

static const char *const type_names[KN_DEVICE_TYPE_COUNT] = {"cpu", "meta", "cuda"};

const char *kn_device_type_name(kn_device_type t) {
    return (unsigned)t < KN_DEVICE_TYPE_COUNT ? type_names[t] : "?";
}

kn_backend *kn_backend_for(kn_device_type type) {
    switch (type) {
    case KN_DEVICE_CPU: return &kn_cpu_backend;
    case KN_DEVICE_META: return &kn_meta_backend;
    default: return NULL; /* CUDA arrives with its own backend folder */
    }
}

bool kn_device_parse(const char *text, kn_device *out) {
    if (!text) return false;
    for (int t = 0; t < KN_DEVICE_TYPE_COUNT; t++) {
        size_t n = strlen(type_names[t]);
        if (strncmp(text, type_names[t], n) != 0) continue;
        int index = 0;
        if (text[n] == ':') {
            char *end;
            long v = strtol(text + n + 1, &end, 10);
            if (*end || end == text + n + 1 || v < 0 || v > 1024) return false;
            index = (int)v;
        } else if (text[n]) {
            continue;
        }
        out->type = (kn_device_type)t;
        out->index = index;
        return true;
    }
    return false;
}

bool kn_device_available(kn_device d) {
    kn_backend *b = kn_backend_for(d.type);
    return b && b->available(d.index);
}

kn_backend *kn_backend_get(kn_device d) {
    if (!kn_runtime_ready()) return NULL;
    kn_backend *b = kn_backend_for(d.type);
    if (!b)
        return kn_error_null(KN_ERR_DEVICE, "device %s:%d: this build of kiln has no %s backend",
                             kn_device_type_name(d.type), d.index, kn_device_type_name(d.type));
    if (!b->available(d.index))
        return kn_error_null(KN_ERR_DEVICE, "device %s:%d is not available", b->name, d.index);
    return b;
}

void kn_backend_register_kernels(kn_backend *b, const kn_kernel_reg *regs) {
    for (; regs->fn; regs++) {
        b->kernels[regs->op].fn = regs->fn;
        b->kernels[regs->op].dtypes = regs->dtypes;
    }
}

kn_status kn_set_default_device(kn_device d) {
    if (!kn_backend_get(d)) return kn_last_status();
    thread_default = d;
    default_set = true;
    process_default = d;
    return KN_OK;
}

kn_device kn_default_device(void) {
    kn_runtime_ready();
    return default_set ? thread_default : process_default;
}

kn_status kn_memory_stats_get(kn_device device, kn_memory_stats *out) {
    if (!out) return kn_error(KN_ERR_NULL, "memory_stats: output pointer is NULL");
    kn_backend *b = kn_backend_get(device);
    if (!b) return kn_last_status();
    b->memory_stats(device.index, out);
    return KN_OK;
}

void kn_memory_reset_peak(kn_device device) {
    kn_backend *b = kn_backend_get(device);
    if (b) b->memory_reset_peak(device.index);
}

void kn_memory_empty_cache(kn_device device) {
    kn_backend *b = kn_backend_get(device);
    if (!b) return;
    kn_realize_pending(NULL);
    b->sync();
    b->empty_cache(device.index);
}
