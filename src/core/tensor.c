/* Tensor and storage lifetimes, metadata accessors, and host transfers. */
#include <stdlib.h>
#include <string.h>

#include "core/backend_device.h"
#include "core/error.h"
#include "core/hooks.h"
#include "core/recycler.h"
#include "core/runtime_impl.h"
#include "core/tensor_impl.h"

/* ---- storage ------------------------------------------------------------------------------ */

static kn_recycler storage_headers = KN_RECYCLER_INIT(0, kn_storage);
static kn_recycler tensor_headers = KN_RECYCLER_INIT(1, kn_tensor);

/* A recycled header as a fresh storage of one reference; data and release are NULL for an
 * allocation of the backend's own (the allocator fills data and block). */
static void storage_header_init(kn_storage *s, kn_device device, kn_backend *b, size_t bytes, void *data,
                                void (*release)(void *ctx), void *ctx) {
    atomic_init(&s->refs, 1);
    s->device = device;
    s->backend = b;
    s->bytes = bytes;
    s->data = data;
    s->block = NULL;
    s->deferred = false;
    s->release = release;
    s->release_ctx = ctx;
    atomic_init(&s->version, 0);
    atomic_init(&s->grad_taken, false);
}

kn_storage *kn_storage_new_deferred(const char *op, kn_device device, size_t bytes) {
    kn_backend *b = kn_backend_get(device);
    if (!b) return NULL;
    kn_storage *s = kn_recycler_get(&storage_headers);
    if (!s) return kn_error_null(KN_ERR_OOM, "%s: out of host memory for a storage header", op);
    storage_header_init(s, device, b, bytes, NULL, NULL, NULL);
    s->deferred = true;
    return s;
}

kn_status kn_storage_realize(kn_storage *s, const char *op) {
    if (!s->deferred) return KN_OK;
    if (s->backend->alloc(s->device.index, s->bytes, &s->data, &s->block) != KN_OK)
        return kn_error(KN_ERR_OOM, "%s: allocating %zu bytes on %s:%d failed", op, s->bytes,
                        kn_device_type_name(s->device.type), s->device.index);
    s->deferred = false;
    return KN_OK;
}

kn_storage *kn_storage_new(const char *op, kn_device device, size_t bytes) {
    kn_storage *s = kn_storage_new_deferred(op, device, bytes);
    if (s && kn_storage_realize(s, op) != KN_OK) {
        kn_recycler_put(&storage_headers, s);
        return NULL;
    }
    return s;
}

kn_storage *kn_storage_external(kn_device device, void *data, size_t bytes, void (*release)(void *ctx), void *ctx) {
    kn_backend *b = kn_backend_get(device);
    kn_storage *s = b ? kn_recycler_get(&storage_headers) : NULL;
    if (!s) {
        release(ctx);
        return b ? kn_error_null(KN_ERR_OOM, "out of host memory for a storage header") : NULL;
    }
    storage_header_init(s, device, b, bytes, data, release, ctx);
    return s;
}

static void release_arena(void *arena) { kn_storage_release(arena); }

void kn_storage_realize_in(kn_storage *s, kn_storage *arena, size_t offset) {
    if (!s->deferred) return;
    kn_storage_retain(arena);
    s->data = (char *)arena->data + offset;
    s->release = release_arena;
    s->release_ctx = arena;
    s->deferred = false;
}

void kn_storage_retain(kn_storage *s) { atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed); }

void kn_storage_release(kn_storage *s) {
    if (!s || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1) return;
    /* Safe without waiting, on any stream: every node that used the block held this storage
     * until it had run (docs/decisions.md, "Streams, events and node lifetime"). */
    if (s->release) s->release(s->release_ctx);
    else if (!s->deferred) s->backend->free(s->device.index, s->block);
    kn_recycler_put(&storage_headers, s);
}

/* ---- tensors ------------------------------------------------------------------------------ */

