/* Views: new shapes and strides over the same storage, without copying. Also contiguous,
 * clone and copy_, which go through the copy op when data must move. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "exec/dispatch.h"
#include "exec/interpose.h"
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/ops_internal.h"

/* Records "op(f32[2, 3]): message" and returns NULL. */
static void *view_fail(const char *op, const kn_tensor *t, kn_status code, const char *fmt, ...) KN_PRINTF(4, 5);
static void *view_fail(const char *op, const kn_tensor *t, kn_status code, const char *fmt, ...) {
    char msg[512], desc[96];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    kn_error(code, "%s(%s): %s", op, kn_describe(t, desc, sizeof desc), msg);
    return NULL;
}

static bool check_input(const char *op, const kn_tensor *t) {
    if (t) return true;
    kn_error_null_input(op, 0);
    return false;
}

/* Wraps a possibly negative dim for a tensor of ndim dims (ndim+1 slots when inserting). */
static bool wrap_dim(const char *op, const kn_tensor *t, int64_t dim, int slots, int64_t *out) {
    if (dim < -slots || dim >= slots || slots == 0) {
        view_fail(op, t, KN_ERR_INDEX, "dim %lld is out of range [%d, %d]", (long long)dim, -slots, slots - 1);
        return false;
    }
    *out = dim < 0 ? dim + slots : dim;
    return true;
}

/* A view of t, shown to the interposers (autograd records it as rec says). */
static kn_tensor *make_view_as(kn_tensor *t, const int64_t *shape, int ndim, const int64_t *stride, int64_t offset,
                               const kn_view_rec *rec) {
    kn_tensor *v = kn_tensor_view_of(t, shape, ndim, stride, offset);
    if (v && kn_interpose_view(t, v, rec) != KN_OK) {
        kn_tensor_decref(v);
        return NULL;
    }
    return kn_scope_adopt(v);
}

/* Same elements in a new shape (view, reshape, squeeze...). */
static kn_tensor *reshaped_view(kn_tensor *t, const int64_t *shape, int ndim, const int64_t *stride, int64_t offset) {
    return make_view_as(t, shape, ndim, stride, offset, &(kn_view_rec){.kind = KN_VIEW_RESHAPE});
}

/* A window of t's elements (slice, select, unfold). The same window over t's row-major
 * layout (window_stride, window_offset) is what backward scatters the gradient into. */
static kn_tensor *window_view(kn_tensor *t, const int64_t *shape, int ndim, const int64_t *stride, int64_t offset,
                              const int64_t *window_stride, int64_t window_offset) {
    kn_view_rec rec = {.kind = KN_VIEW_WINDOW, .window = {.shape.n = ndim, .stride.n = ndim, .offset = window_offset}};
    for (int d = 0; d < ndim; d++) rec.window.shape.v[d] = shape[d], rec.window.stride.v[d] = window_stride[d];
    return make_view_as(t, shape, ndim, stride, offset, &rec);
}

bool kn_broadcast_shapes(const char *op, kn_shape a, kn_shape b, kn_shape *out) {
    int n = a.n > b.n ? a.n : b.n;
    kn_shape r = {.n = n};
    for (int i = 0; i < n; i++) {
        int64_t da = i < n - a.n ? 1 : a.v[i - (n - a.n)];
        int64_t db = i < n - b.n ? 1 : b.v[i - (n - b.n)];
        if (da != db && da != 1 && db != 1) {
            kn_error(KN_ERR_SHAPE, "%s: sizes %lld and %lld do not broadcast in dim %d", op, (long long)da,
                     (long long)db, i);
            return false;
        }
        r.v[i] = da == 1 ? db : da;
    }
    *out = r;
    return true;
}

bool kn_normalize_dims(const char *op, kn_shape dims, int ndim, kn_shape *out) {
    kn_shape r = {0};
    if (dims.n == 0) {
        r.n = ndim;
        for (int d = 0; d < ndim; d++) r.v[d] = d;
        *out = r;
        return true;
    }
    if (dims.n < 0 || dims.n > KN_MAX_DIMS) {
        kn_error(KN_ERR_ARG, "%s: %d dims listed", op, dims.n);
        return false;
    }
    bool seen[KN_MAX_DIMS] = {false};
    for (int i = 0; i < dims.n; i++) {
        int64_t d = dims.v[i];
        int slots = ndim ? ndim : 1;
        if (d < -slots || d >= slots) {
            kn_error(KN_ERR_INDEX, "%s: dim %lld is out of range [%d, %d] for a %d-d tensor", op, (long long)d,
                     -slots, slots - 1, ndim);
            return false;
        }
        if (d < 0) d += slots;
        if (ndim == 0) continue; /* dim 0 / -1 of a 0-d tensor names the tensor itself */
        if (seen[d]) {
            kn_error(KN_ERR_ARG, "%s: dim %lld is listed twice", op, (long long)d);
            return false;
        }
        seen[d] = true;
    }
    for (int d = 0; d < ndim; d++)
        if (seen[d]) r.v[r.n++] = d;
    *out = r;
    return true;
}

