/* kn_tensor_first_alias: sort by (storage, offset, position), then compare within each run of
 * equal storage and offset, which holds only the handles of one tensor (a few, when tied). */
#include "core/tensor_alias.h"

#include <stdint.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor_impl.h"

typedef struct alias_key {
    uintptr_t storage;
    int64_t offset;
    int index;
} alias_key;

static int by_place(const void *pa, const void *pb) {
    const alias_key *a = pa, *b = pb;
    if (a->storage != b->storage) return a->storage < b->storage ? -1 : 1;
    if (a->offset != b->offset) return a->offset < b->offset ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

bool kn_tensor_first_alias(kn_tensor *const *t, int n, bool (*same)(const kn_tensor *a, const kn_tensor *b),
                           int *first) {
    alias_key *keys = malloc(sizeof *keys * (size_t)(n > 0 ? n : 1));
    if (!keys) return kn_error(KN_ERR_OOM, "out of host memory grouping %d tensors", n), false;
    for (int i = 0; i < n; i++) keys[i] = (alias_key){(uintptr_t)t[i]->storage, t[i]->offset, i};
    qsort(keys, (size_t)n, sizeof *keys, by_place);
    for (int r = 0, end; r < n; r = end) {
        for (end = r + 1; end < n && keys[end].storage == keys[r].storage && keys[end].offset == keys[r].offset;) end++;
        for (int i = r; i < end; i++) {
            int k = keys[i].index, j = r;
            while (j < i && !same(t[keys[j].index], t[k])) j++;
            first[k] = keys[j].index; /* runs are in list order, so the first match is the earliest */
        }
    }
    free(keys);
    return true;
}
