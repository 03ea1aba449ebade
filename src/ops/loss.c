/* Losses and dropout: argument checks, dtype promotion, broadcasting and the node layouts of
 * defs/loss.def (the math is in the CPU kernels, backends/cpu/k_loss.c). */
#include <math.h>
#include <stdio.h>

#include "core/runtime_impl.h"
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/loss_internal.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

bool kn_loss_set_input(kn_opctx *c, int i, kn_tensor *t, kn_dtype dtype, const kn_shape *shape, const char *what) {
    kn_tensor *cast = t->dtype == dtype ? kn_retain(t) : kn_cast(t, dtype);
    kn_tensor *wide = cast && shape ? kn_expand(cast, *shape) : kn_retain(cast);
    kn_release(cast);
    if (!wide) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        kn_op_fail(c, kn_last_status(), "%s: %s", what, msg);
        return false;
    }
    kn_op_set_input(c, i, wide);
    kn_release(wide);
    return true;
}

static kn_status check_reduction(int64_t red, char *why, size_t why_size) {
    if (red == KN_REDUCTION_MEAN || red == KN_REDUCTION_SUM || red == KN_REDUCTION_NONE) return KN_OK;
    KN_RULE_FAIL(KN_ERR_ARG, "reduction %d is not mean, sum or none", (int)red);
}

/* cross_entropy and nll_loss as the node holds them: scores [..., C] (class dim last), target
 * class indices [...] or (probs) probabilities like scores, weight [C]; a loss per position
 * for reduction none, else 0-d. The API function checks the caller's layout first. */
KN_RULE(kn_infer_class_loss) {
    const kn_tensor *scores = in[0], *target = in[1], *weight = kn_input_at(in, at, KN_SLOT(cross_entropy, weight));
    const kn_attrs_cross_entropy *a = &at->cross_entropy; /* nll_loss's are cross_entropy's (op_table.c) */
    kn_status st = check_reduction(a->reduction, why, why_size);
    if (st != KN_OK) return st;
    if (!kn_dtype_is_float(scores->dtype) || scores->ndim < 1)
        KN_RULE_FAIL(KN_ERR_DTYPE, "scores must be float with a class dim");
    if (!(a->label_smoothing >= 0 && a->label_smoothing <= 1) || (op == KN_OP_nll_loss && a->label_smoothing != 0))
        KN_RULE_FAIL(KN_ERR_ARG, "label_smoothing %g is not allowed", a->label_smoothing);
    int64_t C = scores->shape[scores->ndim - 1];
    kn_shape pos = kn_shape_of(scores);
    pos.n--;
    kn_shape want = a->probs ? kn_shape_of(scores) : pos;
    bool same = target->ndim == want.n && (a->probs ? kn_dtype_is_float(target->dtype) : kn_dtype_is_int(target->dtype));
    for (int d = 0; same && d < want.n; d++) same = target->shape[d] == want.v[d];
    if (!same) KN_RULE_FAIL(KN_ERR_SHAPE, "target must match scores (class indices or probabilities)");
    if (weight && (!kn_dtype_is_float(weight->dtype) || weight->ndim != 1 || weight->shape[0] != C))
        KN_RULE_FAIL(KN_ERR_SHAPE, "weight must be a float [%lld]", (long long)C);
    kn_infer_out(r, scores->dtype, pos.v, a->reduction == KN_REDUCTION_NONE ? pos.n : 0);
    return KN_OK;
}

