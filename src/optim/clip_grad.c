/* Gradient clipping by global 2-norm, as torch.nn.utils.clip_grad_norm_. */
#include <math.h>
#include <stdlib.h>

#include "core/error.h"
#include "kiln/autograd.h"
#include "kiln/ops.h"
#include "kiln/optim.h"

/* The dtype the norms are combined in: the grads' own when they agree, else f64 if any is
 * f64, else f32. */
static kn_dtype total_dtype(kn_tensor *const *g, int m) {
    kn_dtype d = m ? kn_dtype_of(g[0]) : KN_F32;
    for (int k = 1; k < m; k++)
        if (kn_dtype_of(g[k]) != d) d = (d == KN_F64 || kn_dtype_of(g[k]) == KN_F64) ? KN_F64 : KN_F32;
    return d;
}

/* Scales the m grads of params by max_norm / (total + 1e-6) when that is below 1 (or NaN). */
static kn_status clip(kn_tensor *const *params, kn_tensor **grads, int m, double max_norm, double *total_out) {
    kn_tensor **norms = malloc(sizeof *norms * (size_t)(m ? m : 1));
    if (!norms) return kn_error(KN_ERR_OOM, "clip_grad_norm: out of host memory");
    kn_dtype d = total_dtype(grads, m);
    /* Sums of squares (a multiply and a parallel sum; one fused pass in fused mode), not
     * kn_norm, whose single long row runs on one thread. */
    for (int k = 0; k < m; k++) {
        norms[k] = kn_sum(kn_mul(grads[k], grads[k]), KN_ALL_DIMS, false);
        if (norms[k] && kn_dtype_of(norms[k]) != d) norms[k] = kn_cast(norms[k], d); /* a cast to its own dtype is a copy */
    }
    kn_tensor *total = m ? kn_sqrt(kn_sum(kn_stack(norms, m, 0), KN_ALL_DIMS, false)) : NULL;
    free(norms);
    double t = 0;
    if (m && kn_item(total, &t) != KN_OK) return kn_last_status();
    if (total_out) *total_out = t;
    /* torch: clip_coef = max_norm / (total + 1e-6), i.e. reciprocal(total + 1e-6) * max_norm,
     * in total's dtype (f32 arithmetic for f32 and narrower) */
    double coef = d == KN_F64 ? 1 / (t + 1e-6) * max_norm : (double)(1 / ((float)t + 1e-6f) * (float)max_norm);
    if (coef >= 1) return KN_OK;
    for (int k = 0; k < m; k++) {
        kn_status st = kn_set_grad(params[k], kn_mul_scalar(grads[k], coef));
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

kn_status kn_clip_grad_norm(kn_tensor *const *params, int n, double max_norm, double *total_norm_out) {
    if (n < 0 || (n > 0 && !params))
        return kn_error(KN_ERR_NULL, "clip_grad_norm: params is NULL or n (%d) is negative", n);
    if (!(max_norm >= 0))
        return kn_error(KN_ERR_ARG, "clip_grad_norm: max_norm is %g; it must be >= 0", max_norm);
    kn_tensor **with_grad = malloc(sizeof *with_grad * (size_t)(n ? 2 * n : 1));
    if (!with_grad) return kn_error(KN_ERR_OOM, "clip_grad_norm: out of host memory");
    kn_tensor **grads = with_grad + n;
    kn_status st = KN_OK;
    int m = 0;
    kn_no_grad_push();
    kn_scope_push();
    for (int k = 0; k < n && st == KN_OK; k++) {
        if (!params[k]) {
            st = kn_error(KN_ERR_NULL, "clip_grad_norm: param %d is NULL", k);
            break;
        }
        kn_tensor *g = kn_grad(params[k]);
        if (g) with_grad[m] = params[k], grads[m++] = g;
    }
    if (st == KN_OK) st = clip(with_grad, grads, m, max_norm, total_norm_out);
    kn_scope_pop();
    kn_no_grad_pop();
    free(with_grad);
    return st;
}
