/* Normalization ops: layer_norm, rms_norm, group_norm, batch_norm (argument checks). */
#include "ops/nn_common.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* layer_norm, rms_norm: x's trailing dims hold `inner` elements, weight and bias (if given)
 * have those trailing dims' shape; out[0] like x. */
KN_RULE(kn_infer_trailing_norm) {
    const kn_tensor *x = in[0];
    int64_t inner = at->layer_norm.inner; /* rms_norm's attributes are layer_norm's (op_table.c) */
    for (int k = 1; k < n_in; k++) {
        const kn_tensor *p = in[k];
        bool same = p->ndim >= 1 && p->ndim <= x->ndim && kn_numel(p) == inner;
        for (int d = 0; same && d < p->ndim; d++) same = p->shape[d] == x->shape[x->ndim - p->ndim + d];
        bool is_bias = kn_input_pos(at, KN_SLOT(layer_norm, bias)) == k;
        if (!same) KN_RULE_FAIL(KN_ERR_SHAPE, "%s must have normalized_shape", is_bias ? "bias" : "weight");
    }
    if (inner < 0 || (inner ? kn_numel(x) % inner : kn_numel(x)))
        KN_RULE_FAIL(KN_ERR_SHAPE, "x does not split into rows of inner (%lld) elements", (long long)inner);
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}


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
    for (int k = 0; k < 2; k++) /* the rule sees trailing dims; normalized_shape may have fewer leading 1s */
        if (params[k] && params[k]->ndim != ns.n)
            return kn_op_fail(&c, KN_ERR_SHAPE, "%s must have normalized_shape", k ? "bias" : "weight");
    /* rms_norm's attributes are layer_norm's (op_table.c) */
    *KN_ATTRS(c.node, layer_norm) = (kn_attrs_layer_norm){.inner = inner, .eps = eps};
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_layer_norm(kn_tensor *x, kn_shape normalized_shape, kn_tensor *weight, kn_tensor *bias, double eps) {
    return trailing_norm(KN_OP_layer_norm, x, normalized_shape, weight, bias, eps);
}

kn_tensor *kn_rms_norm(kn_tensor *x, kn_shape normalized_shape, kn_tensor *weight, double eps) {
    return trailing_norm(KN_OP_rms_norm, x, normalized_shape, weight, NULL, eps);
}

/* Each optional input of slots [first, last] given must be [C] (named by its slot). */
static kn_status channel_vectors(kn_op_id op, kn_tensor *const *in, const kn_attrs *at, int first, int last,
                                 int64_t C, char *why, size_t why_size) {
    const kn_param *p = kn_op_params(op);
    for (int s = first; s <= last; s++) {
        kn_status st = kn_nn_vector_why(kn_input_at(in, at, s), C, p[s].name, why, why_size);
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

/* group_norm: x [N, C, *], groups dividing C, weight and bias [C]; out[0] like x. */
KN_RULE(kn_infer_group_norm) {
    const kn_tensor *x = in[0];
    if (x->ndim < 2) KN_RULE_FAIL(KN_ERR_SHAPE, "x must be [N, C, *]");
    int64_t C = x->shape[1], groups = at->group_norm.groups;
    if (groups <= 0 || C % groups)
        KN_RULE_FAIL(KN_ERR_ARG, "groups (%lld) must be positive and divide the %lld channels", (long long)groups,
                     (long long)C);
    kn_status st = channel_vectors(op, in, at, KN_SLOT(group_norm, weight), KN_SLOT(group_norm, bias), C, why, why_size);
    return st != KN_OK ? st : kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

kn_tensor *kn_group_norm(kn_tensor *x, int64_t groups, kn_tensor *weight, kn_tensor *bias, double eps) {
    kn_opctx c;
    if (!kn_nn_begin(&c, KN_OP_group_norm, 3, (kn_tensor *[]){x, weight, bias})) return NULL;
    *KN_ATTRS(c.node, group_norm) = (kn_attrs_group_norm){.groups = groups, .eps = eps};
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

/* batch_norm: x [N, C, *], the running stats together (required for inference), every vector
 * [C]; out[0] like x, then in training the running stats, updated in place. */
KN_RULE(kn_infer_batch_norm) {
    const kn_tensor *x = in[0];
    const kn_attrs_batch_norm *a = &at->batch_norm;
    int mean_slot = KN_SLOT(batch_norm, running_mean), var_slot = KN_SLOT(batch_norm, running_var);
    bool has_mean = kn_input_pos(at, mean_slot) >= 0, has_var = kn_input_pos(at, var_slot) >= 0;
    if (x->ndim < 2) KN_RULE_FAIL(KN_ERR_SHAPE, "x must be [N, C, *]");
    int64_t C = x->shape[1], count = kn_numel(x) / (C ? C : 1);
    if (has_mean != has_var) KN_RULE_FAIL(KN_ERR_ARG, "running_mean and running_var must be given together");
    if (!a->training && !has_mean) KN_RULE_FAIL(KN_ERR_ARG, "inference needs running_mean and running_var");
    kn_status st = channel_vectors(op, in, at, mean_slot, KN_SLOT(batch_norm, bias), C, why, why_size);
    if (st != KN_OK) return st;
    if (a->training && count <= 1)
        KN_RULE_FAIL(KN_ERR_SHAPE, "training needs more than 1 value per channel (got %lld)", (long long)count);
    kn_infer_like_first(op, n_in, in, at, r, why, why_size);
    if (a->training && has_mean) {
        kn_infer_in_place(r, in, kn_input_pos(at, mean_slot));
        kn_infer_in_place(r, in, kn_input_pos(at, var_slot));
    }
    return KN_OK;
}

kn_tensor *kn_batch_norm(kn_tensor *x, kn_tensor *running_mean, kn_tensor *running_var, kn_tensor *weight,
                         kn_tensor *bias, bool training, double momentum, double eps) {
    kn_opctx c;
    if (!kn_nn_begin(&c, KN_OP_batch_norm, 5, (kn_tensor *[]){x, running_mean, running_var, weight, bias}))
        return NULL;
    *KN_ATTRS(c.node, batch_norm) = (kn_attrs_batch_norm){.training = training, .momentum = momentum, .eps = eps};
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}
