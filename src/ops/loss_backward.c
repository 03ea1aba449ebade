/* The loss family's backward ops (defs/loss.def), recorded for the gradient formulas of
 * grad_loss.c and grad_attention.c. Their inputs come from saved forward nodes, so the
 * checks here are only the dispatcher's. */
#include "core/runtime_impl.h"
#include "kiln/ops.h"
#include "ops/loss_internal.h"

kn_tensor *kn_cross_entropy_backward(kn_tensor *scores, kn_tensor *target, kn_tensor *weight, kn_tensor *g,
                                     const kn_attrs_cross_entropy *a, bool nll) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_cross_entropy_backward, 4, (kn_tensor *[]){scores, target, g, weight}))
        return NULL;
    *KN_ATTRS(c.node, cross_entropy_backward) = (kn_attrs_cross_entropy_backward){
        .reduction = a->reduction, .ignore_index = a->ignore_index, .probs = a->probs,
        .label_smoothing = a->label_smoothing, .nll = nll};
    if (!kn_op_output(&c, scores->dtype, scores->shape, scores->ndim)) return NULL;
    return kn_op_run(&c);
}

kn_status kn_sdpa_backward(kn_tensor *const in[7], const kn_attrs_scaled_dot_product_attention *a, uint64_t seed,
                           uint64_t offset, kn_tensor **dq, kn_tensor **dk, kn_tensor **dv, kn_tensor **dmask) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_scaled_dot_product_attention_backward, 7, in)) return kn_last_status();
    *KN_ATTRS(c.node, scaled_dot_product_attention_backward) = (kn_attrs_scaled_dot_product_attention_backward){
        .causal = a->causal, .causal_align = a->causal_align, .scale = a->scale, .dropout_p = a->dropout_p,
        .mask_grad = dmask != NULL};
    c.node->rng_seed = seed, c.node->rng_offset = offset;
    kn_dtype compute = in[0]->dtype == KN_F64 ? KN_F64 : KN_F32;
    int n_out = dmask ? 4 : 3;
    for (int i = 0; i < n_out; i++) {
        kn_tensor *like = i < 3 ? in[i] : in[6];
        if (!kn_op_output(&c, compute, like->shape, like->ndim)) return kn_last_status();
    }
    return kn_op_run_to(&c, (kn_tensor **const[]){dq, dk, dv, dmask}, n_out);
}

kn_tensor *kn_dropout_replay(kn_tensor *x, double p, uint64_t seed, uint64_t offset) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_dropout, 1, &x)) return NULL;
    KN_ATTRS(c.node, dropout)->p = p;
    c.node->rng_seed = seed, c.node->rng_offset = offset;
    if (!kn_op_output(&c, x->dtype, x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}
