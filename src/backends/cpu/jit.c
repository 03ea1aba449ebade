/* kn_jit_load: source -> loaded functions, through two levels. In memory, a map from key to
 * dlopen handle (handles are never closed: kernels from them may run at any time); on disk,
 * the compilation cache, whose entries are checked as ELF objects and loaded from a private
 * copy. A miss compiles (jit_compile.c) and stores the object. */
#include "backends/cpu/jit.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "backends/cpu/jit_internal.h"
#include "cache/cache.h"
#include "core/error.h"
#include "core/file_read.h"
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

/* A cache that cannot be written costs recompiles, not failures. The thread's last error is
 * left as it was, and the first such failure in the process is reported once on stderr. */
static void store_quietly(kn_ccache_key key, const void *bytes, size_t n) {
    kn_status before = kn_last_status();
    char saved[1024];
    snprintf(saved, sizeof saved, "%s", kn_last_error());
    if (kn_ccache_store(key, OBJECT_EXT, bytes, n) == KN_OK) return;
    static atomic_flag warned = ATOMIC_FLAG_INIT;
    if (!atomic_flag_test_and_set(&warned))
        fprintf(stderr, "kiln: not caching compiled kernels (%s)\n", kn_last_error());
    if (before == KN_OK)
        kn_clear_error();
    else
        kn_error(before, "%s", saved);
}

static bool defines_all(void *handle, int n, const char *const *symbols) {
    for (int i = 0; i < n; i++)
        if (!symbols[i] || !dlsym(handle, symbols[i])) return false;
    return true;
}

/* Compiles source and loads the object from the compile's private directory (deleted after:
 * the mapping outlives the file). The object is read whole and checked first: a truncated one
 * (a full disk, a killed compiler) would crash dlopen here and every later process that found
 * it in the cache. It is stored only once it loads and defines the symbols asked for. */
static kn_status compile_and_open(kn_ccache_key key, const char *source, int n, const char *const *symbols,
                                  void **handle) {
    kn_stat_add(KN_STAT_CACHE_MISSES, 1);
    char dir[PATH_MAX], object[PATH_MAX + 16], why[256];
    kn_status st = kn_jit_compile(source, dir, sizeof dir);
    if (st != KN_OK) return st;
    snprintf(object, sizeof object, "%s/%s", dir, KN_JIT_OBJECT_NAME);
    size_t bytes = 0;
    struct stat info;
    void *payload = kn_read_regular_file(AT_FDCWD, object, &bytes, &info);
    *handle = NULL;
    if (!payload)
        st = kn_error(KN_ERR_IO, "kiln jit: cannot read the compiled object %s: %s", object, strerror(errno));
    else if (!kn_jit_check_object(payload, bytes, why, sizeof why))
        st = kn_error(KN_ERR_INTERNAL, "kiln jit: the compiler's output %s is damaged: %s", object, why);
    else if (!(*handle = dlopen(object, RTLD_NOW | RTLD_LOCAL)))
        st = kn_error(KN_ERR_INTERNAL, "kiln jit: cannot load the compiled object: %s", dlerror());
    else if (defines_all(*handle, n, symbols))
        store_quietly(key, payload, bytes);
    free(payload);
    kn_jit_remove_dir(dir);
    return st;
}

/* Loads bytes from a private copy: a fresh directory only this process writes, under a name
 * never used before (dlopen returns the first object loaded under a name), so what is mapped
 * is exactly what was checked, whatever happens to the cache entry meanwhile. NULL (no error
 * recorded) when the copy cannot be written, or, with *refused set, when dlopen refuses it. */
static void *open_private_copy(const void *bytes, size_t n, bool *refused) {
    char dir[PATH_MAX], object[PATH_MAX + 16];
    *refused = false;
    if (!kn_jit_make_dir(dir, sizeof dir)) return NULL;
    snprintf(object, sizeof object, "%s/%s", dir, KN_JIT_OBJECT_NAME);
    FILE *f = fopen(object, "wbx");
    bool written = f && fwrite(bytes, 1, n, f) == n;
    if (f) written = fclose(f) == 0 && written;
    void *handle = written ? dlopen(object, RTLD_NOW | RTLD_LOCAL) : NULL;
    *refused = written && !handle;
    kn_jit_remove_dir(dir);
    return handle;
}

/* The disk cache's entry of key, if it is there, checked, loads and defines the symbols asked
 * for. An entry that passes the cache's checks but is no loadable object for this machine, or
 * lacks a symbol, is discarded (counted as corrupt) and the caller rebuilds it: never a silent
 * fall-back to running ops one by one. */
static void *open_entry(kn_ccache_key key, int n, const char *const *symbols) {
    void *payload;
    size_t bytes;
    if (!kn_ccache_read(key, OBJECT_EXT, &payload, &bytes)) return NULL;
    bool bad = !kn_jit_check_object(payload, bytes, NULL, 0);
    void *handle = bad ? NULL : open_private_copy(payload, bytes, &bad);
    free(payload);
    if (handle && !defines_all(handle, n, symbols)) {
        dlclose(handle);
        handle = NULL;
        bad = true;
    }
    if (bad) kn_ccache_discard(key, OBJECT_EXT);
    return handle;
}

static kn_status open_object(kn_ccache_key key, const char *source, int n, const char *const *symbols,
                             void **handle) {
    if ((*handle = open_entry(key, n, symbols))) {
        kn_stat_add(KN_STAT_CACHE_DISK_HITS, 1);
        return KN_OK;
    }
    return compile_and_open(key, source, n, symbols, handle);
}

static kn_status get_handle(kn_ccache_key key, const char *source, int n, const char *const *symbols,
                            void **handle) {
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

    kn_status st = open_object(key, source, n, symbols, handle);

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
    kn_status st = get_handle(key, source, n, symbols, &handle);
    if (st != KN_OK) return st;
    for (int i = 0; i < n; i++) {
        if (!symbols[i] || !(fns[i] = dlsym(handle, symbols[i])))
            return kn_error(KN_ERR_ARG, "kiln jit: the compiled source defines no symbol '%s'",
                            symbols[i] ? symbols[i] : "(null)");
    }
    return KN_OK;
}
