/* The tensor and storage structs, shared by the core, the ops and the backends. */
#ifndef KILN_CORE_TENSOR_IMPL_H
#define KILN_CORE_TENSOR_IMPL_H

#include <stdatomic.h>

#include "kiln/tensor.h"

struct kn_backend;
struct kn_scope;
struct kn_ag_meta;

/* A block of device memory. It belongs to one device; code above the backends never reads
 * `data` itself (DESIGN.md) — the kernels do, on the device's stream. */
typedef struct kn_storage {
    atomic_int refs;
    kn_device device;
    struct kn_backend *backend;
    void *data;     /* NULL for zero bytes and on the meta device */
    size_t bytes;
    void *block;    /* the allocator's handle */
    /* A value not realized yet: no memory until the node that writes it is launched
     * (kn_storage_realize). A storage freed unrealized never took any (fused mode's
     * intermediates that no one can see). */
    bool deferred;
    /* Memory kiln did not allocate (a mapped file): released by calling release(release_ctx)
     * instead of the allocator. NULL for allocator blocks. */
    void (*release)(void *ctx);
    void *release_ctx;
    atomic_uint version; /* bumped by every in-place write, so autograd can refuse stale saves */
    /* A leaf's .grad took this memory over, or a caller passed it as backward's seed: a later
     * gradient in it becomes a leaf's .grad only as a copy (autograd/engine.c). */
    atomic_bool grad_taken;
} kn_storage;

struct kn_tensor {
    atomic_int refs;
    kn_storage *storage;
    int64_t offset; /* in elements */
    int ndim;
    int64_t shape[KN_MAX_DIMS];
    int64_t stride[KN_MAX_DIMS];
    kn_dtype dtype;
    /* Scope bookkeeping: the scope that owns one reference, and where in it. */
    struct kn_scope *scope;
    int64_t scope_slot;
    /* Autograd state (src/autograd): NULL for tensors that never required grad. Shared by
     * the handles kn_retain makes, not by views. */
    struct kn_ag_meta *ag;
};

/* A new tensor header over `storage` (whose reference it takes over). */
kn_tensor *kn_tensor_wrap(kn_storage *storage, kn_dtype dtype, const int64_t *shape, int ndim,
                          const int64_t *stride, int64_t offset);
/* A new contiguous tensor with fresh storage on `device`; NULL (and an error naming op) on failure. */
kn_tensor *kn_tensor_alloc(const char *op, kn_dtype dtype, const int64_t *shape, int ndim,
                           kn_device device);
/* The same over a deferred storage (kn_storage_new_deferred). */
kn_tensor *kn_tensor_alloc_deferred(const char *op, kn_dtype dtype, const int64_t *shape, int ndim,
                                    kn_device device);
/* A view of t: same storage, new shape/strides/offset. */
kn_tensor *kn_tensor_view_of(const kn_tensor *t, const int64_t *shape, int ndim,
                             const int64_t *stride, int64_t offset);
/* Same storage, dtype, offset, shape and strides: the same elements in the same order. */
bool kn_tensor_same_view(const kn_tensor *a, const kn_tensor *b);
void kn_contiguous_strides(const int64_t *shape, int ndim, int64_t *stride);
bool kn_tensor_is_contiguous(const kn_tensor *t);
/* Element pointer of the first element (offset applied). Backends only. */
static inline void *kn_tensor_data(const kn_tensor *t) {
    return t->storage->data ? (char *)t->storage->data + t->offset * (int64_t)kn_dtype_size(t->dtype)
                            : NULL;
}

kn_storage *kn_storage_new(const char *op, kn_device device, size_t bytes);
/* The same, with its memory deferred: kn_storage_realize allocates it. */
kn_storage *kn_storage_new_deferred(const char *op, kn_device device, size_t bytes);
/* Gives a deferred storage its memory (a no-op for one that has it); an error naming op. */
kn_status kn_storage_realize(kn_storage *s, const char *op);
/* A storage over `bytes` of memory at data that kiln does not own (a file mapping on the CPU);
 * release(ctx) runs when the last reference goes, after every kernel that used it (nodes hold
 * references). On failure release(ctx) has already run. */
kn_storage *kn_storage_external(kn_device device, void *data, size_t bytes, void (*release)(void *ctx), void *ctx);
/* Gives a deferred storage its memory inside arena (a storage with memory on the same device)
 * at byte offset, holding a reference to the arena until its own last reference goes: a
 * compiled program's planned intermediates (exec/compiled.c). A no-op for one that has memory. */
void kn_storage_realize_in(kn_storage *s, kn_storage *arena, size_t offset);
void kn_storage_retain(kn_storage *s);
void kn_storage_release(kn_storage *s);

/* Registers a new reference with the current scope, if any. Returns t. */
kn_tensor *kn_scope_adopt(kn_tensor *t);
/* Internal references (nodes, kernels): the same handle, never owned by a scope. */
kn_tensor *kn_tensor_incref(kn_tensor *t);
/* Drops one reference without touching scopes (for internal holders such as nodes). */
void kn_tensor_decref(kn_tensor *t);
/* Drops one reference unless it is t's last (which stays the caller's): whether it did. Safe on
 * any thread, since it never frees. */
bool kn_tensor_decref_unless_last(kn_tensor *t);

#endif
