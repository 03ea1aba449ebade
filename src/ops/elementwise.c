/* Elementwise ops: type promotion, broadcasting and the scalar forms. The math itself is in
 * the op table's expressions (defs/unary.def, defs/binary.def). */
#include <math.h>

#include "exec/autocast.h"
#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

static int category(kn_dtype d) { return d == KN_BOOL ? 0 : kn_dtype_is_int(d) ? 1 : 2; }

kn_dtype kn_result_dtype(kn_tensor *const *in, int n) {
    bool have_dim = false, have_zero = false;
    kn_dtype dim_t = KN_BOOL, zero_t = KN_BOOL;
    for (int i = 0; i < n; i++) {
        if (in[i]->ndim > 0) {
            dim_t = have_dim ? kn_promote_types(dim_t, in[i]->dtype) : in[i]->dtype;
            have_dim = true;
        } else {
            zero_t = have_zero ? kn_promote_types(zero_t, in[i]->dtype) : in[i]->dtype;
            have_zero = true;
        }
    }
    if (!have_dim) return zero_t;
    if (have_zero && category(zero_t) > category(dim_t)) return zero_t;
    return dim_t;
}

/* Casts and broadcasts the node's inputs to `compute` and `shape`. */
static bool prepare_inputs(kn_opctx *c, kn_dtype compute, const kn_shape *shape) {
    kn_node *n = c->node;
    for (int i = 0; i < n->n_in; i++) {
        kn_tensor *t = n->in[i];
        bool same_shape = t->ndim == shape->n;
        for (int d = 0; same_shape && d < t->ndim; d++) same_shape = t->shape[d] == shape->v[d];
        if (t->dtype == compute && same_shape) continue; /* the common case: nothing to do */
        kn_tensor *cast = t->dtype == compute ? kn_retain(t) : kn_cast(t, compute);
        kn_tensor *wide = cast ? kn_expand(cast, *shape) : NULL;
        kn_release(cast);
        if (!wide) {
            kn_node_free(n);
            c->node = NULL;
            return false;
        }
        kn_op_set_input(c, i, wide);
        kn_release(wide);
    }
    return true;
}

static kn_tensor *elementwise_checked(kn_op_id op, int n_in, kn_tensor *const *in, double a, double b);

/* The common path of every elementwise op with n_in (at most 3) inputs and attributes a, b.
 * Bool operands that promote to a number (bool + i32 is i32) are cast first, so that ops
 * which do not take bool still accept them next to numbers. */
static kn_tensor *elementwise(kn_op_id op, int n_in, kn_tensor *const *in, double a, double b) {
    bool any_bool = false;
    for (int i = 0; i < n_in; i++) {
        if (!in[i]) return elementwise_checked(op, n_in, in, a, b); /* reports the NULL */
        any_bool |= in[i]->dtype == KN_BOOL;
    }
    if (any_bool && op == KN_OP_sub) /* PyTorch refuses it too: usually a mask inverted by mistake */
        return kn_error_null(KN_ERR_DTYPE, "sub: a bool operand is refused (as in PyTorch); to invert a mask use "
                                           "logical_not, or cast it first");
    kn_dtype promoted = kn_result_dtype(in, n_in);
    if (!any_bool || promoted == KN_BOOL || n_in > 3) return elementwise_checked(op, n_in, in, a, b);
    kn_tensor *cast[3] = {NULL, NULL, NULL};
    bool ok = true;
    for (int i = 0; i < n_in; i++) {
        cast[i] = in[i]->dtype == KN_BOOL ? kn_cast(in[i], promoted) : kn_retain(in[i]);
        ok &= cast[i] != NULL;
    }
    kn_tensor *out = ok ? elementwise_checked(op, n_in, cast, a, b) : NULL;
    for (int i = 0; i < n_in; i++) kn_release(cast[i]);
    return out;
}

static kn_tensor *elementwise_checked(kn_op_id op, int n_in, kn_tensor *const *in, double a, double b) {
    kn_opctx c;
    if (!kn_op_begin(&c, op, n_in, in)) return NULL;
    kn_op_infer r;
    kn_op_set_scalars(op, &c.node->attrs, a, b);
    if (!kn_op_infer_node(&c, &r) || !prepare_inputs(&c, r.compute, &r.shape[0])) return NULL;
    if (!kn_op_add_outputs(&c, &r)) return NULL;
    return kn_op_run(&c);
}

