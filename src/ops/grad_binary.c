/* Gradients of the binary and ternary elementwise ops, following PyTorch's definitions. The
 * node's inputs already have the output's shape and dtype (the API function cast and
 * expanded them, and those steps record their own backward), so nothing here broadcasts.
 * Scalar forms with an integer tensor (kn_add_scalar_int...) are the same nodes with a 0-d
 * constant operand; on float tensors they are ops of their own (ops/grad_scalar.c). */
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/ops_internal.h"

#define CHECKED(slot, expr) \
    if (c->needs[slot] && !(gin[slot] = (expr))) return kn_last_status()

kn_status kn_grad_add(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gin[1] = gout[0];
    return KN_OK;
}

kn_status kn_grad_sub(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0];
    CHECKED(1, kn_neg(gout[0]));
    return KN_OK;
}

kn_status kn_grad_mul(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    CHECKED(0, kn_mul(gout[0], c->in[1]));
    CHECKED(1, kn_mul(gout[0], c->in[0]));
    return KN_OK;
}

/* d(x/y) = g/y dx - g*x/y^2 dy. */
kn_status kn_grad_div(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *gy = kn_div(gout[0], c->in[1]);
    if (c->needs[0]) gin[0] = gy;
    CHECKED(1, kn_neg(kn_div(kn_mul(gy, c->in[0]), c->in[1])));
    return gy ? KN_OK : kn_last_status();
}

/* x - floor(x/y) y: 1 dx, -floor(x/y) dy. */
kn_status kn_grad_remainder(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0];
    CHECKED(1, kn_neg(kn_mul(gout[0], kn_floor_divide(c->in[0], c->in[1]))));
    return KN_OK;
}

kn_status kn_grad_pow(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    CHECKED(0, kn_pow_backward(gout[0], c->in[0], c->in[1]));
    CHECKED(1, kn_pow_backward_exponent(gout[0], c->in[0], c->in[1]));
    return KN_OK;
}

kn_status kn_grad_maximum(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    CHECKED(0, kn_maximum_backward(gout[0], c->in[0], c->in[1]));
    CHECKED(1, kn_maximum_backward(gout[0], c->in[1], c->in[0]));
    return KN_OK;
}

kn_status kn_grad_minimum(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    CHECKED(0, kn_minimum_backward(gout[0], c->in[0], c->in[1]));
    CHECKED(1, kn_minimum_backward(gout[0], c->in[1], c->in[0]));
    return KN_OK;
}

/* where(cond, x, y): the gradient goes to the side cond picked (cond itself has none; the
 * API function cast it to the values' dtype). */
kn_status kn_grad_where(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *zero = kn_full_on(KN_SHAPE0, 0, kn_dtype_of(gout[0]), kn_device_of(gout[0]));
    if (!zero) return kn_last_status();
    CHECKED(1, kn_where(c->in[0], gout[0], zero));
    CHECKED(2, kn_where(c->in[0], zero, gout[0]));
    return KN_OK;
}

/* start + w (end - start): (1 - w) dstart, w dend, (end - start) dw. */
kn_status kn_grad_lerp(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *gw = c->needs[0] || c->needs[1] ? kn_mul(gout[0], c->in[2]) : NULL;
    CHECKED(0, kn_sub(gout[0], gw));
    CHECKED(1, gw);
    CHECKED(2, kn_mul(gout[0], kn_sub(c->in[1], c->in[0])));
    return KN_OK;
}

/* self + v t1 t2. */
kn_status kn_grad_addcmul(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    double v = c->attrs->addcmul.a;
    kn_tensor *gv = v == 1 || !(c->needs[1] || c->needs[2]) ? gout[0] : kn_mul_scalar(gout[0], v);
    gin[0] = gout[0];
    CHECKED(1, kn_mul(gv, c->in[2]));
    CHECKED(2, kn_mul(gv, c->in[1]));
    return KN_OK;
}

/* self + v t1 / t2: v/t2 dt1, -v t1/t2^2 dt2. */
kn_status kn_grad_addcdiv(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    double v = c->attrs->addcdiv.a;
    kn_tensor *g1 = kn_div(v == 1 ? gout[0] : kn_mul_scalar(gout[0], v), c->in[2]);
    if (!g1) return kn_last_status();
    gin[0] = gout[0];
    if (c->needs[1]) gin[1] = g1;
    CHECKED(2, kn_neg(kn_div(kn_mul(g1, c->in[1]), c->in[2])));
    return KN_OK;
}
