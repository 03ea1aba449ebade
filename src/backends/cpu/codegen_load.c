/* Loading fused kernels: this process's table of loaded kernels (by canonical IR text) in
 * front of the jit, which has the compilation cache in front of the compiler. The kernels a
 * schedule still lacks are compiled together, one translation unit per flush. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/codegen.h"
#include "core/error.h"
#include "core/stats.h"

typedef struct loaded {
    char *key;
    uint64_t hash;
    kn_fused_fn fn;
} loaded;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded *table;
static size_t table_cap, table_count;

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static loaded *find(const char *key, uint64_t hash) {
    if (!table_cap) return NULL;
    for (size_t i = hash & (table_cap - 1);; i = (i + 1) & (table_cap - 1)) {
        if (!table[i].key) return NULL;
        if (table[i].hash == hash && strcmp(table[i].key, key) == 0) return &table[i];
    }
}

static bool insert(char *key, uint64_t hash, kn_fused_fn fn) {
    if (2 * (table_count + 1) > table_cap) {
        size_t cap = table_cap ? 2 * table_cap : 256;
        loaded *t = calloc(cap, sizeof *t);
        if (!t) return false;
        for (size_t i = 0; i < table_cap; i++) {
            if (!table[i].key) continue;
            size_t j = table[i].hash & (cap - 1);
            while (t[j].key) j = (j + 1) & (cap - 1);
            t[j] = table[i];
        }
        free(table);
        table = t;
        table_cap = cap;
    }
    size_t j = hash & (table_cap - 1);
    while (table[j].key) j = (j + 1) & (table_cap - 1);
    table[j] = (loaded){key, hash, fn};
    table_count++;
    return true;
}

/* Looks key up, or inserts it with fn; NULL if out of memory. The table owns the key. */
static loaded *find_or_insert(const char *key, kn_fused_fn fn, bool *found) {
    uint64_t h = fnv1a(key);
    loaded *l = find(key, h);
    *found = l != NULL;
    if (l) return l;
    char *copy = strdup(key);
    if (!copy || !insert(copy, h, fn)) {
        free(copy);
        return NULL;
    }
    return find(key, h);
}

kn_status kn_cpu_fused_compile(const kn_fused_ir *const *irs, int n, kn_fused_fn *fns) {
    enum { KEY_MAX = 4096 };
    char *key = malloc(KEY_MAX);
    const kn_fused_ir **todo = malloc((size_t)n * sizeof *todo);
    char (*names)[32] = malloc((size_t)n * sizeof *names);
    const char **name_ptrs = malloc((size_t)n * sizeof *name_ptrs);
    void **got = malloc((size_t)n * sizeof *got);
    if (!key || !todo || !names || !name_ptrs || !got) {
        free(key), free(todo), free(names), free(name_ptrs), free(got);
        return kn_error(KN_ERR_OOM, "fused: out of host memory loading kernels");
    }
    kn_status st = KN_OK;
    pthread_mutex_lock(&table_lock);
    /* New kernels enter the table with no function, so that one schedule's duplicates and a
     * kernel that failed to build are looked up, not built again. */
    int n_todo = 0;
    for (int i = 0; i < n && st == KN_OK; i++) {
        kn_fused_key_text(irs[i], key, KEY_MAX);
        bool found;
        loaded *l = find_or_insert(key, NULL, &found);
        if (!l) {
            st = kn_error(KN_ERR_OOM, "fused: out of host memory loading kernels");
        } else if (found) {
            kn_stat_add(KN_STAT_CACHE_MEMORY_HITS, 1);
        } else {
            snprintf(names[n_todo], sizeof names[0], "kn_fk_%016llx", (unsigned long long)l->hash);
            name_ptrs[n_todo] = names[n_todo];
            todo[n_todo++] = irs[i];
        }
    }
    if (st == KN_OK && n_todo) {
        char *source = kn_cpu_codegen_source(todo, name_ptrs, n_todo);
        st = source ? kn_jit_load(source, n_todo, name_ptrs, got) : kn_last_status();
        free(source);
        for (int m = 0; st == KN_OK && m < n_todo; m++) { /* entries may have moved as the table grew */
            kn_fused_key_text(todo[m], key, KEY_MAX);
            find(key, fnv1a(key))->fn = (kn_fused_fn)got[m];
        }
    }
    /* the table may have grown: look every kernel up again (NULL: runs op by op) */
    for (int i = 0; i < n; i++) {
        kn_fused_key_text(irs[i], key, KEY_MAX);
        loaded *l = find(key, fnv1a(key));
        fns[i] = l ? l->fn : NULL;
    }
    pthread_mutex_unlock(&table_lock);
    free(key), free(todo), free(names), free(name_ptrs), free(got);
    return st;
}
