/* scaled_dot_product_attention: shape checks, grouped-query heads, batch broadcasting and
 * the mask's layout (the blocked kernel is backends/cpu/k_attention.c). */
#include <math.h>
#include <stdio.h>

#include "core/runtime_impl.h"
#include "kiln/ops.h"
#include "ops/loss_internal.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

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

/* q [batch..., Hq, Tq, D], k [batch..., Hk, Tk, D], v [batch..., Hk, Tk, Dv] (a 2-d operand is
 * one head), Hk dividing Hq, batch dims broadcasting, a mask broadcasting to [batch..., Hq,
 * Tq, Tk]; out[0] [batch..., Hq, Tq, Dv] in the promoted dtype (the API function views it as
 * [Tq, Dv] for 2-d q, k, v), out[1] the log-sum-exp [batch..., Hq, Tq] in f32 or f64. */
KN_RULE(kn_infer_sdpa) {
    static const char *const names[3] = {"q", "k", "v"};
    const kn_attrs_scaled_dot_product_attention *a = &at->scaled_dot_product_attention;
    for (int i = 0; i < 3; i++) {
        if (!kn_dtype_is_float(in[i]->dtype))
            KN_RULE_FAIL(KN_ERR_DTYPE, "%s must be a float tensor, not %s", names[i], kn_dtype_name(in[i]->dtype));
        if (in[i]->ndim < 2 || in[i]->ndim > KN_MAX_DIMS - 1)
            KN_RULE_FAIL(KN_ERR_SHAPE, "%s must be [..., H, T, D] (2 to %d dims)", names[i], KN_MAX_DIMS - 1);
    }
    if (!(a->dropout_p >= 0 && a->dropout_p <= 1)) KN_RULE_FAIL(KN_ERR_ARG, "dropout_p %g is outside [0, 1]", a->dropout_p);
    if (!isfinite(a->scale)) KN_RULE_FAIL(KN_ERR_ARG, "scale %g is not finite", a->scale);
    if (a->causal_align != KN_CAUSAL_BOTTOM_RIGHT && a->causal_align != KN_CAUSAL_TOP_LEFT)
        KN_RULE_FAIL(KN_ERR_ARG, "causal_align %d is neither KN_CAUSAL_BOTTOM_RIGHT nor KN_CAUSAL_TOP_LEFT",
                     (int)a->causal_align);
    attn_operand oq = split_operand(in[0]), ok = split_operand(in[1]), ov = split_operand(in[2]);
    if (ok.d != oq.d)
        KN_RULE_FAIL(KN_ERR_SHAPE, "q and k have different head sizes (%lld vs %lld)", (long long)oq.d, (long long)ok.d);
    if (ov.t != ok.t)
        KN_RULE_FAIL(KN_ERR_SHAPE, "k and v have different lengths (%lld vs %lld)", (long long)ok.t, (long long)ov.t);
    if (ov.heads != ok.heads)
        KN_RULE_FAIL(KN_ERR_SHAPE, "k and v have different head counts (%lld vs %lld)", (long long)ok.heads,
                     (long long)ov.heads);
    if (ok.heads == 0 ? oq.heads != 0 : oq.heads % ok.heads != 0)
        KN_RULE_FAIL(KN_ERR_SHAPE, "k's %lld heads do not divide q's %lld heads", (long long)ok.heads, (long long)oq.heads);
    kn_shape batch;
    if (!kn_broadcast_shapes("scaled_dot_product_attention", oq.batch, ok.batch, &batch) ||
        !kn_broadcast_shapes("scaled_dot_product_attention", batch, ov.batch, &batch))
        KN_RULE_FAIL(KN_ERR_SHAPE, "batch dims do not broadcast (%s)", kn_last_error());
    const kn_tensor *mask = kn_input_at(in, at, KN_SLOT(scaled_dot_product_attention, mask));
    if (mask) {
        kn_shape want = with_tail(batch, oq.heads, oq.t, ok.t), b;
        bool fits = kn_broadcast_shapes("scaled_dot_product_attention", kn_shape_of(mask), want, &b) && b.n == want.n;
        for (int d = 0; fits && d < b.n; d++) fits = b.v[d] == want.v[d];
        kn_clear_error();
        if (!fits) KN_RULE_FAIL(KN_ERR_SHAPE, "mask does not broadcast to [..., %lld, %lld, %lld]", (long long)oq.heads,
                                (long long)oq.t, (long long)ok.t);
    }
    r->compute = kn_promote_types(kn_promote_types(in[0]->dtype, in[1]->dtype), in[2]->dtype);
    kn_shape out = with_tail(batch, oq.heads, oq.t, ov.d), lse = batch;
    lse.v[lse.n++] = oq.heads, lse.v[lse.n++] = oq.t;
    kn_infer_out(r, r->compute, out.v, out.n);
    kn_infer_out(r, r->compute == KN_F64 ? KN_F64 : KN_F32, lse.v, lse.n);
    return KN_OK;
}

kn_tensor *kn_scaled_dot_product_attention(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask,
                                           kn_sdpa_opts opts) {
    kn_tensor *in[4] = {q, k, v, mask};
    kn_opctx c;
    kn_op_infer r;
    if (!kn_op_begin_slots(&c, KN_OP_scaled_dot_product_attention, 4, in)) return NULL;
    int64_t head = q->ndim >= 2 ? q->shape[q->ndim - 1] : 0;
    double scale = opts.scale != 0 ? opts.scale : head > 0 ? 1.0 / sqrt((double)head) : 1.0;
    *KN_ATTRS(c.node, scaled_dot_product_attention) = (kn_attrs_scaled_dot_product_attention){
        .causal = opts.causal, .causal_align = opts.causal_align, .scale = scale, .dropout_p = opts.dropout_p};
    if (!kn_op_infer_node(&c, &r)) return NULL;
    static const char *const names[4] = {"q", "k", "v", "mask"};
    attn_operand oq = split_operand(q), ok = split_operand(k), ov = split_operand(v);
    kn_shape batch = r.shape[1];
    batch.n -= 2;
    kn_shape shapes[4] = {with_tail(batch, oq.heads, oq.t, oq.d), with_tail(batch, ok.heads, ok.t, ok.d),
                          with_tail(batch, ov.heads, ov.t, ov.d), with_tail(batch, oq.heads, oq.t, ok.t)};
    kn_dtype mask_dt = !mask || mask->dtype == KN_BOOL ? KN_BOOL : r.compute == KN_F64 ? KN_F64 : KN_F32;
    for (int i = 0; i < (mask ? 4 : 3); i++) /* the node's inputs: autocast may have cast them */
        if (!kn_loss_set_input(&c, i, c.node->in[i], i < 3 ? r.compute : mask_dt, &shapes[i], names[i])) return NULL;
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    if (opts.dropout_p > 0) {
        uint64_t probs = (uint64_t)kn_shape_numel(batch) * (uint64_t)(oq.heads * oq.t * ok.t);
        kn_rng_reserve((probs + 3) / 4, &c.node->rng_seed, &c.node->rng_offset);
    }
    kn_tensor *out = kn_op_run(&c);
    if (!out || q->ndim >= 3 || batch.n) return out;
    kn_tensor *plain = kn_squeeze(out, 0); /* 2-d q, k, v: one head, no batch */
    kn_release(out);
    return plain;
}
