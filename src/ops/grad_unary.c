/* Gradients of copy (casts) and the unary elementwise ops, following PyTorch's definitions
 * (at a kink the derivative is that of the branch taken at x > 0: relu and abs give 0 at 0).
 * Activations use one backward op each (defs/elementwise_backward.def); the rest are short
 * compositions. Formulas read the forward's output where that is cheaper than its input. */
#include "kiln/ops.h"
#include "ops/grad.h"

#define DONE(expr) return (gin[0] = (expr)) ? KN_OK : kn_last_status()

kn_status kn_grad_copy(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0]; /* the engine casts it back to the input's dtype */
    return KN_OK;
}

kn_status kn_grad_neg(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) { DONE(kn_neg(gout[0])); }

kn_status kn_grad_abs(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_mul(gout[0], kn_sign(c->in[0])));
}

kn_status kn_grad_relu(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_relu_backward(gout[0], c->out[0]));
}

kn_status kn_grad_clamp(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_clamp_backward(gout[0], c->in[0], c->attrs->clamp.a, c->attrs->clamp.b));
}

kn_status kn_grad_exp(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_mul(gout[0], c->out[0]));
}

kn_status kn_grad_expm1(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_mul(gout[0], kn_add_scalar(c->out[0], 1)));
}

kn_status kn_grad_log(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_div(gout[0], c->in[0]));
}

kn_status kn_grad_log1p(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_div(gout[0], kn_add_scalar(c->in[0], 1)));
}

kn_status kn_grad_log2(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_div(gout[0], kn_mul_scalar(c->in[0], 0.69314718055994530942)));
}

/* d sqrt(x) = 1 / (2 sqrt(x)) */
kn_status kn_grad_sqrt(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_div(gout[0], kn_mul_scalar(c->out[0], 2)));
}

/* d x^-1/2 = -x^-3/2 / 2 */
kn_status kn_grad_rsqrt(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *y = c->out[0];
    DONE(kn_mul_scalar(kn_mul(gout[0], kn_mul(kn_mul(y, y), y)), -0.5));
}

/* d x^-1 = -x^-2 */
kn_status kn_grad_reciprocal(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_neg(kn_mul(gout[0], kn_mul(c->out[0], c->out[0]))));
}

kn_status kn_grad_sin(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_mul(gout[0], kn_cos(c->in[0])));
}

kn_status kn_grad_cos(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_neg(kn_mul(gout[0], kn_sin(c->in[0]))));
}

kn_status kn_grad_tanh(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_tanh_backward(gout[0], c->out[0]));
}

kn_status kn_grad_sigmoid(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_sigmoid_backward(gout[0], c->out[0]));
}

kn_status kn_grad_leaky_relu(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_leaky_relu_backward(gout[0], c->in[0], c->attrs->leaky_relu.a));
}

kn_status kn_grad_gelu(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_gelu_backward(gout[0], c->in[0]));
}

kn_status kn_grad_gelu_tanh(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_gelu_tanh_backward(gout[0], c->in[0]));
}

kn_status kn_grad_silu(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_silu_backward(gout[0], c->in[0]));
}

kn_status kn_grad_softplus(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_softplus_backward(gout[0], c->in[0], c->attrs->softplus.a, c->attrs->softplus.b));
}

kn_status kn_grad_erf(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    DONE(kn_erf_backward(gout[0], c->in[0]));
}
