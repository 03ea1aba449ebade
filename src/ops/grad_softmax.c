/* Gradients of softmax and log_softmax: one fused kernel each (softmax_backward,
 * log_softmax_backward) from the saved output, the hot path of attention and losses. */
#include "kiln/ops.h"
#include "ops/grad.h"

/* The dim (0 for a 0-d input, whose softmax is constant: the kernel then gives zero). */
static int64_t dim_of(const kn_grad_ctx *c) { return c->attrs->reduce.dims.n ? c->attrs->reduce.dims.v[0] : 0; }

kn_status kn_grad_softmax(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_softmax_backward(gout[0], c->out[0], dim_of(c));
    return gin[0] ? KN_OK : kn_last_status();
}

kn_status kn_grad_log_softmax(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_log_softmax_backward(gout[0], c->out[0], dim_of(c));
    return gin[0] ? KN_OK : kn_last_status();
}
