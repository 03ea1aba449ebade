/* A compiled step's input guards (exec/compiled_guard.h). */
#include "exec/compiled_guard.h"

#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/hash.h"
#include "core/tensor_impl.h"

enum { HEAD = 4 }; /* dtype, device type, device index, rank */

kn_status kn_step_guard_make(kn_step_guard *g, kn_tensor *const *inputs, int n, const kn_compile_dim *dyn, int n_dyn,
                             const char *step) {
    *g = (kn_step_guard){0};
    for (int k = 0; k < n_dyn; k++)
        if (dyn[k].input < n && dyn[k].dim >= inputs[dyn[k].input]->ndim)
            return kn_error(KN_ERR_ARG, "compiled_run(%s): dynamic dim %d of input %d, which has %d dims", step, dyn[k].dim,
                            dyn[k].input, inputs[dyn[k].input]->ndim);
    int len = 0;
    for (int i = 0; i < n; i++) len += HEAD + inputs[i]->ndim;
    if (!(g->v = malloc((size_t)(len ? len : 1) * sizeof *g->v)))
        return kn_error(KN_ERR_OOM, "compiled_run(%s): out of host memory for its guards", step);
    for (int i = 0; i < n; i++) {
        const kn_tensor *t = inputs[i];
        int64_t *at = g->v + g->len;
        at[0] = t->dtype, at[1] = t->storage->device.type, at[2] = t->storage->device.index, at[3] = t->ndim;
        for (int d = 0; d < t->ndim; d++) at[HEAD + d] = t->shape[d];
        for (int k = 0; k < n_dyn; k++)
            if (dyn[k].input == i && (!dyn[k].max || t->shape[dyn[k].dim] <= dyn[k].max)) at[HEAD + dyn[k].dim] = -1;
        g->len += HEAD + t->ndim;
    }
    g->hash = kn_hash_bytes(KN_HASH_SEED, g->v, (size_t)g->len * sizeof *g->v);
    return KN_OK;
}

/* "[4, 64]" (a dynamic size as "*"). */
static void print_sizes(const int64_t *s, int64_t n, char *buf, size_t size) {
    size_t len = (size_t)snprintf(buf, size, "[");
    for (int64_t d = 0; d < n && len < size; d++)
        len += (size_t)(s[d] < 0 ? snprintf(buf + len, size - len, "%s*", d ? ", " : "")
                                 : snprintf(buf + len, size - len, "%s%lld", d ? ", " : "", (long long)s[d]));
    if (len < size) snprintf(buf + len, size - len, "]");
}

kn_recompile_reason kn_step_guard_diff(const kn_step_guard *was, const kn_step_guard *now, char *why, size_t size) {
    int a = 0, b = 0;
    for (int i = 0; a < was->len && b < now->len; i++) {
        const int64_t *x = was->v + a, *y = now->v + b;
        if (x[0] != y[0]) {
            snprintf(why, size, "input %d's dtype %s (was %s)", i, kn_dtype_name((kn_dtype)y[0]), kn_dtype_name((kn_dtype)x[0]));
            return KN_RECOMPILE_DTYPE;
        }
        if (x[1] != y[1] || x[2] != y[2]) {
            snprintf(why, size, "input %d's device changed", i);
            return KN_RECOMPILE_DEVICE;
        }
        char s1[160], s2[160];
        print_sizes(y + HEAD, y[3], s2, sizeof s2);
        print_sizes(x + HEAD, x[3], s1, sizeof s1);
        if (x[3] != y[3]) {
            snprintf(why, size, "input %d's rank: %s (was %s)", i, s2, s1);
            return KN_RECOMPILE_RANK;
        }
        for (int d = 0; d < x[3]; d++)
            if (x[HEAD + d] != y[HEAD + d]) {
                snprintf(why, size, "input %d's size %s (was %s; dynamic_dims lets a size change)", i, s2, s1);
                return KN_RECOMPILE_SHAPE;
            }
        a += HEAD + (int)x[3], b += HEAD + (int)y[3];
    }
    if (a < was->len || b < now->len) {
        snprintf(why, size, "the number of inputs");
        return KN_RECOMPILE_OPS;
    }
    snprintf(why, size, "what the step records (its ops or their wiring)");
    return KN_RECOMPILE_OPS;
}

void kn_step_guard_free(kn_step_guard *g) {
    free(g->v);
    *g = (kn_step_guard){0};
}
