/* A map from pointers (tensor headers, storages) to ints, for the passes that walk a whole
 * program: open addressing, sized once for the entries it will hold, no removal. */
#ifndef KILN_GRAPH_PTR_MAP_H
#define KILN_GRAPH_PTR_MAP_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>

typedef struct kn_ptr_map {
    const void **keys; /* NULL: an empty slot */
    int *vals;
    size_t mask;
} kn_ptr_map;

/* Room for `entries` keys; false when out of memory (kn_ptr_map_free is still safe). */
static inline bool kn_ptr_map_init(kn_ptr_map *m, size_t entries) {
    size_t cap = 16;
    while (cap < 2 * entries) cap *= 2;
    m->keys = calloc(cap, sizeof *m->keys);
    m->vals = malloc(cap * sizeof *m->vals);
    m->mask = cap - 1;
    return m->keys && m->vals;
}

static inline void kn_ptr_map_free(kn_ptr_map *m) { free(m->keys), free(m->vals); }

static inline size_t kn_ptr_map_home(const kn_ptr_map *m, const void *key) {
    return ((uintptr_t)key >> 4) * 0x9E3779B97F4A7C15ull >> 20 & m->mask;
}

/* The int of key, inserted as init when absent. */
static inline int *kn_ptr_map_at(kn_ptr_map *m, const void *key, int init) {
    size_t i = kn_ptr_map_home(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & m->mask;
    if (!m->keys[i]) m->keys[i] = key, m->vals[i] = init;
    return &m->vals[i];
}

/* The int of key, or -1 when absent. */
static inline int kn_ptr_map_get(const kn_ptr_map *m, const void *key) {
    size_t i = kn_ptr_map_home(m, key);
    while (m->keys[i] && m->keys[i] != key) i = (i + 1) & m->mask;
    return m->keys[i] ? m->vals[i] : -1;
}

#endif