/* ---- reshaping -------------------------------------------------------------------------------- */

/* Resolves one -1 and checks the element count. */
static bool infer_shape(const char *op, const kn_tensor *t, kn_shape shape, kn_shape *out) {
    if (shape.n < 0 || shape.n > KN_MAX_DIMS) {
        view_fail(op, t, KN_ERR_SHAPE, "%d dims requested; at most %d", shape.n, KN_MAX_DIMS);
        return false;
    }
    int64_t known = 1, numel = kn_numel(t);
    int infer = -1;
    for (int d = 0; d < shape.n; d++) {
        if (shape.v[d] == -1) {
            if (infer >= 0) {
                view_fail(op, t, KN_ERR_SHAPE, "only one size may be -1");
                return false;
            }
            infer = d;
        } else if (shape.v[d] < 0) {
            view_fail(op, t, KN_ERR_SHAPE, "negative size %lld in dim %d", (long long)shape.v[d], d);
            return false;
        } else {
            known *= shape.v[d];
        }
    }
    if (infer >= 0) {
        if (known == 0 || numel % known) {
            view_fail(op, t, KN_ERR_SHAPE, "cannot infer the -1 size: %lld elements do not split by %lld",
                      (long long)numel, (long long)known);
            return false;
        }
        shape.v[infer] = numel / known;
        known = numel;
    }
    if (known != numel) {
        view_fail(op, t, KN_ERR_SHAPE, "%lld elements cannot be viewed as %lld", (long long)numel, (long long)known);
        return false;
    }
    *out = shape;
    return true;
}

