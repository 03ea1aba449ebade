/* scaled_dot_product_attention: shape checks, grouped-query heads, batch broadcasting and
 * the mask's layout (the blocked kernel is backends/cpu/k_attention.c). */
#include <math.h>
#include <stdio.h>

#include "core/runtime_impl.h"
#include "kiln/ops.h"
#include "ops/loss_internal.h"

/* One of q, k, v as [batch..., heads, T, D]: a 2-d operand has one head. */
typedef struct attn_operand {
    kn_shape batch;
    int64_t heads, t, d;
} attn_operand;

static attn_operand split_operand(const kn_tensor *x) {
    attn_operand o = {.heads = 1};
    int nd = x->ndim;
    o.t = x->shape[nd - 2], o.d = x->shape[nd - 1];
    if (nd >= 3) o.heads = x->shape[nd - 3];
    for (int d = 0; d < nd - 3; d++) o.batch.v[o.batch.n++] = x->shape[d];
    return o;
}

static kn_shape with_tail(kn_shape batch, int64_t a, int64_t b, int64_t c) {
    batch.v[batch.n++] = a, batch.v[batch.n++] = b, batch.v[batch.n++] = c;
    return batch;
}

kn_tensor *kn_scaled_dot_product_attention(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask,
                                           kn_sdpa_opts opts) {
    kn_tensor *in[4] = {q, k, v, mask};
    kn_opctx c;
    if (!kn_op_begin_slots(&c, KN_OP_scaled_dot_product_attention, 4, in)) return NULL;
    static const char *const names[4] = {"q", "k", "v", "mask"};
    for (int i = 0; i < 3; i++) {
        if (!kn_dtype_is_float(in[i]->dtype))
            return kn_op_fail(&c, KN_ERR_DTYPE, "%s must be a float tensor, not %s", names[i], kn_dtype_name(in[i]->dtype));
        if (in[i]->ndim < 2 || in[i]->ndim > KN_MAX_DIMS - 1)
            return kn_op_fail(&c, KN_ERR_SHAPE, "%s must be [..., H, T, D] (2 to %d dims)", names[i], KN_MAX_DIMS - 1);
    }
    if (!(opts.dropout_p >= 0 && opts.dropout_p <= 1))
        return kn_op_fail(&c, KN_ERR_ARG, "dropout_p %g is outside [0, 1]", opts.dropout_p);
    if (!isfinite(opts.scale)) return kn_op_fail(&c, KN_ERR_ARG, "scale %g is not finite", opts.scale);
    if (opts.causal_align != KN_CAUSAL_BOTTOM_RIGHT && opts.causal_align != KN_CAUSAL_TOP_LEFT)
        return kn_op_fail(&c, KN_ERR_ARG, "causal_align %d is neither KN_CAUSAL_BOTTOM_RIGHT nor KN_CAUSAL_TOP_LEFT",
                          (int)opts.causal_align);
    attn_operand oq = split_operand(q), ok = split_operand(k), ov = split_operand(v);
    if (ok.d != oq.d)
        return kn_op_fail(&c, KN_ERR_SHAPE, "q and k have different head sizes (%lld vs %lld)", (long long)oq.d,
                          (long long)ok.d);
    if (ov.t != ok.t)
        return kn_op_fail(&c, KN_ERR_SHAPE, "k and v have different lengths (%lld vs %lld)", (long long)ok.t,
                          (long long)ov.t);
    if (ov.heads != ok.heads)
        return kn_op_fail(&c, KN_ERR_SHAPE, "k and v have different head counts (%lld vs %lld)", (long long)ok.heads,
                          (long long)ov.heads);
    if (ok.heads == 0 ? oq.heads != 0 : oq.heads % ok.heads != 0)
        return kn_op_fail(&c, KN_ERR_SHAPE, "k's %lld heads do not divide q's %lld heads", (long long)ok.heads,
                          (long long)oq.heads);
    kn_shape batch;
    if (!kn_broadcast_shapes("scaled_dot_product_attention", oq.batch, ok.batch, &batch) ||
        !kn_broadcast_shapes("scaled_dot_product_attention", batch, ov.batch, &batch)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(&c, KN_ERR_SHAPE, "batch dims do not broadcast (%s)", msg);
    }
    kn_dtype dt = kn_promote_types(kn_promote_types(q->dtype, k->dtype), v->dtype);
    kn_shape shapes[4] = {with_tail(batch, oq.heads, oq.t, oq.d), with_tail(batch, ok.heads, ok.t, ok.d),
                          with_tail(batch, ov.heads, ov.t, ov.d), with_tail(batch, oq.heads, oq.t, ok.t)};
    kn_dtype mask_dt = !mask || mask->dtype == KN_BOOL ? KN_BOOL : dt == KN_F64 ? KN_F64 : KN_F32;
    for (int i = 0; i < (mask ? 4 : 3); i++)
        if (!kn_loss_set_input(&c, i, in[i], i < 3 ? dt : mask_dt, &shapes[i], names[i])) return NULL;

    double scale = opts.scale != 0 ? opts.scale : oq.d > 0 ? 1.0 / sqrt((double)oq.d) : 1.0;
    *KN_ATTRS(c.node, scaled_dot_product_attention) = (kn_attrs_scaled_dot_product_attention){
        .causal = opts.causal, .causal_align = opts.causal_align, .scale = scale, .dropout_p = opts.dropout_p};
    kn_shape out = q->ndim >= 3 || batch.n ? with_tail(batch, oq.heads, oq.t, ov.d) : KN_SHAPE(oq.t, ov.d);
    kn_shape lse = batch;
    lse.v[lse.n++] = oq.heads, lse.v[lse.n++] = oq.t;
    if (!kn_op_output(&c, dt, out.v, out.n) || !kn_op_output(&c, dt == KN_F64 ? KN_F64 : KN_F32, lse.v, lse.n))
        return NULL;
    if (opts.dropout_p > 0) {
        uint64_t probs = (uint64_t)kn_shape_numel(batch) * (uint64_t)(oq.heads * oq.t * ok.t);
        kn_rng_reserve((probs + 3) / 4, &c.node->rng_seed, &c.node->rng_offset);
    }
    return kn_op_run(&c);
}
