/* Size-class caching allocator. Classes: multiples of 512 B below 1 MiB, then steps of an
 * eighth of the power of two, so rounding wastes at most 12.5%. */
#include "core/block_pool.h"

#include <stdint.h>
#include <stdlib.h>

static size_t size_class(size_t bytes) {
    if (bytes < 512) return 512;
    if (bytes < ((size_t)1 << 20)) return (bytes + 511) & ~(size_t)511;
    int top = 63 - __builtin_clzll((unsigned long long)bytes);
    size_t step = (size_t)1 << (top - 3);
    return (bytes + step - 1) & ~(step - 1);
}

static size_t bucket_of(size_t cls) { return (size_t)((cls * 0x9E3779B97F4A7C15ull) >> 54) % KN_ALLOC_BUCKETS; }

/* A block of class cls goes to a caller; the lock is held. */
static void count_handed_out(kn_block_pool *a, size_t cls) {
    a->stats.allocated_bytes += (int64_t)cls;
    a->stats.allocated_total_bytes += (int64_t)cls;
    if (a->stats.allocated_bytes > a->stats.peak_allocated_bytes)
        a->stats.peak_allocated_bytes = a->stats.allocated_bytes;
}

kn_pool_block *kn_block_pool_alloc(kn_block_pool *a, size_t bytes) {
    if (bytes > ((size_t)1 << 56)) return NULL;
    size_t cls = size_class(bytes);
    size_t bucket = bucket_of(cls);
    pthread_mutex_lock(&a->lock);
    a->stats.alloc_count++;
    for (kn_pool_block **p = &a->free_lists[bucket]; *p; p = &(*p)->next) {
        if ((*p)->size != cls) continue;
        kn_pool_block *b = *p;
        *p = b->next;
        a->stats.cache_hits++;
        a->stats.cached_bytes -= (int64_t)cls;
        count_handed_out(a, cls);
        pthread_mutex_unlock(&a->lock);
        return b;
    }
    pthread_mutex_unlock(&a->lock);

    kn_pool_block *b = malloc(sizeof *b);
    if (!b) return NULL;
    b->size = cls;
    b->next = NULL;
    b->ptr = a->raw_alloc(cls);
    if (!b->ptr) { /* give the cache back to the system and try once more */
        kn_block_pool_empty(a);
        b->ptr = a->raw_alloc(cls);
    }
    if (!b->ptr) {
        free(b);
        return NULL;
    }
    pthread_mutex_lock(&a->lock);
    a->stats.system_allocs++;
    a->stats.reserved_bytes += (int64_t)cls;
    count_handed_out(a, cls);
    pthread_mutex_unlock(&a->lock);
    return b;
}

void kn_block_pool_free(kn_block_pool *a, kn_pool_block *b) {
    if (!b) return;
    size_t bucket = bucket_of(b->size);
    pthread_mutex_lock(&a->lock);
    b->next = a->free_lists[bucket];
    a->free_lists[bucket] = b;
    a->stats.allocated_bytes -= (int64_t)b->size;
    a->stats.cached_bytes += (int64_t)b->size;
    pthread_mutex_unlock(&a->lock);
}

void kn_block_pool_empty(kn_block_pool *a) {
    pthread_mutex_lock(&a->lock);
    for (int i = 0; i < KN_ALLOC_BUCKETS; i++) {
        kn_pool_block *b = a->free_lists[i];
        while (b) {
            kn_pool_block *next = b->next;
            a->raw_free(b->ptr);
            a->stats.reserved_bytes -= (int64_t)b->size;
            a->stats.cached_bytes -= (int64_t)b->size;
            free(b);
            b = next;
        }
        a->free_lists[i] = NULL;
    }
    pthread_mutex_unlock(&a->lock);
}

void kn_block_pool_stats(kn_block_pool *a, kn_memory_stats *out) {
    pthread_mutex_lock(&a->lock);
    *out = a->stats;
    pthread_mutex_unlock(&a->lock);
}

void kn_block_pool_reset_peak(kn_block_pool *a) {
    pthread_mutex_lock(&a->lock);
    a->stats.peak_allocated_bytes = a->stats.allocated_bytes;
    pthread_mutex_unlock(&a->lock);
}