void kn_contiguous_strides(const int64_t *shape, int ndim, int64_t *stride) {
    int64_t acc = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        stride[d] = acc;
        /* shapes whose non-zero dims multiply past int64 are refused where tensors are made
         * (shape_bytes); a view of an empty tensor may still ask, and saturates */
        if (__builtin_mul_overflow(acc, shape[d] > 0 ? shape[d] : 1, &acc)) acc = INT64_MAX;
    }
}

kn_tensor *kn_tensor_wrap(kn_storage *storage, kn_dtype dtype, const int64_t *shape, int ndim,
                          const int64_t *stride, int64_t offset) {
    kn_tensor *t = kn_recycler_get(&tensor_headers);
    if (!t) {
        kn_storage_release(storage);
        return kn_error_null(KN_ERR_OOM, "out of host memory for a tensor header");
    }
    atomic_init(&t->refs, 1);
    t->storage = storage;
    t->offset = offset;
    t->ndim = ndim;
    t->dtype = dtype;
    t->scope = NULL;
    t->scope_slot = -1;
    t->ag = NULL;
    for (int d = 0; d < ndim; d++) {
        t->shape[d] = shape[d];
        t->stride[d] = stride[d];
    }
    return t;
}

static bool shape_bytes(const char *op, kn_dtype dtype, const int64_t *shape, int ndim, size_t *bytes) {
    if (ndim < 0 || ndim > KN_MAX_DIMS) {
        kn_error(KN_ERR_SHAPE, "%s: %d dims requested; kiln tensors have at most %d", op, ndim, KN_MAX_DIMS);
        return false;
    }
    uint64_t n = kn_dtype_size(dtype);
    int64_t strided = 1; /* the product of the non-zero dims: the largest stride */
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 0) {
            kn_error(KN_ERR_SHAPE, "%s: negative size %lld in dim %d", op, (long long)shape[d], d);
            return false;
        }
        if (shape[d] && __builtin_mul_overflow(strided, shape[d], &strided)) {
            kn_error(KN_ERR_SHAPE, "%s: the non-zero sizes of a %d-dim shape multiply past 2^63 (size %lld in dim %d)",
                     op, ndim, (long long)shape[d], d);
            return false;
        }
        if (shape[d] && n > (UINT64_MAX >> 2) / (uint64_t)shape[d]) {
            kn_error(KN_ERR_OOM, "%s: a %s tensor of this shape would not fit in memory", op,
                     kn_dtype_name(dtype));
            return false;
        }
        n *= (uint64_t)shape[d];
    }
    *bytes = (size_t)n;
    return true;
}

static kn_tensor *tensor_alloc(const char *op, kn_dtype dtype, const int64_t *shape, int ndim, kn_device device,
                               bool deferred) {
    size_t bytes;
    if (!kn_dtype_valid(dtype)) return kn_error_null(KN_ERR_DTYPE, "%s: invalid dtype %d", op, (int)dtype);
    if (!shape_bytes(op, dtype, shape, ndim, &bytes)) return NULL;
    kn_storage *s = deferred ? kn_storage_new_deferred(op, device, bytes) : kn_storage_new(op, device, bytes);
    if (!s) return NULL;
    int64_t stride[KN_MAX_DIMS];
    kn_contiguous_strides(shape, ndim, stride);
    return kn_tensor_wrap(s, dtype, shape, ndim, stride, 0);
}

kn_tensor *kn_tensor_alloc(const char *op, kn_dtype dtype, const int64_t *shape, int ndim, kn_device device) {
    return tensor_alloc(op, dtype, shape, ndim, device, false);
}

kn_tensor *kn_tensor_alloc_deferred(const char *op, kn_dtype dtype, const int64_t *shape, int ndim,
                                    kn_device device) {
    return tensor_alloc(op, dtype, shape, ndim, device, true);
}

kn_tensor *kn_tensor_view_of(const kn_tensor *t, const int64_t *shape, int ndim, const int64_t *stride,
                             int64_t offset) {
    kn_storage_retain(t->storage);
    return kn_tensor_wrap(t->storage, t->dtype, shape, ndim, stride, offset);
}

