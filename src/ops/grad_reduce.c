/* Gradients of reductions: the output gradient spread back over the reduced dims. Masks and
 * divisions use safe denominators, so backward makes no NaN/Inf from finite values (debug
 * mode would report them) where the gradient itself is finite. */
#include <math.h>

#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/ops_internal.h"

/* g (the reduced shape, or the kept shape when keepdim) with the reduced dims restored as
 * size 1, ready to broadcast against the input. */
static kn_tensor *unreduce(const kn_grad_ctx *c, kn_tensor *g) {
    kn_shape kept = c->in_shape[0];
    const kn_shape *dims = &c->attrs->reduce.dims;
    for (int i = 0; i < dims->n; i++) kept.v[dims->v[i]] = 1;
    return kn_reshape(g, kept);
}

static int64_t reduced_count(const kn_grad_ctx *c) {
    int64_t n = 1;
    for (int i = 0; i < c->attrs->reduce.dims.n; i++) n *= c->in_shape[0].v[c->attrs->reduce.dims.v[i]];
    return n;
}

/* A 0-d tensor of value v with t's dtype and device, to broadcast in where/eq. */
static kn_tensor *scalar_as(kn_tensor *t, double v) {
    return t ? kn_full_on(KN_SHAPE0, v, kn_dtype_of(t), kn_device_of(t)) : NULL;
}

/* t with its zeros replaced by one: a denominator that stays finite where t is masked out. */
static kn_tensor *nonzero_or_one(kn_tensor *t) {
    return kn_where(kn_eq(t, scalar_as(t, 0)), scalar_as(t, 1), t);
}

/* How many elements of each reduced slice hit is true for, at least 1 (a divisor). */
static kn_tensor *hit_count(const kn_grad_ctx *c, kn_tensor *hit) {
    kn_tensor *n = kn_sum(hit, c->attrs->reduce.dims, true);
    return kn_maximum(n, scalar_as(n, 1));
}

static kn_status done(kn_tensor **gin) { return gin[0] ? KN_OK : kn_last_status(); }

kn_status kn_grad_sum(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_expand(unreduce(c, gout[0]), c->in_shape[0]);
    return done(gin);
}

kn_status kn_grad_mean(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *g = kn_div_scalar(unreduce(c, gout[0]), (double)reduced_count(c));
    gin[0] = kn_expand(g, c->in_shape[0]);
    return done(gin);
}

/* d prod / dx_i is the product of the other elements, taken from the product of the nonzero
 * ones (as PyTorch does): with no zero in the slice it is that product over x_i; the one zero
 * of a slice gets the product itself; with two or more zeros every element gets zero. */
kn_status kn_grad_prod(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *x = c->in[0], *zero = scalar_as(x, 0);
    const kn_shape dims = c->attrs->reduce.dims;
    kn_tensor *is_zero = kn_eq(x, zero);
    kn_tensor *zeros = kn_sum(is_zero, dims, true);
    kn_tensor *safe = kn_where(is_zero, scalar_as(x, 1), x);
    kn_tensor *others = kn_mul(unreduce(c, gout[0]), kn_prod(safe, dims, true));
    kn_tensor *at_zero = kn_where(kn_eq(zeros, scalar_as(zeros, 1)), others, zero);
    kn_tensor *at_rest = kn_where(kn_eq(zeros, scalar_as(zeros, 0)), kn_div(others, safe), zero);
    gin[0] = kn_where(is_zero, at_zero, at_rest);
    return done(gin);
}

/* amax, amin, max, min: the gradient is shared evenly by the elements equal to the extreme
 * (PyTorch's rule for ties). Where the extreme is NaN, PyTorch's max and min share it among the
 * NaNs, and its amax and amin give the whole slice NaN (their g / 0 * 0); so does kiln, without
 * dividing by zero. */
static kn_status extreme(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin, bool nan_shares) {
    kn_tensor *x = c->in[0], *out_nan = kn_isnan(unreduce(c, c->out[0]));
    kn_tensor *hit = kn_eq(x, unreduce(c, c->out[0]));
    if (nan_shares) hit = kn_logical_or(hit, kn_logical_and(kn_isnan(x), out_nan));
    kn_tensor *share = kn_div(unreduce(c, gout[0]), hit_count(c, hit));
    kn_tensor *zero = scalar_as(share, 0);
    gin[0] = kn_where(hit, share, nan_shares ? zero : kn_where(out_nan, scalar_as(share, NAN), zero));
    return done(gin);
}
kn_status kn_grad_amax(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) { return extreme(c, gout, gin, false); }
kn_status kn_grad_amin(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) { return extreme(c, gout, gin, false); }
kn_status kn_grad_max(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) { return extreme(c, gout, gin, true); }
kn_status kn_grad_min(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) { return extreme(c, gout, gin, true); }

