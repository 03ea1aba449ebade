/* kn_jit_load: source -> loaded functions, through two levels. In memory, a map from key to
 * dlopen handle (handles are never closed: kernels from them may run at any time); on disk,
 * the compilation cache. A miss compiles (jit_compile.c) and stores the object. */
#include "backends/cpu/jit.h"

#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/jit_internal.h"
#include "cache/cache.h"
#include "core/error.h"
#include "core/stats.h"

#define OBJECT_EXT ".so"

typedef struct loaded {
    kn_ccache_key key;
    void *handle; /* NULL while a thread loads it */
    struct loaded *next;
} loaded;

/* One lock for the map; loading happens outside it, and a thread that finds a key being
 * loaded waits for that load instead of compiling the same source again. */
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t map_changed = PTHREAD_COND_INITIALIZER;
static loaded **buckets;
static size_t n_buckets, n_loaded;

static size_t bucket_of(kn_ccache_key key, size_t n) { return (size_t)(key.lo % n); }

static loaded **find(kn_ccache_key key) {
    if (!n_buckets) return NULL;
    loaded **p = &buckets[bucket_of(key, n_buckets)];
    while (*p && ((*p)->key.hi != key.hi || (*p)->key.lo != key.lo)) p = &(*p)->next;
    return *p ? p : NULL;
}

/* Doubles the buckets when the chains grow long; without memory the chains just get longer. */
static void grow(void) {
    size_t n = n_buckets ? 2 * n_buckets : 64;
    loaded **b = calloc(n, sizeof *b);
    if (!b) return;
    for (size_t i = 0; i < n_buckets; i++)
        for (loaded *e = buckets[i], *next; e; e = next) {
            next = e->next;
            e->next = b[bucket_of(e->key, n)];
            b[bucket_of(e->key, n)] = e;
        }
    free(buckets);
    buckets = b;
    n_buckets = n;
}

static loaded *insert(kn_ccache_key key) {
    if (n_loaded >= n_buckets) grow();
    loaded *e = n_buckets ? calloc(1, sizeof *e) : NULL;
    if (!e) return NULL;
    e->key = key;
    e->next = buckets[bucket_of(key, n_buckets)];
    buckets[bucket_of(key, n_buckets)] = e;
    n_loaded++;
    return e;
}

/* A cache that cannot be written costs recompiles, not failures: the caller loads the object
 * from its temporary directory. The thread's last error is left as it was, and the first such
 * failure in the process is reported once on stderr. */
static bool store_quietly(kn_ccache_key key, const void *bytes, size_t n, char *path, size_t size) {
    kn_status before = kn_last_status();
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", kn_last_error());
    if (kn_ccache_store(key, OBJECT_EXT, bytes, n, path, size) == KN_OK) return *path != '\0';
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&warned))
        fprintf(stderr, "kiln: not caching compiled kernels (%s)\n", kn_last_error());
    if (before == KN_OK)
        kn_clear_error();
    else
        kn_error(before, "%s", saved);
    return false;
}

static void *read_object(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    void *buf = NULL;
    long size = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (size >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)size + 1)))
        *n = fread(buf, 1, (size_t)size, f);
    fclose(f);
    return buf;
}

/* Compiles source and loads the object, from the cache entry it becomes when the cache takes
 * it, else from the compile's own directory (deleted after: the mapping outlives the file). */
static kn_status compile_and_open(kn_ccache_key key, const char *source, void **handle) {
    kn_stat_add(KN_STAT_CACHE_MISSES, 1);
    char dir[PATH_MAX], object[PATH_MAX + 16], entry[PATH_MAX];
    kn_status st = kn_jit_compile(source, dir, sizeof dir);
    if (st != KN_OK) return st;
    snprintf(object, sizeof object, "%s/%s", dir, KN_JIT_OBJECT_NAME);
    *handle = NULL;
    if (kn_ccache_enabled()) {
        size_t n = 0;
        void *bytes = read_object(object, &n);
        /* Another process may evict the entry before dlopen: then the temporary copy serves. */
        if (bytes && store_quietly(key, bytes, n, entry, sizeof entry)) *handle = dlopen(entry, RTLD_NOW | RTLD_LOCAL);
        free(bytes);
    }
    if (!*handle) *handle = dlopen(object, RTLD_NOW | RTLD_LOCAL);
    if (!*handle) st = kn_error(KN_ERR_INTERNAL, "kiln jit: cannot load the compiled object: %s", dlerror());
    kn_jit_remove_dir(dir);
    return st;
}

/* The disk cache's entry if it is there and loads (it may have been evicted since the
 * lookup), else a compile. */
static kn_status open_object(kn_ccache_key key, const char *source, void **handle) {
    char entry[PATH_MAX];
    if (kn_ccache_lookup(key, OBJECT_EXT, entry, sizeof entry) && (*handle = dlopen(entry, RTLD_NOW | RTLD_LOCAL))) {
        kn_stat_add(KN_STAT_CACHE_DISK_HITS, 1);
        return KN_OK;
    }
    return compile_and_open(key, source, handle);
}

static kn_status get_handle(kn_ccache_key key, const char *source, void **handle) {
    pthread_mutex_lock(&map_lock);
    loaded **found;
    while ((found = find(key)) && !(*found)->handle) pthread_cond_wait(&map_changed, &map_lock);
    if (found) {
        *handle = (*found)->handle;
        pthread_mutex_unlock(&map_lock);
        kn_stat_add(KN_STAT_CACHE_MEMORY_HITS, 1);
        return KN_OK;
    }
    loaded *e = insert(key);
    pthread_mutex_unlock(&map_lock);
    if (!e) return kn_error(KN_ERR_OOM, "kiln jit: out of memory");

    kn_status st = open_object(key, source, handle);

    pthread_mutex_lock(&map_lock);
    if (st == KN_OK) {
        e->handle = *handle;
    } else { /* forget it, so that a waiter (or a later call) tries again */
        loaded **p = find(key);
        *p = e->next;
        n_loaded--;
        free(e);
    }
    pthread_cond_broadcast(&map_changed);
    pthread_mutex_unlock(&map_lock);
    return st;
}

kn_status kn_jit_load(const char *source, int n, const char *const *symbols, void **fns) {
    if (!source || (n > 0 && (!symbols || !fns))) return kn_error(KN_ERR_NULL, "kiln jit: source, symbols or fns is NULL");
    if (n < 0) return kn_error(KN_ERR_ARG, "kiln jit: %d symbols", n);
    const char *parts[] = {source, "cpu", kn_jit_arch(), kn_jit_compiler_id()};
    kn_ccache_key key = kn_ccache_key_of(parts, 4);
    void *handle = NULL;
    kn_status st = get_handle(key, source, &handle);
    if (st != KN_OK) return st;
    for (int i = 0; i < n; i++) {
        if (!symbols[i] || !(fns[i] = dlsym(handle, symbols[i])))
            return kn_error(KN_ERR_ARG, "kiln jit: the compiled source defines no symbol '%s'",
                            symbols[i] ? symbols[i] : "(null)");
    }
    return KN_OK;
}