/* cross_entropy and nll_loss: scores [N, C, d...] (or [C]) are handed over as [N, d..., C]. */
static kn_tensor *class_loss(kn_op_id op, kn_tensor *scores, kn_tensor *target, kn_ce_opts o) {
    bool nll = op == KN_OP_nll_loss;
    kn_opctx c;
    char why[256];
    if (!kn_op_begin_slots(&c, op, 3, (kn_tensor *[]){scores, target, o.weight})) return NULL;
    if (check_reduction(o.reduction, why, sizeof why) != KN_OK) return kn_op_fail(&c, KN_ERR_ARG, "%s", why);
    if (!kn_dtype_is_float(scores->dtype))
        return kn_op_fail(&c, KN_ERR_DTYPE, "input must be a float tensor, not %s", kn_dtype_name(scores->dtype));
    if (scores->ndim < 1) return kn_op_fail(&c, KN_ERR_SHAPE, "input needs a class dim ([C], [N, C] or [N, C, d...])");
    if (!(o.label_smoothing >= 0 && o.label_smoothing <= 1))
        return kn_op_fail(&c, KN_ERR_ARG, "label_smoothing %g is outside [0, 1]", o.label_smoothing);
    if (nll && o.label_smoothing != 0) return kn_op_fail(&c, KN_ERR_ARG, "nll_loss takes no label smoothing");
    int cdim = scores->ndim == 1 ? 0 : 1;
    int64_t C = scores->shape[cdim];
    kn_shape pos = {0}, order = {0};
    for (int d = 0; d < scores->ndim; d++)
        if (d != cdim) pos.v[pos.n++] = scores->shape[d], order.v[order.n++] = d;
    order.v[order.n++] = cdim;

    bool probs = kn_dtype_is_float(target->dtype);
    if (probs && nll) return kn_op_fail(&c, KN_ERR_DTYPE, "target must hold class indices (i32 or i64)");
    if (!probs && !kn_dtype_is_int(target->dtype))
        return kn_op_fail(&c, KN_ERR_DTYPE, "target must be class indices (i32, i64) or class probabilities (float), not %s",
                          kn_dtype_name(target->dtype));
    kn_shape want = probs ? kn_shape_of(scores) : pos;
    kn_shape have = kn_shape_of(target);
    bool same = want.n == have.n;
    for (int d = 0; same && d < want.n; d++) same = want.v[d] == have.v[d];
    if (!same)
        return kn_op_fail(&c, KN_ERR_SHAPE, "target must have shape %s (%s targets)",
                          probs ? "the input's" : "[N, d...] (the input's without the class dim)",
                          probs ? "probability" : "class-index");
    if (o.weight && !kn_dtype_is_float(o.weight->dtype))
        return kn_op_fail(&c, KN_ERR_DTYPE, "weight must be a float tensor, not %s", kn_dtype_name(o.weight->dtype));
    if (o.weight && (o.weight->ndim != 1 || o.weight->shape[0] != C))
        return kn_op_fail(&c, KN_ERR_SHAPE, "weight must have shape [%lld] (one per class)", (long long)C);

    /* the node's inputs from here: autocast may have cast them */
    kn_tensor *moved = kn_permute(c.node->in[0], order);
    if (!moved) return kn_op_fail(&c, kn_last_status(), "%s", "could not move the class dim last");
    kn_op_set_input(&c, 0, moved);
    kn_release(moved);
    if (probs) {
        kn_tensor *tmoved = kn_permute(c.node->in[1], order);
        bool ok = tmoved && kn_loss_set_input(&c, 1, tmoved, c.node->in[0]->dtype, NULL, "target");
        kn_release(tmoved);
        if (!ok) return c.node ? kn_op_fail(&c, kn_last_status(), "%s", "could not move the class dim last") : NULL;
    }
    /* nll_loss's attributes are cross_entropy's (op_table.c) */
    *KN_ATTRS(c.node, cross_entropy) = (kn_attrs_cross_entropy){
        .reduction = o.reduction, .ignore_index = o.ignore_index, .probs = probs, .label_smoothing = o.label_smoothing};
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_cross_entropy(kn_tensor *logits, kn_tensor *target, kn_ce_opts opts) {
    return class_loss(KN_OP_cross_entropy, logits, target, opts);
}

kn_tensor *kn_nll_loss(kn_tensor *log_probs, kn_tensor *target, kn_ce_opts opts) {
    return class_loss(KN_OP_nll_loss, log_probs, target, opts);
}

/* The pointwise losses: x and y broadcast together, the weights (bce's weight, bce_with_logits'
 * pos_weight) to their shape; the promoted dtype; a loss per element for reduction none,
 * else 0-d. */
KN_RULE(kn_infer_pointwise_loss) {
    kn_status st = check_reduction(at->mse_loss.reduction, why, why_size); /* every pointwise loss's (op_table.c) */
    if (st != KN_OK) return st;
    if (op == KN_OP_smooth_l1_loss && !(at->smooth_l1_loss.beta >= 0))
        KN_RULE_FAIL(KN_ERR_ARG, "beta %g must be >= 0", at->smooth_l1_loss.beta);
    kn_shape shape;
    if (!kn_broadcast_shapes(kn_op_name(op), kn_shape_of(in[0]), kn_shape_of(in[1]), &shape))
        KN_RULE_FAIL(KN_ERR_SHAPE, "input and target do not broadcast (%s)", kn_last_error());
    r->compute = kn_promote_types(in[0]->dtype, in[1]->dtype);
    const kn_param *p = kn_op_params(op);
    for (int slot = 2; slot < kn_op_input_slots(op); slot++) { /* the weights */
        const kn_tensor *w = kn_input_at(in, at, slot);
        if (!w) continue;
        r->compute = kn_promote_types(r->compute, w->dtype);
        kn_shape b;
        bool fits = kn_broadcast_shapes(kn_op_name(op), kn_shape_of(w), shape, &b) && b.n == shape.n;
        for (int d = 0; fits && d < b.n; d++) fits = b.v[d] == shape.v[d];
        kn_clear_error();
        if (!fits) KN_RULE_FAIL(KN_ERR_SHAPE, "%s does not broadcast to the input's and target's shape", p[slot].name);
    }
    kn_infer_out(r, r->compute, shape.v, at->mse_loss.reduction == KN_REDUCTION_NONE ? shape.n : 0);
    return KN_OK;
}

/* in = {x, y, weight or NULL, pos_weight or NULL}, each cast to the promoted dtype and
 * expanded to the broadcast shape for the kernel. */
static kn_tensor *pointwise_loss(kn_op_id op, kn_tensor *const in[4], kn_reduction reduction, double beta) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin_slots(&c, op, kn_op_input_slots(op), in)) return NULL;
    KN_ATTRS(c.node, mse_loss)->reduction = reduction; /* every pointwise loss's (op_table.c) */
    if (op == KN_OP_smooth_l1_loss) KN_ATTRS(c.node, smooth_l1_loss)->beta = beta;
    if (!kn_op_infer_node(&c, &r)) return NULL;
    kn_shape shape;
    kn_broadcast_shapes(kn_op_name(op), kn_shape_of(in[0]), kn_shape_of(in[1]), &shape); /* the rule's */
    static const char *const names[4] = {"input", "target", "weight", "pos_weight"};
    for (int i = 0, slot = 0; i < 4; i++) {
        if (i >= 2 && !in[i]) continue;
        /* the node's input: autocast may have cast it */
        if (!kn_loss_set_input(&c, slot, c.node->in[slot], r.compute, &shape, names[i])) return NULL;
        slot++;
    }
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_mse_loss(kn_tensor *x, kn_tensor *y, kn_reduction reduction) {
    return pointwise_loss(KN_OP_mse_loss, (kn_tensor *[4]){x, y, NULL, NULL}, reduction, 0);
}