KN_RULE(kn_infer_elementwise) {
    kn_shape shape = kn_shape_of(in[0]);
    for (int i = 1; i < n_in; i++) {
        kn_shape next;
        if (!kn_broadcast_shapes(kn_op_name(op), shape, kn_shape_of(in[i]), &next))
            KN_RULE_FAIL(KN_ERR_SHAPE, "shapes do not broadcast (%s)", kn_last_error());
        shape = next;
    }
    r->compute = kn_result_dtype(in, n_in);
    if ((kn_op_table[op].flags & KN_OPF_INT_TO_FLOAT) && !kn_dtype_is_float(r->compute)) r->compute = KN_F32;
    if (r->compute == KN_BOOL && !(kn_op_table[op].dtypes & KN_DT(KN_BOOL)))
        KN_RULE_FAIL(KN_ERR_DTYPE, "%s does not take bool operands; cast them first", kn_op_name(op));
    kn_infer_out(r, kn_op_table[op].flags & KN_OPF_BOOL_OUT ? KN_BOOL : r->compute, shape.v, shape.n);
    return KN_OK;
}


#define KN_OP(name, ...)
#define KN_UNARY(name, ...)
#define KN_BINARY(name, cls, out, attrs, expr)                                      \
    kn_tensor *kn_##name(kn_tensor *a, kn_tensor *b) {                          \
        return elementwise(KN_OP_##name, 2, (kn_tensor *[]){a, b}, 0, 0); \
    }
#define KN_TERNARY(name, ...)
#include "ops/defs/binary.def"
#undef KN_BINARY
#undef KN_UNARY
#undef KN_TERNARY
#undef KN_OP

/* Unary ops without attributes get their API function from the table; those with
 * attributes are written out below. */
#define UNARY_PLAIN(name) \
    kn_tensor *kn_##name(kn_tensor *x) { return elementwise(KN_OP_##name, 1, &x, 0, 0); }
UNARY_PLAIN(neg)
UNARY_PLAIN(abs)
UNARY_PLAIN(sign)
UNARY_PLAIN(relu)
UNARY_PLAIN(exp)
UNARY_PLAIN(expm1)
UNARY_PLAIN(log)
UNARY_PLAIN(log1p)
UNARY_PLAIN(log2)
UNARY_PLAIN(sqrt)
UNARY_PLAIN(rsqrt)
UNARY_PLAIN(reciprocal)
UNARY_PLAIN(sin)
UNARY_PLAIN(cos)
UNARY_PLAIN(tanh)
UNARY_PLAIN(sigmoid)
UNARY_PLAIN(gelu)
UNARY_PLAIN(gelu_tanh)
UNARY_PLAIN(silu)
UNARY_PLAIN(erf)
UNARY_PLAIN(floor)
UNARY_PLAIN(ceil)
UNARY_PLAIN(round)
UNARY_PLAIN(trunc)
UNARY_PLAIN(bitwise_not)
UNARY_PLAIN(logical_not)
UNARY_PLAIN(isnan)
UNARY_PLAIN(isinf)
UNARY_PLAIN(isfinite)

kn_tensor *kn_leaky_relu(kn_tensor *x, double slope) { return elementwise(KN_OP_leaky_relu, 1, &x, slope, 0); }

kn_tensor *kn_softplus(kn_tensor *x, double beta, double threshold) {
    if (!(beta != 0) || isnan(threshold))
        return kn_error_null(KN_ERR_ARG, "softplus: beta %g must be nonzero and threshold %g a number", beta, threshold);
    return elementwise(KN_OP_softplus, 1, &x, beta, threshold);
}

/* PyTorch's clamp with float bounds: min(max(x, min), max), so a NaN bound gives NaN and
 * min > max gives max; integer and bool tensors compute in f32 (a float operand's promotion). */
kn_tensor *kn_clamp(kn_tensor *x, double min, double max) {
    return elementwise(KN_OP_clamp, 1, &x, min, max);
}

/* A 0-d tensor of integer dtype d holding v, saturated to d's range (exact: no double). */
static kn_tensor *int_bound(int64_t v, kn_dtype d, kn_device device) {
    if (d == KN_I32) {
        int32_t w = v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : (int32_t)v;
        return kn_from_host(&w, KN_I32, KN_SHAPE0, device);
    }
    return kn_from_host(&v, KN_I64, KN_SHAPE0, device);
}

