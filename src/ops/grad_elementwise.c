/* Gradients of elementwise ops. gout[0] is the output's gradient; broadcasting is undone by
 * the engine (inputs were expanded by views that record their own backward). */
#include "kiln/ops.h"
#include "ops/grad.h"

kn_status kn_grad_copy(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0]; /* the engine casts it back to the input's dtype */
    return KN_OK;
}

kn_status kn_grad_neg(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_neg(gout[0]);
    return gin[0] ? KN_OK : kn_last_status();
}

kn_status kn_grad_exp(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_mul(gout[0], c->out[0]);
    return gin[0] ? KN_OK : kn_last_status();
}

kn_status kn_grad_add(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gin[1] = gout[0];
    return KN_OK;
}

kn_status kn_grad_sub(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0];
    if (c->needs[1] && !(gin[1] = kn_neg(gout[0]))) return kn_last_status();
    return KN_OK;
}

kn_status kn_grad_mul(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    if (c->needs[0] && !(gin[0] = kn_mul(gout[0], c->in[1]))) return kn_last_status();
    if (c->needs[1] && !(gin[1] = kn_mul(gout[0], c->in[0]))) return kn_last_status();
    return KN_OK;
}

/* d(x/y) = g/y dx - g*x/y^2 dy. */
kn_status kn_grad_div(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *gy = kn_div(gout[0], c->in[1]);
    if (c->needs[0]) gin[0] = gy;
    if (c->needs[1]) gin[1] = kn_neg(kn_div(kn_mul(gy, c->in[0]), c->in[1]));
    return gy && (!c->needs[1] || gin[1]) ? KN_OK : kn_last_status();
}
