/* The backend interface (DESIGN.md): one struct of function pointers per device type. A new
 * backend is one folder that fills it; nothing above this header changes. */
#ifndef KILN_BACKENDS_BACKEND_H
#define KILN_BACKENDS_BACKEND_H

#include "kiln/runtime.h"
#include "graph/fused_ir.h"
#include "ops/op_table.h"

/* Runs one node on the device. Called on the device's stream; returns an error (with the
 * message set) for data-dependent failures such as an index out of range. */
typedef kn_status (*kn_kernel_fn)(kn_node *n);

typedef struct kn_kernel_entry {
    kn_kernel_fn fn;
    uint32_t dtypes; /* dtypes (of the node's key dtype, see kn_node_key_dtype) it handles */
} kn_kernel_entry;

/* A family's kernels, registered into a backend's table at start-up. */
typedef struct kn_kernel_reg {
    kn_op_id op;
    kn_kernel_fn fn;
    uint32_t dtypes;
} kn_kernel_reg;

typedef struct kn_backend {
    const char *name;
    kn_device_type type;
    bool holds_values; /* false for meta: storages have no memory */

    kn_status (*init)(struct kn_backend *b);
    bool (*available)(int index);

    /* Memory, through the device's caching allocator. `block` is the allocator's handle. */
    kn_status (*alloc)(int index, size_t bytes, void **data, void **block);
    void (*free)(int index, void *block);
    void (*memory_stats)(int index, kn_memory_stats *out);
    void (*memory_reset_peak)(int index);
    void (*empty_cache)(int index);

    /* Host transfers, ordered with the stream's work. copy_from_host takes its own copy of
     * src before returning; copy_to_host waits for the work that produces src. */
    kn_status (*copy_from_host)(kn_storage *dst, size_t dst_offset, const void *src, size_t bytes);
    kn_status (*copy_to_host)(void *dst, kn_storage *src, size_t src_offset, size_t bytes);

    /* Stream: queue a node (the backend runs it in order and then frees it), and wait for
     * everything queued, returning the first asynchronous error. */
    void (*launch)(kn_node *n);
    kn_status (*sync)(void);

    /* Generated code (fused mode): kernels for n kernel IRs, generated, compiled through the
     * compilation cache and loaded; they run as `fused` nodes through kernels[KN_OP_fused].
     * NULL for a backend that generates no code (its nodes then run one by one). */
    kn_status (*compile_fused)(const struct kn_fused_ir *const *irs, int n, kn_fused_fn *fns);

    /* Custom ops with a source kernel (src/ops/custom.c): makes op id's kernel for dtype ready
     * (compiling it through the cache) before a call is recorded, so that a compile error is
     * the call's. NULL for a backend that cannot run source kernels. */
    kn_status (*custom_prepare)(int id, kn_dtype dtype);

    /* Prebuilt kernels, indexed by op. */
    kn_kernel_entry kernels[KN_OP_COUNT];
} kn_backend;

/* The backend for a device type (NULL if none is built in). */
kn_backend *kn_backend_for(kn_device_type type);
/* The same, initialized; NULL with an error if the device is not available. */
kn_backend *kn_backend_get(kn_device device);
void kn_backend_register_kernels(kn_backend *b, const kn_kernel_reg *regs);

extern kn_backend kn_cpu_backend;
extern kn_backend kn_meta_backend;

#endif