/* PyTorch's clamp with integer bounds: an integer tensor keeps its dtype (bool becomes i64),
 * a float tensor is clamped as by kn_clamp. Built from maximum and minimum, which take the
 * bounds exactly where the clamp op's double attributes could not (|bound| > 2^53). */
kn_tensor *kn_clamp_int(kn_tensor *x, int64_t min, int64_t max) {
    if (!x) {
        kn_error_null_input("clamp_int", 0);
        return NULL;
    }
    if (kn_dtype_is_float(x->dtype))
        return kn_clamp(x, min == INT64_MIN ? -INFINITY : (double)min, max == INT64_MAX ? INFINITY : (double)max);
    kn_dtype d = x->dtype == KN_BOOL ? KN_I64 : x->dtype;
    kn_scope_push();
    kn_tensor *lo = int_bound(min, d, kn_device_of(x)), *hi = int_bound(max, d, kn_device_of(x));
    return kn_scope_pop_keep(kn_minimum(kn_maximum(x, lo), hi));
}

/* ---- ternary ---------------------------------------------------------------------------- */

kn_tensor *kn_where(kn_tensor *cond, kn_tensor *a, kn_tensor *b) {
    if (!cond || !a || !b) {
        kn_error_null_input("where", !cond ? 0 : !a ? 1 : 2);
        return NULL;
    }
    /* cond takes part in broadcasting but not in promotion: it is cast to the values' dtype. */
    kn_dtype values = kn_result_dtype((kn_tensor *[]){a, b}, 2);
    kn_tensor *c = cond->dtype == values ? kn_retain(cond) : kn_cast(cond, values);
    if (!c) return NULL;
    kn_tensor *out = elementwise(KN_OP_where, 3, (kn_tensor *[]){c, a, b}, 0, 0);
    kn_release(c);
    return out;
}

kn_tensor *kn_lerp(kn_tensor *start, kn_tensor *end, kn_tensor *weight) {
    return elementwise(KN_OP_lerp, 3, (kn_tensor *[]){start, end, weight}, 0, 0);
}

kn_tensor *kn_addcmul(kn_tensor *self, kn_tensor *t1, kn_tensor *t2, double value) {
    return elementwise(KN_OP_addcmul, 3, (kn_tensor *[]){self, t1, t2}, value, 0);
}

kn_tensor *kn_addcdiv(kn_tensor *self, kn_tensor *t1, kn_tensor *t2, double value) {
    return elementwise(KN_OP_addcdiv, 3, (kn_tensor *[]){self, t1, t2}, value, 0);
}

/* ---- backward helpers (defs/elementwise_backward.def) -------------------------------------
 * Written out like the unary ops, since some take the forward op's attributes. */

static kn_tensor *backward2(kn_op_id op, kn_tensor *grad, kn_tensor *x, double a, double b) {
    return elementwise(op, 2, (kn_tensor *[]){grad, x}, a, b);
}
static kn_tensor *backward3(kn_op_id op, kn_tensor *grad, kn_tensor *x, kn_tensor *y) {
    return elementwise(op, 3, (kn_tensor *[]){grad, x, y}, 0, 0);
}

