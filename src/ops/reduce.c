/* Reductions: sum and mean. */
#include "kiln/ops.h"
#include "ops/ops_internal.h"
#include "ops/reduce_common.h"

bool kn_reduce_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim, kn_shape *out_shape) {
    if (!kn_op_begin(c, op, 1, &x)) return false;
    kn_shape reduced;
    if (!kn_normalize_dims(kn_op_name(op), dims, x->ndim, &reduced)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(c, kn_last_status(), "%s", msg) != NULL;
    }
    kn_shape out = {0};
    for (int d = 0, r = 0; d < x->ndim; d++) {
        bool is_reduced = r < reduced.n && reduced.v[r] == d;
        if (is_reduced) r++;
        if (!is_reduced) out.v[out.n++] = x->shape[d];
        else if (keepdim) out.v[out.n++] = 1;
    }
    c->node->attrs.s[0] = reduced;
    c->node->attrs.i[0] = keepdim;
    *out_shape = out;
    return true;
}

kn_tensor *kn_sum(kn_tensor *x, kn_shape dims, bool keepdim) {
    kn_opctx c;
    kn_shape shape;
    if (!kn_reduce_begin(&c, KN_OP_sum, x, dims, keepdim, &shape)) return NULL;
    kn_dtype out = kn_dtype_is_float(x->dtype) ? x->dtype : KN_I64;
    if (!kn_op_output(&c, out, shape.v, shape.n)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_mean(kn_tensor *x, kn_shape dims, bool keepdim) {
    kn_opctx c;
    kn_shape shape;
    if (!kn_reduce_begin(&c, KN_OP_mean, x, dims, keepdim, &shape)) return NULL;
    if (!kn_op_output(&c, x->dtype, shape.v, shape.n)) return NULL;
    return kn_op_run(&c);
}
