/* Gradients of embedding and embedding_bag: the rows' gradients added into a zero weight
 * gradient in one pass by embedding_backward (never a dense one-hot product). */
#include <math.h>

#include "kiln/ops.h"
#include "ops/grad.h"

#define OK_IF(t) ((t) ? KN_OK : kn_last_status())

kn_status kn_grad_embedding(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_embedding_backward(gout[0], c->in[1], c->in_shape[0].v[0]);
    return OK_IF(gin[0]);
}

/* Linear in grad: its adjoint picks the rows back out. */
kn_status kn_grad_embedding_backward(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_embedding(gout[0], c->in[1]);
    return OK_IF(gin[0]);
}

/* The bag of each of the n indices (i64 [n], clamped into [0, B)) and, with offsets, whether
 * the index lies in a bag at all (dt [n]; NULL when every index does). */
static kn_status bag_of(const kn_grad_ctx *c, int64_t n, int64_t B, kn_dtype dt, kn_tensor **bag, kn_tensor **in_bag) {
    *in_bag = NULL;
    kn_tensor *offsets = KN_GRAD_INPUT(c, embedding_bag, offsets);
    if (!offsets) { /* [B, L] indices */
        kn_tensor *rows = kn_unsqueeze(kn_arange(0, (double)B, 1, KN_I64), 1);
        *bag = kn_reshape(kn_expand(rows, KN_SHAPE(B, c->attrs->embedding_bag.length)), KN_SHAPE(n));
        return OK_IF(*bag);
    }
    /* started[e]: the bags starting at or before e (offsets never decrease); the last of them
     * holds e, unless none started yet or e is past include_last_offset's final offset. */
    kn_tensor *marks = kn_index_add(kn_zeros(KN_SHAPE(n + 1), KN_I64), 0, kn_narrow(offsets, 0, 0, B),
                                    kn_ones(KN_SHAPE(B), KN_I64), 1);
    kn_tensor *started = kn_narrow(kn_cumsum(marks, 0), 0, 0, n);
    kn_tensor *inside = kn_gt(started, kn_scalar(0, KN_I64));
    if (c->attrs->embedding_bag.include_last_offset)
        inside = kn_logical_and(inside, kn_lt(kn_arange(0, (double)n, 1, KN_I64), kn_narrow(offsets, 0, B, 1)));
    *bag = kn_clamp_int(kn_sub_scalar_int(started, 1), 0, B - 1);
    *in_bag = kn_cast(inside, dt);
    return *bag && *in_bag ? KN_OK : kn_last_status();
}

/* max mode, [n, D] in dt: 1 where an index's row is the first of its bag to hold the bag's
 * maximum in that column, the row PyTorch's max_indices name (the forward replaces a maximum
 * only by a greater value, so a NaN maximum is the bag's first row, and equal maxima keep the
 * first). */
static kn_tensor *first_max_rows(const kn_grad_ctx *c, kn_tensor *rows_w, kn_tensor *bag, kn_tensor *in_bag, int64_t n,
                                 kn_dtype dt) {
    kn_tensor *best = kn_index_select(c->out[0], 0, bag);
    kn_tensor *hit = kn_logical_or(kn_eq(rows_w, best), kn_logical_and(kn_isnan(rows_w), kn_isnan(best)));
    if (in_bag) hit = kn_logical_and(hit, kn_unsqueeze(kn_cast(in_bag, KN_BOOL), 1));
    kn_tensor *hits = kn_cast(hit, KN_I64);
    kn_tensor *before = kn_sub(kn_cumsum(hits, 0), hits); /* hits in the rows above */
    kn_tensor *offsets = KN_GRAD_INPUT(c, embedding_bag, offsets);
    kn_tensor *start = offsets ? kn_index_select(offsets, 0, bag)
                               : kn_mul(bag, kn_scalar(c->attrs->embedding_bag.length, KN_I64));
    start = kn_minimum(kn_cast(start, KN_I64), kn_scalar(n - 1, KN_I64)); /* rows in no bag are masked out */
    return kn_cast(kn_logical_and(hit, kn_eq(before, kn_index_select(before, 0, start))), dt);
}

/* Each index's row gets its bag's gradient, scaled by its per-sample weight (sum), by one
 * over the bag's size (mean), or, per column, all of it to the row holding the maximum (max). */
kn_status kn_grad_embedding_bag(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_bag_mode mode = (kn_bag_mode)c->attrs->embedding_bag.mode;
    int w_at = KN_GRAD_POS(c, embedding_bag, per_sample_weights);
    bool has_w = w_at >= 0;
    kn_tensor *g = gout[0];
    kn_dtype dt = kn_dtype_of(g);
    int64_t n = kn_shape_numel(c->in_shape[1]), B = kn_size(g, 0), V = c->in_shape[0].v[0];
    if (n == 0 || B == 0) return KN_OK; /* no row is in a bag: zero gradients */
    kn_tensor *bag, *in_bag;
    kn_status st = bag_of(c, n, B, dt, &bag, &in_bag);
    if (st != KN_OK) return st;
    kn_tensor *indices = kn_reshape(c->in[1], KN_SHAPE(n));
    kn_tensor *rows_g = kn_index_select(g, 0, bag); /* [n, D] */
    kn_tensor *scale = in_bag;                       /* [n], NULL for 1 */
    if (mode == KN_BAG_MEAN) {
        kn_tensor *member = in_bag ? in_bag : kn_ones(KN_SHAPE(n), dt);
        kn_tensor *sizes = kn_index_add(kn_zeros(KN_SHAPE(B), dt), 0, bag, member, 1);
        scale = kn_div(member, kn_index_select(kn_clamp(sizes, 1, INFINITY), 0, bag));
    }
    kn_tensor *psw = has_w ? kn_reshape(c->in[w_at], KN_SHAPE(n)) : NULL;
    if (psw) scale = scale ? kn_mul(scale, psw) : psw;
    kn_tensor *rows = scale ? kn_mul(rows_g, kn_unsqueeze(scale, 1)) : rows_g;
    kn_tensor *rows_w = mode == KN_BAG_MAX || has_w ? kn_index_select(c->in[0], 0, indices) : NULL;
    if (mode == KN_BAG_MAX) rows = kn_mul(rows_g, first_max_rows(c, rows_w, bag, in_bag, n, dt));
    if (c->needs[0] && !(gin[0] = kn_embedding_backward(rows, indices, V))) return kn_last_status();
    if (has_w && c->needs[w_at]) {
        kn_tensor *gw = kn_sum(kn_mul(rows_g, rows_w), KN_DIMS(1), false);
        if (in_bag) gw = kn_mul(gw, in_bag);
        if (!(gin[w_at] = kn_reshape(gw, c->in_shape[w_at]))) return kn_last_status();
    }
    return KN_OK;
}
