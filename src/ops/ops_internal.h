/* Helpers the op families share that are not public API. */
#ifndef KILN_OPS_OPS_INTERNAL_H
#define KILN_OPS_OPS_INTERNAL_H

#include "exec/dispatch.h"
#include "kiln/tensor.h"
#include "ops/op_table.h"

/* Creation on an explicit device (the public forms use the default device). */
kn_tensor *kn_full_on(kn_shape shape, double value, kn_dtype dtype, kn_device device);
kn_tensor *kn_empty_on(kn_shape shape, kn_dtype dtype, kn_device device);

/* Normalizes a list of dims against ndim: wraps negatives, sorts, rejects repeats and
 * out-of-range dims (error naming op). KN_ALL_DIMS becomes every dim. */
bool kn_normalize_dims(const char *op, kn_shape dims, int ndim, kn_shape *out);

/* PyTorch's result_type of n tensors: dimensioned operands decide unless a 0-d operand is of
 * a higher category (bool < int < float). */
kn_dtype kn_result_dtype(kn_tensor *const *in, int n);

/* Elementwise op `op` of the table over n_in (at most 3) inputs, promoted and broadcast, with
 * attributes a and b (ops/elementwise.c). */
kn_tensor *kn_elementwise(kn_op_id op, int n_in, kn_tensor *const *in, double a, double b);

/* kn_op_begin over the op's declared input slots in order, where an optional input may be
 * NULL: the node holds the given ones packed and marks the rest absent (KN_INPUT reads them). */
bool kn_op_begin_slots(kn_opctx *c, kn_op_id op, int n_slots, kn_tensor *const *slots);

/* The dispatcher-side step of every API function: runs the entry's shape and dtype rule
 * (kn_op_table[op].infer, ops/op_rules.h) on the node's inputs and attributes, failing the op
 * with the rule's reason, and adds the outputs it finds. API functions: begin, attributes,
 * kn_op_outputs_inferred, run. kn_op_infer_node and kn_op_add_outputs are its two halves,
 * for ops that prepare their inputs (casts, broadcasts) between them. */
bool kn_op_outputs_inferred(kn_opctx *c);
bool kn_op_infer_node(kn_opctx *c, kn_op_infer *r);
bool kn_op_add_outputs(kn_opctx *c, const kn_op_infer *r);

#endif
