/* The loss family's backward ops (defs/loss.def), recorded for the gradient formulas of
 * grad_loss.c and grad_attention.c. Their inputs come from saved forward nodes, so the
 * checks here are only the dispatcher's. */
#include "core/runtime_impl.h"
#include "kiln/ops.h"
#include "ops/loss_internal.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

kn_tensor *kn_cross_entropy_backward(kn_tensor *scores, kn_tensor *target, kn_tensor *weight, kn_tensor *g,
                                     const kn_attrs_cross_entropy *a, bool nll) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_cross_entropy_backward, 4, (kn_tensor *[]){scores, target, g, weight}))
        return NULL;
    *KN_ATTRS(c.node, cross_entropy_backward) = (kn_attrs_cross_entropy_backward){
        .reduction = a->reduction, .ignore_index = a->ignore_index, .probs = a->probs,
        .label_smoothing = a->label_smoothing, .nll = nll};
    if (!kn_op_outputs_inferred(&c)) return NULL; /* kn_infer_like_first: the gradient of scores */
    return kn_op_run(&c);
}

/* The attention gradients dq, dk, dv (and dmask with mask_grad), each like its forward
 * input, in f32 or f64. */
KN_RULE(kn_infer_sdpa_backward) {
    kn_dtype compute = in[0]->dtype == KN_F64 ? KN_F64 : KN_F32;
    const kn_tensor *mask = kn_input_at(in, at, KN_SLOT(scaled_dot_product_attention_backward, mask));
    if (at->scaled_dot_product_attention_backward.mask_grad && !mask) KN_RULE_FAIL(KN_ERR_ARG, "mask_grad needs a mask");
    for (int i = 0; i < 3; i++) kn_infer_out(r, compute, in[i]->shape, in[i]->ndim);
    if (at->scaled_dot_product_attention_backward.mask_grad) kn_infer_out(r, compute, mask->shape, mask->ndim);
    return KN_OK;
}

kn_status kn_sdpa_backward(kn_tensor *const in[7], const kn_attrs_scaled_dot_product_attention *a, uint64_t seed,
                           uint64_t offset, kn_tensor **dq, kn_tensor **dk, kn_tensor **dv, kn_tensor **dmask) {
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_scaled_dot_product_attention_backward, 7, in)) return kn_last_status();
    *KN_ATTRS(c.node, scaled_dot_product_attention_backward) = (kn_attrs_scaled_dot_product_attention_backward){
        .causal = a->causal, .causal_align = a->causal_align, .scale = a->scale, .dropout_p = a->dropout_p,
        .mask_grad = dmask != NULL};
    c.node->rng_seed = seed, c.node->rng_offset = offset;
    if (!kn_op_outputs_inferred(&c)) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){dq, dk, dv, dmask}, c.node->n_out);
}

kn_tensor *kn_dropout_replay(kn_tensor *x, double p, uint64_t seed, uint64_t offset) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_dropout, 1, &x)) return NULL;
    KN_ATTRS(c.node, dropout)->p = p;
    c.node->rng_seed = seed, c.node->rng_offset = offset;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}
