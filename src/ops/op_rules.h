/* Shape and dtype rules: the functions op table entries point to (kn_op_def.infer). Each
 * family's rules live next to its API functions; an entry names its rule as its fifth field
 * (defs/all.def), the elementwise forms name kn_infer_elementwise for themselves. Rules that
 * several families share (an output shaped like an input) are in ops/op_infer.c. */
#ifndef KILN_OPS_OP_RULES_H
#define KILN_OPS_OP_RULES_H

#include <stdio.h>

#include "core/error.h"
#include "ops/op_table.h"

/* Declares or defines rule fn with kn_infer_fn's parameters. */
#define KN_RULE(fn)                                                                                   \
    kn_status fn(kn_op_id op, int n_in, kn_tensor *const *in, const kn_attrs *at, kn_op_infer *r, \
                 char *why, size_t why_size)
/* In a rule: writes the reason to why and returns code. */
#define KN_RULE_FAIL(code, ...) return (snprintf(why, why_size, __VA_ARGS__), (code))
/* Appends an output of dtype and shape to r. */
static inline void kn_infer_out(kn_op_infer *r, kn_dtype dtype, const int64_t *shape, int ndim) {
    kn_shape *s = &r->shape[r->n_out];
    s->n = ndim;
    for (int d = 0; d < ndim; d++) s->v[d] = shape[d];
    r->in_place[r->n_out] = 0;
    r->out[r->n_out++] = dtype;
}

/* Appends input i of the rule's inputs as an output updated in place. */
static inline void kn_infer_in_place(kn_op_infer *r, kn_tensor *const *in, int i) {
    kn_infer_out(r, in[i]->dtype, in[i]->shape, in[i]->ndim);
    r->in_place[r->n_out - 1] = (uint8_t)(i + 1);
}

/* Runs op's rule with r emptied first (no outputs; compute is in[0]'s dtype unless the rule
 * says otherwise): what the dispatcher (kn_op_infer_node) and a planner
 * call. KN_ERR_INTERNAL for an op without one (a value-dependent op). */
kn_status kn_op_apply_rule(kn_op_id op, int n_in, kn_tensor *const *in, const kn_attrs *at, kn_op_infer *r,
                           char *why, size_t why_size);

/* Shared (ops/op_infer.c). */
KN_RULE(kn_infer_like_first);   /* one output: in[0]'s shape and dtype */

/* Elementwise (ops/elementwise.c): inputs broadcast together; PyTorch's result type (f32 for
 * integers where KN_OPF_INT_TO_FLOAT); bool out for KN_OPF_BOOL_OUT ops. */
KN_RULE(kn_infer_elementwise);
/* Reductions (ops/reduce.c): x's shape without (keepdim: with size 1) the normalized dims;
 * x's dtype, i64 for integer sums and products and for arg*, bool for all and any; max_dim
 * and min_dim add their i64 indices. */
KN_RULE(kn_infer_reduce);
/* Scans and softmaxes (ops/reduce.c): x's shape; cumsum and cumprod widen integers to i64. */
KN_RULE(kn_infer_scan);
/* softmax_backward, log_softmax_backward (ops/reduce.c): g's shape (y's too), f32 or f64. */
KN_RULE(kn_infer_softmax_backward);
/* matmul (ops/linalg.c): a [..., M, K] @ b [..., K, N], batch dims broadcast, promoted dtype. */
KN_RULE(kn_infer_matmul);
/* Layout (ops/layout.c, layout_reorder.c): cat along its dim (promoted dtype); pad, roll and
 * repeat to their size attribute; tril and triu like x (at least 2-d). */
KN_RULE(kn_infer_cat);
KN_RULE(kn_infer_remap);
KN_RULE(kn_infer_triangle);
/* Indexing (ops/index.c, index_mask.c): each checks its index dtypes and shapes as the API
 * function did. scatter covers scatter, scatter_value, scatter_add and scatter_reduce. */
KN_RULE(kn_infer_index_select);
KN_RULE(kn_infer_embedding);
KN_RULE(kn_infer_embedding_backward);
KN_RULE(kn_infer_gather);
KN_RULE(kn_infer_scatter);
KN_RULE(kn_infer_index_add);
KN_RULE(kn_infer_index_put);
KN_RULE(kn_infer_masked_fill);
KN_RULE(kn_infer_embedding_bag);
KN_RULE(kn_infer_sort);
KN_RULE(kn_infer_multinomial);
/* nn (ops/nn_norm.c, nn_conv.c, nn_pool.c, nn_backward.c): the checks the API functions made
 * on shapes and attributes; batch_norm's running stats are outputs updated in place. */
KN_RULE(kn_infer_trailing_norm);
KN_RULE(kn_infer_group_norm);
KN_RULE(kn_infer_batch_norm);
KN_RULE(kn_infer_conv);
KN_RULE(kn_infer_pool);
KN_RULE(kn_infer_resize);
KN_RULE(kn_infer_norm_backward);
KN_RULE(kn_infer_batch_norm_backward);
KN_RULE(kn_infer_conv2d_backward_weight);
/* Losses, dropout, attention (ops/loss.c, loss_backward.c, attention.c). class_loss is
 * cross_entropy's and nll_loss's over the node's class-last layout. */
KN_RULE(kn_infer_class_loss);
KN_RULE(kn_infer_pointwise_loss);
KN_RULE(kn_infer_dropout);
KN_RULE(kn_infer_sdpa);
KN_RULE(kn_infer_sdpa_backward);
/* Optimizer updates (ops/optim.c): operands checked against param; outputs in place. */
KN_RULE(kn_infer_optim_update);
/* Creation (ops/create.c): the shape and dtype attributes every creation op starts with;
 * copy (ops/elementwise.c): x's shape in its dtype attribute. */
KN_RULE(kn_infer_creation);
KN_RULE(kn_infer_copy);
/* Custom ops (ops/custom_infer.c): the registered op's infer callback, or the elementwise
 * rule for ops registered without one. */
KN_RULE(kn_infer_custom);

#endif
