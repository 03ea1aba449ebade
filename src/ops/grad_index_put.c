/* Gradients of advanced indexing, masks and sorting: index_put, masked_fill, masked_select,
 * sort (and topk, which is sort keeping k). */
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/grad_index.h"

#define OK_IF(t) ((t) ? KN_OK : kn_last_status())

/* index_put's flat positions in x.shape[:n] (i64, the indices' shape), negatives wrapped. */
static kn_tensor *flat_positions(const kn_grad_ctx *c, int n) {
    const kn_shape *xs = &c->in_shape[0];
    kn_tensor *pos = NULL;
    int64_t stride = 1;
    for (int k = n - 1; k >= 0; k--) {
        kn_tensor *i = kn_remainder(c->in[2 + k], kn_scalar((double)xs->v[k], KN_I64));
        kn_tensor *term = stride == 1 ? i : kn_mul_scalar_int(i, stride);
        pos = pos ? kn_add(pos, term) : term;
        stride *= xs->v[k];
    }
    return pos;
}

/* t [x.shape[:n]..., rest...] at the flat positions pos: [pos' shape..., rest...]. */
static kn_tensor *take(kn_tensor *t, int n, kn_tensor *pos) {
    if (!t || !pos) return NULL;
    kn_shape s = kn_shape_of(t), rows = {.n = 1, .v = {1}}, out = kn_shape_of(pos);
    for (int d = 0; d < n; d++) rows.v[0] *= s.v[d];
    for (int d = n; d < s.n; d++) rows.v[rows.n++] = out.v[out.n++] = s.v[d];
    kn_tensor *picked = kn_index_select(kn_reshape(t, rows), 0, kn_reshape(pos, KN_SHAPE(kn_numel(pos))));
    return kn_reshape(picked, out);
}

/* x's gradient where nothing was written over it (all of it when accumulating); values' at
 * the positions they went to, for the last write of each element only. */
kn_status kn_grad_index_put(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int n = (int)c->attrs->index_put.n;
    bool accumulate = c->attrs->index_put.accumulate;
    kn_tensor *g = gout[0];
    if (c->needs[0] &&
        !(gin[0] = accumulate ? g : kn_index_put(g, c->in + 2, n, kn_scalar(0, kn_dtype_of(g)), false)))
        return kn_last_status();
    if (!c->needs[1]) return KN_OK;
    kn_tensor *pos = flat_positions(c, n), *gv = take(g, n, pos);
    if (!accumulate) {
        kn_shape B = c->in_shape[2], head = c->in_shape[0], won_shape = B;
        head.n = n;
        kn_tensor *ids = kn_grad_ids(B);
        kn_tensor *owner = kn_index_put(kn_full(head, -1, KN_I64), c->in + 2, n, ids, false);
        for (int d = n; d < c->in_shape[0].n; d++) won_shape.v[won_shape.n++] = 1;
        kn_tensor *won = kn_reshape(kn_eq(take(owner, n, pos), ids), won_shape);
        gv = kn_masked_fill(gv, kn_logical_not(won), 0);
    }
    gin[1] = gv;
    return OK_IF(gin[1]);
}

kn_status kn_grad_masked_fill(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_masked_fill(gout[0], c->in[1], 0);
    return OK_IF(gin[0]);
}

/* The selected elements' gradients put back where the mask is true. */
kn_status kn_grad_masked_select(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_shape s = c->in_shape[0];
    kn_shape flat = KN_SHAPE(kn_shape_numel(s));
    kn_tensor *pos = kn_flatten(kn_nonzero(kn_reshape(c->in[1], flat)), 0, -1);
    kn_tensor *g = kn_index_add(kn_zeros(flat, kn_dtype_of(gout[0])), 0, pos, gout[0], 1.0);
    gin[0] = kn_reshape(g, s);
    return OK_IF(gin[0]);
}

/* The values' gradients sent back to the positions the indices name (distinct per row). */
kn_status kn_grad_sort(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    if (!gout[0]) return KN_OK;
    gin[0] = kn_scatter(kn_zeros(c->in_shape[0], kn_dtype_of(gout[0])), c->attrs->sort.dim, c->out[1], gout[0]);
    return OK_IF(gin[0]);
}
