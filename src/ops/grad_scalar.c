/* Gradients of the scalar-operand ops (defs/scalar.def), following PyTorch's definitions;
 * attribute a is the number as the forward kernel met it. */
#include "kiln/ops.h"
#include "ops/grad.h"

#define DONE(expr) return (gin[0] = (expr)) ? KN_OK : kn_last_status()

kn_status kn_grad_add_scalar(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0];
    return KN_OK;
}

kn_status kn_grad_mul_scalar(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_mul_scalar(gout[0], c->attrs->mul_scalar.a));
}

kn_status kn_grad_div_scalar(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_div_scalar(gout[0], c->attrs->div_scalar.a));
}

/* a x^(a-1), and zero for a = 0 (not 0 * inf at x = 0), as PyTorch's pow_backward. */
kn_status kn_grad_pow_scalar(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    double a = c->attrs->pow_scalar.a;
    if (a == 0) DONE(kn_zeros_like(gout[0]));
    DONE(kn_mul(gout[0], kn_mul_scalar(kn_pow_scalar(c->in[0], a - 1), a)));
}

/* (1 - w) dstart, w dend. */
kn_status kn_grad_lerp_scalar(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    double w = c->attrs->lerp_scalar.a;
    if (c->needs[0] && !(gin[0] = kn_mul_scalar(gout[0], 1 - w))) return kn_last_status();
    if (c->needs[1] && !(gin[1] = kn_mul_scalar(gout[0], w))) return kn_last_status();
    return KN_OK;
}
