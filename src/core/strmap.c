/* The string -> int32 map of strmap.h: linear probing, at most half full. */
#include "core/strmap.h"

#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "core/error.h"

struct kn_strmap_slot {
    const char *key; /* NULL: empty */
    size_t len;
    uint64_t hash;
    int32_t value;
};

uint64_t kn_strmap_hash(const void *s, size_t n) { return XXH3_64bits(s, n); }

static struct kn_strmap_slot *find(const kn_strmap *m, const char *key, size_t len, uint64_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct kn_strmap_slot *s = &m->slots[i];
        if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) return s;
    }
}

static bool rehash(kn_strmap *m, size_t cap) {
    struct kn_strmap_slot *old = m->slots;
    size_t old_cap = m->cap;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) {
        m->slots = old;
        kn_error(KN_ERR_OOM, "out of host memory for a map of %zu entries", cap);
        return false;
    }
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) *find(m, old[i].key, old[i].len, old[i].hash) = old[i];
    free(old);
    return true;
}

bool kn_strmap_put(kn_strmap *m, const char *key, size_t len, int32_t value) {
    if ((m->n + 1) * 2 > m->cap && !rehash(m, m->cap ? m->cap * 2 : 16)) return false;
    uint64_t h = kn_strmap_hash(key, len);
    struct kn_strmap_slot *s = find(m, key, len, h);
    if (!s->key) m->n++;
    *s = (struct kn_strmap_slot){key, len, h, value};
    return true;
}

int32_t kn_strmap_get(const kn_strmap *m, const char *key, size_t len) {
    if (m->n == 0) return -1;
    const struct kn_strmap_slot *s = find(m, key, len, kn_strmap_hash(key, len));
    return s->key ? s->value : -1;
}

void kn_strmap_free(kn_strmap *m) {
    free(m->slots);
    *m = (kn_strmap){0};
}