bool kn_tensor_same_view(const kn_tensor *a, const kn_tensor *b) {
    if (a == b) return true;
    if (a->storage != b->storage || a->offset != b->offset || a->ndim != b->ndim || a->dtype != b->dtype) return false;
    for (int d = 0; d < a->ndim; d++)
        if (a->shape[d] != b->shape[d] || a->stride[d] != b->stride[d]) return false;
    return true;
}

bool kn_tensor_is_contiguous(const kn_tensor *t) {
    int64_t acc = 1;
    for (int d = t->ndim - 1; d >= 0; d--) {
        if (t->shape[d] == 1) continue;
        if (t->shape[d] == 0) return true;
        if (t->stride[d] != acc) return false;
        acc *= t->shape[d];
    }
    return true;
}

/* A new handle, so that each handle has one owner (a scope or the caller) and kn_release
 * always knows which reference it drops. */
kn_tensor *kn_retain(kn_tensor *t) {
    if (!t) return NULL;
    kn_tensor *r = kn_tensor_view_of(t, t->shape, t->ndim, t->stride, t->offset);
    if (r && t->ag) r->ag = kn_hooks.ag_share(t->ag);
    return r;
}

kn_tensor *kn_tensor_incref(kn_tensor *t) {
    atomic_fetch_add_explicit(&t->refs, 1, memory_order_relaxed);
    return t;
}

void kn_tensor_decref(kn_tensor *t) {
    if (!t || atomic_fetch_sub_explicit(&t->refs, 1, memory_order_acq_rel) != 1) return;
    if (t->ag) kn_hooks.ag_release(t->ag);
    kn_storage_release(t->storage);
    kn_recycler_put(&tensor_headers, t);
}

bool kn_tensor_decref_unless_last(kn_tensor *t) {
    int refs = atomic_load_explicit(&t->refs, memory_order_relaxed);
    while (refs > 1)
        if (atomic_compare_exchange_weak_explicit(&t->refs, &refs, refs - 1, memory_order_acq_rel, memory_order_relaxed))
            return true;
    return false;
}

/* ---- metadata ------------------------------------------------------------------------------ */

int kn_ndim(const kn_tensor *t) { return t ? t->ndim : -1; }

int64_t kn_size(const kn_tensor *t, int64_t dim) {
    if (!t) return -1;
    if (dim < 0) dim += t->ndim;
    return dim >= 0 && dim < t->ndim ? t->shape[dim] : -1;
}

int64_t kn_stride(const kn_tensor *t, int64_t dim) {
    if (!t) return 0;
    if (dim < 0) dim += t->ndim;
    return dim >= 0 && dim < t->ndim ? t->stride[dim] : 0;
}

