/* Gradient checks against float64 central finite differences (gradcheck.h). */
#include "gradcheck.h"

#include <stdlib.h>

#define GC_MAX_IN 8
#define GC_EPS 1e-6
#define GC_RTOL 1e-5
#define GC_ATOL 1e-7

/* L = sum(f(in) * r) with the current values; NAN on failure. */
static double loss_of(gc_fn f, const void *ctx, int n, const gc_input *in, double *const *vals, kn_tensor *r,
                      kn_tensor **leaves) {
    kn_scope_push();
    kn_tensor *args[GC_MAX_IN];
    for (int i = 0; i < n; i++) {
        args[i] = in[i].fixed ? in[i].fixed : tensor_from(vals[i], in[i].shape, KN_F64);
        if (leaves && !in[i].fixed) args[i] = kn_requires_grad(args[i], true), leaves[i] = kn_keep(args[i]);
    }
    kn_tensor *out = f(args, ctx);
    kn_tensor *loss = out ? kn_sum(kn_mul(kn_cast(out, KN_F64), r), KN_ALL_DIMS, false) : NULL;
    double v = NAN;
    if (leaves) {
        if (!loss || kn_backward(loss) != KN_OK) v = NAN;
        else kn_item(loss, &v);
    } else if (loss) {
        kn_item(loss, &v);
    }
    kn_scope_pop();
    return v;
}

bool gradcheck_at(const char *what, gc_fn f, const void *ctx, int n, const gc_input *in, const char *file, int line) {
    if (n > GC_MAX_IN) {
        test_fail(file, line, "%s: gradcheck takes at most %d inputs", what, GC_MAX_IN);
        return false;
    }
    double *vals[GC_MAX_IN] = {0};
    kn_tensor *leaves[GC_MAX_IN] = {0};
    for (int i = 0; i < n; i++) {
        if (in[i].fixed) continue;
        int64_t cnt = kn_shape_numel(in[i].shape);
        vals[i] = malloc(sizeof(double) * (size_t)(cnt ? cnt : 1));
        rand_fill(vals[i], cnt, in[i].lo, in[i].hi);
    }
    /* The random weights r need the output's shape: one forward without grad first. */
    kn_no_grad_push();
    kn_scope_push();
    kn_tensor *args[GC_MAX_IN];
    for (int i = 0; i < n; i++) args[i] = in[i].fixed ? in[i].fixed : tensor_from(vals[i], in[i].shape, KN_F64);
    kn_tensor *probe = f(args, ctx);
    kn_shape out_shape = kn_shape_of(probe);
    kn_scope_pop();
    kn_no_grad_pop();
    bool ok = probe != NULL;
    if (!ok) test_fail(file, line, "%s: the forward failed: %s", what, kn_last_error());
    kn_tensor *r = ok ? rand_tensor(out_shape, KN_F64, -1, 1) : NULL;
    if (ok && isnan(loss_of(f, ctx, n, in, vals, r, leaves))) {
        test_fail(file, line, "%s: forward or backward failed: %s", what, kn_last_error());
        ok = false;
    }
    kn_no_grad_push();
    for (int i = 0; ok && i < n; i++) {
        if (in[i].fixed) continue;
        int64_t cnt = kn_shape_numel(in[i].shape);
        kn_tensor *g = kn_grad(leaves[i]);
        double *got = g ? read_f64(g) : calloc((size_t)(cnt ? cnt : 1), sizeof(double));
        kn_release(g);
        for (int64_t j = 0; ok && j < cnt; j++) {
            double keep = vals[i][j];
            vals[i][j] = keep + GC_EPS;
            double up = loss_of(f, ctx, n, in, vals, r, NULL);
            vals[i][j] = keep - GC_EPS;
            double down = loss_of(f, ctx, n, in, vals, r, NULL);
            vals[i][j] = keep;
            double want = (up - down) / (2 * GC_EPS);
            if (!(fabs(got[j] - want) <= GC_ATOL + GC_RTOL * fabs(want))) {
                test_fail(file, line, "%s: d/d input %d element %lld: backward %.10g, finite difference %.10g", what,
                          i, (long long)j, got[j], want);
                ok = false;
            }
        }
        free(got);
    }
    kn_no_grad_pop();
    for (int i = 0; i < n; i++) {
        free(vals[i]);
        kn_release(leaves[i]);
    }
    kn_release(r);
    return ok;
}
