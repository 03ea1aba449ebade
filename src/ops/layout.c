/* Layout ops that join and split: cat and stack (the cat kernel), split, split_sizes,
 * chunk and meshgrid (views, no copy). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* Records "op(f32[2, 3], ...): message" for ops that record no node; returns `code`. */
static kn_status list_fail(const char *op, kn_tensor *const *ts, int n, kn_status code, const char *fmt, ...)
    KN_PRINTF(5, 6);
static kn_status list_fail(const char *op, kn_tensor *const *ts, int n, kn_status code, const char *fmt, ...) {
    char msg[512], inputs[320] = "";
    size_t len = 0;
    for (int i = 0; i < n && ts && len + 1 < sizeof inputs; i++) {
        char d[96];
        len += (size_t)snprintf(inputs + len, sizeof inputs - len, i ? ", %s" : "%s",
                                ts[i] ? kn_describe(ts[i], d, sizeof d) : "NULL");
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return kn_error(code, "%s(%s): %s", op, inputs, msg);
}

static bool wrap_dim(const char *op, kn_tensor *x, int64_t dim, int slots, int64_t *out) {
    if (slots <= 0 || dim < -slots || dim >= slots) {
        list_fail(op, &x, 1, KN_ERR_INDEX, "dim %lld is out of range for a %d-d tensor", (long long)dim, x->ndim);
        return false;
    }
    *out = dim < 0 ? dim + slots : dim;
    return true;
}

/* ---- joining -------------------------------------------------------------------------------- */

/* A 1-d tensor of size 0: cat skips it whatever the others' shapes (PyTorch's legacy rule). */
static bool skipped_by_cat(const kn_tensor *t) { return t->ndim == 1 && t->shape[0] == 0; }

/* The tensor whose shape the others must match: the first one cat does not skip. */
static int cat_ref(kn_tensor *const *in, int n) {
    int ref = 0;
    while (ref < n && skipped_by_cat(in[ref])) ref++;
    return ref == n ? 0 : ref; /* all empty: the result is empty too */
}

KN_RULE(kn_infer_cat) {
    int ref = cat_ref(in, n_in);
    const kn_tensor *r0 = in[ref];
    int64_t d = at->cat.dim;
    r->compute = in[0]->dtype;
    for (int k = 0; k < n_in; k++) {
        if (in[k]->ndim == 0) KN_RULE_FAIL(KN_ERR_SHAPE, "tensor %d is 0-d; 0-d tensors cannot be concatenated", k);
        r->compute = kn_promote_types(r->compute, in[k]->dtype);
    }
    if (d < 0 || d >= r0->ndim) KN_RULE_FAIL(KN_ERR_INDEX, "dim %lld is out of range for a %d-d tensor", (long long)d, r0->ndim);
    int64_t shape[KN_MAX_DIMS];
    for (int i = 0; i < r0->ndim; i++) shape[i] = r0->shape[i];
    shape[d] = 0;
    for (int k = 0; k < n_in; k++) {
        const kn_tensor *t = in[k];
        if (skipped_by_cat(t) && !skipped_by_cat(r0)) continue;
        if (t->ndim != r0->ndim)
            KN_RULE_FAIL(KN_ERR_SHAPE, "tensor %d has %d dims but tensor %d has %d", k, t->ndim, ref, r0->ndim);
        for (int i = 0; i < r0->ndim; i++)
            if (i != d && t->shape[i] != r0->shape[i])
                KN_RULE_FAIL(KN_ERR_SHAPE, "tensor %d has size %lld in dim %d but tensor %d has %lld", k,
                             (long long)t->shape[i], i, ref, (long long)r0->shape[i]);
        shape[d] += t->shape[d];
    }
    kn_infer_out(r, r->compute, shape, r0->ndim);
    return KN_OK;
}

kn_tensor *kn_cat(kn_tensor *const *tensors, int n, int64_t dim) {
    if (!tensors || n <= 0) return kn_error_null(KN_ERR_ARG, "cat: %d tensors given; at least one is needed", n);
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_cat, n, tensors)) return NULL;
    int ndim = tensors[cat_ref(tensors, n)]->ndim;
    int64_t d = dim;
    if (ndim > 0 && !kn_op_dim(&c, dim, ndim, &d)) return NULL; /* 0-d: the rule says so */
    KN_ATTRS(c.node, cat)->dim = d;
    kn_op_infer r;
    if (!kn_op_infer_node(&c, &r)) return NULL;
    for (int k = 0; k < n; k++) {
        if (tensors[k]->dtype == r.compute) continue;
        kn_tensor *cast = kn_cast(tensors[k], r.compute);
        if (!cast) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", kn_last_error());
            return kn_op_fail(&c, kn_last_status(), "casting tensor %d: %s", k, msg);
        }
        kn_op_set_input(&c, k, cast);
        kn_release(cast);
    }
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_stack(kn_tensor *const *tensors, int n, int64_t dim) {
    if (!tensors || n <= 0) return kn_error_null(KN_ERR_ARG, "stack: %d tensors given; at least one is needed", n);
    for (int k = 0; k < n; k++)
        if (!tensors[k]) {
            kn_error_null_input("stack", k);
            return NULL;
        }
    const kn_tensor *first = tensors[0];
    for (int k = 1; k < n; k++) {
        bool same = tensors[k]->ndim == first->ndim;
        for (int i = 0; same && i < first->ndim; i++) same = tensors[k]->shape[i] == first->shape[i];
        if (!same) {
            char a[96], b[96];
            list_fail("stack", tensors, n, KN_ERR_SHAPE, "tensor %d is %s but tensor 0 is %s; stack needs equal shapes", k,
                      kn_describe(tensors[k], a, sizeof a), kn_describe(first, b, sizeof b));
            return NULL;
        }
    }
    if (first->ndim == KN_MAX_DIMS) {
        list_fail("stack", tensors, n, KN_ERR_SHAPE, "the result would have more than %d dims", KN_MAX_DIMS);
        return NULL;
    }
    int64_t d;
    if (!wrap_dim("stack", tensors[0], dim, first->ndim + 1, &d)) return NULL;
    kn_tensor **parts = malloc(sizeof *parts * (size_t)n);
    if (!parts) return kn_error_null(KN_ERR_OOM, "stack: out of host memory for %d inputs", n);
    kn_scope_push();
    for (int k = 0; k < n; k++) parts[k] = kn_unsqueeze(tensors[k], d);
    kn_tensor *out = kn_cat(parts, n, d);
    free(parts);
    return kn_scope_pop_keep(out);
}