kn_shape kn_shape_of(const kn_tensor *t) {
    kn_shape s = {0};
    if (!t) return s;
    s.n = t->ndim;
    memcpy(s.v, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    return s;
}

kn_shape kn_strides_of(const kn_tensor *t) {
    kn_shape s = {0};
    if (!t) return s;
    s.n = t->ndim;
    memcpy(s.v, t->stride, sizeof(int64_t) * (size_t)t->ndim);
    return s;
}

int64_t kn_shape_numel(kn_shape s) {
    int64_t n = 1;
    for (int d = 0; d < s.n; d++) n *= s.v[d];
    return n;
}

int64_t kn_offset(const kn_tensor *t) { return t ? t->offset : 0; }
int64_t kn_numel(const kn_tensor *t) { return t ? kn_shape_numel(kn_shape_of(t)) : 0; }
kn_dtype kn_dtype_of(const kn_tensor *t) { return t ? t->dtype : KN_DTYPE_COUNT; }
kn_device kn_device_of(const kn_tensor *t) { return t ? t->storage->device : KN_CPU; }
bool kn_is_contiguous(const kn_tensor *t) { return t && kn_tensor_is_contiguous(t); }
bool kn_shares_storage(const kn_tensor *a, const kn_tensor *b) { return a && b && a->storage == b->storage; }

/* ---- host transfers ------------------------------------------------------------------------ */

kn_tensor *kn_from_host(const void *data, kn_dtype dtype, kn_shape shape, kn_device device) {
    if (!kn_runtime_ready()) return NULL;
    if (!data && kn_shape_numel(shape) > 0) return kn_error_null(KN_ERR_NULL, "from_host: data is NULL");
    kn_tensor *t = kn_tensor_alloc("from_host", dtype, shape.v, shape.n, device);
    if (!t) return NULL;
    size_t bytes = t->storage->bytes;
    if (bytes && t->storage->backend->holds_values &&
        t->storage->backend->copy_from_host(kn_stream_of(device), t->storage, 0, data, bytes) != KN_OK) {
        kn_tensor_decref(t);
        return NULL;
    }
    return kn_scope_adopt(t);
}

/* Copies a strided view's elements, row-major, from src (its storage's bytes starting at the
 * view's first element) to dst. */
static void gather(char *dst, const char *src, const kn_tensor *t, size_t es) {
    int64_t idx[KN_MAX_DIMS] = {0}, at = 0, n = kn_numel(t);
    for (int64_t i = 0; i < n; i++) {
        memcpy(dst + (size_t)i * es, src + at * (int64_t)es, es);
        for (int d = t->ndim - 1; d >= 0; d--) {
            at += t->stride[d];
            if (++idx[d] < t->shape[d]) break;
            at -= t->stride[d] * t->shape[d];
            idx[d] = 0;
        }
    }
}

kn_status kn_to_host(kn_tensor *t, void *dst, size_t dst_bytes) {
    if (!t) {
        kn_error_null_input("to_host", 0);
        return kn_last_status();
    }
    if (!dst && kn_numel(t) > 0) return kn_error(KN_ERR_NULL, "to_host: destination is NULL");
    char desc[96];
    size_t es = kn_dtype_size(t->dtype), need = (size_t)kn_numel(t) * es;
    if (dst_bytes < need)
        return kn_error(KN_ERR_ARG, "to_host: %s needs %zu bytes, the buffer has %zu",
                        kn_describe(t, desc, sizeof desc), need, dst_bytes);
    kn_storage *s = t->storage;
    if (!s->backend->holds_values)
        return kn_error(KN_ERR_DEVICE, "to_host: %s is on the %s device, which holds shapes but no values",
                        kn_describe(t, desc, sizeof desc), s->backend->name);
    if (need == 0) return kn_sync();
    kn_status st = kn_realize_pending(t); /* the work that makes t may not have been launched */
    /* whichever stream made the values; errors are the current stream's */
    if (st == KN_OK) st = kn_device_sync(s->device);
    if (st != KN_OK) return st;
    if (kn_tensor_is_contiguous(t)) return s->backend->copy_to_host(kn_stream_of(s->device), dst, s, (size_t)t->offset * es, need);
    /* A strided view: the storage range it spans comes over, and is gathered here. */
    int64_t lo = t->offset, hi = t->offset;
    for (int d = 0; d < t->ndim; d++) {
        int64_t reach = (t->shape[d] - 1) * t->stride[d];
        if (reach < 0) lo += reach;
        else hi += reach;
    }
    size_t span = (size_t)(hi - lo + 1) * es;
    char *staging = malloc(span);
    if (!staging)
        return kn_error(KN_ERR_OOM, "to_host: out of host memory staging %zu bytes of %s", span,
                        kn_describe(t, desc, sizeof desc));
    st = s->backend->copy_to_host(kn_stream_of(s->device), staging, s, (size_t)lo * es, span);
    if (st == KN_OK) gather(dst, staging + (t->offset - lo) * (int64_t)es, t, es);
    free(staging);
    return st;
}

char *kn_describe(const kn_tensor *t, char *buf, size_t n) {
    if (!t) {
        snprintf(buf, n, "NULL");
        return buf;
    }
    size_t len = (size_t)snprintf(buf, n, "%s[", kn_dtype_name(t->dtype));
    for (int d = 0; d < t->ndim && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, d ? ", %lld" : "%lld", (long long)t->shape[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}
