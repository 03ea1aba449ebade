/* A string -> int32 hash map with open addressing; the vocabulary and the added tokens use it. */
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "tok_internal.h"

struct kn_tok_strmap_slot {
    const char *key; /* NULL: empty */
    size_t len;
    uint64_t hash;
    int32_t value;
};

uint64_t kn_tok_hash(const void *s, size_t n) { return XXH3_64bits(s, n); }

static struct kn_tok_strmap_slot *find(const kn_tok_strmap *m, const char *key, size_t len, uint64_t h) {
    size_t mask = m->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        struct kn_tok_strmap_slot *s = &m->slots[i];
        if (!s->key || (s->hash == h && s->len == len && memcmp(s->key, key, len) == 0)) return s;
    }
}

static bool rehash(kn_tok_strmap *m, size_t cap) {
    struct kn_tok_strmap_slot *old = m->slots;
    size_t old_cap = m->cap;
    m->slots = calloc(cap, sizeof *m->slots);
    if (!m->slots) {
        m->slots = old;
        kn_set_error(KN_ERR_OOM, "tokenizer: out of memory for a map of %zu entries", cap);
        return false;
    }
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) *find(m, old[i].key, old[i].len, old[i].hash) = old[i];
    free(old);
    return true;
}

bool kn_tok_strmap_put(kn_tok_strmap *m, const char *key, size_t len, int32_t value) {
    if ((m->n + 1) * 2 > m->cap && !rehash(m, m->cap ? m->cap * 2 : 64)) return false;
    uint64_t h = kn_tok_hash(key, len);
    struct kn_tok_strmap_slot *s = find(m, key, len, h);
    if (!s->key) m->n++;
    *s = (struct kn_tok_strmap_slot){key, len, h, value};
    return true;
}

int32_t kn_tok_strmap_get(const kn_tok_strmap *m, const char *key, size_t len) {
    if (m->n == 0) return -1;
    const struct kn_tok_strmap_slot *s = find(m, key, len, kn_tok_hash(key, len));
    return s->key ? s->value : -1;
}

void kn_tok_strmap_free(kn_tok_strmap *m) {
    free(m->slots);
    *m = (kn_tok_strmap){0};
}
