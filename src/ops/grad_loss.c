/* Gradients of the losses and dropout (node layouts in defs/loss.def). The class-index
 * losses go through one backward op (cross_entropy_backward: softmax - onehot in one pass
 * over the logits); the pointwise losses are short compositions; dropout replays its own
 * Philox mask on the gradient. */
#include <math.h>

#include "core/error.h"
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/loss_internal.h"

#define TRY(expr)                                    \
    do {                                             \
        if (!(expr)) return kn_last_status();        \
    } while (0)

/* ---- cross_entropy, nll_loss ---------------------------------------------------------- */

static kn_status refuse_weight_grad(const kn_grad_ctx *c) {
    return kn_error(KN_ERR_UNSUPPORTED,
                    "backward of %s: no gradient for the class weight (as in PyTorch); pass a weight that does "
                    "not require grad (kn_detach)",
                    kn_op_name(c->op));
}

/* The gradient of probability targets: -(1 - eps) w_c log_softmax(x)_c, times each row's
 * share of the loss gradient (g per row for none, g / rows for mean, g for sum). */
static kn_tensor *target_probs_grad(const kn_grad_ctx *c, kn_tensor *g) {
    kn_tensor *x = c->in[0];
    const kn_attrs_cross_entropy *a = &c->attrs->cross_entropy; /* nll_loss's too (op_table.c) */
    kn_reduction r = (kn_reduction)a->reduction;
    kn_shape xs = c->in_shape[0];
    int64_t rows = xs.v[xs.n - 1] ? kn_shape_numel(xs) / xs.v[xs.n - 1] : 0;
    kn_tensor *s = r == KN_REDUCTION_NONE ? kn_unsqueeze(g, -1)
                   : r == KN_REDUCTION_MEAN ? kn_div_scalar(g, (double)(rows ? rows : 1))
                                            : g;
    kn_tensor *d = kn_mul(kn_mul_scalar(kn_log_softmax(x, -1), -(1 - a->label_smoothing)), s);
    kn_tensor *weight = KN_GRAD_INPUT(c, cross_entropy, weight);
    return weight ? kn_mul(d, weight) : d;
}

static kn_status class_loss_grad(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin, bool nll) {
    int weight_at = KN_GRAD_POS(c, cross_entropy, weight); /* nll_loss's slots are cross_entropy's */
    if (weight_at >= 0 && c->needs[weight_at]) return refuse_weight_grad(c);
    kn_tensor *weight = KN_GRAD_INPUT(c, cross_entropy, weight);
    if (c->needs[0])
        TRY(gin[0] = kn_cross_entropy_backward(c->in[0], c->in[1], weight, gout[0], &c->attrs->cross_entropy, nll));
    if (c->needs[1]) TRY(gin[1] = target_probs_grad(c, gout[0])); /* float targets: probabilities */
    return KN_OK;
}

kn_status kn_grad_cross_entropy(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return class_loss_grad(c, gout, gin, false);
}

kn_status kn_grad_nll_loss(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return class_loss_grad(c, gout, gin, true);
}

/* ---- pointwise losses: inputs x, y, [weight], [pos_weight] of one broadcast shape ------ */

/* The loss gradient per element: g itself (none) or the 0-d g, divided by the count for mean. */
static kn_tensor *pointwise_scale(const kn_grad_ctx *c, kn_tensor *g) {
    if (c->attrs->mse_loss.reduction != KN_REDUCTION_MEAN) return g; /* every pointwise loss's (op_table.c) */
    int64_t count = kn_shape_numel(c->in_shape[0]);
    return kn_div_scalar(g, (double)(count ? count : 1));
}

/* gin[0] = d * s and gin[1] = -d * s, for losses of x - y. */
static kn_status difference_grads(const kn_grad_ctx *c, kn_tensor *d, kn_tensor *s, kn_tensor **gin) {
    TRY(d = kn_mul(d, s));
    if (c->needs[0]) gin[0] = d;
    if (c->needs[1]) TRY(gin[1] = kn_neg(d));
    return KN_OK;
}

kn_status kn_grad_mse_loss(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *d = kn_mul_scalar(kn_sub(c->in[0], c->in[1]), 2);
    return difference_grads(c, d, pointwise_scale(c, gout[0]), gin);
}

