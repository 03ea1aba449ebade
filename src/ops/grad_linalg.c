/* Gradient of matmul: in[0] [..., M, K] @ in[1] [..., K, N] with batch dims already
 * broadcast (the expand views that did it sum them back). */
#include "kiln/ops.h"
#include "ops/grad.h"

kn_status kn_grad_matmul(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    if (c->needs[0] && !(gin[0] = kn_matmul(gout[0], kn_transpose(c->in[1], -1, -2)))) return kn_last_status();
    if (c->needs[1] && !(gin[1] = kn_matmul(kn_transpose(c->in[0], -1, -2), gout[0]))) return kn_last_status();
    return KN_OK;
}