kn_tensor *kn_l1_loss(kn_tensor *x, kn_tensor *y, kn_reduction reduction) {
    return pointwise_loss(KN_OP_l1_loss, (kn_tensor *[4]){x, y, NULL, NULL}, reduction, 0);
}

kn_tensor *kn_smooth_l1_loss(kn_tensor *x, kn_tensor *y, kn_reduction reduction, double beta) {
    return pointwise_loss(KN_OP_smooth_l1_loss, (kn_tensor *[4]){x, y, NULL, NULL}, reduction, beta);
}

kn_tensor *kn_bce_loss(kn_tensor *p, kn_tensor *y, kn_tensor *weight, kn_reduction reduction) {
    return pointwise_loss(KN_OP_bce_loss, (kn_tensor *[4]){p, y, weight, NULL}, reduction, 0);
}

kn_tensor *kn_bce_with_logits(kn_tensor *x, kn_tensor *y, kn_tensor *weight, kn_tensor *pos_weight,
                              kn_reduction reduction) {
    return pointwise_loss(KN_OP_bce_with_logits, (kn_tensor *[4]){x, y, weight, pos_weight}, reduction, 0);
}

/* dropout: p in [0, 1]; out[0] like x. */
KN_RULE(kn_infer_dropout) {
    if (!(at->dropout.p >= 0 && at->dropout.p <= 1)) KN_RULE_FAIL(KN_ERR_ARG, "p %g is outside [0, 1]", at->dropout.p);
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

kn_tensor *kn_dropout(kn_tensor *x, double p, bool training) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin(&c, KN_OP_dropout, 1, &x)) return NULL;
    KN_ATTRS(c.node, dropout)->p = p;
    if (!kn_op_infer_node(&c, &r)) return NULL;
    if (!training || p == 0) {
        kn_node_free(c.node);
        return kn_scope_adopt(kn_retain(x));
    }
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    kn_rng_reserve(((uint64_t)kn_numel(x) + 3) / 4, &c.node->rng_seed, &c.node->rng_offset);
    return kn_op_run(&c);
}
