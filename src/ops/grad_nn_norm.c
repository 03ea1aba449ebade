/* Gradients of the normalizations. layer_norm and rms_norm run one backward kernel
 * (ops/nn_backward.h) that recomputes the row statistics from x; group_norm reuses it on
 * its groups as rows; batch_norm is composed of ops. Each takes x normalized again (xhat)
 * from the forward op without affine parameters where weight's gradient needs it. */
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/nn_backward.h"

static bool wants(const kn_grad_ctx *c, int i) { return i >= 0 && c->needs[i]; }

static kn_status trailing_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin, bool rms) {
    /* rms_norm's slots and attributes are layer_norm's, less bias (op_table.c) */
    int wi = KN_GRAD_POS(c, layer_norm, weight), bi = rms ? -1 : KN_GRAD_POS(c, layer_norm, bias);
    int64_t inner = c->attrs->layer_norm.inner;
    if (!gout[0]) return KN_OK;
    kn_tensor *w = wi >= 0 ? kn_reshape(c->in[wi], KN_SHAPE(inner)) : NULL, *dx = NULL, *dw = NULL, *db = NULL;
    if (wi >= 0 && !w) return kn_last_status();
    kn_status st = kn_norm_backward(gout[0], c->in[0], w, inner, c->attrs->layer_norm.eps, rms, c->needs[0] ? &dx : NULL,
                                    wants(c, wi) ? &dw : NULL, wants(c, bi) ? &db : NULL);
    if (st != KN_OK) return st;
    gin[0] = dx;
    if (wants(c, wi) && !(gin[wi] = kn_reshape(dw, c->in_shape[wi]))) return kn_last_status();
    if (wants(c, bi) && !(gin[bi] = kn_reshape(db, c->in_shape[bi]))) return kn_last_status();
    return KN_OK;
}

kn_status kn_grad_layer_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return trailing_norm(c, gout, gin, false);
}

kn_status kn_grad_rms_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return trailing_norm(c, gout, gin, true);
}

/* x [N, C, *]: the dims other than channels, and a [C] vector shaped to broadcast over x. */
static kn_shape non_channel_dims(kn_shape x) {
    kn_shape d = {.n = 1, .v = {0}};
    for (int i = 2; i < x.n; i++) d.v[d.n++] = i;
    return d;
}
static kn_tensor *per_channel(kn_tensor *v, kn_shape x) {
    kn_shape s = {.n = x.n - 1, .v = {x.v[1]}};
    for (int i = 1; i < s.n; i++) s.v[i] = 1;
    return kn_reshape(v, s);
}

/* Shared tail of group_norm and batch_norm: dweight = sum(gy * xhat), dbias = sum(gy) over
 * every dim but channels. */
static kn_status affine_grads(const kn_grad_ctx *c, kn_tensor *gy, kn_tensor *xhat, kn_tensor **gin) {
    bool bn = c->op == KN_OP_batch_norm;
    int wi = bn ? KN_GRAD_POS(c, batch_norm, weight) : KN_GRAD_POS(c, group_norm, weight);
    int bi = bn ? KN_GRAD_POS(c, batch_norm, bias) : KN_GRAD_POS(c, group_norm, bias);
    kn_shape x = c->in_shape[0], dims = non_channel_dims(x);
    if (wants(c, wi) && !(gin[wi] = kn_sum(kn_mul(gy, xhat), dims, false))) return kn_last_status();
    if (wants(c, bi) && !(gin[bi] = kn_sum(gy, dims, false))) return kn_last_status();
    return KN_OK;
}

/* group_norm: each (image, group) is a row of layer_norm without affine parameters, fed
 * gy * weight. */
kn_status kn_grad_group_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int wi = KN_GRAD_POS(c, group_norm, weight);
    kn_shape x = c->in_shape[0];
    int64_t G = c->attrs->group_norm.groups, rows = x.v[0] * G, inner = rows ? kn_shape_numel(x) / rows : 0;
    double eps = c->attrs->group_norm.eps;
    kn_tensor *gy = gout[0];
    if (!gy) return KN_OK;
    if (c->needs[0] && rows && inner) {
        kn_tensor *gxhat = wi >= 0 ? kn_mul(gy, per_channel(c->in[wi], x)) : gy, *dx = NULL;
        kn_status st = kn_norm_backward(kn_reshape(gxhat, KN_SHAPE(rows, inner)), kn_reshape(c->in[0], KN_SHAPE(rows, inner)),
                                        NULL, inner, eps, false, &dx, NULL, NULL);
        if (st != KN_OK || !(gin[0] = kn_reshape(dx, x))) return kn_last_status();
    }
    kn_tensor *xhat = wants(c, wi) ? kn_group_norm(c->in[0], G, NULL, NULL, eps) : NULL;
    if (wants(c, wi) && !xhat) return kn_last_status();
    return affine_grads(c, gy, xhat, gin);
}

/* batch_norm. Training: with statistics over (N, *) per channel, gxhat = gy * weight and
 * dx = rstd * (gxhat - mean(gxhat) - xhat * mean(gxhat * xhat)). Inference: the running
 * statistics are constants, dx = gy * weight * rsqrt(running_var + eps). Running statistics
 * get no gradient (their in-place update is not differentiable). */
kn_status kn_grad_batch_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    bool training = c->attrs->batch_norm.training;
    int mi = KN_GRAD_POS(c, batch_norm, running_mean), vi = KN_GRAD_POS(c, batch_norm, running_var);
    int wi = KN_GRAD_POS(c, batch_norm, weight);
    double eps = c->attrs->batch_norm.eps;
    kn_shape x = c->in_shape[0], dims = non_channel_dims(x);
    kn_tensor *gy = gout[0], *xin = c->in[0];
    if (!gy) return KN_OK;
    kn_tensor *xhat = training ? kn_batch_norm(xin, NULL, NULL, NULL, NULL, true, 0, eps)
                               : kn_batch_norm(xin, c->in[mi], c->in[vi], NULL, NULL, false, 0, eps);
    if (!xhat) return kn_last_status();
    if (c->needs[0]) {
        kn_tensor *gxhat = wi >= 0 ? kn_mul(gy, per_channel(c->in[wi], x)) : gy, *dx;
        if (training) {
            kn_tensor *rstd = kn_rsqrt(kn_add_scalar(kn_var(xin, dims, 0, true), eps));
            kn_tensor *centered = kn_sub(gxhat, kn_mean(gxhat, dims, true));
            kn_tensor *proj = kn_mul(xhat, kn_mean(kn_mul(gxhat, xhat), dims, true));
            dx = kn_mul(kn_sub(centered, proj), rstd);
        } else {
            dx = kn_mul(gxhat, per_channel(kn_rsqrt(kn_add_scalar(c->in[vi], eps)), x));
        }
        if (!(gin[0] = dx)) return kn_last_status();
    }
    return affine_grads(c, gy, xhat, gin);
}
