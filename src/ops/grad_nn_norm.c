/* Gradients of the normalizations. layer_norm, rms_norm and batch_norm run one backward
 * kernel each (ops/nn_backward.h) that recomputes the statistics from x; group_norm reuses
 * layer_norm's on its groups as rows, and takes x normalized again (xhat) from the forward op
 * without affine parameters where weight's gradient needs it. */
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

/* group_norm: each (image, group) is a row of layer_norm without affine parameters, fed
 * gy * weight; dweight = sum(gy * xhat), dbias = sum(gy) over every dim but channels. */
kn_status kn_grad_group_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int wi = KN_GRAD_POS(c, group_norm, weight), bi = KN_GRAD_POS(c, group_norm, bias);
    kn_shape x = c->in_shape[0], dims = non_channel_dims(x);
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
    if (wants(c, wi) && !(xhat && (gin[wi] = kn_sum(kn_mul(gy, xhat), dims, false)))) return kn_last_status();
    if (wants(c, bi) && !(gin[bi] = kn_sum(gy, dims, false))) return kn_last_status();
    return KN_OK;
}

/* batch_norm: one backward op (ops/nn_backward.h); training recomputes the batch statistics
 * from x, inference takes the running ones as constants. Running statistics get no gradient
 * (their in-place update is not differentiable). */
kn_status kn_grad_batch_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    bool training = c->attrs->batch_norm.training;
    int wi = KN_GRAD_POS(c, batch_norm, weight), bi = KN_GRAD_POS(c, batch_norm, bias);
    kn_tensor *rm = training ? NULL : KN_GRAD_INPUT(c, batch_norm, running_mean);
    kn_tensor *rv = training ? NULL : KN_GRAD_INPUT(c, batch_norm, running_var);
    if (!gout[0]) return KN_OK;
    return kn_batch_norm_backward(gout[0], c->in[0], wi >= 0 ? c->in[wi] : NULL, rm, rv, training,
                                  c->attrs->batch_norm.eps, c->needs[0] ? &gin[0] : NULL,
                                  wants(c, wi) ? &gin[wi] : NULL, wants(c, bi) ? &gin[bi] : NULL);
}
