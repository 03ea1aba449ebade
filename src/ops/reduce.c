/* Reductions: the API functions, which check dims and dtypes, set attributes and record. */
#include <math.h>

#include "kiln/ops.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"
#include "ops/reduce_common.h"

bool kn_reduce_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim) {
    if (!kn_op_begin(c, op, 1, &x)) return false;
    kn_shape reduced;
    if (!kn_normalize_dims(kn_op_name(op), dims, x->ndim, &reduced)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(c, kn_last_status(), "%s", msg) != NULL;
    }
    *KN_ATTRS(c->node, reduce) = (kn_reduce_attrs){.dims = reduced, .keepdim = keepdim};
    return true;
}

static kn_dtype int_to_i64(kn_dtype d) { return kn_dtype_is_float(d) ? d : KN_I64; }

/* Whether op reduces to an extreme, which does not exist over no elements (as in PyTorch). */
static bool needs_elements(kn_op_id op, const kn_attrs *at) {
    switch (op) {
    case KN_OP_amax: case KN_OP_amin: case KN_OP_max: case KN_OP_min: case KN_OP_max_dim: case KN_OP_min_dim:
    case KN_OP_argmax: case KN_OP_argmin: case KN_OP_argmax_all: case KN_OP_argmin_all: return true;
    case KN_OP_norm: return isinf(at->norm.p);
    default: return false;
    }
}

KN_RULE(kn_infer_reduce) {
    const kn_tensor *x = in[0];
    const kn_reduce_attrs *a = &at->reduce;
    if (op == KN_OP_norm) {
        double p = at->norm.p;
        if (isnan(p) || (p < 0 && p != -INFINITY))
            KN_RULE_FAIL(KN_ERR_ARG, "p = %g is not a norm order (0, a positive value or +-inf)", p);
    }
    if ((op == KN_OP_var && isnan(at->var.correction)) || (op == KN_OP_std && isnan(at->std.correction)))
        KN_RULE_FAIL(KN_ERR_ARG, "correction is NaN");
    kn_shape shape = {0};
    for (int d = 0, k = 0; d < x->ndim; d++) {
        bool is_reduced = k < a->dims.n && a->dims.v[k] == d;
        if (is_reduced) k++;
        if (is_reduced && x->shape[d] == 0 && needs_elements(op, at))
            KN_RULE_FAIL(KN_ERR_SHAPE, "cannot reduce over dim %d of size 0 (no identity)", d);
        if (!is_reduced) shape.v[shape.n++] = x->shape[d];
        else if (a->keepdim) shape.v[shape.n++] = 1;
    }
    for (int k = 0; k < a->dims.n; k++)
        if (a->dims.v[k] < 0 || a->dims.v[k] >= (x->ndim ? x->ndim : 1) || (k && a->dims.v[k] <= a->dims.v[k - 1]))
            KN_RULE_FAIL(KN_ERR_INDEX, "dims are not sorted distinct dims of a %d-d tensor", x->ndim);
    kn_dtype out;
    switch (op) {
    case KN_OP_sum:
    case KN_OP_prod: out = int_to_i64(x->dtype); break;
    case KN_OP_all:
    case KN_OP_any: out = KN_BOOL; break;
    case KN_OP_argmax:
    case KN_OP_argmin:
    case KN_OP_argmax_all:
    case KN_OP_argmin_all: out = KN_I64; break;
    default: out = x->dtype; break;
    }
    r->compute = x->dtype;
    kn_infer_out(r, out, shape.v, shape.n);
    if (op == KN_OP_max_dim || op == KN_OP_min_dim) kn_infer_out(r, KN_I64, shape.v, shape.n); /* the indices */
    return KN_OK;
}

/* Every reduction: dims normalized into the attributes, the rest by the entry's rule. */
static kn_tensor *reduce_op(kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim, double param) {
    kn_opctx c;
    if (!kn_reduce_begin(&c, op, x, dims, keepdim)) return NULL;
    if (op == KN_OP_norm) KN_ATTRS(c.node, norm)->p = param;
    else if (op == KN_OP_var) KN_ATTRS(c.node, var)->correction = param;
    else if (op == KN_OP_std) KN_ATTRS(c.node, std)->correction = param;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}
static kn_tensor *simple_reduce(kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim) {
    return reduce_op(op, x, dims, keepdim, 0);
}

kn_tensor *kn_sum(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_sum, x, dims, keepdim);
}
kn_tensor *kn_mean(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_mean, x, dims, keepdim);
}
kn_tensor *kn_prod(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_prod, x, dims, keepdim);
}
kn_tensor *kn_amax(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_amax, x, dims, keepdim);
}
kn_tensor *kn_amin(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_amin, x, dims, keepdim);
}
kn_tensor *kn_max(kn_tensor *x) { return simple_reduce(KN_OP_max, x, KN_ALL_DIMS, false); }
kn_tensor *kn_min(kn_tensor *x) { return simple_reduce(KN_OP_min, x, KN_ALL_DIMS, false); }
kn_tensor *kn_logsumexp(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_logsumexp, x, dims, keepdim);
}
kn_tensor *kn_all(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_all, x, dims, keepdim);
}
kn_tensor *kn_any(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_any, x, dims, keepdim);
}

