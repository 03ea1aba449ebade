/* Gradients of the scans along one dim (reduce.dims: the dim, empty for a 0-d input). */
#include "kiln/ops.h"
#include "ops/grad.h"
#include "ops/ops_internal.h"

/* t[::-1] along d: a view. */
static kn_tensor *reversed(kn_tensor *t, int64_t d) {
    if (!t) return NULL;
    int64_t n = kn_shape_of(t).v[d];
    return kn_slice(t, d, n - 1, -n - 1, -1);
}

/* The sums from each element to the end of the dim: cumsum run backwards. */
static kn_tensor *reverse_cumsum(kn_tensor *t, int64_t d) { return reversed(kn_cumsum(reversed(t, d), d), d); }

static kn_tensor *scalar_as(kn_tensor *t, double v) {
    return t ? kn_full_on(KN_SHAPE0, v, kn_dtype_of(t), kn_device_of(t)) : NULL;
}

kn_status kn_grad_cumsum(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = c->attrs->reduce.dims.n ? reverse_cumsum(gout[0], c->attrs->reduce.dims.v[0]) : gout[0];
    return gin[0] ? KN_OK : kn_last_status();
}

/* d y_j / d x_i = y_j / x_i for j >= i, so the gradient is reverse_cumsum(g y) / x where no
 * zero came before or at i. At a slice's first zero k, d y_j / d x_k is the product of the
 * others, the cumprod with x_k set to 1; past it every y_j holds that zero, so the gradient
 * is 0. Exact with zeros, as PyTorch's. */
kn_status kn_grad_cumprod(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    if (c->attrs->reduce.dims.n == 0) { /* y = x */
        gin[0] = gout[0];
        return KN_OK;
    }
    int64_t d = c->attrs->reduce.dims.v[0];
    kn_tensor *x = c->in[0], *g = gout[0], *zero = scalar_as(x, 0), *one = scalar_as(x, 1);
    kn_tensor *is_zero = kn_eq(x, zero);
    kn_tensor *zeros_so_far = kn_cumsum(is_zero, d);
    kn_tensor *before = kn_eq(zeros_so_far, scalar_as(zeros_so_far, 0));
    kn_tensor *first = kn_logical_and(is_zero, kn_eq(zeros_so_far, scalar_as(zeros_so_far, 1)));
    kn_tensor *plain = kn_div(reverse_cumsum(kn_mul(g, c->out[0]), d), kn_where(is_zero, one, x));
    kn_tensor *at_first = reverse_cumsum(kn_mul(g, kn_cumprod(kn_where(first, one, x), d)), d);
    gin[0] = kn_where(before, plain, kn_where(first, at_first, zero));
    return gin[0] ? KN_OK : kn_last_status();
}
