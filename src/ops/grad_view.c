/* Gradients of views: the view's gradient mapped back onto the tensor it was taken from. */
#include <stdlib.h>

#include "core/error.h"
#include "core/tensor_impl.h"
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/ops_internal.h"

/* Whether two elements of the geometry share a storage position (dims sorted by stride,
 * each stride must step over everything the smaller ones reach). */
static bool overlaps(const kn_view_geom *g) {
    int order[KN_MAX_DIMS], n = 0;
    for (int d = 0; d < g->shape.n; d++) {
        if (g->shape.v[d] == 0) return false;
        if (g->shape.v[d] > 1) order[n++] = d;
    }
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && llabs(g->stride.v[order[j]]) < llabs(g->stride.v[order[j - 1]]); j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int64_t reach = 0;
    for (int i = 0; i < n; i++) {
        int64_t s = llabs(g->stride.v[order[i]]);
        if (s <= reach) return true;
        reach += s * (g->shape.v[order[i]] - 1);
    }
    return false;
}

/* Storage position of every element of the geometry, row-major, as an i64 tensor. */
static kn_tensor *positions(const kn_view_geom *g, kn_device device) {
    int64_t n = kn_shape_numel(g->shape);
    int64_t *pos = malloc(sizeof *pos * (size_t)(n ? n : 1));
    if (!pos) return kn_error_null(KN_ERR_OOM, "backward of a view: out of host memory for %lld positions", (long long)n);
    int64_t idx[KN_MAX_DIMS] = {0};
    for (int64_t e = 0; e < n; e++) {
        int64_t p = g->offset;
        for (int d = 0; d < g->shape.n; d++) p += idx[d] * g->stride.v[d];
        pos[e] = p;
        for (int d = g->shape.n - 1; d >= 0 && ++idx[d] == g->shape.v[d]; d--) idx[d] = 0;
    }
    kn_tensor *t = kn_from_host(pos, KN_I64, KN_SHAPE(n), device);
    free(pos);
    return t;
}

/* Adds g into the window of buf (overlapping windows add up where elements coincide). */
static kn_tensor *scatter_window(kn_tensor *buf, const kn_view_geom *w, kn_tensor *g) {
    if (!overlaps(w)) {
        kn_tensor *window = kn_as_strided(buf, w->shape, w->stride, w->offset);
        return kn_copy_(window, g) == KN_OK ? buf : NULL;
    }
    return kn_index_add(buf, 0, positions(w, kn_device_of(g)), kn_reshape(g, KN_SHAPE(-1)), 1.0);
}

/* slice, select, unfold: scatter g into zeros laid out like the input, row-major. */
static kn_tensor *window_grad(const kn_view_rec *v, kn_tensor *g) {
    kn_tensor *buf = kn_full_on(KN_SHAPE(kn_shape_numel(v->in_shape)), 0, kn_dtype_of(g), kn_device_of(g));
    return kn_reshape(buf ? scatter_window(buf, &v->window, g) : NULL, v->in_shape);
}

/* as_strided addresses the storage: scatter g into a buffer shaped like the whole storage,
 * then read the input's elements out of it. (An input that itself aliases elements, such as
 * an expanded tensor, gets each storage element's gradient once per alias.) */
static kn_tensor *storage_grad(const kn_view_rec *v, kn_tensor *g) {
    kn_tensor *buf = kn_full_on(KN_SHAPE(v->storage_numel), 0, kn_dtype_of(g), kn_device_of(g));
    buf = buf ? scatter_window(buf, &v->window, g) : NULL;
    if (!buf) return NULL;
    if (!overlaps(&v->in)) return kn_contiguous(kn_as_strided(buf, v->in.shape, v->in.stride, v->in.offset));
    return kn_reshape(kn_index_select(buf, 0, positions(&v->in, kn_device_of(g))), v->in.shape);
}

bool kn_grad_view_is_window(const kn_view_rec *v) { return v->kind == KN_VIEW_WINDOW && !overlaps(&v->window); }

kn_status kn_grad_view_add_into(const kn_view_rec *v, kn_tensor *buf, kn_tensor *g) {
    const kn_view_geom *w = &v->window;
    kn_tensor *window = kn_as_strided(buf, w->shape, w->stride, buf->offset + w->offset);
    kn_status st = window ? kn_copy_(window, kn_add(window, g)) : kn_last_status();
    kn_release(window);
    return st;
}

kn_tensor *kn_grad_view(const kn_view_rec *v, kn_tensor *g) {
    switch (v->kind) {
    case KN_VIEW_RESHAPE: return kn_reshape(g, v->in_shape);
    case KN_VIEW_PERMUTE: {
        kn_shape inverse = {.n = v->perm.n};
        for (int k = 0; k < v->perm.n; k++) inverse.v[v->perm.v[k]] = k;
        return kn_permute(g, inverse);
    }
    case KN_VIEW_EXPAND: return kn_sum_to(g, v->in_shape);
    case KN_VIEW_WINDOW: return window_grad(v, g);
    case KN_VIEW_STORAGE: return storage_grad(v, g);
    }
    return NULL;
}
