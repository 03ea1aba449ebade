/* Loading fused kernels: this process's table of loaded kernels (by canonical IR text, and by
 * packed IR in front of that) in front of the jit, which has the compilation cache in front of the compiler. The kernels a
 * schedule still lacks are compiled together, one translation unit per flush. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/codegen.h"
#include "core/error.h"
#include "core/stats.h"

/* One kernel; entries never move, so a schedule can hold on to them. fn is NULL while being
 * built and forever after a failed build (its ops then run one by one). */
typedef struct loaded {
    uint64_t hash;
    kn_fused_fn fn;
    char name[24]; /* its symbol: kn_fk_<hash> */
    char key[];
} loaded;

static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static loaded **table; /* open addressing */
static size_t table_cap, table_count;
static kn_fused_memo by_ir; /* the entries again, by packed IR: found without formatting the key */

static uint64_t fnv1a(const char *s) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static bool grow(void) {
    size_t cap = table_cap ? 2 * table_cap : 256;
    loaded **t = calloc(cap, sizeof *t);
    if (!t) return false;
    for (size_t i = 0; i < table_cap; i++) {
        if (!table[i]) continue;
        size_t j = table[i]->hash & (cap - 1);
        while (t[j]) j = (j + 1) & (cap - 1);
        t[j] = table[i];
    }
    free(table);
    table = t;
    table_cap = cap;
    return true;
}

/* The symbol of the kernel whose key text is key: kn_fk_<hash>. */
static void symbol_of(const char *key, char name[24]) {
    snprintf(name, 24, "kn_fk_%016llx", (unsigned long long)fnv1a(key));
}

/* The entry of key, made (with no function yet) if there is none; *made says which. NULL
 * when out of memory. */
static loaded *entry_for(const char *key, bool *made) {
    uint64_t h = fnv1a(key);
    *made = false;
    if (2 * (table_count + 1) > table_cap && !grow()) return NULL;
    size_t j = h & (table_cap - 1);
    for (; table[j]; j = (j + 1) & (table_cap - 1))
        if (table[j]->hash == h && strcmp(table[j]->key, key) == 0) return table[j];
    size_t len = strlen(key);
    loaded *l = malloc(sizeof *l + len + 1);
    if (!l) return NULL;
    l->hash = h;
    l->fn = NULL;
    symbol_of(key, l->name);
    memcpy(l->key, key, len + 1);
    table[j] = l;
    table_count++;
    *made = true;
    return l;
}

kn_status kn_cpu_fused_compile(const kn_fused_ir *const *irs, int n, kn_fused_fn *fns) {
    /* per IR its entry; per kernel to build its IR, symbol and loaded address */
    loaded **entries = calloc((size_t)n, sizeof *entries);
    const kn_fused_ir **to_build = malloc((size_t)n * sizeof *to_build);
    const char **names = malloc((size_t)n * sizeof *names);
    void **got = malloc((size_t)n * sizeof *got);
    kn_status st = entries && to_build && names && got ? KN_OK
                                                   : kn_error(KN_ERR_OOM, "fused: out of host memory loading kernels");
    pthread_mutex_lock(&table_lock);
    int n_to_build = 0;
    for (int i = 0; i < n && st == KN_OK; i++) {
        bool made = false;
        if (!(entries[i] = kn_fused_memo_get(&by_ir, irs[i]))) {
            char key[4096];
            kn_fused_key_text(irs[i], key, sizeof key);
            entries[i] = entry_for(key, &made);
            if (entries[i] && !kn_fused_memo_put(&by_ir, irs[i], entries[i])) entries[i] = NULL;
        }
        if (!entries[i]) {
            st = kn_error(KN_ERR_OOM, "fused: out of host memory loading kernels");
        } else if (!made) { /* loaded before, failed before, or twice in this schedule */
            kn_stat_add(KN_STAT_CACHE_MEMORY_HITS, 1);
        } else {
            to_build[n_to_build] = irs[i];
            names[n_to_build++] = entries[i]->name;
        }
    }
    if (st == KN_OK && n_to_build) {
        char *source = kn_cpu_codegen_source(to_build, names, n_to_build);
        st = source ? kn_jit_load(source, n_to_build, names, got) : kn_last_status();
        free(source);
        for (int i = 0, m = 0; st == KN_OK && i < n; i++) /* the new entries, in the order they were made */
            if (m < n_to_build && entries[i]->name == names[m]) entries[i]->fn = (kn_fused_fn)got[m++];
    }
    for (int i = 0; i < n; i++) fns[i] = entries && entries[i] ? entries[i]->fn : NULL;
    pthread_mutex_unlock(&table_lock);
    free(entries);
    free(to_build);
    free(names);
    free(got);
    return st;
}

char *kn_cpu_fused_source(const kn_fused_ir *const *irs, int n) {
    char(*names)[24] = malloc((size_t)(n ? n : 1) * sizeof *names);
    const char **name_ptrs = malloc((size_t)(n ? n : 1) * sizeof *name_ptrs);
    char *source = NULL;
    if (names && name_ptrs) {
        for (int i = 0; i < n; i++) {
            char key[4096];
            kn_fused_key_text(irs[i], key, sizeof key);
            symbol_of(key, names[i]);
            name_ptrs[i] = names[i];
        }
        source = kn_cpu_codegen_source(irs, name_ptrs, n);
    } else {
        kn_error(KN_ERR_OOM, "fused: out of host memory for kernel source");
    }
    free(names);
    free(name_ptrs);
    return source;
}
