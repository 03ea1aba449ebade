/* Reductions: the API functions, which check dims and dtypes, set attributes and record. */
#include <math.h>

#include "kiln/ops.h"
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

kn_status kn_infer_reduce(kn_op_id op, int n_in, kn_tensor *const *in, const kn_attrs *at, kn_op_infer *r,
                          char *why, size_t why_size) {
    const kn_tensor *x = in[0];
    const kn_reduce_attrs *a = &at->reduce;
    r->shape = (kn_shape){0};
    for (int d = 0, k = 0; d < x->ndim; d++) {
        bool is_reduced = k < a->dims.n && a->dims.v[k] == d;
        if (is_reduced) k++;
        if (!is_reduced) r->shape.v[r->shape.n++] = x->shape[d];
        else if (a->keepdim) r->shape.v[r->shape.n++] = 1;
    }
    r->compute = x->dtype;
    switch (op) {
    case KN_OP_sum:
    case KN_OP_prod: r->out = int_to_i64(x->dtype); break;
    case KN_OP_all:
    case KN_OP_any: r->out = KN_BOOL; break;
    case KN_OP_argmax:
    case KN_OP_argmin:
    case KN_OP_argmax_all:
    case KN_OP_argmin_all: r->out = KN_I64; break;
    default: r->out = x->dtype; break; /* max_dim and min_dim: the values; the indices are i64 */
    }
    return KN_OK;
}

/* The node's output shape and dtype by its table entry's rule (kn_infer_reduce). */
static bool reduce_rule(kn_opctx *c, kn_tensor *x, kn_op_infer *r) {
    char why[256];
    kn_status st = kn_op_table[c->node->op].infer(c->node->op, 1, &x, &c->node->attrs, r, why, sizeof why);
    return st == KN_OK || kn_op_fail(c, st, "%s", why) != NULL;
}

/* Fails (naming the op) when the node's reduced dims hold no element: there is no extreme
 * of nothing, as in PyTorch. */
static bool require_nonempty(kn_opctx *c, kn_tensor *x) {
    kn_shape r = KN_ATTRS(c->node, reduce)->dims;
    for (int i = 0; i < r.n; i++)
        if (x->shape[r.v[i]] == 0)
            return kn_op_fail(c, KN_ERR_SHAPE, "cannot reduce over dim %lld of size 0 (no identity)", (long long)r.v[i]) != NULL;
    return true;
}

/* A reduction whose output dtype is a function of the input's. */
static kn_tensor *simple_reduce(kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim, bool need_elements) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_reduce_begin(&c, op, x, dims, keepdim) || !reduce_rule(&c, x, &r)) return NULL;
    if (need_elements && !require_nonempty(&c, x)) return NULL;
    if (!kn_op_output(&c, r.out, r.shape.v, r.shape.n)) return NULL;
    return kn_op_run(&c);
}

kn_tensor *kn_sum(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_sum, x, dims, keepdim, false);
}
kn_tensor *kn_mean(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_mean, x, dims, keepdim, false);
}
kn_tensor *kn_prod(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_prod, x, dims, keepdim, false);
}
kn_tensor *kn_amax(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_amax, x, dims, keepdim, true);
}
kn_tensor *kn_amin(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_amin, x, dims, keepdim, true);
}
kn_tensor *kn_max(kn_tensor *x) { return simple_reduce(KN_OP_max, x, KN_ALL_DIMS, false, true); }
kn_tensor *kn_min(kn_tensor *x) { return simple_reduce(KN_OP_min, x, KN_ALL_DIMS, false, true); }
kn_tensor *kn_logsumexp(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_logsumexp, x, dims, keepdim, false);
}
kn_tensor *kn_all(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_all, x, dims, keepdim, false);
}
kn_tensor *kn_any(kn_tensor *x, kn_shape dims, bool keepdim) {
    return simple_reduce(KN_OP_any, x, dims, keepdim, false);
}

static kn_status extreme_dim(kn_op_id op, kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values,
                             kn_tensor **indices) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_reduce_begin(&c, op, x, KN_DIMS(dim), keepdim) || !reduce_rule(&c, x, &r)) return kn_last_status();
    if (!require_nonempty(&c, x)) return kn_last_status();
    if (!kn_op_output(&c, r.out, r.shape.v, r.shape.n)) return kn_last_status();
    if (!kn_op_output(&c, KN_I64, r.shape.v, r.shape.n)) return kn_last_status();
    return kn_op_run_to(&c, (kn_tensor **const[]){values, indices}, 2);
}
kn_status kn_max_dim(kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values, kn_tensor **indices) {
    return extreme_dim(KN_OP_max_dim, x, dim, keepdim, values, indices);
}
kn_status kn_min_dim(kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values, kn_tensor **indices) {
    return extreme_dim(KN_OP_min_dim, x, dim, keepdim, values, indices);
}