kn_status kn_grad_l1_loss(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return difference_grads(c, kn_sign(kn_sub(c->in[0], c->in[1])), pointwise_scale(c, gout[0]), gin);
}

/* d/dd of smooth_l1: d / beta inside (-beta, beta), sign(d) outside; beta 0 is l1. */
kn_status kn_grad_smooth_l1_loss(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    double beta = c->attrs->smooth_l1_loss.beta;
    kn_tensor *d = kn_sub(c->in[0], c->in[1]);
    d = beta > 0 ? kn_clamp(kn_div_scalar(d, beta), -1, 1) : kn_sign(d);
    return difference_grads(c, d, pointwise_scale(c, gout[0]), gin);
}

/* bce = -w (y lp + (1 - y) lq), lp = max(log p, -100), lq = max(log(1 - p), -100):
 * d/dp = w (p - y) / max(p (1 - p), 1e-12) (PyTorch's), d/dy = w (lq - lp), d/dw = bce / w. */
kn_status kn_grad_bce_loss(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *p = c->in[0], *y = c->in[1], *w = KN_GRAD_INPUT(c, bce_loss, weight);
    kn_tensor *s = pointwise_scale(c, gout[0]);
    kn_tensor *ws = w ? kn_mul(w, s) : s;
    if (c->needs[0]) {
        kn_tensor *den = kn_clamp(kn_mul(p, kn_sub(kn_ones_like(p), p)), 1e-12, INFINITY);
        TRY(gin[0] = kn_mul(kn_div(kn_sub(p, y), den), ws));
    }
    if (c->needs[1]) {
        kn_tensor *lp = kn_clamp(kn_log(p), -100, INFINITY), *lq = kn_clamp(kn_log1p(kn_neg(p)), -100, INFINITY);
        TRY(gin[1] = kn_mul(kn_sub(lq, lp), ws));
    }
    if (w && c->needs[2]) TRY(gin[2] = kn_mul(kn_bce_loss(p, y, NULL, KN_REDUCTION_NONE), s));
    return KN_OK;
}

/* bce_with_logits = w ((1 - y) x - (1 + (pw - 1) y) ls), ls = log_sigmoid(x):
 * d/dx = w ((1 + (pw - 1) y) sigmoid(x) - pw y), d/dy = -w (x + (pw - 1) ls),
 * d/dw = the unweighted loss, d/dpw = -w y ls. */
kn_status kn_grad_bce_with_logits(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int w_at = KN_GRAD_POS(c, bce_with_logits, weight), pw_at = KN_GRAD_POS(c, bce_with_logits, pos_weight);
    kn_tensor *x = c->in[0], *y = c->in[1], *w = w_at >= 0 ? c->in[w_at] : NULL, *pw = pw_at >= 0 ? c->in[pw_at] : NULL;
    kn_tensor *s = pointwise_scale(c, gout[0]);
    kn_tensor *ws = w ? kn_mul(w, s) : s;
    kn_tensor *pw1 = pw ? kn_sub_scalar(pw, 1) : NULL; /* pw - 1 */
    kn_tensor *ls = kn_neg(kn_softplus(kn_neg(x), 1, 20));
    if (c->needs[0]) {
        kn_tensor *coef = pw ? kn_add_scalar(kn_mul(pw1, y), 1) : NULL;
        kn_tensor *d = pw ? kn_sub(kn_mul(coef, kn_sigmoid(x)), kn_mul(pw, y)) : kn_sub(kn_sigmoid(x), y);
        TRY(gin[0] = kn_mul(d, ws));
    }
    if (c->needs[1]) TRY(gin[1] = kn_mul(kn_neg(pw ? kn_add(x, kn_mul(pw1, ls)) : x), ws));
    if (w && c->needs[w_at]) TRY(gin[w_at] = kn_mul(kn_bce_with_logits(x, y, NULL, pw, KN_REDUCTION_NONE), s));
    if (pw && c->needs[pw_at]) TRY(gin[pw_at] = kn_mul(kn_neg(kn_mul(y, ls)), ws));
    return KN_OK;
}

/* ---- dropout ------------------------------------------------------------------------------ */

/* The same Philox mask and 1 / (1 - p) scale applied to the gradient: nothing saved. */
kn_status kn_grad_dropout(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    TRY(gin[0] = kn_dropout_replay(gout[0], c->attrs->dropout.p, c->rng_seed, c->rng_offset));
    return KN_OK;
}
