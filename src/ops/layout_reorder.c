/* Layout ops that move elements within one tensor: pad, roll and repeat (the remap kernel),
 * flip and repeat_interleave (views + the copy op), tril/triu and one_hot. */
#include <stdio.h>

#include "core/error.h"
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* Remap modes of defs/layout.def; the first three are kn_pad_mode's values. */
enum { REMAP_CIRCULAR = 3 };

/* pad's limits per dim of size `size` padded by lo before and hi after, in mode. */
static kn_status pad_dim_ok(int d, int64_t size, int64_t lo, int64_t hi, int64_t mode, char *why, size_t why_size) {
    static const char *const names[] = {"constant", "reflect", "replicate"};
    if (mode != KN_PAD_CONSTANT && (lo < 0 || hi < 0))
        KN_RULE_FAIL(KN_ERR_ARG, "negative padding (%lld, %lld) of dim %d needs constant mode, not %s", (long long)lo,
                     (long long)hi, d, names[mode]);
    if (mode == KN_PAD_REFLECT && (lo || hi) && (lo >= size || hi >= size))
        KN_RULE_FAIL(KN_ERR_ARG, "padding (%lld, %lld) must be smaller than dim %d of size %lld in reflect mode",
                     (long long)lo, (long long)hi, d, (long long)size);
    if (mode == KN_PAD_REPLICATE && (lo || hi) && size == 0)
        KN_RULE_FAIL(KN_ERR_ARG, "dim %d is empty; replicate mode has nothing to repeat", d);
    if (size + lo + hi < 0)
        KN_RULE_FAIL(KN_ERR_SHAPE, "padding (%lld, %lld) leaves dim %d of size %lld with a negative size",
                     (long long)lo, (long long)hi, d, (long long)size);
    return KN_OK;
}

/* pad, roll and repeat: x's dtype, the size attribute's shape (one size per dim of x); pad's
 * modes (all but circular) within their limits, dims checked last first as they are given. */
KN_RULE(kn_infer_remap) {
    const kn_attrs_pad *a = &at->pad; /* roll's and repeat's are pad's (op_table.c) */
    const kn_tensor *x = in[0];
    if (a->size.n != x->ndim || a->before.n != x->ndim)
        KN_RULE_FAIL(KN_ERR_ARG, "size and before need one entry per dim of x");
    if (a->mode < 0 || a->mode > REMAP_CIRCULAR) KN_RULE_FAIL(KN_ERR_ARG, "unknown remap mode %lld", (long long)a->mode);
    for (int d = x->ndim - 1; d >= 0; d--) {
        int64_t lo = a->before.v[d], hi = a->size.v[d] - x->shape[d] - lo;
        kn_status st = a->mode == REMAP_CIRCULAR ? KN_OK : pad_dim_ok(d, x->shape[d], lo, hi, a->mode, why, why_size);
        if (st != KN_OK) return st;
        if (a->size.v[d] < 0) KN_RULE_FAIL(KN_ERR_SHAPE, "size %lld of dim %d is negative", (long long)a->size.v[d], d);
    }
    kn_infer_out(r, x->dtype, a->size.v, a->size.n);
    return KN_OK;
}

/* Finishes a begun pad/roll/repeat node: out_shape, per-dim `before` shifts, mode, fill value. */
static kn_tensor *run_remap(kn_opctx *c, const int64_t *out_shape, const int64_t *before, int mode, double value) {
    kn_tensor *x = c->node->in[0];
    kn_attrs_pad *a = KN_ATTRS(c->node, pad); /* roll's and repeat's are pad's (op_table.c) */
    a->mode = mode;
    a->value = value;
    a->before.n = a->size.n = x->ndim;
    for (int d = 0; d < x->ndim; d++) a->before.v[d] = before[d], a->size.v[d] = out_shape[d];
    if (!kn_op_outputs_inferred(c)) return NULL;
    return kn_op_run(c);
}

