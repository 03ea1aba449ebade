/* Backward ops of the nn family (argument preparation; kernels in backends/cpu/k_nn_*.c). */
#include "ops/nn_backward.h"

#include "ops/nn_common.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* layer_norm_backward, rms_norm_backward: gy and x of one size, a multiple of inner, weight
 * [inner]; dx like x, dweight and (layer_norm) dbias [inner]. */
KN_RULE(kn_infer_norm_backward) {
    const kn_tensor *gy = in[0], *x = in[1], *weight = kn_input_at(in, at, KN_SLOT(layer_norm_backward, weight));
    int64_t inner = at->layer_norm_backward.inner; /* rms_norm_backward's are layer_norm_backward's */
    if (inner <= 0 || kn_numel(x) % inner || kn_numel(gy) != kn_numel(x) ||
        (weight && (weight->ndim != 1 || weight->shape[0] != inner)))
        KN_RULE_FAIL(KN_ERR_SHAPE, "gy and x must have the same size, a multiple of inner (%lld), weight [inner]",
                     (long long)inner);
    kn_infer_out(r, x->dtype, x->shape, x->ndim);
    kn_infer_out(r, x->dtype, &inner, 1);
    if (op == KN_OP_layer_norm_backward) kn_infer_out(r, x->dtype, &inner, 1);
    return KN_OK;
}

kn_status kn_norm_backward(kn_tensor *gy, kn_tensor *x, kn_tensor *weight, int64_t inner, double eps, bool rms,
                           kn_tensor **dx, kn_tensor **dweight, kn_tensor **dbias) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, rms ? KN_OP_rms_norm_backward : KN_OP_layer_norm_backward, 3,
                           (kn_tensor *[]){gy, x, weight}))
        return kn_last_status();
    if (!kn_nn_prepare_input(&c, 0, x->dtype) || !kn_nn_prepare_input(&c, 1, x->dtype)) return kn_last_status();
    /* rms_norm_backward's attributes are layer_norm_backward's (op_table.c) */
    *KN_ATTRS(c.node, layer_norm_backward) = (kn_attrs_layer_norm_backward){.inner = inner, .eps = eps};
    if (!kn_op_outputs_inferred(&c)) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){dx, dweight, dbias}, rms ? 2 : 3);
}

/* batch_norm_backward: gy and x [N, C, *] of one shape, the vectors [C], running statistics
 * together and only in inference (where they are required); dx like x, dweight and dbias [C]. */
KN_RULE(kn_infer_batch_norm_backward) {
    const kn_tensor *gy = in[0], *x = in[1];
    bool same = gy->ndim == x->ndim;
    for (int d = 0; same && d < x->ndim; d++) same = gy->shape[d] == x->shape[d];
    if (x->ndim < 2 || !same) KN_RULE_FAIL(KN_ERR_SHAPE, "gy and x must be [N, C, *] of one shape");
    int64_t C = x->shape[1];
    const kn_param *p = kn_op_params(op);
    for (int s = KN_SLOT(batch_norm_backward, weight); s <= KN_SLOT(batch_norm_backward, running_var); s++) {
        kn_status st = kn_nn_vector_why(kn_input_at(in, at, s), C, p[s].name, why, why_size);
        if (st != KN_OK) return st;
    }
    bool has_mean = kn_input_pos(at, KN_SLOT(batch_norm_backward, running_mean)) >= 0;
    bool has_var = kn_input_pos(at, KN_SLOT(batch_norm_backward, running_var)) >= 0;
    if (at->batch_norm_backward.training ? has_mean || has_var : !has_mean || !has_var)
        KN_RULE_FAIL(KN_ERR_ARG, "running_mean and running_var are for inference, where both are required");
    kn_infer_out(r, x->dtype, x->shape, x->ndim);
    kn_infer_out(r, x->dtype, &C, 1);
    kn_infer_out(r, x->dtype, &C, 1);
    return KN_OK;
}

kn_status kn_batch_norm_backward(kn_tensor *gy, kn_tensor *x, kn_tensor *weight, kn_tensor *running_mean,
                                 kn_tensor *running_var, bool training, double eps, kn_tensor **dx,
                                 kn_tensor **dweight, kn_tensor **dbias) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_batch_norm_backward, 5, (kn_tensor *[]){gy, x, weight, running_mean, running_var}))
        return kn_last_status();
    if (!kn_nn_prepare_input(&c, 0, x->dtype) || !kn_nn_prepare_input(&c, 1, x->dtype)) return kn_last_status();
    *KN_ATTRS(c.node, batch_norm_backward) = (kn_attrs_batch_norm_backward){.training = training, .eps = eps};
    if (!kn_op_outputs_inferred(&c)) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){dx, dweight, dbias}, 3);
}

/* conv2d_backward_weight: gy [N, Cout, OH, OW], x [N, C, H, W], channels divisible by groups;
 * dweight [Cout, C/groups, KH, KW]. */
KN_RULE(kn_infer_conv2d_backward_weight) {
    const kn_tensor *gy = in[0], *x = in[1];
    const kn_attrs_conv2d_backward_weight *a = &at->conv2d_backward_weight;
    if (gy->ndim != 4 || x->ndim != 4 || gy->shape[0] != x->shape[0] || a->groups <= 0 || x->shape[1] % a->groups ||
        gy->shape[1] % a->groups || a->kernel[0] <= 0 || a->kernel[1] <= 0)
        KN_RULE_FAIL(KN_ERR_SHAPE, "gy and x must be [N, C, H, W] with channels divisible by groups");
    kn_infer_out(r, x->dtype, (int64_t[]){gy->shape[1], x->shape[1] / a->groups, a->kernel[0], a->kernel[1]}, 4);
    return KN_OK;
}

kn_tensor *kn_conv2d_backward_weight(kn_tensor *gy, kn_tensor *x, int64_t kh, int64_t kw, const int64_t stride[2],
                                     const int64_t padding[2], const int64_t dilation[2], int64_t groups) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_conv2d_backward_weight, 2, (kn_tensor *[]){gy, x})) return NULL;
    if (!kn_nn_prepare_input(&c, 0, x->dtype) || !kn_nn_prepare_input(&c, 1, x->dtype)) return NULL;
    kn_attrs_conv2d_backward_weight *a = KN_ATTRS(c.node, conv2d_backward_weight);
    for (int d = 0; d < 2; d++) a->stride[d] = stride[d], a->padding[d] = padding[d], a->dilation[d] = dilation[d];
    a->groups = groups;
    a->kernel[0] = kh, a->kernel[1] = kw;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}
