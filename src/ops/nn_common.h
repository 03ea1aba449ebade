/* Helpers the nn API functions share (src/ops/nn*.c). */
#ifndef KILN_OPS_NN_COMMON_H
#define KILN_OPS_NN_COMMON_H

#include "exec/dispatch.h"
#include "kiln/ops.h"

/* Starts recording op on its declared input slots (x first; optional ones may be NULL, see
 * kn_op_begin_slots). x becomes contiguous. */
bool kn_nn_begin(kn_opctx *c, kn_op_id op, int n_slots, kn_tensor *const *slots);
/* In a shape rule: t must be 1-d of size n (named `what`), else KN_ERR_SHAPE with the reason
 * in why. NULL passes. */
kn_status kn_nn_vector_why(const kn_tensor *t, int64_t n, const char *what, char *why, size_t why_size);
/* Replaces input i with a contiguous copy of it in dtype (no copy when it already is). */
bool kn_nn_prepare_input(kn_opctx *c, int i, kn_dtype dtype);

#endif