kn_tensor *kn_pad(kn_tensor *x, const int64_t *pads, int n_pads, kn_pad_mode mode, double value) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_pad, 1, &x)) return NULL;
    if (n_pads < 0 || n_pads % 2 || n_pads > 2 * x->ndim || (n_pads && !pads))
        return kn_op_fail(&c, KN_ERR_ARG, "%d pad amounts given; an even count up to %d is needed", n_pads, 2 * x->ndim);
    if (mode != KN_PAD_CONSTANT && mode != KN_PAD_REFLECT && mode != KN_PAD_REPLICATE)
        return kn_op_fail(&c, KN_ERR_ARG, "unknown pad mode %d", (int)mode);
    int64_t shape[KN_MAX_DIMS], before[KN_MAX_DIMS] = {0};
    for (int d = 0; d < x->ndim; d++) shape[d] = x->shape[d];
    for (int i = 0; i < n_pads / 2; i++) { /* pads run from the last dim; the rule checks them */
        int d = x->ndim - 1 - i;
        shape[d] = x->shape[d] + pads[2 * i] + pads[2 * i + 1];
        before[d] = pads[2 * i];
    }
    return run_remap(&c, shape, before, (int)mode, value);
}

/* Rolls x along every dim by shift[d] (any sign). */
static kn_tensor *roll_dims(kn_opctx *c, const int64_t *shift) {
    kn_tensor *x = c->node->in[0];
    int64_t before[KN_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        int64_t size = x->shape[d];
        before[d] = size ? ((shift[d] % size) + size) % size : 0;
    }
    return run_remap(c, x->shape, before, REMAP_CIRCULAR, 0);
}

kn_tensor *kn_roll(kn_tensor *x, const int64_t *shifts, kn_shape dims) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_roll, 1, &x)) return NULL;
    if (!shifts) return kn_op_fail(&c, KN_ERR_NULL, "shifts is NULL");
    if (dims.n < 0 || dims.n > KN_MAX_DIMS) return kn_op_fail(&c, KN_ERR_ARG, "%d dims listed", dims.n);
    int64_t shift[KN_MAX_DIMS] = {0};
    if (dims.n == 0) { /* the flattened tensor, rolled as one dim */
        kn_scope_push();
        kn_tensor *flat = kn_reshape(x, KN_SHAPE(-1));
        if (!flat) {
            kn_scope_pop();
            char msg[512];
            snprintf(msg, sizeof msg, "%s", kn_last_error());
            return kn_op_fail(&c, kn_last_status(), "%s", msg);
        }
        kn_op_set_input(&c, 0, flat);
        shift[0] = shifts[0];
        kn_tensor *rolled = roll_dims(&c, shift);
        return kn_scope_pop_keep(rolled ? kn_view(rolled, kn_shape_of(x)) : NULL);
    }
    for (int i = 0; i < dims.n; i++) {
        int64_t d;
        if (!kn_op_dim(&c, dims.v[i], x->ndim, &d)) return NULL;
        if (x->ndim) shift[d] += shifts[i]; /* a repeated dim rolls by the sum, as rolling twice would */
    }
    return roll_dims(&c, shift);
}

kn_tensor *kn_repeat(kn_tensor *x, kn_shape repeats) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_repeat, 1, &x)) return NULL;
    if (repeats.n < x->ndim || repeats.n > KN_MAX_DIMS)
        return kn_op_fail(&c, KN_ERR_ARG, "%d repeats given for a %d-d tensor; %d to %d are needed", repeats.n, x->ndim,
                          x->ndim, KN_MAX_DIMS);
    kn_shape wide = {.n = repeats.n}, out = {.n = repeats.n};
    int lead = repeats.n - x->ndim;
    for (int d = 0; d < repeats.n; d++) {
        if (repeats.v[d] < 0)
            return kn_op_fail(&c, KN_ERR_ARG, "repeat %lld of dim %d is negative", (long long)repeats.v[d], d);
        wide.v[d] = d < lead ? 1 : x->shape[d - lead];
        out.v[d] = wide.v[d] * repeats.v[d];
    }
    kn_tensor *xv = kn_view(x, wide); /* leading size-1 dims: always a view */
    if (!xv) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(&c, kn_last_status(), "%s", msg);
    }
    kn_op_set_input(&c, 0, xv);
    kn_release(xv);
    int64_t before[KN_MAX_DIMS] = {0};
    return run_remap(&c, out.v, before, REMAP_CIRCULAR, 0);
}

