/* Gradients of the axis-walk index ops: index_select, gather, the scatters and index_add.
 * Index inputs never get gradients (they are integers). Where duplicate indices write one
 * element and the last write wins (scatter), only the winning source element gets the
 * gradient, so the formulas stay exact with duplicates. */
#include <math.h>

#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/grad_index.h"

#define OK_IF(t) ((t) ? KN_OK : kn_last_status())

kn_tensor *kn_grad_fit(kn_tensor *g, kn_shape shape) {
    if (!g) return NULL;
    kn_shape have = kn_shape_of(g);
    int64_t pads[2 * KN_MAX_DIMS] = {0};
    bool same = true;
    for (int d = 0; d < shape.n; d++) {
        pads[2 * (shape.n - 1 - d) + 1] = shape.v[d] - have.v[d];
        same &= shape.v[d] == have.v[d];
    }
    return same ? g : kn_pad(g, pads, 2 * shape.n, KN_PAD_CONSTANT, 0);
}

/* The leading window of t with shape s (src may be larger than index in every dim). */
static kn_tensor *window(kn_tensor *t, kn_shape s) {
    for (int d = 0; t && d < s.n; d++)
        if (kn_size(t, d) != s.v[d]) t = kn_narrow(t, d, 0, s.v[d]);
    return t;
}

kn_tensor *kn_grad_ids(kn_shape shape) {
    kn_tensor *ids = kn_arange(0, (double)kn_shape_numel(shape), 1, KN_I64);
    return ids ? kn_reshape(ids, shape) : NULL;
}

/* For scatter along d into shape x_shape: whether each index position is the last write
 * to its element (bool, index's shape). The scatter of position ids decides, so this
 * follows whatever order the backend's scatter keeps. */
static kn_tensor *scatter_winners(kn_shape x_shape, int64_t d, kn_tensor *index) {
    kn_tensor *ids = kn_grad_ids(kn_shape_of(index));
    kn_tensor *owner = kn_scatter(kn_full(x_shape, -1, KN_I64), d, index, ids);
    return kn_eq(kn_gather(owner, d, index), ids);
}

kn_status kn_grad_index_select(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *z = kn_zeros(c->in_shape[0], kn_dtype_of(gout[0]));
    gin[0] = kn_index_add(z, c->attrs->index_select.dim, c->in[1], gout[0], 1.0);
    return OK_IF(gin[0]);
}

kn_status kn_grad_gather(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *z = kn_zeros(c->in_shape[0], kn_dtype_of(gout[0]));
    gin[0] = kn_scatter_add(z, c->attrs->gather.dim, c->in[1], gout[0]);
    return OK_IF(gin[0]);
}

/* x's gradient where nothing was written over it; src's from the elements it won. */
kn_status kn_grad_scatter(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int64_t d = c->attrs->scatter.dim;
    kn_tensor *g = gout[0], *index = c->in[1];
    if (c->needs[0] && !(gin[0] = kn_scatter_value(g, d, index, 0))) return kn_last_status();
    if (c->needs[2]) {
        kn_tensor *lost = kn_logical_not(scatter_winners(c->in_shape[0], d, index));
        gin[2] = kn_grad_fit(kn_masked_fill(kn_gather(g, d, index), lost, 0), c->in_shape[2]);
        if (!gin[2]) return kn_last_status();
    }
    return KN_OK;
}

kn_status kn_grad_scatter_value(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_scatter_value(gout[0], c->attrs->scatter_value.dim, c->in[1], 0);
    return OK_IF(gin[0]);
}

kn_status kn_grad_scatter_add(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0];
    if (c->needs[2] && !(gin[2] = kn_grad_fit(kn_gather(gout[0], c->attrs->scatter_add.dim, c->in[1]), c->in_shape[2])))
        return kn_last_status();
    return KN_OK;
}

kn_status kn_grad_index_add(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = gout[0];
    if (!c->needs[2]) return KN_OK;
    double alpha = c->attrs->index_add.alpha;
    kn_tensor *g = kn_index_select(gout[0], c->attrs->index_add.dim, c->in[1]);
    gin[2] = alpha == 1 ? g : kn_mul_scalar(g, alpha);
    return OK_IF(gin[2]);
}

/* ---- scatter_reduce ----------------------------------------------------------------------
 * Computed in the accumulator dtype (src's), with src cut to index's shape; prod, amax and
 * amin read the values (x cast to that dtype), sum and mean only the index. */

typedef struct reduce_args {
    kn_tensor *g, *x, *index, *src;
    int64_t d;
    kn_scatter_reduce_op op;
    bool include_self;
    kn_dtype dt;
} reduce_args;

