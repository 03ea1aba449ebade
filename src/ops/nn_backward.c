/* Backward ops of the nn family (argument preparation; kernels in backends/cpu/k_nn_*.c). */
#include "ops/nn_backward.h"

#include "ops/nn_common.h"
#include "ops/ops_internal.h"

kn_status kn_norm_backward(kn_tensor *gy, kn_tensor *x, kn_tensor *weight, int64_t inner, double eps, bool rms,
                           kn_tensor **dx, kn_tensor **dweight, kn_tensor **dbias) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, rms ? KN_OP_rms_norm_backward : KN_OP_layer_norm_backward, 3,
                           (kn_tensor *[]){gy, x, weight}))
        return kn_last_status();
    if (!kn_nn_prepare_input(&c, 0, x->dtype) || !kn_nn_prepare_input(&c, 1, x->dtype)) return kn_last_status();
    if (inner <= 0 || kn_numel(x) % inner || kn_numel(gy) != kn_numel(x) ||
        (weight && (weight->ndim != 1 || weight->shape[0] != inner))) {
        kn_op_fail(&c, KN_ERR_SHAPE, "gy and x must have the same size, a multiple of inner (%lld), weight [inner]",
                   (long long)inner);
        return kn_last_status();
    }
    /* rms_norm_backward's attributes are layer_norm_backward's (op_table.c) */
    *KN_ATTRS(c.node, layer_norm_backward) = (kn_attrs_layer_norm_backward){.inner = inner, .eps = eps};
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim) || !kn_op_output(&c, x->dtype, &inner, 1) ||
        (!rms && !kn_op_output(&c, x->dtype, &inner, 1)))
        return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){dx, dweight, dbias}, rms ? 2 : 3);
}

kn_tensor *kn_conv2d_backward_weight(kn_tensor *gy, kn_tensor *x, int64_t kh, int64_t kw, const int64_t stride[2],
                                     const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_conv2d_backward_weight, 2, (kn_tensor *[]){gy, x})) return NULL;
    if (!kn_nn_prepare_input(&c, 0, x->dtype) || !kn_nn_prepare_input(&c, 1, x->dtype)) return NULL;
    if (gy->ndim != 4 || x->ndim != 4 || gy->shape[0] != x->shape[0] || groups <= 0 || x->shape[1] % groups ||
        gy->shape[1] % groups || kh <= 0 || kw <= 0)
        return kn_op_fail(&c, KN_ERR_SHAPE, "gy and x must be [N, C, H, W] with channels divisible by groups");
    kn_attrs_conv2d_backward_weight *a = KN_ATTRS(c.node, conv2d_backward_weight);
    for (int d = 0; d < 2; d++) a->stride[d] = stride[d], a->padding[d] = padding[d], a->dilation[d] = dilation[d];
    a->groups = groups;
    if (!kn_op_output(&c, x->dtype, (int64_t[]){gy->shape[1], x->shape[1] / groups, kh, kw}, 4)) return NULL;
    return kn_op_run(&c);
}
