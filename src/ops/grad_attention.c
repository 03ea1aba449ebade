/* Gradient of scaled_dot_product_attention: one backward op (its CPU kernel recomputes the
 * probabilities block by block from the forward's saved log-sum-exp, FlashAttention-style). */
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/loss_internal.h"

kn_status kn_grad_scaled_dot_product_attention(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    if (!gout[0]) return KN_OK; /* only the log-sum-exp, which the API never hands out */
    int mask_at = KN_GRAD_POS(c, scaled_dot_product_attention, mask);
    kn_tensor *mask = mask_at >= 0 ? c->in[mask_at] : NULL;
    bool want_dmask = mask && c->needs[mask_at] && kn_dtype_is_float(c->in_dtype[mask_at]);
    /* The output is [Tq, Dv] for 2-d q: the kernel reads it as [B..., H, Tq, Dv]. */
    kn_shape o = c->in_shape[0];
    o.v[o.n - 1] = c->in_shape[2].v[c->in_shape[2].n - 1];
    kn_tensor *in[7] = {c->in[0], c->in[1], c->in[2], kn_reshape(c->out[0], o), kn_reshape(gout[0], o), c->out[1], mask};
    kn_tensor *dq = NULL, *dk = NULL, *dv = NULL, *dmask = NULL;
    kn_status st = kn_sdpa_backward(in, &c->attrs->scaled_dot_product_attention, c->rng_seed, c->rng_offset, &dq, &dk, &dv, want_dmask ? &dmask : NULL);
    if (st != KN_OK) return st;
    gin[0] = dq, gin[1] = dk, gin[2] = dv;
    if (want_dmask) gin[mask_at] = dmask;
    return KN_OK;
}
