/* How an op's API function records a node and hands it to the current mode. Every op in
 * src/ops follows the same four steps:
 *
 *     kn_opctx c;
 *     if (!kn_op_begin(&c, KN_OP_softmax, 1, &x)) return NULL;   // NULLs, devices, dtypes
 *     if (dim out of range) return kn_op_fail(&c, KN_ERR_INDEX, "dim %lld ...", dim);
 *     KN_ATTRS(c.node, softmax)->dims = KN_DIMS(d);               // the entry's attributes
 *     if (!kn_op_outputs_inferred(&c)) return NULL;               // the entry's shape rule
 *     return kn_op_run(&c);                                       // adopted into the scope
 *
 * (kn_op_outputs_inferred, ops/ops_internal.h, adds the outputs its rule describes through
 * kn_op_output.)
 * Errors name the op and its inputs' dtypes and shapes ("softmax(f32[2, 3]): ..."). */
#ifndef KILN_EXEC_DISPATCH_H
#define KILN_EXEC_DISPATCH_H

#include "backends/backend.h"
#include "core/error.h"
#include "graph/node.h"

typedef struct kn_opctx {
    kn_node *node;
    kn_device device;
    kn_backend *backend;
    bool defer; /* outputs get deferred storage (the mode's scheduler realizes them at launch) */
} kn_opctx;

/* Starts recording op with n_in inputs (any may be a view). Fails if an input is NULL (the
 * first error is kept), inputs are on different devices, or a dtype is not in the op's
 * table entry. Creation ops pass n_in = 0 and get the default device (see kn_op_begin_on). */
bool kn_op_begin(kn_opctx *c, kn_op_id op, int n_in, kn_tensor *const *in);
bool kn_op_begin_on(kn_opctx *c, kn_op_id op, int n_in, kn_tensor *const *in, kn_device device);
/* Replaces input i (the node takes its own reference to t; t stays the caller's). */
void kn_op_set_input(kn_opctx *c, int i, kn_tensor *t);
/* Records an error naming the op and its inputs, frees the node, returns NULL. */
void *kn_op_fail(kn_opctx *c, kn_status code, const char *fmt, ...) KN_PRINTF(3, 4);
/* Adds a fresh output; NULL on allocation failure (the node is freed then). */
kn_tensor *kn_op_output(kn_opctx *c, kn_dtype dtype, const int64_t *shape, int ndim);
/* Runs the interposers on the node (exec/interpose.h), hands it to the current mode's scheduler
 * (exec/scheduler.h) and returns output 0, adopted into the current scope. For several outputs, kn_op_run_multi fills outs[0..n_out-1]. NULL/error on failure
 * (debug mode reports kernel errors and NaN/Inf here; strict mode at the next sync). */
kn_tensor *kn_op_run(kn_opctx *c);
kn_status kn_op_run_multi(kn_opctx *c, kn_tensor **outs);
/* Submits an op whose outputs are all existing tensors updated in place (kn_op_output is
 * not called; the caller put incref'd tensors in node->out): the interposers see the writes
 * (autograd bumps versions), and nothing is handed out, so the tensors' owners are untouched. */
kn_status kn_op_run_inplace(kn_opctx *c);
/* kn_op_run_multi for ops whose n outputs the caller may not all want: output i goes to *dst[i],
 * or is released where dst[i] is NULL. */
kn_status kn_op_run_to(kn_opctx *c, kn_tensor **const *dst, int n);
/* The same hand-out, for n outputs already run (NULL outputs are skipped). */
void kn_hand_outputs(kn_tensor *const *outs, kn_tensor **const *dst, int n);

/* Helpers for argument checks, each failing through kn_op_fail. */
bool kn_op_dim(kn_opctx *c, int64_t dim, int ndim, int64_t *out);   /* wraps negative dims */

/* Runs a node's kernel on the calling thread (stream tasks, ops that run on the host). */
kn_status kn_node_execute(kn_backend *b, kn_node *n);
/* Queues n on n->stream; the node is consumed (released on the host once it has run). */
void kn_node_launch(kn_node *n);
/* The same, then waits for n->stream: its error, with the host's call site (debug mode). */
kn_status kn_node_run_now(kn_node *n);

#endif
