/* Normalization ops: layer_norm, rms_norm, group_norm, batch_norm (argument checks). */
#include "ops/nn_common.h"

/* The trailing dims of x must equal normalized_shape; weight/bias must have that shape. */
static kn_tensor *trailing_norm(kn_op_id op, kn_tensor *x, kn_shape ns, kn_tensor *w, kn_tensor *b, double eps) {
    kn_opctx c;
    if (!kn_nn_begin(&c, op, op == KN_OP_rms_norm ? 2 : 3, (kn_tensor *[]){x, w, b})) return NULL;
    if (ns.n < 1 || ns.n > x->ndim)
        return kn_op_fail(&c, KN_ERR_SHAPE, "normalized_shape has %d dims; x has %d", ns.n, x->ndim);
    int64_t inner = 1;
    for (int d = 0; d < ns.n; d++) {
        if (x->shape[x->ndim - ns.n + d] != ns.v[d])
            return kn_op_fail(&c, KN_ERR_SHAPE, "normalized_shape's dim %d is %lld but x's trailing size there is %lld",
                              d, (long long)ns.v[d], (long long)x->shape[x->ndim - ns.n + d]);
        inner *= ns.v[d];
    }
    kn_tensor *params[2] = {w, b};
    for (int k = 0; k < 2; k++) {
        kn_tensor *p = params[k];
        bool same = p && p->ndim == ns.n;
        for (int d = 0; same && d < ns.n; d++) same = p->shape[d] == ns.v[d];
        if (p && !same)
            return kn_op_fail(&c, KN_ERR_SHAPE, "%s must have normalized_shape", k ? "bias" : "weight");
    }
    /* rms_norm's attributes are layer_norm's (op_table.c) */
    *KN_ATTRS(c.node, layer_norm) = (kn_attrs_layer_norm){.inner = inner, .eps = eps};
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_layer_norm(kn_tensor *x, kn_shape normalized_shape, kn_tensor *weight, kn_tensor *bias, double eps) {
    return trailing_norm(KN_OP_layer_norm, x, normalized_shape, weight, bias, eps);
}

kn_tensor *kn_rms_norm(kn_tensor *x, kn_shape normalized_shape, kn_tensor *weight, double eps) {
    return trailing_norm(KN_OP_rms_norm, x, normalized_shape, weight, NULL, eps);
}

kn_tensor *kn_group_norm(kn_tensor *x, int64_t groups, kn_tensor *weight, kn_tensor *bias, double eps) {
    kn_opctx c;
    if (!kn_nn_begin(&c, KN_OP_group_norm, 3, (kn_tensor *[]){x, weight, bias})) return NULL;
    if (x->ndim < 2) return kn_op_fail(&c, KN_ERR_SHAPE, "x must be [N, C, *]");
    int64_t C = x->shape[1];
    if (groups <= 0 || C % groups)
        return kn_op_fail(&c, KN_ERR_ARG, "groups (%lld) must be positive and divide the %lld channels",
                          (long long)groups, (long long)C);
    if (!kn_nn_check_vector(&c, weight, C, "weight") || !kn_nn_check_vector(&c, bias, C, "bias")) return NULL;
    *KN_ATTRS(c.node, group_norm) = (kn_attrs_group_norm){.groups = groups, .eps = eps};
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_batch_norm(kn_tensor *x, kn_tensor *running_mean, kn_tensor *running_var, kn_tensor *weight,
                         kn_tensor *bias, bool training, double momentum, double eps) {
    kn_opctx c;
    if (!kn_nn_begin(&c, KN_OP_batch_norm, 5, (kn_tensor *[]){x, running_mean, running_var, weight, bias}))
        return NULL;
    if (x->ndim < 2) return kn_op_fail(&c, KN_ERR_SHAPE, "x must be [N, C, *]");
    int64_t C = x->shape[1], count = kn_numel(x) / (C ? C : 1);
    if (!running_mean != !running_var)
        return kn_op_fail(&c, KN_ERR_ARG, "running_mean and running_var must be given together");
    if (!training && !running_mean)
        return kn_op_fail(&c, KN_ERR_ARG, "inference needs running_mean and running_var");
    if (!kn_nn_check_vector(&c, running_mean, C, "running_mean") ||
        !kn_nn_check_vector(&c, running_var, C, "running_var") || !kn_nn_check_vector(&c, weight, C, "weight") ||
        !kn_nn_check_vector(&c, bias, C, "bias"))
        return NULL;
    if (training && count <= 1)
        return kn_op_fail(&c, KN_ERR_SHAPE, "training needs more than 1 value per channel (got %lld)",
                          (long long)count);
    *KN_ATTRS(c.node, batch_norm) = (kn_attrs_batch_norm){.training = training, .momentum = momentum, .eps = eps};
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    if (training && running_mean) {
        c.node->out[c.node->n_out++] = kn_tensor_incref(running_mean);
        c.node->out[c.node->n_out++] = kn_tensor_incref(running_var);
    }
    return kn_op_run(&c);
}
