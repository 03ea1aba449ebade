/* Pooling and resampling over the last two dims: max/avg/adaptive-avg pooling, nearest and
 * bilinear upsampling (argument checks and output sizes, PyTorch's formulas). */
#include "ops/nn_common.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* x [C, H, W] or [N, C, H, W]: x's shape with the last two sizes oh, ow. */
static kn_status planes_out(const kn_tensor *x, int64_t oh, int64_t ow, kn_op_infer *r, char *why, size_t why_size) {
    if (x->ndim != 3 && x->ndim != 4) KN_RULE_FAIL(KN_ERR_SHAPE, "x must be [C, H, W] or [N, C, H, W]");
    if (oh <= 0 || ow <= 0) KN_RULE_FAIL(KN_ERR_SHAPE, "output size %lld x %lld is not positive", (long long)oh, (long long)ow);
    int64_t shape[4];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 2] = oh, shape[x->ndim - 1] = ow;
    kn_infer_out(r, x->dtype, shape, x->ndim);
    r->compute = x->dtype;
    return KN_OK;
}

/* PyTorch's pooling_output_shape. */
static int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

/* max_pool2d (out[1]: the i64 indices) and avg_pool2d (no dilation). */
KN_RULE(kn_infer_pool) {
    const kn_tensor *x = in[0];
    const kn_attrs_max_pool2d *a = &at->max_pool2d; /* avg_pool2d's are max_pool2d's (op_table.c) */
    if (x->ndim != 3 && x->ndim != 4) KN_RULE_FAIL(KN_ERR_SHAPE, "x must be [C, H, W] or [N, C, H, W]");
    if (op == KN_OP_avg_pool2d && (a->dilation[0] > 1 || a->dilation[1] > 1)) KN_RULE_FAIL(KN_ERR_ARG, "avg_pool2d has no dilation");
    int64_t out[2];
    for (int d = 0; d < 2; d++) {
        int64_t k = a->kernel[d], s = a->stride[d], p = a->padding[d], dl = a->dilation[d];
        if (k <= 0 || s <= 0 || dl <= 0 || p < 0)
            KN_RULE_FAIL(KN_ERR_ARG, "kernel, stride and dilation must be positive and padding non-negative");
        if (p > k / 2) KN_RULE_FAIL(KN_ERR_ARG, "padding %lld must be at most half the kernel size %lld", (long long)p, (long long)k);
        out[d] = pooled_size(x->shape[x->ndim - 2 + d], k, s, p, dl, a->ceil_mode);
        if (out[d] <= 0)
            KN_RULE_FAIL(KN_ERR_SHAPE, "output size %lld along dim %d is not positive", (long long)out[d], x->ndim - 2 + d);
    }
    kn_status st = planes_out(x, out[0], out[1], r, why, why_size);
    if (st == KN_OK && op == KN_OP_max_pool2d) kn_infer_out(r, KN_I64, r->shape[0].v, r->shape[0].n);
    return st;
}

static kn_status pool_any(kn_op_id op, kn_tensor *x, kn_pool_opts o, kn_tensor **outs) {
    kn_opctx c;
    if (!kn_nn_begin(&c, op, 1, &x)) return kn_last_status();
    kn_attrs_max_pool2d *a = KN_ATTRS(c.node, max_pool2d); /* avg_pool2d's are max_pool2d's (op_table.c) */
    for (int d = 0; d < 2; d++) {
        int64_t k = o.kernel[d];
        a->kernel[d] = k, a->stride[d] = o.stride[d] ? o.stride[d] : k, a->padding[d] = o.padding[d];
        a->dilation[d] = o.dilation[d] ? o.dilation[d] : 1;
    }
    a->exclude_pad = o.exclude_pad;
    a->ceil_mode = o.ceil_mode;
    if (!kn_op_outputs_inferred(&c)) return kn_last_status();
    return kn_op_run_multi(&c, outs);
}

kn_status kn_max_pool2d_with_indices(kn_tensor *x, kn_pool_opts opts, kn_tensor **out, kn_tensor **indices) {
    kn_tensor *outs[2] = {0};
    kn_status st = pool_any(KN_OP_max_pool2d, x, opts, outs);
    kn_hand_outputs(outs, (kn_tensor **const[]){out, indices}, 2);
    return st;
}

kn_tensor *kn_max_pool2d(kn_tensor *x, kn_pool_opts opts) {
    kn_tensor *out = NULL;
    kn_max_pool2d_with_indices(x, opts, &out, NULL);
    return out;
}

kn_tensor *kn_avg_pool2d(kn_tensor *x, kn_pool_opts opts) {
    kn_tensor *outs[1] = {0};
    pool_any(KN_OP_avg_pool2d, x, opts, outs);
    return outs[0];
}

/* Adaptive pooling and upsampling: x's planes resized to the op's size attribute. */
KN_RULE(kn_infer_resize) {
    const int64_t *size = op == KN_OP_adaptive_avg_pool2d  ? at->adaptive_avg_pool2d.size
                          : op == KN_OP_upsample_nearest2d ? at->upsample_nearest2d.size
                                                           : at->upsample_bilinear2d.size;
    return planes_out(in[0], size[0], size[1], r, why, why_size);
}

static kn_tensor *resize_any(kn_op_id op, kn_tensor *x, int64_t oh, int64_t ow, bool align_corners) {
    kn_opctx c;
    if (!kn_nn_begin(&c, op, 1, &x)) return NULL;
    int64_t *size = op == KN_OP_adaptive_avg_pool2d  ? KN_ATTRS(c.node, adaptive_avg_pool2d)->size
                    : op == KN_OP_upsample_nearest2d ? KN_ATTRS(c.node, upsample_nearest2d)->size
                                                     : KN_ATTRS(c.node, upsample_bilinear2d)->size;
    size[0] = oh, size[1] = ow;
    if (op == KN_OP_upsample_bilinear2d) KN_ATTRS(c.node, upsample_bilinear2d)->align_corners = align_corners;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_adaptive_avg_pool2d(kn_tensor *x, int64_t out_h, int64_t out_w) {
    return resize_any(KN_OP_adaptive_avg_pool2d, x, out_h, out_w, false);
}
kn_tensor *kn_upsample_nearest2d(kn_tensor *x, int64_t out_h, int64_t out_w) {
    return resize_any(KN_OP_upsample_nearest2d, x, out_h, out_w, false);
}
kn_tensor *kn_upsample_bilinear2d(kn_tensor *x, int64_t out_h, int64_t out_w, bool align_corners) {
    return resize_any(KN_OP_upsample_bilinear2d, x, out_h, out_w, align_corners);
}
