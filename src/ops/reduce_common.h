/* The shared front half of every reduction op: dims checked and normalized, the output
 * shape computed. KN_ATTRS(node, reduce) holds the reduced dims (sorted) and keepdim. */
#ifndef KILN_OPS_REDUCE_COMMON_H
#define KILN_OPS_REDUCE_COMMON_H

#include "exec/dispatch.h"

/* Starts a reduction node of x over dims; fills *out_shape with the result's shape. */
bool kn_reduce_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim, kn_shape *out_shape);

#endif
