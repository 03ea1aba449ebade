/* Convolutions: conv2d, conv1d (as conv2d over a height of 1) and conv_transpose2d. */
#include "ops/nn_common.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

static int64_t or_default(int64_t v, int64_t d) { return v ? v : d; }

/* conv2d and conv_transpose2d: x [N, C, H, W], weight 4-d with channels matching groups, bias
 * [Cout]; out[0] [N, Cout, OH, OW] by PyTorch's formulas. */
KN_RULE(kn_infer_conv) {
    const kn_tensor *x = in[0], *w = in[1], *bias = kn_input_at(in, at, KN_SLOT(conv2d, bias));
    const kn_attrs_conv2d *o = &at->conv2d; /* conv_transpose2d's are conv2d's (op_table.c) */
    bool transposed = op == KN_OP_conv_transpose2d;
    const int64_t zero[2] = {0, 0}, *out_pad = transposed ? at->conv_transpose2d.output_padding : zero;
    if (x->ndim != 4 || w->ndim != 4) KN_RULE_FAIL(KN_ERR_SHAPE, "x and weight must be 4-d");
    int64_t N = x->shape[0], C = x->shape[1], H = x->shape[2], W = x->shape[3], g = o->groups;
    int64_t KH = w->shape[2], KW = w->shape[3], Cout = transposed ? w->shape[1] * g : w->shape[0];
    if (g <= 0 || C % g || (!transposed && Cout % g))
        KN_RULE_FAIL(KN_ERR_ARG, "groups (%lld) must divide the %lld input and %lld output channels", (long long)g,
                     (long long)C, (long long)Cout);
    if (transposed ? w->shape[0] != C : w->shape[1] * g != C)
        KN_RULE_FAIL(KN_ERR_SHAPE, "weight expects %lld input channels, x has %lld",
                     (long long)(transposed ? w->shape[0] : w->shape[1] * g), (long long)C);
    for (int d = 0; d < 2; d++)
        if (o->stride[d] <= 0 || o->dilation[d] <= 0 || o->padding[d] < 0 || out_pad[d] < 0)
            KN_RULE_FAIL(KN_ERR_ARG, "stride and dilation must be positive, padding non-negative");
    int64_t OH, OW;
    if (transposed) {
        for (int d = 0; d < 2; d++)
            if (out_pad[d] >= o->stride[d] && out_pad[d] >= o->dilation[d])
                KN_RULE_FAIL(KN_ERR_ARG, "output_padding must be smaller than stride or dilation");
        OH = (H - 1) * o->stride[0] - 2 * o->padding[0] + o->dilation[0] * (KH - 1) + out_pad[0] + 1;
        OW = (W - 1) * o->stride[1] - 2 * o->padding[1] + o->dilation[1] * (KW - 1) + out_pad[1] + 1;
    } else {
        int64_t eh = o->dilation[0] * (KH - 1) + 1, ew = o->dilation[1] * (KW - 1) + 1;
        if (eh > H + 2 * o->padding[0] || ew > W + 2 * o->padding[1])
            KN_RULE_FAIL(KN_ERR_SHAPE, "kernel (%lld x %lld, dilated) is larger than the padded input (%lld x %lld)",
                         (long long)eh, (long long)ew, (long long)(H + 2 * o->padding[0]),
                         (long long)(W + 2 * o->padding[1]));
        OH = (H + 2 * o->padding[0] - eh) / o->stride[0] + 1;
        OW = (W + 2 * o->padding[1] - ew) / o->stride[1] + 1;
    }
    if (OH <= 0 || OW <= 0) KN_RULE_FAIL(KN_ERR_SHAPE, "output size %lld x %lld is not positive", (long long)OH, (long long)OW);
    kn_status st = kn_nn_vector_why(bias, Cout, "bias", why, why_size);
    if (st != KN_OK) return st;
    kn_infer_out(r, x->dtype, (int64_t[]){N, Cout, OH, OW}, 4);
    return KN_OK;
}

/* Records conv2d (transposed: conv_transpose2d); opts already has defaults. */
static kn_tensor *conv_any(kn_tensor *x, kn_tensor *w, kn_tensor *bias, kn_conv_opts o, bool transposed) {
    kn_opctx c;
    kn_op_infer r;
    if (!w) {
        kn_error_null_input(transposed ? "conv_transpose2d" : "conv2d", 1);
        return NULL;
    }
    if (!kn_nn_begin(&c, transposed ? KN_OP_conv_transpose2d : KN_OP_conv2d, 3, (kn_tensor *[]){x, w, bias}))
        return NULL;
    kn_attrs_conv_transpose2d *a = KN_ATTRS(c.node, conv_transpose2d); /* conv2d's less output_padding */
    for (int d = 0; d < 2; d++) {
        a->stride[d] = o.stride[d], a->padding[d] = o.padding[d], a->dilation[d] = o.dilation[d];
        if (transposed) a->output_padding[d] = o.output_padding[d];
        else if (o.output_padding[d] < 0)
            return kn_op_fail(&c, KN_ERR_ARG, "stride and dilation must be positive, padding non-negative");
    }
    a->groups = o.groups;
    if (!kn_op_infer_node(&c, &r) || !kn_nn_prepare_input(&c, 1, c.node->in[0]->dtype) || !kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

static kn_conv_opts with_defaults(kn_conv_opts o) {
    for (int d = 0; d < 2; d++) o.stride[d] = or_default(o.stride[d], 1), o.dilation[d] = or_default(o.dilation[d], 1);
    o.groups = or_default(o.groups, 1);
    return o;
}

kn_tensor *kn_conv2d(kn_tensor *x, kn_tensor *weight, kn_tensor *bias, kn_conv_opts opts) {
    return conv_any(x, weight, bias, with_defaults(opts), false);
}

kn_tensor *kn_conv_transpose2d(kn_tensor *x, kn_tensor *weight, kn_tensor *bias, kn_conv_opts opts) {
    return conv_any(x, weight, bias, with_defaults(opts), true);
}

kn_tensor *kn_conv1d(kn_tensor *x, kn_tensor *weight, kn_tensor *bias, kn_conv_opts opts) {
    if (!x || !weight) {
        kn_error_null_input("conv1d", x ? 1 : 0);
        return NULL;
    }
    if (x->ndim != 3 || weight->ndim != 3) {
        char dx[96], dw[96];
        return kn_error_null(KN_ERR_SHAPE, "conv1d(%s, %s): x and weight must be 3-d", kn_describe(x, dx, sizeof dx),
                             kn_describe(weight, dw, sizeof dw));
    }
    kn_conv_opts o = {.stride = {1, opts.stride[0]}, .padding = {0, opts.padding[0]},
                      .dilation = {1, opts.dilation[0]}, .groups = opts.groups};
    kn_scope_push();
    kn_tensor *y = kn_conv2d(kn_unsqueeze(x, 2), kn_unsqueeze(weight, 2), bias, o);
    return kn_scope_pop_keep(y ? kn_squeeze(y, 2) : NULL);
}
