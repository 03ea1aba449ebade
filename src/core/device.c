/* Devices: names, the backend registry, device counts and properties, the default device,
 * memory statistics. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "core/backend_device.h"
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

/* The registry: filled at start-up (kn_register_builtin_backends) and by kn_backend_register;
 * a slot is written before the count that publishes it. */
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static kn_backend *registry[KN_DEVICE_TYPE_COUNT];
static atomic_int registered;
static bool initialized; /* guarded by registry_lock */

kn_status kn_backend_register(kn_backend *b) {
    if (!b) return kn_error(KN_ERR_NULL, "backend_register: the backend is NULL");
    if ((unsigned)b->type >= KN_DEVICE_TYPE_COUNT)
        return kn_error(KN_ERR_ARG, "backend_register(%s): device type %d is not one kiln knows", b->name, (int)b->type);
    if (!b->kernels) /* exec runs every node through it and never checks */
        return kn_error(KN_ERR_ARG, "backend_register(%s): it has no kernel table", b->name);
    pthread_mutex_lock(&registry_lock);
    kn_status st = KN_OK;
    int n = atomic_load(&registered);
    for (int i = 0; i < n && st == KN_OK; i++)
        if (registry[i]->type == b->type)
            st = kn_error(KN_ERR_ARG, "backend_register(%s): the %s backend is registered for %s devices already",
                          b->name, registry[i]->name, kn_device_type_name(b->type));
    if (st == KN_OK && initialized && b->init) st = b->init(b);
    if (st == KN_OK) {
        registry[n] = b;
        atomic_store(&registered, n + 1);
    }
    pthread_mutex_unlock(&registry_lock);
    return st;
}

kn_status kn_backends_init(void) {
    pthread_mutex_lock(&registry_lock);
    kn_status first = KN_OK;
    int n = atomic_load(&registered);
    for (int i = 0; i < n; i++)
        if (registry[i]->init && registry[i]->init(registry[i]) != KN_OK && first == KN_OK) first = kn_last_status();
    initialized = true;
    pthread_mutex_unlock(&registry_lock);
    return first;
}

kn_backend *kn_backend_for(kn_device_type type) {
    int n = atomic_load_explicit(&registered, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (registry[i]->type == type) return registry[i];
    return NULL;
}

static bool has_device(kn_backend *b, int index) { return index >= 0 && index < b->device_count(); }

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

bool kn_device_exists(kn_device d) {
    kn_backend *b = kn_backend_for(d.type);
    return b && has_device(b, d.index);
}

bool kn_device_available(kn_device d) {
    kn_runtime_ready(); /* registers the backends */
    return kn_device_exists(d);
}

kn_backend *kn_backend_get(kn_device d) {
    if (!kn_runtime_ready()) return NULL;
    kn_backend *b = kn_backend_for(d.type);
    if (!b)
        return kn_error_null(KN_ERR_DEVICE, "device %s:%d: this build of kiln has no %s backend",
                             kn_device_type_name(d.type), d.index, kn_device_type_name(d.type));
    if (!has_device(b, d.index))
        return kn_error_null(KN_ERR_DEVICE, "device %s:%d is not available (this process has %d %s device%s)", b->name,
                             d.index, b->device_count(), b->name, b->device_count() == 1 ? "" : "s");
    return b;
}

kn_status kn_set_default_device(kn_device d) {
    if (!kn_backend_get(d)) return kn_last_status();
    thread_default = d;
    default_set = true;
    process_default = d;
    return KN_OK;
}

void kn_device_set_process_default(kn_device d) { process_default = d; }

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
    kn_device_wait(device);
    if (kn_hooks.release_device_memory) kn_hooks.release_device_memory(device);
    b->empty_cache(device.index);
}

int kn_device_count(kn_device_type type) {
    if (!kn_runtime_ready()) return 0;
    kn_backend *b = kn_backend_for(type);
    return b ? b->device_count() : 0;
}

kn_status kn_device_properties(kn_device device, kn_device_props *out) {
    if (!out) return kn_error(KN_ERR_NULL, "device_properties: output pointer is NULL");
    kn_backend *b = kn_backend_get(device);
    if (!b) return kn_last_status();
    memset(out, 0, sizeof *out);
    out->device = device;
    out->holds_values = b->holds_values;
    out->host_memory = b->host_memory;
    b->device_properties(device.index, out);
    out->max_streams = KN_MAX_STREAMS;
    out->streams = kn_stream_count(device);
    return KN_OK;
}
