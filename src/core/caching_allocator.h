/* A caching allocator over any raw device allocator: freed blocks are kept in size classes
 * and reused, so steady-state steps take nothing from the system. Thread-safe. */
#ifndef KILN_CORE_CACHING_ALLOCATOR_H
#define KILN_CORE_CACHING_ALLOCATOR_H

#include <pthread.h>
#include <stddef.h>

#include "kiln/runtime.h"

typedef struct kn_cached_block {
    void *ptr;
    size_t size; /* the rounded size class */
    struct kn_cached_block *next;
} kn_cached_block;

#define KN_ALLOC_BUCKETS 1024

typedef struct kn_caching_allocator {
    void *(*raw_alloc)(size_t bytes); /* NULL on failure */
    void (*raw_free)(void *ptr);
    pthread_mutex_t lock;
    kn_cached_block *free_lists[KN_ALLOC_BUCKETS]; /* hashed by size class */
    kn_memory_stats stats;
} kn_caching_allocator;

#define KN_CACHING_ALLOCATOR_INIT(alloc_fn, free_fn) \
    {.raw_alloc = (alloc_fn), .raw_free = (free_fn), .lock = PTHREAD_MUTEX_INITIALIZER}

/* A block of at least `bytes` (a distinct non-NULL block even for 0); NULL if the system
 * refuses it even after the cache has been emptied. */
kn_cached_block *kn_cache_alloc(kn_caching_allocator *a, size_t bytes);
void kn_cache_free(kn_caching_allocator *a, kn_cached_block *b);
void kn_cache_empty(kn_caching_allocator *a);
void kn_cache_stats(kn_caching_allocator *a, kn_memory_stats *out);
void kn_cache_reset_peak(kn_caching_allocator *a);

#endif
