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

/* The factor for the m grads: max_norm / (total + 1e-6) when that is below 1 (or NaN), else
 * exactly 1. */
static kn_status clip_coef(kn_tensor **grads, int m, double max_norm, double *total_out, double *coef_out) {
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
    *coef_out = coef >= 1 ? 1 : coef;
    return KN_OK;
}

/* The grads of params (those that have one) and their factor; with apply, the grads scaled by
 * it (kn_set_grad) unless it is 1. */
static kn_status clip(kn_tensor *const *params, int n, double max_norm, double *total_out, double *coef_out,
                      bool apply) {
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
    double coef = 1;
    if (st == KN_OK) st = clip_coef(grads, m, max_norm, total_out, &coef);
    for (int k = 0; apply && coef != 1 && k < m && st == KN_OK; k++)
        st = kn_set_grad(with_grad[k], kn_mul_scalar(grads[k], coef));
    if (coef_out) *coef_out = coef;
    kn_scope_pop();
    kn_no_grad_pop();
    free(with_grad);
    return st;
}

kn_status kn_clip_grad_norm(kn_tensor *const *params, int n, double max_norm, double *total_norm_out) {
    return clip(params, n, max_norm, total_norm_out, NULL, true);
}

kn_status kn_clip_grad_norm_coef(kn_tensor *const *params, int n, double max_norm, double *total_norm_out,
                                 double *coef_out) {
    if (!coef_out) return kn_error(KN_ERR_NULL, "clip_grad_norm_coef: coef_out is NULL");
    return clip(params, n, max_norm, total_norm_out, coef_out, false);
}
