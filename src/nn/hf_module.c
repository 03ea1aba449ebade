/* kn_hf_load_module: a module tree's parameters and buffers take a file's tensors by name.
 * Everything is checked and placed first and assigned last, so a failure leaves the module
 * as it was. Handles that share one tensor (tied weights) form one group and are assigned
 * together. */
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/tensor_alias.h"
#include "core/tensor_impl.h"
#include "io/safetensors_format.h"
#include "kiln/hf.h"
#include "kiln/nn_module.h"
#include "kiln/ops.h"

static bool is_float(kn_dtype d) { return d == KN_F32 || d == KN_F64 || d == KN_F16 || d == KN_BF16; }

static bool is_optional(const kn_hf_load_opts *o, const char *name) {
    for (const char *const *p = o->optional; p && *p; p++)
        if (strcmp(*p, name) == 0) return true;
    return false;
}

static bool same_shape(kn_shape a, const kn_tensor *t) {
    if (a.n != kn_ndim(t)) return false;
    for (int d = 0; d < a.n; d++)
        if (a.v[d] != kn_size(t, d)) return false;
    return true;
}

/* The file tensor for module entry `name` (whose handle is t), checked against it and placed;
 * *skip when the entry is absent and allowed to be. */
static kn_tensor *take(kn_hf_weights *w, const kn_hf_load_opts *o, const char *name, kn_tensor *t, bool *taken,
                       bool *skip) {
    char buf[512];
    const char *file_name = o->rename ? o->rename(o->rename_ctx, name, buf, sizeof buf) : name;
    *skip = false;
    int i = file_name ? kn_hf_weights_find(w, file_name) : -1;
    if (i < 0) {
        if (!file_name || is_optional(o, name)) return *skip = true, NULL;
        return kn_error_null(KN_ERR_ARG, "%s: no tensor '%s', which the model's %s needs (%d tensors in the files)",
                             kn_hf_weights_file(w, 0) ? kn_hf_weights_file(w, 0) : "weights", file_name, name,
                             kn_hf_weights_count(w));
    }
    taken[i] = true;
    kn_shape shape = kn_hf_weights_shape(w, i);
    kn_dtype stored = kn_hf_weights_dtype(w, i), want = kn_dtype_of(t);
    char have[96], need[96];
    kn_st_describe(stored, shape, have, sizeof have);
    if (!same_shape(shape, t))
        return kn_error_null(KN_ERR_SHAPE, "%s: tensor '%s' is %s but the model's %s is %s", kn_hf_weights_file(w, i),
                             file_name, have, name, kn_describe(t, need, sizeof need));
    if (is_float(stored) != is_float(want) || (!is_float(want) && stored != want))
        return kn_error_null(KN_ERR_DTYPE, "%s: tensor '%s' is %s but the model's %s is %s", kn_hf_weights_file(w, i),
                             file_name, have, name, kn_dtype_name(want));
    kn_dtype dtype = is_float(stored) && o->dtype != KN_DTYPE_COUNT ? o->dtype : stored;
    return kn_hf_weights_get(w, file_name, o->device, dtype);
}

kn_status kn_hf_load_module(void *module, kn_hf_weights *w, const kn_hf_load_opts *opts, int *unused) {
    if (!w) return kn_error_null_input("hf_load_module", 1), kn_last_status();
    kn_hf_load_opts o = opts ? *opts : (kn_hf_load_opts){.device = KN_CPU, .dtype = KN_DTYPE_COUNT};
    kn_named_tensors list;
    kn_status st = kn_module_named(module, KN_STATE, &list);
    if (st != KN_OK) return st;
    int n = list.count, n_files = kn_hf_weights_count(w);
    int *group = malloc((size_t)(n + 1) * sizeof *group);   /* the first entry sharing the tensor */
    kn_tensor **placed = calloc((size_t)n + 1, sizeof *placed); /* per group leader */
    bool *taken = calloc((size_t)n_files + 1, sizeof *taken);
    if (!group || !placed || !taken) {
        st = kn_error(KN_ERR_OOM, "hf_load_module: out of memory");
        goto done;
    }
    if (!kn_tensor_first_alias(list.tensors, n, kn_tensor_same_view, group)) {
        st = kn_last_status();
        goto done;
    }
    kn_scope_push();
    for (int i = 0; i < n && st == KN_OK; i++) {
        bool skip;
        kn_tensor *t = take(w, &o, list.names[i], list.tensors[i], taken, &skip);
        if (!t && !skip) st = kn_last_status();
        else if (t && !placed[group[i]]) placed[group[i]] = t;
    }
    for (int i = 0; i < n && st == KN_OK; i++)
        if (!placed[group[i]] && !is_optional(&o, list.names[i]))
            st = kn_error(KN_ERR_ARG, "%s: nothing in the files for the model's %s",
                          kn_hf_weights_file(w, 0) ? kn_hf_weights_file(w, 0) : "weights", list.names[i]);
    for (int i = 0; i < n && st == KN_OK; i++)
        if (placed[group[i]]) st = kn_tensor_assign_(list.tensors[i], placed[group[i]]);
    kn_scope_pop();
    if (st == KN_OK && unused) {
        *unused = 0;
        for (int i = 0; i < n_files; i++) *unused += !taken[i];
    }
done:
    free(group);
    free(placed);
    free(taken);
    kn_named_tensors_free(&list);
    return st;
}
