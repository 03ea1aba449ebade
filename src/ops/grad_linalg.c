/* Gradient of matmul: in[0] [..., M, K] @ in[1] [..., K, N] with batch dims already
 * broadcast (the expand views that did it sum them back). Each gradient comes out in its
 * input's layout: an operand stored transposed (a linear layer's weight, used as w^T) gets the
 * transpose of a product computed in its stored order, so the transpose view's backward hands
 * the weight a contiguous gradient of its own shape instead of a strided one to copy. */
#include "kiln/ops.h"
#include "ops/grad.h"

/* Whether t's last two dims are stored column-major (a transposed view of a contiguous matrix). */
static bool stored_transposed(const kn_tensor *t) {
    const kn_shape shape = kn_shape_of(t), stride = kn_strides_of(t);
    const int nd = shape.n;
    return nd >= 2 && shape.v[nd - 2] > 1 && shape.v[nd - 1] > 1 && stride.v[nd - 2] == 1 &&
           stride.v[nd - 1] >= shape.v[nd - 2];
}

kn_status kn_grad_matmul(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *a = c->in[0], *b = c->in[1], *g = gout[0];
    if (c->needs[0]) { /* dA = g B^T, or (B g^T)^T */
        gin[0] = stored_transposed(a) ? kn_transpose(kn_matmul(b, kn_transpose(g, -1, -2)), -1, -2)
                                      : kn_matmul(g, kn_transpose(b, -1, -2));
        if (!gin[0]) return kn_last_status();
    }
    if (c->needs[1]) { /* dB = A^T g, or (g^T A)^T */
        gin[1] = stored_transposed(b) ? kn_transpose(kn_matmul(kn_transpose(g, -1, -2), a), -1, -2)
                                      : kn_matmul(kn_transpose(a, -1, -2), g);
        if (!gin[1]) return kn_last_status();
    }
    return KN_OK;
}