kn_tensor *kn_relu_backward(kn_tensor *grad, kn_tensor *out) {
    return backward2(KN_OP_relu_backward, grad, out, 0, 0);
}
kn_tensor *kn_leaky_relu_backward(kn_tensor *grad, kn_tensor *x, double negative_slope) {
    return backward2(KN_OP_leaky_relu_backward, grad, x, negative_slope, 0);
}
kn_tensor *kn_clamp_backward(kn_tensor *grad, kn_tensor *x, double min, double max) {
    return backward2(KN_OP_clamp_backward, grad, x, min, max);
}
kn_tensor *kn_softplus_backward(kn_tensor *grad, kn_tensor *x, double beta, double threshold) {
    return backward2(KN_OP_softplus_backward, grad, x, beta, threshold);
}
kn_tensor *kn_sigmoid_backward(kn_tensor *grad, kn_tensor *out) {
    return backward2(KN_OP_sigmoid_backward, grad, out, 0, 0);
}
kn_tensor *kn_tanh_backward(kn_tensor *grad, kn_tensor *out) { return backward2(KN_OP_tanh_backward, grad, out, 0, 0); }
kn_tensor *kn_gelu_backward(kn_tensor *grad, kn_tensor *x) { return backward2(KN_OP_gelu_backward, grad, x, 0, 0); }
kn_tensor *kn_gelu_tanh_backward(kn_tensor *grad, kn_tensor *x) {
    return backward2(KN_OP_gelu_tanh_backward, grad, x, 0, 0);
}
kn_tensor *kn_silu_backward(kn_tensor *grad, kn_tensor *x) { return backward2(KN_OP_silu_backward, grad, x, 0, 0); }
kn_tensor *kn_erf_backward(kn_tensor *grad, kn_tensor *x) { return backward2(KN_OP_erf_backward, grad, x, 0, 0); }
kn_tensor *kn_pow_backward(kn_tensor *grad, kn_tensor *base, kn_tensor *exponent) {
    return backward3(KN_OP_pow_backward, grad, base, exponent);
}
kn_tensor *kn_pow_backward_exponent(kn_tensor *grad, kn_tensor *base, kn_tensor *exponent) {
    return backward3(KN_OP_pow_backward_exponent, grad, base, exponent);
}
kn_tensor *kn_maximum_backward(kn_tensor *grad, kn_tensor *a, kn_tensor *b) {
    return backward3(KN_OP_maximum_backward, grad, a, b);
}
kn_tensor *kn_minimum_backward(kn_tensor *grad, kn_tensor *a, kn_tensor *b) {
    return backward3(KN_OP_minimum_backward, grad, a, b);
}

/* ---- for the scalar-operand forms (ops/elementwise_scalar.c) ---------------------------------- */

kn_tensor *kn_elementwise(kn_op_id op, int n_in, kn_tensor *const *in, double a, double b) {
    return elementwise(op, n_in, in, a, b);
}

/* ---- casts ------------------------------------------------------------------------------------ */

/* copy: x's shape in the dtype attribute. */
KN_RULE(kn_infer_copy) {
    if (!kn_dtype_valid((kn_dtype)at->copy.dtype)) KN_RULE_FAIL(KN_ERR_DTYPE, "invalid target dtype %d", (int)at->copy.dtype);
    kn_infer_out(r, (kn_dtype)at->copy.dtype, in[0]->shape, in[0]->ndim);
    r->compute = in[0]->dtype;
    return KN_OK;
}

kn_tensor *kn_cast(kn_tensor *x, kn_dtype dtype) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_copy, 1, &x)) return NULL;
    KN_ATTRS(c.node, copy)->dtype = dtype;
    if (!kn_op_outputs_inferred(&c)) return NULL;
    return kn_op_run(&c);
}

/* The order of x's dims that lays its elements out contiguously (by decreasing stride; size-1
 * dims go anywhere), or false when no order does (x broadcast, sliced or overlapping). */
static bool storage_order(const kn_tensor *x, kn_shape *order) {
    order->n = x->ndim;
    for (int i = 0; i < x->ndim; i++) {
        int j = i;
        for (; j > 0 && x->stride[order->v[j - 1]] < x->stride[i]; j--) order->v[j] = order->v[j - 1];
        order->v[j] = i;
    }
    int64_t want = 1;
    for (int k = x->ndim - 1; k >= 0; k--) {
        int d = (int)order->v[k];
        if (x->shape[d] != 1 && x->stride[d] != want) return false;
        want *= x->shape[d];
    }
    return true;
}

/* Autocast's casts (exec/autocast.h) keep a permuted tensor's layout, as PyTorch's casts do: a
 * transposed weight is cast in its storage order and permuted back, so the copy streams
 * through memory instead of transposing it, and the product reads the bf16 operand transposed
 * as it read the f32 one. */
static kn_tensor *cast_in_layout(kn_tensor *x, kn_dtype dtype) {
    kn_shape order;
    if (kn_is_contiguous(x) || !storage_order(x, &order)) return kn_cast(x, dtype);
    kn_shape back = {.n = order.n};
    for (int k = 0; k < order.n; k++) back.v[order.v[k]] = k;
    kn_tensor *laid = kn_permute(x, order);
    kn_tensor *cast = laid ? kn_cast(laid, dtype) : NULL;
    kn_tensor *out = cast ? kn_permute(cast, back) : NULL;
    kn_release(laid);
    kn_release(cast);
    return out;
}

__attribute__((constructor)) static void install_autocast_cast(void) { kn_autocast_install_cast(cast_in_layout); }