/* max_dim, min_dim: all of it to the element whose index the forward returned. */
static kn_status extreme_dim(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    if (c->attrs->reduce.dims.n == 0) { /* a 0-d input is its own extreme */
        gin[0] = gout[0];
        return done(gin);
    }
    kn_tensor *g = unreduce(c, gout[0]);
    kn_tensor *base = g ? kn_full_on(c->in_shape[0], 0, kn_dtype_of(g), kn_device_of(g)) : NULL;
    gin[0] = kn_scatter(base, c->attrs->reduce.dims.v[0], unreduce(c, c->out[1]), g);
    return done(gin);
}
kn_status kn_grad_max_dim(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return extreme_dim(c, gout, gin);
}
kn_status kn_grad_min_dim(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    return extreme_dim(c, gout, gin);
}

/* var: 2 (x - mean) / max(0, N - correction), times g. */
static kn_tensor *var_backward(const kn_grad_ctx *c, kn_tensor *g_kept) {
    double correction = c->op == KN_OP_std ? c->attrs->std.correction : c->attrs->var.correction;
    double divisor = fmax(0.0, (double)reduced_count(c) - correction);
    kn_tensor *centered = kn_sub(c->in[0], kn_mean(c->in[0], c->attrs->reduce.dims, true));
    return kn_mul(centered, kn_mul_scalar(g_kept, 2.0 / divisor));
}

kn_status kn_grad_var(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = var_backward(c, unreduce(c, gout[0]));
    return done(gin);
}

/* std = sqrt(var): var's gradient of g / (2 std), zero where std is 0 (as PyTorch masks it). */
kn_status kn_grad_std(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *std = unreduce(c, c->out[0]);
    kn_tensor *g = kn_div(unreduce(c, gout[0]), kn_mul_scalar(nonzero_or_one(std), 2));
    g = kn_where(kn_eq(std, scalar_as(std, 0)), scalar_as(std, 0), g);
    gin[0] = var_backward(c, g);
    return done(gin);
}

/* norm, PyTorch's formulas: p = 0 counts nonzeros (no gradient); p = 1 gives sign(x) g;
 * p = +-inf shares g among the elements of extreme |x| like amax; any other p gives
 * sign(x) |x|^(p-1) g / norm^(p-1) (x g / norm for p = 2), zero where the norm is 0 and,
 * for p < 1, where x is 0. */
kn_status kn_grad_norm(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    double p = c->attrs->norm.p;
    if (p == 0) return KN_OK;
    kn_tensor *x = c->in[0], *g = unreduce(c, gout[0]);
    if (p == 1) {
        gin[0] = kn_mul(kn_sign(x), g);
        return done(gin);
    }
    kn_tensor *norm = unreduce(c, c->out[0]), *zero = scalar_as(norm, 0);
    if (isinf(p)) {
        kn_tensor *hit = kn_eq(kn_abs(x), norm);
        kn_tensor *count = hit_count(c, hit);
        gin[0] = kn_where(hit, kn_mul(kn_sign(x), kn_div(g, count)), zero);
        return done(gin);
    }
    kn_tensor *norm_zero = kn_eq(norm, zero), *safe_norm = nonzero_or_one(norm);
    if (p == 2) {
        gin[0] = kn_mul(x, kn_where(norm_zero, zero, kn_div(g, safe_norm)));
        return done(gin);
    }
    kn_tensor *scale = kn_where(norm_zero, zero, kn_div(g, kn_pow_scalar(safe_norm, p - 1)));
    kn_tensor *scaled = kn_mul(kn_sign(x), kn_pow_scalar(nonzero_or_one(kn_abs(x)), p - 1));
    gin[0] = kn_mul(scaled, scale); /* sign(0) = 0 zeroes x = 0 for every p */
    return done(gin);
}

/* logsumexp: softmax(x) over the dims, times g. */
kn_status kn_grad_logsumexp(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_mul(unreduce(c, gout[0]), kn_exp(kn_sub(c->in[0], unreduce(c, c->out[0]))));
    return done(gin);
}
