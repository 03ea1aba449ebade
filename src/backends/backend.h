/* The backend interface (DESIGN.md): one struct of function pointers per device type, its
 * device side (memory, streams, events, copies, the registry) in core/backend_device.h and
 * its kernel table here. A new backend is one folder that fills both; nothing above this
 * header changes. */
#ifndef KILN_BACKENDS_BACKEND_H
#define KILN_BACKENDS_BACKEND_H

#include "core/backend_device.h"
#include "graph/fused_ir.h"
#include "graph/node.h"
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

/* A backend's kernels and code generation: what runs nodes, above core's device interface
 * (core/backend_device.h), which carries it as `kernels`. Call sites read
 * `b->kernels->op[n->op]`. */
typedef struct kn_kernel_table {
    /* Generated code (fused mode): kernels for n kernel IRs, generated, compiled through the
     * compilation cache and loaded; they run as `fused` nodes through op[KN_OP_fused].
     * NULL for a backend that generates no code (its nodes then run one by one). */
    kn_status (*compile_fused)(const struct kn_fused_ir *const *irs, int n, kn_fused_fn *fns);
    /* The source compile_fused builds for irs (malloc'd; NULL with an error), for the
     * compiled mode's dumps. */
    char *(*fused_source)(const struct kn_fused_ir *const *irs, int n);

    /* Custom ops with a source kernel (src/ops/custom.c): makes op id's kernel for dtype ready
     * (compiling it through the cache) before a call is recorded, so that a compile error is
     * the call's. NULL for a backend that cannot run source kernels. */
    kn_status (*custom_prepare)(int id, kn_dtype dtype);

    /* Prebuilt kernels, indexed by op. */
    kn_kernel_entry op[KN_OP_COUNT];
} kn_kernel_table;

/* Puts a family's kernels (ended by an entry without fn) into t. */
static inline void kn_kernel_table_add(kn_kernel_table *t, const kn_kernel_reg *regs) {
    for (; regs->fn; regs++) t->op[regs->op] = (kn_kernel_entry){regs->fn, regs->dtypes};
}

/* The CPU backend (tests swap its kernels). */
extern kn_backend kn_cpu_backend;

#endif