static kn_tensor *arg_extreme(kn_op_id op, kn_tensor *x, kn_shape dims, bool keepdim) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_reduce_begin(&c, op, x, dims, keepdim) || !reduce_rule(&c, x, &r)) return NULL;
    if (!require_nonempty(&c, x)) return NULL;
    if (!kn_op_output(&c, r.out, r.shape.v, r.shape.n)) return NULL;
    return kn_op_run(&c);
}
kn_tensor *kn_argmax(kn_tensor *x, int64_t dim, bool keepdim) { return arg_extreme(KN_OP_argmax, x, KN_DIMS(dim), keepdim); }
kn_tensor *kn_argmin(kn_tensor *x, int64_t dim, bool keepdim) { return arg_extreme(KN_OP_argmin, x, KN_DIMS(dim), keepdim); }
kn_tensor *kn_argmax_all(kn_tensor *x) { return arg_extreme(KN_OP_argmax_all, x, KN_ALL_DIMS, false); }
kn_tensor *kn_argmin_all(kn_tensor *x) { return arg_extreme(KN_OP_argmin_all, x, KN_ALL_DIMS, false); }

static kn_tensor *with_param(kn_op_id op, kn_tensor *x, kn_shape dims, double param, bool keepdim) {
    kn_opctx c;
    kn_op_infer r;
    if (!kn_reduce_begin(&c, op, x, dims, keepdim) || !reduce_rule(&c, x, &r)) return NULL;
    if (op == KN_OP_norm) KN_ATTRS(c.node, norm)->p = param;
    else if (op == KN_OP_var) KN_ATTRS(c.node, var)->correction = param;
    else KN_ATTRS(c.node, std)->correction = param;
    if (op == KN_OP_norm) {
        if (isnan(param) || (param < 0 && param != -INFINITY))
            return kn_op_fail(&c, KN_ERR_ARG, "p = %g is not a norm order (0, a positive value or +-inf)", param);
        if (isinf(param) && !require_nonempty(&c, x)) return NULL;
    } else if (isnan(param)) {
        return kn_op_fail(&c, KN_ERR_ARG, "correction is NaN");
    }
    if (!kn_op_output(&c, r.out, r.shape.v, r.shape.n)) return NULL;
    return kn_op_run(&c);
}
kn_tensor *kn_var(kn_tensor *x, kn_shape dims, double correction, bool keepdim) {
    return with_param(KN_OP_var, x, dims, correction, keepdim);
}
kn_tensor *kn_std(kn_tensor *x, kn_shape dims, double correction, bool keepdim) {
    return with_param(KN_OP_std, x, dims, correction, keepdim);
}
kn_tensor *kn_norm(kn_tensor *x, double p, kn_shape dims, bool keepdim) {
    return with_param(KN_OP_norm, x, dims, p, keepdim);
}

/* Ops along one dim whose output has x's shape. */
static kn_tensor *along_dim(kn_op_id op, kn_tensor *x, int64_t dim, kn_dtype (*out_dtype)(kn_dtype)) {
    kn_opctx c;
    if (!kn_reduce_begin(&c, op, x, KN_DIMS(dim), true)) return NULL;
    if (!kn_op_output(&c, out_dtype(x->dtype), x->shape, x->ndim)) return NULL;
    return kn_op_run(&c);
}
static kn_dtype same_dtype(kn_dtype d) { return d; }
kn_tensor *kn_cumsum(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_cumsum, x, dim, int_to_i64); }
kn_tensor *kn_cumprod(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_cumprod, x, dim, int_to_i64); }
kn_tensor *kn_softmax(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_softmax, x, dim, same_dtype); }
kn_tensor *kn_log_softmax(kn_tensor *x, int64_t dim) { return along_dim(KN_OP_log_softmax, x, dim, same_dtype); }

/* The softmax gradients: g and y cast to one compute dtype and made contiguous for the kernel. */
static kn_tensor *softmax_grad(kn_op_id op, kn_tensor *g, kn_tensor *y, int64_t dim) {
    kn_opctx c;
    if (!kn_op_begin(&c, op, 2, (kn_tensor *[]){g, y})) return NULL;
    bool same = g->ndim == y->ndim;
    for (int d = 0; same && d < g->ndim; d++) same = g->shape[d] == y->shape[d];
    if (!same) return kn_op_fail(&c, KN_ERR_SHAPE, "the gradient and the output differ in shape");
    kn_shape reduced;
    if (!kn_normalize_dims(kn_op_name(op), KN_DIMS(dim), g->ndim, &reduced)) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(&c, kn_last_status(), "%s", msg);
    }
    kn_dtype dt = g->dtype == KN_F64 || y->dtype == KN_F64 ? KN_F64 : KN_F32;
    kn_tensor *ins[2] = {g, y};
    for (int i = 0; i < 2; i++) {
        kn_scope_push();
        kn_tensor *t = kn_contiguous(ins[i]->dtype == dt ? ins[i] : kn_cast(ins[i], dt));
        if (t) kn_op_set_input(&c, i, t);
        kn_scope_pop();
        if (!t) {
            kn_node_free(c.node);
            return NULL;
        }
    }
    KN_ATTRS(c.node, reduce)->dims = reduced;
    if (!kn_op_output(&c, dt, g->shape, g->ndim)) return NULL;
    return kn_op_run(&c);
}
kn_tensor *kn_softmax_backward(kn_tensor *g, kn_tensor *y, int64_t dim) {
    return softmax_grad(KN_OP_softmax_backward, g, y, dim);
}
kn_tensor *kn_log_softmax_backward(kn_tensor *g, kn_tensor *y, int64_t dim) {
    return softmax_grad(KN_OP_log_softmax_backward, g, y, dim);
}