kn_tensor *kn_flip(kn_tensor *x, kn_shape dims) {
    if (!x) {
        kn_error_null_input("flip", 0);
        return NULL;
    }
    kn_shape norm;
    if (!kn_normalize_dims("flip", dims, x->ndim, &norm)) return NULL;
    kn_scope_push();
    kn_tensor *v = x;
    for (int i = 0; i < norm.n && v; i++) {
        int64_t size = v->shape[norm.v[i]];
        v = kn_slice(v, norm.v[i], size - 1, -size - 1, -1); /* x[::-1] along the dim */
    }
    return kn_scope_pop_keep(v ? kn_clone(v) : NULL);
}

kn_tensor *kn_repeat_interleave(kn_tensor *x, int64_t repeats, int64_t dim) {
    if (!x) {
        kn_error_null_input("repeat_interleave", 0);
        return NULL;
    }
    char desc[96];
    int nd = x->ndim ? x->ndim : 1;
    if (repeats < 0)
        return kn_error_null(KN_ERR_ARG, "repeat_interleave(%s): repeats %lld is negative", kn_describe(x, desc, sizeof desc),
                             (long long)repeats);
    if (dim < -nd || dim >= nd)
        return kn_error_null(KN_ERR_INDEX, "repeat_interleave(%s): dim %lld is out of range for a %d-d tensor",
                             kn_describe(x, desc, sizeof desc), (long long)dim, x->ndim);
    int64_t d = dim < 0 ? dim + nd : dim;
    /* [before, size, after] -> [before, size, repeats, after] by an expand view, copied. */
    int64_t outer = 1, size = x->ndim ? x->shape[d] : 1, inner = 1;
    for (int i = 0; i < x->ndim; i++) {
        if (i < d) outer *= x->shape[i];
        if (i > d) inner *= x->shape[i];
    }
    kn_shape out = x->ndim ? kn_shape_of(x) : KN_SHAPE(1);
    out.v[d] *= repeats;
    kn_scope_push();
    kn_tensor *grid = kn_reshape(x, KN_SHAPE(outer, size, 1, inner));
    kn_tensor *copy = kn_clone(kn_expand(grid, KN_SHAPE(outer, size, repeats, inner)));
    return kn_scope_pop_keep(kn_view(copy, out));
}

/* tril and triu: x's shape and dtype, x at least 2-d. */
KN_RULE(kn_infer_triangle) {
    if (in[0]->ndim < 2) KN_RULE_FAIL(KN_ERR_SHAPE, "needs at least 2 dims, not %d", in[0]->ndim);
    return kn_infer_like_first(op, n_in, in, at, r, why, why_size);
}

static kn_tensor *triangle(kn_op_id op, kn_tensor *x, int64_t diagonal) {
    kn_opctx c;
    if (!kn_op_begin(&c, op, 1, &x)) return NULL;
    if (op == KN_OP_tril) KN_ATTRS(c.node, tril)->diagonal = diagonal;
    else KN_ATTRS(c.node, triu)->diagonal = diagonal;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_tril(kn_tensor *x, int64_t diagonal) { return triangle(KN_OP_tril, x, diagonal); }
kn_tensor *kn_triu(kn_tensor *x, int64_t diagonal) { return triangle(KN_OP_triu, x, diagonal); }

kn_tensor *kn_one_hot(kn_tensor *indices, int64_t num_classes) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_one_hot, 1, &indices)) return NULL;
    if (num_classes < -1)
        return kn_op_fail(&c, KN_ERR_ARG, "num_classes %lld is negative (-1 infers it)", (long long)num_classes);
    if (indices->ndim == KN_MAX_DIMS)
        return kn_op_fail(&c, KN_ERR_SHAPE, "the result would have more than %d dims", KN_MAX_DIMS);
    KN_ATTRS(c.node, one_hot)->classes = num_classes;
    return kn_op_run(&c);
}