/* ---- splitting ------------------------------------------------------------------------------ */

/* Fills out[0..count) with the views of x of the given sizes along d. */
static kn_status split_views(kn_tensor *x, int64_t d, int count, const int64_t *sizes, int64_t uniform,
                             kn_tensor **out) {
    int64_t start = 0;
    for (int k = 0; k < count; k++) {
        int64_t len = sizes ? sizes[k] : (x->shape[d] - start < uniform ? x->shape[d] - start : uniform);
        out[k] = kn_narrow(x, d, start, len);
        if (!out[k]) {
            for (int j = 0; j < k; j++) kn_release(out[j]);
            return kn_last_status();
        }
        start += len;
    }
    return KN_OK;
}

/* The checks every split form shares: x and out present, x not 0-d, dim in range. */
static bool split_begin(const char *op, kn_tensor *x, int64_t dim, kn_tensor **out, int64_t *d) {
    if (!x) {
        kn_error_null_input(op, 0);
        return false;
    }
    if (!out) {
        list_fail(op, &x, 1, KN_ERR_NULL, "the output array is NULL");
        return false;
    }
    if (x->ndim == 0) {
        list_fail(op, &x, 1, KN_ERR_SHAPE, "a 0-d tensor cannot be split");
        return false;
    }
    return wrap_dim(op, x, dim, x->ndim, d);
}

kn_status kn_split(kn_tensor *x, int64_t split_size, int64_t dim, kn_tensor **out, int max_out, int *n_out) {
    if (n_out) *n_out = 0;
    int64_t d;
    if (!split_begin("split", x, dim, out, &d)) return kn_last_status();
    int64_t size = x->shape[d];
    if (split_size < 0 || (split_size == 0 && size > 0))
        return list_fail("split", &x, 1, KN_ERR_ARG, "split_size %lld cannot split dim %lld of size %lld",
                         (long long)split_size, (long long)d, (long long)size);
    int64_t count = size == 0 ? 1 : (size + split_size - 1) / split_size;
    if (count > max_out)
        return list_fail("split", &x, 1, KN_ERR_ARG, "%lld pieces are needed but the output array holds %d",
                         (long long)count, max_out);
    kn_status st = split_views(x, d, (int)count, NULL, split_size, out);
    if (st == KN_OK && n_out) *n_out = (int)count;
    return st;
}