/* Strides for viewing t as `shape`, if its strides allow (PyTorch's computeStride). */
static bool view_strides(const kn_tensor *t, kn_shape shape, int64_t *stride) {
    int64_t numel = kn_numel(t);
    if (numel == 0 || t->ndim == 0) {
        kn_contiguous_strides(shape.v, shape.n, stride);
        return true;
    }
    int view_d = shape.n - 1;
    int64_t chunk_base_stride = t->stride[t->ndim - 1];
    int64_t tensor_numel = 1, view_numel = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        tensor_numel *= t->shape[d];
        if (d == 0 || (t->shape[d - 1] != 1 && t->stride[d - 1] != tensor_numel * chunk_base_stride)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape.v[view_d] == 1)) {
                stride[view_d] = view_numel * chunk_base_stride;
                view_numel *= shape.v[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel) return false;
            if (d > 0) {
                chunk_base_stride = t->stride[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

kn_tensor *kn_view(kn_tensor *t, kn_shape shape) {
    if (!check_input("view", t)) return NULL;
    kn_shape s;
    if (!infer_shape("view", t, shape, &s)) return NULL;
    int64_t stride[KN_MAX_DIMS];
    if (!view_strides(t, s, stride))
        return view_fail("view", t, KN_ERR_VIEW,
                         "the strides of this non-contiguous tensor cannot express the new shape; use reshape");
    return reshaped_view(t, s.v, s.n, stride, t->offset);
}

kn_tensor *kn_reshape(kn_tensor *t, kn_shape shape) {
    if (!check_input("reshape", t)) return NULL;
    kn_shape s;
    if (!infer_shape("reshape", t, shape, &s)) return NULL;
    int64_t stride[KN_MAX_DIMS];
    if (view_strides(t, s, stride)) return reshaped_view(t, s.v, s.n, stride, t->offset);
    kn_tensor *c = kn_contiguous(t);
    kn_tensor *v = c ? kn_view(c, s) : NULL;
    kn_release(c);
    return v;
}

kn_tensor *kn_flatten(kn_tensor *t, int64_t start_dim, int64_t end_dim) {
    if (!check_input("flatten", t)) return NULL;
    if (t->ndim == 0) return kn_reshape(t, KN_SHAPE(1));
    int64_t s, e;
    if (!wrap_dim("flatten", t, start_dim, t->ndim, &s) || !wrap_dim("flatten", t, end_dim, t->ndim, &e)) return NULL;
    if (s > e) return view_fail("flatten", t, KN_ERR_ARG, "start_dim %lld is after end_dim %lld", (long long)s, (long long)e);
    kn_shape shape = {0};
    for (int d = 0; d < t->ndim; d++) {
        if (d > s && d <= e) shape.v[shape.n - 1] *= t->shape[d];
        else shape.v[shape.n++] = t->shape[d];
    }
    return kn_reshape(t, shape);
}

/* ---- reordering ------------------------------------------------------------------------------- */

kn_tensor *kn_permute(kn_tensor *t, kn_shape dims) {
    if (!check_input("permute", t)) return NULL;
    if (dims.n != t->ndim)
        return view_fail("permute", t, KN_ERR_ARG, "%d dims given for a %d-d tensor", dims.n, t->ndim);
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    bool seen[KN_MAX_DIMS] = {false};
    for (int i = 0; i < dims.n; i++) {
        int64_t d;
        if (!wrap_dim("permute", t, dims.v[i], t->ndim, &d)) return NULL;
        if (seen[d]) return view_fail("permute", t, KN_ERR_ARG, "dim %lld appears twice", (long long)d);
        seen[d] = true;
        shape[i] = t->shape[d];
        stride[i] = t->stride[d];
    }
    kn_shape perm = {.n = t->ndim};
    for (int k = 0; k < t->ndim; k++) perm.v[k] = dims.v[k] < 0 ? dims.v[k] + t->ndim : dims.v[k];
    return make_view_as(t, shape, t->ndim, stride, t->offset, &(kn_view_rec){.kind = KN_VIEW_PERMUTE, .perm = perm});
}

kn_tensor *kn_transpose(kn_tensor *t, int64_t dim0, int64_t dim1) {
    if (!check_input("transpose", t)) return NULL;
    if (t->ndim == 0) return reshaped_view(t, t->shape, 0, t->stride, t->offset);
    int64_t a, b;
    if (!wrap_dim("transpose", t, dim0, t->ndim, &a) || !wrap_dim("transpose", t, dim1, t->ndim, &b)) return NULL;
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    shape[a] = t->shape[b], shape[b] = t->shape[a];
    stride[a] = t->stride[b], stride[b] = t->stride[a];
    kn_shape perm = {.n = t->ndim};
    for (int k = 0; k < t->ndim; k++) perm.v[k] = k == a ? b : k == b ? a : k;
    return make_view_as(t, shape, t->ndim, stride, t->offset, &(kn_view_rec){.kind = KN_VIEW_PERMUTE, .perm = perm});
}

/* ---- selecting -------------------------------------------------------------------------------- */

kn_tensor *kn_slice(kn_tensor *t, int64_t dim, int64_t start, int64_t end, int64_t step) {
    if (!check_input("slice", t)) return NULL;
    int64_t d;
    if (!wrap_dim("slice", t, dim, t->ndim, &d)) return NULL;
    if (step == 0) return view_fail("slice", t, KN_ERR_ARG, "step must not be zero");
    int64_t size = t->shape[d], count;
    /* Python's slice.indices(). */
    if (step > 0) {
        start = start < 0 ? (start + size < 0 ? 0 : start + size) : (start > size ? size : start);
        end = end < 0 ? (end + size < 0 ? 0 : end + size) : (end > size ? size : end);
        count = end > start ? (end - start + step - 1) / step : 0;
    } else {
        start = start < 0 ? (start + size < 0 ? -1 : start + size) : (start >= size ? size - 1 : start);
        end = end < 0 ? (end + size < 0 ? -1 : end + size) : (end >= size ? size - 1 : end);
        count = start > end ? (start - end - step - 1) / (-step) : 0;
    }
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    shape[d] = count;
    stride[d] = t->stride[d] * step;
    int64_t offset = t->offset + (count ? start * t->stride[d] : 0);
    int64_t window[KN_MAX_DIMS];
    kn_contiguous_strides(t->shape, t->ndim, window);
    int64_t window_offset = count ? start * window[d] : 0;
    window[d] *= step;
    return window_view(t, shape, t->ndim, stride, offset, window, window_offset);
}

kn_tensor *kn_narrow(kn_tensor *t, int64_t dim, int64_t start, int64_t length) {
    if (!check_input("narrow", t)) return NULL;
    int64_t d;
    if (!wrap_dim("narrow", t, dim, t->ndim, &d)) return NULL;
    if (start < 0) start += t->shape[d];
    if (start < 0 || length < 0 || start + length > t->shape[d])
        return view_fail("narrow", t, KN_ERR_INDEX, "start %lld, length %lld do not fit in dim %lld of size %lld",
                         (long long)start, (long long)length, (long long)d, (long long)t->shape[d]);
    return kn_slice(t, d, start, start + length, 1);
}

kn_tensor *kn_select(kn_tensor *t, int64_t dim, int64_t index) {
    if (!check_input("select", t)) return NULL;
    int64_t d;
    if (!wrap_dim("select", t, dim, t->ndim, &d)) return NULL;
    int64_t size = t->shape[d];
    if (index < -size || index >= size)
        return view_fail("select", t, KN_ERR_INDEX, "index %lld is out of range for dim %lld of size %lld",
                         (long long)index, (long long)d, (long long)size);
    if (index < 0) index += size;
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS], rowmajor[KN_MAX_DIMS], window[KN_MAX_DIMS];
    kn_contiguous_strides(t->shape, t->ndim, rowmajor);
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d) shape[n] = t->shape[i], window[n] = rowmajor[i], stride[n++] = t->stride[i];
    return window_view(t, shape, n, stride, t->offset + index * t->stride[d], window, index * rowmajor[d]);
}

/* ---- broadcasting and unit dims --------------------------------------------------------------- */

kn_tensor *kn_expand(kn_tensor *t, kn_shape shape) {
    if (!check_input("expand", t)) return NULL;
    if (shape.n < t->ndim || shape.n > KN_MAX_DIMS)
        return view_fail("expand", t, KN_ERR_SHAPE, "cannot expand %d dims to %d", t->ndim, shape.n);
    int64_t out_shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    int lead = shape.n - t->ndim;
    for (int d = 0; d < shape.n; d++) {
        int64_t want = shape.v[d];
        if (d < lead) {
            if (want < 0) return view_fail("expand", t, KN_ERR_SHAPE, "size -1 is not allowed in a new leading dim %d", d);
            out_shape[d] = want, stride[d] = 0;
            continue;
        }
        int64_t have = t->shape[d - lead];
        if (want == -1) want = have;
        if (want != have && have != 1)
            return view_fail("expand", t, KN_ERR_SHAPE, "dim %d of size %lld cannot expand to %lld", d - lead,
                             (long long)have, (long long)want);
        out_shape[d] = want;
        stride[d] = want == have ? t->stride[d - lead] : 0;
    }
    return make_view_as(t, out_shape, shape.n, stride, t->offset, &(kn_view_rec){.kind = KN_VIEW_EXPAND});
}

kn_tensor *kn_broadcast_to(kn_tensor *t, kn_shape shape) { return kn_expand(t, shape); }

kn_tensor *kn_squeeze(kn_tensor *t, int64_t dim) {
    if (!check_input("squeeze", t)) return NULL;
    if (t->ndim == 0) return reshaped_view(t, t->shape, 0, t->stride, t->offset);
    int64_t d;
    if (!wrap_dim("squeeze", t, dim, t->ndim, &d)) return NULL;
    if (t->shape[d] != 1) return reshaped_view(t, t->shape, t->ndim, t->stride, t->offset);
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (i != d) shape[n] = t->shape[i], stride[n++] = t->stride[i];
    return reshaped_view(t, shape, n, stride, t->offset);
}

kn_tensor *kn_squeeze_all(kn_tensor *t) {
    if (!check_input("squeeze", t)) return NULL;
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] != 1) shape[n] = t->shape[i], stride[n++] = t->stride[i];
    return reshaped_view(t, shape, n, stride, t->offset);
}