static kn_tensor *reduce_with(const reduce_args *a, kn_tensor *x, kn_tensor *src) {
    return kn_scatter_reduce(x, a->d, a->index, src, a->op, a->include_self);
}

/* gx without include_self: no gradient where src was reduced in instead of x. */
static kn_tensor *drop_written(const reduce_args *a, kn_tensor *gx) {
    return a->include_self ? gx : kn_scatter_value(gx, a->d, a->index, 0);
}

static kn_status reduce_sum_mean(const reduce_args *a, kn_tensor **gx, kn_tensor **gs) {
    kn_tensor *g = a->g;
    if (a->op == KN_SCATTER_MEAN) {
        /* Each written element is divided by its count of terms (at least one). */
        kn_tensor *ones = kn_ones(kn_shape_of(a->index), a->dt);
        kn_tensor *count = kn_scatter_add(kn_zeros(kn_shape_of(g), a->dt), a->d, a->index, ones);
        g = kn_div(g, kn_clamp(kn_add_scalar(count, a->include_self), 1, INFINITY));
    }
    *gx = a->include_self ? g : kn_scatter_value(a->g, a->d, a->index, 0);
    *gs = kn_gather(g, a->d, a->index);
    return *gx && *gs ? KN_OK : kn_last_status();
}

/* As PyTorch: ratios of the result to each factor, with the factors that are zero handled
 * apart (a single zero's gradient is the product of the others; with two, all are zero). */
static kn_status reduce_prod(const reduce_args *a, kn_tensor **gx, kn_tensor **gs) {
    kn_tensor *g = a->g, *x = a->x, *src = a->src;
    kn_tensor *x1 = kn_masked_fill(x, kn_eq(x, kn_scalar(0, a->dt)), 1);
    *gx = drop_written(a, kn_mul(g, kn_div(reduce_with(a, x1, src), x1)));
    kn_tensor *src_zero = kn_eq(src, kn_scalar(0, a->dt));
    kn_tensor *zeros_per = kn_scatter_add(kn_zeros(kn_shape_of(x), a->dt), a->d, a->index, kn_cast(src_zero, a->dt));
    kn_tensor *single = kn_logical_and(src_zero, kn_eq(kn_gather(zeros_per, a->d, a->index), kn_scalar(1, a->dt)));
    kn_tensor *others = kn_gather(kn_mul(g, reduce_with(a, x, kn_masked_fill(src, single, 1))), a->d, a->index);
    kn_tensor *ratio = kn_div(kn_gather(kn_mul(g, reduce_with(a, x, src)), a->d, a->index),
                              kn_masked_fill(src, src_zero, 1));
    *gs = kn_where(single, others, ratio);
    return *gx && *gs ? KN_OK : kn_last_status();
}

/* As PyTorch: the gradient shared evenly by every term equal to the result. */
static kn_status reduce_extreme(const reduce_args *a, kn_tensor **gx, kn_tensor **gs) {
    kn_tensor *result = reduce_with(a, a->x, a->src);
    kn_tensor *x_is = drop_written(a, kn_cast(kn_eq(a->x, result), a->dt));
    kn_tensor *src_is = kn_cast(kn_eq(a->src, kn_gather(result, a->d, a->index)), a->dt);
    kn_tensor *share = kn_div(a->g, kn_scatter_add(x_is, a->d, a->index, src_is));
    *gx = kn_mul(x_is, share);
    *gs = kn_mul(src_is, kn_gather(share, a->d, a->index));
    return *gx && *gs ? KN_OK : kn_last_status();
}

kn_status kn_grad_scatter_reduce(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *index = c->in[1];
    kn_dtype dt = c->in_dtype[2];
    const kn_attrs_scatter_reduce *at = &c->attrs->scatter_reduce;
    kn_scatter_reduce_op op = (kn_scatter_reduce_op)at->reduce;
    bool by_value = op == KN_SCATTER_PROD || op == KN_SCATTER_AMAX || op == KN_SCATTER_AMIN;
    reduce_args a = {.g = kn_cast(gout[0], dt), .x = by_value ? kn_cast(c->in[0], dt) : NULL, .index = index,
                     .src = window(c->in[2], kn_shape_of(index)), .d = at->dim, .op = op,
                     .include_self = at->include_self, .dt = dt};
    kn_tensor *gx = NULL, *gs = NULL;
    kn_status st = op == KN_SCATTER_PROD ? reduce_prod(&a, &gx, &gs)
                   : by_value            ? reduce_extreme(&a, &gx, &gs)
                                         : reduce_sum_mean(&a, &gx, &gs);
    if (st != KN_OK) return st;
    if (c->needs[0]) gin[0] = gx;
    if (c->needs[2] && !(gin[2] = kn_grad_fit(gs, c->in_shape[2]))) return kn_last_status();
    return KN_OK;
}
