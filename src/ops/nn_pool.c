/* Pooling and resampling over the last two dims: max/avg/adaptive-avg pooling, nearest and
 * bilinear upsampling (argument checks and output sizes, PyTorch's formulas). */
#include "ops/nn_common.h"

static bool begin_planes(kn_opctx *c, kn_op_id op, kn_tensor *x) {
    if (!kn_nn_begin(c, op, 1, &x)) return false;
    if (x->ndim != 3 && x->ndim != 4) return kn_op_fail(c, KN_ERR_SHAPE, "x must be [C, H, W] or [N, C, H, W]") != NULL;
    return true;
}

/* Records out (x's shape with the last two sizes replaced) and runs; indices too if asked. */
static kn_status finish_planes(kn_opctx *c, kn_tensor *x, int64_t oh, int64_t ow, kn_tensor **outs, bool indices) {
    int64_t shape[4];
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    shape[x->ndim - 2] = oh, shape[x->ndim - 1] = ow;
    if (!kn_op_output(c, x->dtype, shape, x->ndim)) return kn_last_status();
    if (indices && !kn_op_output(c, KN_I64, shape, x->ndim)) return kn_last_status();
    return kn_op_run_multi(c, outs);
}

/* PyTorch's pooling_output_shape. */
static int64_t pooled_size(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil_mode) {
    int64_t num = in + 2 * p - d * (k - 1) - 1 + (ceil_mode ? s - 1 : 0);
    int64_t out = (num >= 0 ? num / s : -((-num + s - 1) / s)) + 1;
    if (ceil_mode && (out - 1) * s >= in + p) out--;
    return out;
}

static kn_status pool_any(kn_op_id op, kn_tensor *x, kn_pool_opts o, kn_tensor **outs) {
    kn_opctx c;
    if (!begin_planes(&c, op, x)) return kn_last_status();
    bool is_max = op == KN_OP_max_pool2d;
    if (!is_max && (o.dilation[0] > 1 || o.dilation[1] > 1)) {
        kn_op_fail(&c, KN_ERR_ARG, "avg_pool2d has no dilation");
        return kn_last_status();
    }
    int64_t out[2];
    kn_attrs_max_pool2d *a = KN_ATTRS(c.node, max_pool2d); /* avg_pool2d's are max_pool2d's (op_table.c) */
    for (int d = 0; d < 2; d++) {
        int64_t k = o.kernel[d], s = o.stride[d] ? o.stride[d] : k, p = o.padding[d], dl = o.dilation[d] ? o.dilation[d] : 1;
        if (k <= 0 || s <= 0 || dl <= 0 || p < 0) {
            kn_op_fail(&c, KN_ERR_ARG, "kernel, stride and dilation must be positive and padding non-negative");
            return kn_last_status();
        }
        if (p > k / 2) {
            kn_op_fail(&c, KN_ERR_ARG, "padding %lld must be at most half the kernel size %lld", (long long)p, (long long)k);
            return kn_last_status();
        }
        out[d] = pooled_size(x->shape[x->ndim - 2 + d], k, s, p, dl, o.ceil_mode);
        if (out[d] <= 0) {
            kn_op_fail(&c, KN_ERR_SHAPE, "output size %lld along dim %d is not positive", (long long)out[d], x->ndim - 2 + d);
            return kn_last_status();
        }
        a->kernel[d] = k, a->stride[d] = s, a->padding[d] = p, a->dilation[d] = dl;
    }
    a->exclude_pad = o.exclude_pad;
    return finish_planes(&c, x, out[0], out[1], outs, is_max);
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

/* The ops whose output size is given: adaptive pooling and upsampling. */
static kn_tensor *resize_any(kn_op_id op, kn_tensor *x, int64_t oh, int64_t ow, int64_t attr) {
    kn_opctx c;
    if (!begin_planes(&c, op, x)) return NULL;
    if (oh <= 0 || ow <= 0)
        return kn_op_fail(&c, KN_ERR_SHAPE, "output size %lld x %lld is not positive", (long long)oh, (long long)ow);
    if (op == KN_OP_upsample_bilinear2d) KN_ATTRS(c.node, upsample_bilinear2d)->align_corners = attr;
    kn_tensor *outs[1] = {0};
    finish_planes(&c, x, oh, ow, outs, false);
    return outs[0];
}

kn_tensor *kn_adaptive_avg_pool2d(kn_tensor *x, int64_t out_h, int64_t out_w) {
    return resize_any(KN_OP_adaptive_avg_pool2d, x, out_h, out_w, 0);
}
kn_tensor *kn_upsample_nearest2d(kn_tensor *x, int64_t out_h, int64_t out_w) {
    return resize_any(KN_OP_upsample_nearest2d, x, out_h, out_w, 0);
}
kn_tensor *kn_upsample_bilinear2d(kn_tensor *x, int64_t out_h, int64_t out_w, bool align_corners) {
    return resize_any(KN_OP_upsample_bilinear2d, x, out_h, out_w, align_corners);
}
