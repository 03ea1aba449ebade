/* A block pool: the caching allocator over any raw device allocator. Freed blocks are kept in
 * size classes and reused, so steady-state steps take nothing from the system. Thread-safe.
 * Stream order needs nothing here: a storage returns its block only after every node that
 * used it, on any stream, has completed (docs/decisions.md, "Streams, events and node
 * lifetime"), so a cached block is idle on every stream and any stream may take it. */
#ifndef KILN_CORE_BLOCK_POOL_H
#define KILN_CORE_BLOCK_POOL_H

#include <pthread.h>
#include <stddef.h>

#include "kiln/runtime.h"

typedef struct kn_pool_block {
    void *ptr;
    size_t size; /* the rounded size class */
    struct kn_pool_block *next;
} kn_pool_block;

#define KN_ALLOC_BUCKETS 1024

typedef struct kn_block_pool {
    void *(*raw_alloc)(size_t bytes); /* NULL on failure */
    void (*raw_free)(void *ptr);
    pthread_mutex_t lock;
    kn_pool_block *free_lists[KN_ALLOC_BUCKETS]; /* hashed by size class */
    kn_memory_stats stats;
} kn_block_pool;

#define KN_BLOCK_POOL_INIT(alloc_fn, free_fn) \
    {.raw_alloc = (alloc_fn), .raw_free = (free_fn), .lock = PTHREAD_MUTEX_INITIALIZER}

/* A block of at least `bytes` (a distinct non-NULL block even for 0); NULL if the system
 * refuses it even after the cache has been emptied. */
kn_pool_block *kn_block_pool_alloc(kn_block_pool *a, size_t bytes);
void kn_block_pool_free(kn_block_pool *a, kn_pool_block *b);
void kn_block_pool_empty(kn_block_pool *a);
void kn_block_pool_stats(kn_block_pool *a, kn_memory_stats *out);
void kn_block_pool_reset_peak(kn_block_pool *a);

#endif
