/* The shared front half of every reduction op: dims checked and normalized into
 * KN_ATTRS(node, reduce) (sorted) with keepdim; the output then follows the table entry's
 * rule, kn_infer_reduce. */
#ifndef KILN_OPS_REDUCE_COMMON_H
#define KILN_OPS_REDUCE_COMMON_H

#include "exec/dispatch.h"

/* Starts a reduction (or scan) node of x over dims. */
bool kn_reduce_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim);

#endif