kn_status kn_split_sizes(kn_tensor *x, const int64_t *sizes, int n, int64_t dim, kn_tensor **out) {
    int64_t d;
    if (!split_begin("split_sizes", x, dim, out, &d)) return kn_last_status();
    if (n < 0 || (n > 0 && !sizes))
        return list_fail("split_sizes", &x, 1, KN_ERR_ARG, "%d sizes given%s", n, sizes ? "" : " as NULL");
    int64_t total = 0;
    for (int k = 0; k < n; k++) {
        if (sizes[k] < 0)
            return list_fail("split_sizes", &x, 1, KN_ERR_ARG, "size %d is negative (%lld)", k, (long long)sizes[k]);
        total += sizes[k];
    }
    if (total != x->shape[d])
        return list_fail("split_sizes", &x, 1, KN_ERR_SHAPE, "the sizes add up to %lld but dim %lld has size %lld",
                         (long long)total, (long long)d, (long long)x->shape[d]);
    return split_views(x, d, n, sizes, 0, out);
}

kn_status kn_chunk(kn_tensor *x, int chunks, int64_t dim, kn_tensor **out, int *n_out) {
    if (n_out) *n_out = 0;
    int64_t d;
    if (!split_begin("chunk", x, dim, out, &d)) return kn_last_status();
    if (chunks <= 0) return list_fail("chunk", &x, 1, KN_ERR_ARG, "chunks must be positive, not %d", chunks);
    int64_t size = x->shape[d];
    int64_t piece = (size + chunks - 1) / chunks;
    int64_t count = size == 0 ? chunks : (size + piece - 1) / piece; /* torch.chunk: empty dims give `chunks` pieces */
    kn_status st = split_views(x, d, (int)count, NULL, piece, out);
    if (st == KN_OK && n_out) *n_out = (int)count;
    return st;
}

/* ---- grids ---------------------------------------------------------------------------------- */

kn_status kn_meshgrid(kn_tensor *const *tensors, int n, bool xy_indexing, kn_tensor **out) {
    if (!tensors || !out || n <= 0 || n > KN_MAX_DIMS)
        return kn_error(KN_ERR_ARG, "meshgrid: %d tensors given%s; 1 to %d are needed", n,
                        tensors && out ? "" : " (or a NULL array)", KN_MAX_DIMS);
    for (int k = 0; k < n; k++)
        if (!tensors[k]) {
            kn_error_null_input("meshgrid", k);
            return kn_last_status();
        }
    kn_shape grid = {.n = n};
    for (int k = 0; k < n; k++) {
        const kn_tensor *t = tensors[k];
        if (t->ndim > 1)
            return list_fail("meshgrid", tensors, n, KN_ERR_SHAPE, "tensor %d has %d dims; meshgrid takes 0-d or 1-d tensors",
                             k, t->ndim);
        if (t->dtype != tensors[0]->dtype)
            return list_fail("meshgrid", tensors, n, KN_ERR_DTYPE, "tensor %d is %s but tensor 0 is %s", k,
                             kn_dtype_name(t->dtype), kn_dtype_name(tensors[0]->dtype));
        kn_device a = t->storage->device, b = tensors[0]->storage->device;
        if (a.type != b.type || a.index != b.index)
            return list_fail("meshgrid", tensors, n, KN_ERR_DEVICE, "tensor %d is on another device than tensor 0", k);
    }
    /* "xy" swaps the first two dims of the grid (only for two or more inputs). */
    int pos[KN_MAX_DIMS];
    for (int k = 0; k < n; k++) pos[k] = xy_indexing && n >= 2 && k < 2 ? 1 - k : k;
    for (int k = 0; k < n; k++) grid.v[pos[k]] = kn_numel(tensors[k]);
    for (int k = 0; k < n; k++) {
        kn_shape line = {.n = n};
        for (int i = 0; i < n; i++) line.v[i] = i == pos[k] ? grid.v[i] : 1;
        kn_scope_push();
        kn_tensor *g = kn_expand(kn_view(tensors[k], line), grid);
        out[k] = kn_scope_pop_keep(g);
        if (!out[k]) {
            for (int j = 0; j < k; j++) kn_release(out[j]);
            return kn_last_status();
        }
    }
    return KN_OK;
}