kn_tensor *kn_unsqueeze(kn_tensor *t, int64_t dim) {
    if (!check_input("unsqueeze", t)) return NULL;
    if (t->ndim == KN_MAX_DIMS) return view_fail("unsqueeze", t, KN_ERR_SHAPE, "already at %d dims", KN_MAX_DIMS);
    int64_t d;
    if (!wrap_dim("unsqueeze", t, dim, t->ndim + 1, &d)) return NULL;
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    for (int i = 0, j = 0; i <= t->ndim; i++) {
        if (i == d) {
            shape[i] = 1;
            stride[i] = d < t->ndim ? t->stride[d] * t->shape[d] : 1;
        } else {
            shape[i] = t->shape[j], stride[i] = t->stride[j];
            j++;
        }
    }
    return reshaped_view(t, shape, t->ndim + 1, stride, t->offset);
}

kn_tensor *kn_unfold(kn_tensor *t, int64_t dim, int64_t size, int64_t step) {
    if (!check_input("unfold", t)) return NULL;
    if (t->ndim == KN_MAX_DIMS) return view_fail("unfold", t, KN_ERR_SHAPE, "already at %d dims", KN_MAX_DIMS);
    int64_t d = 0;
    if (t->ndim && !wrap_dim("unfold", t, dim, t->ndim, &d)) return NULL;
    int64_t len = t->ndim ? t->shape[d] : 1;
    if (size < 0 || size > len || step <= 0)
        return view_fail("unfold", t, KN_ERR_ARG, "window %lld with step %lld does not fit dim %lld of size %lld",
                         (long long)size, (long long)step, (long long)d, (long long)len);
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    memcpy(shape, t->shape, sizeof shape);
    memcpy(stride, t->stride, sizeof stride);
    int64_t window[KN_MAX_DIMS];
    kn_contiguous_strides(t->shape, t->ndim, window);
    int n = t->ndim;
    shape[n] = size;
    stride[n] = n ? t->stride[d] : 1;
    window[n] = n ? window[d] : 1;
    if (n) {
        shape[d] = (len - size) / step + 1;
        stride[d] = t->stride[d] * step;
        window[d] *= step;
    }
    return window_view(t, shape, n + 1, stride, t->offset, window, 0);
}

