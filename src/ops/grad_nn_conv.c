/* Gradients of the convolutions. conv2d and conv_transpose2d are each other's input
 * gradient; the weight gradient of both is one backward op (ops/nn_backward.h) that
 * correlates an image with an output gradient; the bias gradient sums over (N, H, W). */
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/nn_backward.h"

/* The node's stride, padding, dilation and groups as options (conv_transpose2d's attributes
 * and slots are conv2d's: op_table.c). */
static kn_conv_opts opts_of(const kn_grad_ctx *c) {
    const kn_attrs_conv2d *a = &c->attrs->conv2d;
    return (kn_conv_opts){.stride = {a->stride[0], a->stride[1]},
                          .padding = {a->padding[0], a->padding[1]},
                          .dilation = {a->dilation[0], a->dilation[1]},
                          .groups = a->groups};
}

static kn_status bias_grad(const kn_grad_ctx *c, kn_tensor *gy, kn_tensor **gin) {
    int bi = KN_GRAD_POS(c, conv2d, bias);
    if (bi >= 0 && c->needs[bi] && !(gin[bi] = kn_sum(gy, KN_DIMS(0, 2, 3), false))) return kn_last_status();
    return KN_OK;
}

/* conv2d: dx is the transposed convolution of gy with the same weight, its output_padding
 * restoring the rows and columns the forward's floor division dropped. */
kn_status kn_grad_conv2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *gy = gout[0];
    if (!gy) return KN_OK;
    kn_conv_opts o = opts_of(c);
    kn_shape x = c->in_shape[0], w = c->in_shape[1], y = kn_shape_of(gy);
    if (c->needs[0]) {
        for (int d = 0; d < 2; d++)
            o.output_padding[d] =
                x.v[2 + d] - ((y.v[2 + d] - 1) * o.stride[d] - 2 * o.padding[d] + o.dilation[d] * (w.v[2 + d] - 1) + 1);
        if (!(gin[0] = kn_conv_transpose2d(gy, c->in[1], NULL, o))) return kn_last_status();
    }
    if (c->needs[1] && !(gin[1] = kn_conv2d_backward_weight(gy, c->in[0], w.v[2], w.v[3], o.stride, o.padding,
                                                            o.dilation, o.groups)))
        return kn_last_status();
    return bias_grad(c, gy, gin);
}

/* conv_transpose2d: dx is the convolution of gy with the same weight (cut to x's size when
 * output_padding reached past the stride); the weight's gradient swaps the roles of x and gy. */
kn_status kn_grad_conv_transpose2d(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *gy = gout[0];
    if (!gy) return KN_OK;
    kn_conv_opts o = opts_of(c);
    kn_shape x = c->in_shape[0], w = c->in_shape[1];
    if (c->needs[0]) {
        kn_tensor *dx = kn_conv2d(gy, c->in[1], NULL, o);
        kn_shape got = kn_shape_of(dx);
        if (dx && (got.v[2] > x.v[2] || got.v[3] > x.v[3]))
            dx = kn_narrow(kn_narrow(dx, 2, 0, x.v[2]), 3, 0, x.v[3]);
        if (!(gin[0] = dx)) return kn_last_status();
    }
    if (c->needs[1] && !(gin[1] = kn_conv2d_backward_weight(c->in[0], gy, w.v[2], w.v[3], o.stride, o.padding,
                                                            o.dilation, o.groups)))
        return kn_last_status();
    return bias_grad(c, gy, gin);
}
