/* Runtime start-up from the environment, the execution mode, threads and the generator. */
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/backend_device.h"
#include "core/error.h"
#include "core/hooks.h"
#include "core/runtime_impl.h"
#include "core/stats.h"
#include "core/thread_pool.h"
#include "kiln_build_config.h"

static pthread_once_t start_once = PTHREAD_ONCE_INIT;
static kn_status start_status = KN_OK;
static char start_message[512];

static _Atomic kn_mode current_mode = KN_MODE_STRICT;
/* The shadow's reference device as 1 + (type | index << 8); 0 when the shadow is off. */
static atomic_int shadow_code = 0;

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed = 0, rng_offset = 0;

const char *kn_version(void) { return KILN_VERSION_STRING; }

static const char *const mode_names[KN_MODE_COUNT] = {"strict", "debug", "fused", "compiled"};

const char *kn_mode_name(kn_mode mode) { return (unsigned)mode < KN_MODE_COUNT ? mode_names[mode] : "?"; }

bool kn_mode_parse(const char *name, kn_mode *out) {
    for (int m = 0; name && m < KN_MODE_COUNT; m++)
        if (strcmp(name, mode_names[m]) == 0) {
            *out = (kn_mode)m;
            return true;
        }
    return false;
}

static void start_fail(kn_status code, const char *msg) {
    start_status = code;
    snprintf(start_message, sizeof start_message, "%s", msg);
}

/* Checks a reference device for the shadow: one that holds values and is available. Errors
 * name it as `what` and list the backends that would do. */
static kn_status parse_shadow(const char *text, const char *what, int *code) {
    *code = 0;
    if (!text || !*text) return KN_OK;
    char choices[64] = "";
    size_t len = 0;
    for (int t = 0; t < KN_DEVICE_TYPE_COUNT && len < sizeof choices; t++) {
        kn_backend *b = kn_backend_for((kn_device_type)t);
        if (b && b->holds_values && kn_device_exists((kn_device){(kn_device_type)t, 0}))
            len += (size_t)snprintf(choices + len, sizeof choices - len, len ? ", %s" : "%s", b->name);
    }
    kn_device d;
    if (!kn_device_parse(text, &d)) return kn_error(KN_ERR_ARG, "%s: no backend has that name (try %s)", what, choices);
    kn_backend *b = kn_backend_for(d.type);
    if (!b) return kn_error(KN_ERR_DEVICE, "%s: this build of kiln has no %s backend (try %s)", what, text, choices);
    if (!b->holds_values)
        return kn_error(KN_ERR_DEVICE, "%s: the %s backend holds no values, so it cannot be the reference (try %s)",
                        what, b->name, choices);
    if (!kn_device_exists(d)) return kn_error(KN_ERR_DEVICE, "%s: that device is not available (try %s)", what, choices);
    *code = 1 + ((int)d.type | d.index << 8);
    return KN_OK;
}

/* The cores this process may run on (its affinity mask, which taskset and containers set). */
static int usable_cores(void) {
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0) return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void start(void) {
    char msg[256];
    const char *s = getenv("KILN_THREADS");
    int threads = s ? atoi(s) : 0;
    if (s && threads <= 0) {
        snprintf(msg, sizeof msg, "KILN_THREADS=%s: expected a positive number of threads", s);
        start_fail(KN_ERR_ARG, msg);
    }
    kn_pool_resize(threads > 0 ? threads : usable_cores());

    kn_stats_start();

    s = getenv("KILN_SEED");
    if (s) rng_seed = strtoull(s, NULL, 10);

    s = getenv("KILN_MODE");
    bool mode_set = s && *s;
    if (mode_set) {
        kn_mode m;
        if (!kn_mode_parse(s, &m)) {
            snprintf(msg, sizeof msg, "KILN_MODE=%s: expected strict, debug, fused or compiled", s);
            start_fail(KN_ERR_ARG, msg);
        } else {
            atomic_store(&current_mode, m);
        }
    }

    kn_register_builtin_backends();
    if (kn_backends_init() != KN_OK && start_status == KN_OK) start_fail(kn_last_status(), kn_last_error());

    /* KILN_SHADOW alone is a request to debug: it starts kiln in debug mode. */
    s = getenv("KILN_SHADOW");
    if (s && *s && start_status == KN_OK) {
        snprintf(msg, sizeof msg, "KILN_SHADOW=%s", s);
        int code;
        if (parse_shadow(s, msg, &code) != KN_OK) {
            start_fail(kn_last_status(), kn_last_error());
        } else {
            atomic_store(&shadow_code, code);
            if (!mode_set) atomic_store(&current_mode, KN_MODE_DEBUG);
        }
    }

    s = getenv("KILN_DEVICE");
    if (s && *s && start_status == KN_OK) {
        kn_device d;
        if (!kn_device_parse(s, &d) || !kn_device_exists(d)) {
            snprintf(msg, sizeof msg, "KILN_DEVICE=%s: no such device available (try cpu or meta)", s);
            start_fail(KN_ERR_DEVICE, msg);
        } else {
            kn_device_set_process_default(d);
        }
    }
}

