/* The FLOP formulas of the op table: what the meta backend's trace counts per node. */
#include "ops/op_table.h"

double kn_op_flops(kn_op_id op, kn_tensor *const *in, int n_in, const kn_tensor *out) {
    double out_numel = out ? (double)kn_numel(out) : 0;
    const kn_tensor *a = n_in ? in[0] : NULL, *w = n_in > 1 ? in[1] : NULL;
    switch (op) {
    case KN_OP_matmul: return 2.0 * out_numel * (double)a->shape[a->ndim - 1];
    case KN_OP_conv2d: /* weight [C_out, C_in/groups, KH, KW]: one product per weight tap */
        return 2.0 * out_numel * (double)(kn_numel(w) / w->shape[0]);
    case KN_OP_conv_transpose2d: /* weight [C_in, C_out/groups, KH, KW], scattered per input */
        return 2.0 * (double)kn_numel(a) * (double)(kn_numel(w) / w->shape[0]);
    case KN_OP_conv2d_backward_weight: /* dweight [C_out, C_in/groups, KH, KW]: one product per tap of gy */
        return 2.0 * (double)kn_numel(a) * (double)(kn_numel(out) / out->shape[0]);
    case KN_OP_scaled_dot_product_attention: { /* q k^T, then p v, over Tk keys */
        double tk = (double)in[1]->shape[in[1]->ndim - 2];
        return 2.0 * tk * ((double)kn_numel(a) + out_numel);
    }
    case KN_OP_scaled_dot_product_attention_backward: { /* q k^T again, then dv, dp, dq, dk */
        double tk = (double)in[1]->shape[in[1]->ndim - 2];
        return 2.0 * tk * (3.0 * (double)kn_numel(a) + 2.0 * (double)kn_numel(in[3]));
    }
    default: break;
    }
    double in_numel = n_in ? (double)kn_numel(in[0]) : 0;
    return in_numel > out_numel ? in_numel : out_numel;
}