static kn_status extreme_dim(kn_op_id op, kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values,
                             kn_tensor **indices) {
    kn_opctx c;
    if (!kn_reduce_begin(&c, op, x, KN_DIMS(dim), keepdim) || !kn_op_outputs_inferred(&c)) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){values, indices}, 2);
}
kn_status kn_max_dim(kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values, kn_tensor **indices) {
    return extreme_dim(KN_OP_max_dim, x, dim, keepdim, values, indices);
}
kn_status kn_min_dim(kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values, kn_tensor **indices) {
    return extreme_dim(KN_OP_min_dim, x, dim, keepdim, values, indices);
}

kn_tensor *kn_argmax(kn_tensor *x, int64_t dim, bool keepdim) { return simple_reduce(KN_OP_argmax, x, KN_DIMS(dim), keepdim); }
kn_tensor *kn_argmin(kn_tensor *x, int64_t dim, bool keepdim) { return simple_reduce(KN_OP_argmin, x, KN_DIMS(dim), keepdim); }
kn_tensor *kn_argmax_all(kn_tensor *x) { return simple_reduce(KN_OP_argmax_all, x, KN_ALL_DIMS, false); }
kn_tensor *kn_argmin_all(kn_tensor *x) { return simple_reduce(KN_OP_argmin_all, x, KN_ALL_DIMS, false); }

kn_tensor *kn_var(kn_tensor *x, kn_shape dims, double correction, bool keepdim) {
    return reduce_op(KN_OP_var, x, dims, keepdim, correction);
}
kn_tensor *kn_std(kn_tensor *x, kn_shape dims, double correction, bool keepdim) {
    return reduce_op(KN_OP_std, x, dims, keepdim, correction);
}
kn_tensor *kn_norm(kn_tensor *x, double p, kn_shape dims, bool keepdim) {
    return reduce_op(KN_OP_norm, x, dims, keepdim, p);
}

/* The scans and softmaxes' one dim (none for 0-d x), checked against x (the API function
 * normalized it). */
static kn_status check_one_dim(const kn_attrs *at, const kn_tensor *x, char *why, size_t why_size) {
    kn_shape d = at->reduce.dims;
    if (x->ndim ? d.n != 1 || d.v[0] < 0 || d.v[0] >= x->ndim : d.n != 0)
        KN_RULE_FAIL(KN_ERR_INDEX, "needs one dim of a %d-d tensor", x->ndim);
    return KN_OK;
}

KN_RULE(kn_infer_scan) {
    kn_status st = check_one_dim(at, in[0], why, why_size);
    if (st != KN_OK) return st;
    bool widen = op == KN_OP_cumsum || op == KN_OP_cumprod;
    kn_infer_out(r, widen ? int_to_i64(in[0]->dtype) : in[0]->dtype, in[0]->shape, in[0]->ndim);
    r->compute = in[0]->dtype;
    return KN_OK;
}

/* Ops along one dim whose output has x's shape. */
static kn_tensor *along_dim(kn_op_id op, kn_tensor *x, int64_t dim) {
    kn_opctx c;
    if (!kn_reduce_begin(&c, op, x, KN_DIMS(dim), true) || !kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}
kn_tensor *kn_cumsum(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_cumsum, x, dim); }
kn_tensor *kn_cumprod(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_cumprod, x, dim); }
kn_tensor *kn_softmax(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_softmax, x, dim); }
kn_tensor *kn_log_softmax(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_log_softmax, x, dim); }

/* g and y of one shape; the gradient in f64 if either is, else f32 (the kernel's inputs are
 * cast to it). */
KN_RULE(kn_infer_softmax_backward) {
    const kn_tensor *g = in[0], *y = in[1];
    bool same = g->ndim == y->ndim;
    for (int d = 0; same && d < g->ndim; d++) same = g->shape[d] == y->shape[d];
    if (!same) KN_RULE_FAIL(KN_ERR_SHAPE, "the gradient and the output differ in shape");
    kn_status st = check_one_dim(at, g, why, why_size);
    if (st != KN_OK) return st;
    r->compute = g->dtype == KN_F64 || y->dtype == KN_F64 ? KN_F64 : KN_F32;
    kn_infer_out(r, r->compute, g->shape, g->ndim);
    return KN_OK;
}

/* The softmax gradients: g and y cast to one compute dtype and made contiguous for the kernel. */
static kn_tensor *softmax_grad(kn_op_id op, kn_tensor *g, kn_tensor *y, int64_t dim) {
    kn_opctx c;
    if (!kn_op_begin(&c, op, 2, (kn_tensor *[]){g, y})) return NULL;
    kn_shape reduced;
    if (!kn_normalize_dims(kn_op_name(op), KN_DIMS(dim), g->ndim, &reduced)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(&c, kn_last_status(), "%s", msg);
    }
    KN_ATTRS(c.node, reduce)->dims = reduced;
    kn_op_infer r;
    if (!kn_op_infer_node(&c, &r)) return NULL;
    kn_tensor *ins[2] = {g, y};
    for (int i = 0; i < 2; i++) {
        kn_scope_push();
        kn_tensor *t = kn_contiguous(ins[i]->dtype == r.compute ? ins[i] : kn_cast(ins[i], r.compute));
        if (t) kn_op_set_input(&c, i, t);
        kn_scope_pop();
        if (!t) {
            kn_node_free(c.node);
            return NULL;
        }
    }
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}
kn_tensor *kn_softmax_backward(kn_tensor *g, kn_tensor *y, int64_t dim) {
    return softmax_grad(KN_OP_softmax_backward, g, y, dim);
}
kn_tensor *kn_log_softmax_backward(kn_tensor *g, kn_tensor *y, int64_t dim) {
    return softmax_grad(KN_OP_log_softmax_backward, g, y, dim);
}