bool kn_runtime_ready(void) {
    pthread_once(&start_once, start);
    if (start_status != KN_OK) {
        kn_error(start_status, "kiln start-up: %s", start_message);
        return false;
    }
    return true;
}

kn_status kn_set_mode(kn_mode mode) {
    if (!kn_runtime_ready()) return kn_last_status();
    if ((unsigned)mode >= KN_MODE_COUNT) return kn_error(KN_ERR_ARG, "set_mode: invalid mode %d", (int)mode);
    kn_status st = kn_sync();
    atomic_store(&current_mode, mode);
    return st;
}

kn_status kn_set_shadow(const char *backend) {
    if (!kn_runtime_ready()) return kn_last_status();
    char what[96];
    snprintf(what, sizeof what, "set_shadow(\"%s\")", backend ? backend : "");
    int code;
    kn_status st = parse_shadow(backend, what, &code);
    if (st == KN_OK) atomic_store(&shadow_code, code);
    return st;
}

const char *kn_get_shadow(void) {
    static _Thread_local char name[32];
    kn_device d;
    kn_backend *b = kn_shadow_reference(&d);
    if (!b) return NULL;
    if (d.index) snprintf(name, sizeof name, "%s:%d", b->name, d.index);
    else snprintf(name, sizeof name, "%s", b->name);
    return name;
}

kn_backend *kn_shadow_reference(kn_device *device) {
    kn_runtime_ready();
    int code = atomic_load_explicit(&shadow_code, memory_order_relaxed);
    if (!code) return NULL;
    device->type = (kn_device_type)((code - 1) & 0xff);
    device->index = (code - 1) >> 8;
    return kn_backend_for(device->type);
}

kn_mode kn_get_mode(void) {
    kn_runtime_ready();
    return atomic_load(&current_mode);
}

kn_status kn_sync(void) {
    if (!kn_runtime_ready()) return kn_last_status();
    kn_status first = kn_realize_pending(NULL);
    kn_status st = kn_streams_sync_all(); /* every stream of every device */
    return first != KN_OK ? first : st;
}

void kn_set_num_threads(int n) {
    kn_runtime_ready();
    kn_pool_resize(n);
}

int kn_get_num_threads(void) {
    kn_runtime_ready();
    return kn_pool_threads();
}

void kn_manual_seed(uint64_t seed) { kn_rng_set_state(seed, 0); }

uint64_t kn_mix64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void kn_rng_get_state(uint64_t *seed, uint64_t *offset) {
    kn_runtime_ready();
    pthread_mutex_lock(&rng_lock);
    if (seed) *seed = rng_seed;
    if (offset) *offset = rng_offset;
    pthread_mutex_unlock(&rng_lock);
}

void kn_rng_set_state(uint64_t seed, uint64_t offset) {
    kn_runtime_ready();
    pthread_mutex_lock(&rng_lock);
    rng_seed = seed;
    rng_offset = offset;
    pthread_mutex_unlock(&rng_lock);
}

void kn_rng_reserve(uint64_t count, uint64_t *seed, uint64_t *offset) {
    pthread_mutex_lock(&rng_lock);
    *seed = rng_seed;
    *offset = rng_offset;
    rng_offset += count;
    pthread_mutex_unlock(&rng_lock);
}