kn_tensor *kn_as_strided(kn_tensor *t, kn_shape shape, kn_shape strides, int64_t offset) {
    if (!check_input("as_strided", t)) return NULL;
    if (shape.n != strides.n || shape.n < 0 || shape.n > KN_MAX_DIMS)
        return view_fail("as_strided", t, KN_ERR_ARG, "%d sizes but %d strides", shape.n, strides.n);
    int64_t lo = offset, hi = offset;
    bool empty = false;
    for (int d = 0; d < shape.n; d++) {
        if (shape.v[d] < 0) return view_fail("as_strided", t, KN_ERR_SHAPE, "negative size in dim %d", d);
        if (shape.v[d] == 0) empty = true;
        int64_t reach = (shape.v[d] - 1) * strides.v[d];
        if (reach < 0) lo += reach;
        else hi += reach;
    }
    int64_t capacity = (int64_t)(t->storage->bytes / kn_dtype_size(t->dtype));
    if (!empty && (lo < 0 || hi >= capacity))
        return view_fail("as_strided", t, KN_ERR_VIEW, "elements %lld..%lld fall outside the storage of %lld elements",
                         (long long)lo, (long long)hi, (long long)capacity);
    kn_view_rec rec = {.kind = KN_VIEW_STORAGE, .window = {shape, strides, offset}};
    return make_view_as(t, shape.v, shape.n, strides.v, offset, &rec);
}

/* ---- copies ----------------------------------------------------------------------------------- */

kn_tensor *kn_contiguous(kn_tensor *t) {
    if (!check_input("contiguous", t)) return NULL;
    if (kn_tensor_is_contiguous(t)) return kn_scope_adopt(kn_retain(t));
    return kn_cast(t, t->dtype);
}

kn_tensor *kn_clone(kn_tensor *t) {
    if (!check_input("clone", t)) return NULL;
    return kn_cast(t, t->dtype);
}

/* Whether writing dst could change elements it reads twice (an expanded or overlapping view). */
static bool has_internal_overlap(const kn_tensor *t) {
    for (int d = 0; d < t->ndim; d++)
        if (t->stride[d] == 0 && t->shape[d] > 1) return true;
    return false;
}

kn_status kn_copy_(kn_tensor *dst, kn_tensor *src) {
    if (!dst || !src) {
        kn_error_null_input("copy_", dst ? 1 : 0);
        return kn_last_status();
    }
    if (has_internal_overlap(dst)) {
        view_fail("copy_", dst, KN_ERR_VIEW, "the destination has broadcast (stride 0) dims; writing it is ambiguous");
        return kn_last_status();
    }
    /* A source that shares dst's storage is read in full before dst is written. */
    kn_tensor *source = src->storage == dst->storage ? kn_clone(src) : kn_retain(src);
    kn_tensor *wide = source ? kn_expand(source, kn_shape_of(dst)) : NULL;
    kn_release(source);
    if (!wide) return kn_last_status();
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_copy, 1, &wide)) {
        kn_release(wide);
        return kn_last_status();
    }
    kn_release(wide);
    if (dst->storage->device.type != c.device.type || dst->storage->device.index != c.device.index) {
        kn_op_fail(&c, KN_ERR_DEVICE, "the destination is on another device; use kn_to_device first");
        return kn_last_status();
    }
    KN_ATTRS(c.node, copy)->dtype = dst->dtype; /* dst is what kn_infer_copy describes */
    c.node->out[c.node->n_out++] = kn_tensor_incref(dst);
    return kn_op_run_inplace(&c);
}
