/* A string -> int32 hash map (open addressing) whose keys point at strings owned elsewhere:
 * the module tree's member names, a JSON object's keys, a tokenizer's vocabulary. */
#ifndef KILN_CORE_STRMAP_H
#define KILN_CORE_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct kn_strmap {
    struct kn_strmap_slot *slots;
    size_t cap, n;
} kn_strmap;

/* Maps key (len bytes, kept by pointer: it must outlive the map) to value, replacing an
 * earlier value; false with a KN_ERR_OOM error on out-of-memory. */
bool kn_strmap_put(kn_strmap *m, const char *key, size_t len, int32_t value);
/* The value of key, or -1 when absent. */
int32_t kn_strmap_get(const kn_strmap *m, const char *key, size_t len);
void kn_strmap_free(kn_strmap *m);
uint64_t kn_strmap_hash(const void *s, size_t n);

#endif
