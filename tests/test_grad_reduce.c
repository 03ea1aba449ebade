/* Gradients of reductions, scans, softmax, matrix products and layout ops: GRADCHECK against
 * float64 finite differences for every op and attribute variant (non-contiguous inputs and
 * broadcasting included), f32 gradients against f64 ones, ties and zeros by hand, and the
 * family's entries in the gradient table. */
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"
#include "ops/grad.h"

/* ---- helpers -------------------------------------------------------------------------------- */

static kn_tensor *maybe_nc(kn_tensor *x, bool nc) { return nc ? non_contiguous_copy(x) : x; }

/* A tensor of x's shape and dtype holding at(i, n) at flat index i of n. */
static kn_tensor *pattern_like(kn_tensor *x, double (*at)(int64_t i, int64_t n)) {
    kn_shape s = kn_shape_of(x);
    int64_t n = kn_shape_numel(s);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) v[i] = at(i, n);
    kn_tensor *m = tensor_from(v, s, kn_dtype_of(x));
    free(v);
    return m;
}

static double sign_at(int64_t i, int64_t n) { return (void)n, i % 3 == 1 ? -1 : 1; }
/* A band of its own for each element, 3 apart, in an order that is not the index's (7919 is a
 * prime, so i * 7919 mod n visits every band once for the sizes here). */
static double band_at(int64_t i, int64_t n) { return 3.0 * (double)((i * 7919) % n); }

/* x times a fixed pattern of signs (-1 at every third element), in x's dtype: inputs drawn
 * away from zero in [lo, hi) become both signs without going near the kinks of |x|. */
static kn_tensor *mixed_signs(kn_tensor *x) { return kn_mul(x, pattern_like(x, sign_at)); }

/* x plus its element's band: inputs drawn in [lo, hi) with hi - lo < 2 keep the bands apart,
 * so max, min and the infinity norms have no near-ties, where central differences would
 * straddle the kink (the reduction's gradient is still the one checked). One element has
 * nothing to tie with. */
static kn_tensor *untied(kn_tensor *x) { return kn_numel(x) > 1 ? kn_add(x, pattern_like(x, band_at)) : x; }

/* Gradients of sum(f(in) * r) for the differentiated inputs in f32 leaves: f32 dtype and close
 * to those of the same values in f64. */
static bool f32_agrees_at(const char *what, gc_fn f, const void *ctx, int n, const gc_input *in, const char *file,
                          int line) {
    kn_scope_push();
    kn_tensor *x64[8], *x32[8];
    for (int i = 0; i < n; i++) {
        if (in[i].fixed) {
            x64[i] = x32[i] = in[i].fixed;
            continue;
        }
        kn_tensor *t = rand_tensor(in[i].shape, KN_F32, in[i].lo, in[i].hi);
        x64[i] = kn_requires_grad(kn_cast(t, KN_F64), true);
        x32[i] = kn_requires_grad(t, true);
    }
    kn_tensor *y64 = f(x64, ctx);
    kn_tensor *r = y64 ? rand_tensor(kn_shape_of(y64), KN_F64, -1, 1) : NULL;
    bool ok = r && kn_backward(kn_sum(kn_mul(y64, r), KN_ALL_DIMS, false)) == KN_OK;
    kn_tensor *y32 = ok ? f(x32, ctx) : NULL;
    ok = ok && y32 && kn_dtype_of(y32) == KN_F32 &&
         kn_backward(kn_sum(kn_mul(y32, kn_cast(r, KN_F32)), KN_ALL_DIMS, false)) == KN_OK;
    if (!ok) test_fail(file, line, "%s (f32): forward or backward failed: %s", what, kn_last_error());
    for (int i = 0; ok && i < n; i++) {
        if (in[i].fixed) continue;
        kn_tensor *g64 = kn_grad(x64[i]), *g32 = kn_grad(x32[i]);
        if (!g64 && !g32) continue; /* a zero gradient (norm 0) */
        if (!g64 || !g32 || kn_dtype_of(g32) != KN_F32) {
            test_fail(file, line, "%s (f32): input %d has no f32 gradient", what, i);
            ok = false;
            break;
        }
        double *want = read_f64(g64), *got = read_f64(g32), scale = 1;
        int64_t cnt = kn_numel(g64);
        for (int64_t j = 0; j < cnt; j++) scale = fmax(scale, fabs(want[j]));
        for (int64_t j = 0; ok && j < cnt; j++)
            if (!(fabs(got[j] - want[j]) <= 1e-4 * scale + 1e-3 * fabs(want[j]))) {
                test_fail(file, line, "%s (f32): d/d input %d element %lld: f32 %.8g, f64 %.8g", what, i,
                          (long long)j, got[j], want[j]);
                ok = false;
            }
        free(want);
        free(got);
    }
    kn_scope_pop();
    return ok;
}
#define F32_AGREES(what, f, ctx, n, ...) \
    f32_agrees_at((what), (f), (ctx), (n), (const gc_input[]){__VA_ARGS__}, __FILE__, __LINE__)

/* The gradient of sum(f(x) * seed) for x of these values, as doubles (malloc'd). */
static double *grad_of(kn_tensor *(*f)(kn_tensor *), const double *xv, kn_shape shape, const double *seed) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(tensor_from(xv, shape, KN_F64), true);
    kn_tensor *y = f(x);
    kn_tensor *s = tensor_from(seed, kn_shape_of(y), KN_F64);
    double *g = kn_backward(kn_sum(kn_mul(y, s), KN_ALL_DIMS, false)) == KN_OK ? read_f64(kn_grad(x)) : NULL;
    kn_scope_pop();
    return g;
}

static void check_values(const double *got, const double *want, int n, const char *what) {
    CHECK_MSG(got != NULL, "%s: no gradient: %s", what, kn_last_error());
    for (int i = 0; got && i < n; i++)
        CHECK_MSG(fabs(got[i] - want[i]) < 1e-12 || (isnan(got[i]) && isnan(want[i])), "%s: element %d is %g, want %g",
                  what, i, got[i], want[i]);
}

/* ---- reductions ----------------------------------------------------------------------------- */

enum { R_SUM, R_MEAN, R_PROD, R_AMAX, R_AMIN, R_VAR, R_STD, R_NORM, R_LSE, R_COUNT };
static const char *const R_NAMES[] = {"sum", "mean", "prod", "amax", "amin", "var", "std", "norm", "logsumexp"};

typedef struct rcase {
    int op;
    kn_shape dims;
    bool keepdim, nc;
    double param;
} rcase;

static kn_tensor *f_reduce(kn_tensor *const *in, const void *ctx) {
    const rcase *k = ctx;
    kn_tensor *x = maybe_nc(in[0], k->nc);
    switch (k->op) {
    case R_SUM: return kn_sum(x, k->dims, k->keepdim);
    case R_MEAN: return kn_mean(x, k->dims, k->keepdim);
    case R_PROD: return kn_prod(mixed_signs(x), k->dims, k->keepdim);
    case R_AMAX: return kn_amax(untied(x), k->dims, k->keepdim);
    case R_AMIN: return kn_amin(untied(x), k->dims, k->keepdim);
    case R_VAR: return kn_var(x, k->dims, k->param, k->keepdim);
    case R_STD: return kn_std(x, k->dims, k->param, k->keepdim);
    case R_NORM: return kn_norm(mixed_signs(isinf(k->param) ? untied(x) : x), k->param, k->dims, k->keepdim);
    default: return kn_logsumexp(x, k->dims, k->keepdim);
    }
}

static void check_reduction(int op, double param, double lo, double hi) {
    const kn_shape dims[] = {KN_ALL_DIMS, KN_DIMS(1), KN_DIMS(0, 2), KN_DIMS(-1)};
    for (int d = 0; d < 4; d++)
        for (int v = 0; v < 4; v++) {
            rcase k = {op, dims[d], v & 1, v >> 1, param};
            char what[96];
            snprintf(what, sizeof what, "%s p=%g dims#%d keepdim=%d nc=%d", R_NAMES[op], param, d, v & 1, v >> 1);
            GRADCHECK(what, f_reduce, &k, 1, GC_IN(KN_SHAPE(3, 4, 5), lo, hi));
        }
    rcase whole = {op, KN_ALL_DIMS, false, false, param};
    if (!((op == R_VAR || op == R_STD) && param >= 1)) /* 0-d: one element, divisor N - correction */
        GRADCHECK(R_NAMES[op], f_reduce, &whole, 1, GC_IN(KN_SHAPE0, lo, hi));
    rcase rows = {op, KN_DIMS(1), false, true, param};
    F32_AGREES(R_NAMES[op], f_reduce, &rows, 1, GC_IN(KN_SHAPE(3, 6), lo, hi));
}

static void test_sum_mean_prod_logsumexp(void) {
    check_reduction(R_SUM, 0, -1, 1);
    check_reduction(R_MEAN, 0, -1, 1);
    check_reduction(R_PROD, 0, 0.5, 1.5);
    check_reduction(R_LSE, 0, -2, 2);
}

static void test_extremes(void) {
    check_reduction(R_AMAX, 0, -1, 1);
    check_reduction(R_AMIN, 0, -1, 1);
}

static void test_var_std(void) {
    for (int c = 0; c < 3; c++) {
        double correction = c == 2 ? 0.5 : c;
        check_reduction(R_VAR, correction, -1, 1);
        check_reduction(R_STD, correction, -1, 1);
    }
}

static void test_norm(void) {
    const double ps[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5, 1.5};
    for (int i = 0; i < 8; i++) check_reduction(R_NORM, ps[i], 0.3, 1);
}

/* The whole-tensor max/min and the one-dim forms with indices. */
typedef struct xcase {
    bool is_max, nc, keepdim, with_dim;
    int64_t dim;
} xcase;

static kn_tensor *f_extreme(kn_tensor *const *in, const void *ctx) {
    const xcase *k = ctx;
    kn_tensor *x = maybe_nc(in[0], k->nc);
    if (!k->with_dim) return k->is_max ? kn_max(x) : kn_min(x);
    kn_tensor *values = NULL, *indices = NULL;
    kn_status st = (k->is_max ? kn_max_dim : kn_min_dim)(x, k->dim, k->keepdim, &values, &indices);
    return st == KN_OK && kn_dtype_of(indices) == KN_I64 ? values : NULL;
}

static void test_max_min_and_dims(void) {
    for (int m = 0; m < 2; m++) {
        for (int nc = 0; nc < 2; nc++) {
            xcase whole = {m, nc, false, false, 0};
            GRADCHECK(m ? "max" : "min", f_extreme, &whole, 1, GC_IN(KN_SHAPE(3, 4), -1, 1));
            for (int64_t dim = -1; dim < 3; dim++)
                for (int keep = 0; keep < 2; keep++) {
                    xcase k = {m, nc, keep, true, dim};
                    char what[64];
                    snprintf(what, sizeof what, "%s_dim dim=%lld keepdim=%d nc=%d", m ? "max" : "min", (long long)dim,
                             keep, nc);
                    GRADCHECK(what, f_extreme, &k, 1, GC_IN(KN_SHAPE(3, 4, 5), -1, 1));
                }
        }
        xcase scalar = {m, false, false, true, 0};
        GRADCHECK("extreme_dim of 0-d", f_extreme, &scalar, 1, GC_IN(KN_SHAPE0, -1, 1));
        xcase whole = {m, true, false, false, 0}, along = {m, true, true, true, 1};
        F32_AGREES("max/min", f_extreme, &whole, 1, GC_IN(KN_SHAPE(3, 4), -1, 1));
        F32_AGREES("max_dim/min_dim", f_extreme, &along, 1, GC_IN(KN_SHAPE(3, 4), -1, 1));
    }
}

static kn_tensor *amax_rows(kn_tensor *x) { return kn_amax(x, KN_DIMS(1), false); }
static kn_tensor *amin_rows(kn_tensor *x) { return kn_amin(x, KN_DIMS(1), true); }
static kn_tensor *max_all(kn_tensor *x) { return kn_max(x); }
static kn_tensor *min_all(kn_tensor *x) { return kn_min(x); }
static kn_tensor *max_dim_rows(kn_tensor *x) {
    kn_tensor *v = NULL;
    return kn_max_dim(x, 1, false, &v, NULL) == KN_OK ? v : NULL;
}
static kn_tensor *min_dim_cols(kn_tensor *x) {
    kn_tensor *v = NULL;
    return kn_min_dim(x, 0, true, &v, NULL) == KN_OK ? v : NULL;
}
static kn_tensor *norm_inf_rows(kn_tensor *x) { return kn_norm(x, INFINITY, KN_DIMS(1), false); }

/* Ties: the extremes share the gradient evenly (PyTorch's amax and max); the one-dim forms
 * give it all to the index they return (the first). */
static void test_ties(void) {
    const double x[6] = {1, 3, 3, 2, 2, 0}, two[2] = {1, 2}, one[1] = {4};
    double *g = grad_of(amax_rows, x, KN_SHAPE(2, 3), two);
    check_values(g, (double[]){0, 0.5, 0.5, 1, 1, 0}, 6, "amax ties");
    free(g);
    g = grad_of(amin_rows, x, KN_SHAPE(2, 3), two);
    check_values(g, (double[]){1, 0, 0, 0, 0, 2}, 6, "amin ties");
    free(g);
    g = grad_of(max_all, x, KN_SHAPE(2, 3), one);
    check_values(g, (double[]){0, 2, 2, 0, 0, 0}, 6, "max ties");
    free(g);
    const double y[6] = {1, 0, 1, 2, 0, 5};
    g = grad_of(min_all, y, KN_SHAPE(2, 3), one);
    check_values(g, (double[]){0, 2, 0, 0, 2, 0}, 6, "min ties");
    free(g);
    g = grad_of(max_dim_rows, x, KN_SHAPE(2, 3), two);
    check_values(g, (double[]){0, 1, 0, 2, 0, 0}, 6, "max_dim ties");
    free(g);
    const double three[3] = {1, 2, 3};
    g = grad_of(min_dim_cols, (double[]){1, 2, 3, 1, 0, 3}, KN_SHAPE(2, 3), three);
    check_values(g, (double[]){1, 0, 3, 0, 2, 0}, 6, "min_dim ties");
    free(g);
    g = grad_of(norm_inf_rows, (double[]){-3, 3, 1, 0, 2, -2}, KN_SHAPE(2, 3), two);
    check_values(g, (double[]){-0.5, 0.5, 0, 0, 1, -1}, 6, "norm inf ties");
    free(g);
}

/* A NaN extreme, as PyTorch 2.15's backward: max and min share the gradient among the NaNs
 * (evenly_distribute_backward), amax and amin make the slice's gradient NaN (g / 0 * 0). */
static void test_nan_extremes_route_the_gradient_as_pytorch(void) {
    /* x = torch.tensor([[1., nan, nan], [1, nan, 3], [2, 5, 5]], dtype=torch.float64) */
    const double x[9] = {1, NAN, NAN, 1, NAN, 3, 2, 5, 5}, three[3] = {1, 2, 3}, four[1] = {4}, t = 4.0 / 3;
    /* (torch.amax(x, 1) * torch.tensor([1., 2, 3])).sum().backward() */
    double *g = grad_of(amax_rows, x, KN_SHAPE(3, 3), three);
    check_values(g, (double[]){NAN, NAN, NAN, NAN, NAN, NAN, 0, 1.5, 1.5}, 9, "amax with NaN");
    free(g);
    /* torch.amin(x, 1, keepdim=True) */
    g = grad_of(amin_rows, x, KN_SHAPE(3, 3), three);
    check_values(g, (double[]){NAN, NAN, NAN, NAN, NAN, NAN, 3, 0, 0}, 9, "amin with NaN");
    free(g);
    /* (torch.max(x) * 4).backward(), and torch.min */
    g = grad_of(max_all, x, KN_SHAPE(3, 3), four);
    check_values(g, (double[]){0, t, t, 0, t, 0, 0, 0, 0}, 9, "max with NaN");
    free(g);
    g = grad_of(min_all, x, KN_SHAPE(3, 3), four);
    check_values(g, (double[]){0, t, t, 0, t, 0, 0, 0, 0}, 9, "min with NaN");
    free(g);
}

static kn_tensor *norm2(kn_tensor *x) { return kn_norm(x, 2, KN_ALL_DIMS, false); }
static kn_tensor *norm3(kn_tensor *x) { return kn_norm(x, 3, KN_ALL_DIMS, false); }
static kn_tensor *norm_half(kn_tensor *x) { return kn_norm(x, 0.5, KN_DIMS(1), false); }
static kn_tensor *std_rows(kn_tensor *x) { return kn_std(x, KN_DIMS(1), 1, false); }

/* Where PyTorch defines the gradient at a kink as zero: a zero norm, a zero std, and the
 * zero elements of a p < 1 norm. */
static void test_zero_norm_and_std(void) {
    const double zeros[4] = {0, 0, 0, 0}, one[1] = {1}, two[2] = {1, 1};
    double *g = grad_of(norm2, zeros, KN_SHAPE(4), one);
    check_values(g, zeros, 4, "norm 2 at 0");
    free(g);
    g = grad_of(norm3, zeros, KN_SHAPE(4), one);
    check_values(g, zeros, 4, "norm 3 at 0");
    free(g);
    g = grad_of(norm_half, (double[]){0, 0, 4, 0}, KN_SHAPE(2, 2), two);
    check_values(g, (double[]){0, 0, 1, 0}, 4, "norm 0.5 with zeros");
    free(g);
    g = grad_of(std_rows, (double[]){2, 2, 1, 3}, KN_SHAPE(2, 2), two);
    check_values(g, (double[]){0, 0, -sqrt(0.5), sqrt(0.5)}, 4, "std of a constant row");
    free(g);
}

/* prod with exact zeros: inputs made of all-zero pieces (lo = hi = 0) next to random ones. */
typedef struct zcase {
    int64_t cat_dim, dim;
    bool keepdim, scan;
} zcase;

static kn_tensor *f_with_zeros(kn_tensor *const *in, const void *ctx) {
    const zcase *k = ctx;
    kn_tensor *x = kn_cat((kn_tensor *[]){in[0], in[1], in[2]}, 3, k->cat_dim);
    return k->scan ? kn_cumprod(x, k->dim) : kn_prod(x, KN_DIMS(k->dim), k->keepdim);
}

static void test_prod_and_cumprod_with_zeros(void) {
    for (int scan = 0; scan < 2; scan++)
        for (int64_t dim = 0; dim < 2; dim++) {
            zcase k = {dim, dim, dim == 1, scan};
            kn_shape one = dim ? KN_SHAPE(3, 1) : KN_SHAPE(1, 4), two = dim ? KN_SHAPE(3, 2) : KN_SHAPE(2, 4);
            kn_shape rest = dim ? KN_SHAPE(3, 3) : KN_SHAPE(3, 4);
            const char *what = scan ? "cumprod" : "prod";
            /* one zero per slice, in the middle */
            GRADCHECK(what, f_with_zeros, &k, 3, GC_IN(rest, 0.5, 1.5), GC_IN(one, 0, 0), GC_IN(rest, -1.5, -0.5));
            /* two zeros per slice */
            GRADCHECK(what, f_with_zeros, &k, 3, GC_IN(rest, 0.5, 1.5), GC_IN(two, 0, 0), GC_IN(one, 0.5, 1.5));
            /* zeros first */
            GRADCHECK(what, f_with_zeros, &k, 3, GC_IN(one, 0, 0), GC_IN(rest, 0.5, 1.5), GC_IN(one, 0, 0));
        }
    /* slices across the zeros: a row of all zeros, and rows with none */
    zcase across = {0, 1, false, false};
    GRADCHECK("prod across", f_with_zeros, &across, 3, GC_IN(KN_SHAPE(2, 3), 0.5, 1.5), GC_IN(KN_SHAPE(1, 3), 0, 0),
              GC_IN(KN_SHAPE(1, 3), 0.5, 1.5));
}

/* ---- scans and softmax ---------------------------------------------------------------------- */

enum { A_CUMSUM, A_CUMPROD, A_SOFTMAX, A_LOG_SOFTMAX };
static const char *const A_NAMES[] = {"cumsum", "cumprod", "softmax", "log_softmax"};

typedef struct acase {
    int op;
    int64_t dim;
    bool nc;
} acase;

static kn_tensor *f_along(kn_tensor *const *in, const void *ctx) {
    const acase *k = ctx;
    kn_tensor *x = maybe_nc(in[0], k->nc);
    switch (k->op) {
    case A_CUMSUM: return kn_cumsum(x, k->dim);
    case A_CUMPROD: return kn_cumprod(mixed_signs(x), k->dim);
    case A_SOFTMAX: return kn_softmax(x, k->dim);
    default: return kn_log_softmax(x, k->dim);
    }
}

static void check_along(int op, double lo, double hi) {
    for (int64_t dim = -1; dim < 3; dim++)
        for (int nc = 0; nc < 2; nc++) {
            acase k = {op, dim, nc};
            char what[64];
            snprintf(what, sizeof what, "%s dim=%lld nc=%d", A_NAMES[op], (long long)dim, nc);
            GRADCHECK(what, f_along, &k, 1, GC_IN(KN_SHAPE(3, 4, 5), lo, hi));
        }
    acase cols = {op, 1, false}, scalar = {op, 0, false}, rows = {op, -1, true};
    GRADCHECK(A_NAMES[op], f_along, &cols, 1, GC_IN(KN_SHAPE(2, 3, 20), lo, hi)); /* 20 columns after the dim */
    GRADCHECK(A_NAMES[op], f_along, &scalar, 1, GC_IN(KN_SHAPE0, lo, hi));
    F32_AGREES(A_NAMES[op], f_along, &rows, 1, GC_IN(KN_SHAPE(4, 9), lo, hi));
    F32_AGREES(A_NAMES[op], f_along, &cols, 1, GC_IN(KN_SHAPE(2, 3, 20), lo, hi));
}

static void test_scans(void) {
    check_along(A_CUMSUM, -1, 1);
    check_along(A_CUMPROD, 0.5, 1.5);
}

static void test_softmax(void) {
    check_along(A_SOFTMAX, -3, 3);
    check_along(A_LOG_SOFTMAX, -3, 3);
}

/* The backward ops record no history of their own: higher-order gradients are refused. */
static void test_softmax_backward_ops_are_leaves_of_backward(void) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(2, 3), KN_F64, -1, 1), true);
    kn_tensor *y = kn_softmax(x, 1);
    CHECK(!kn_needs_grad(kn_softmax_backward(kn_ones_like(y), y, 1)));
    CHECK(!kn_needs_grad(kn_log_softmax_backward(kn_ones_like(y), y, 1)));
    kn_scope_pop();
}

/* ---- matrix products ------------------------------------------------------------------------ */

enum { M_MATMUL, M_BMM, M_ADDMM, M_LINEAR, M_LINEAR_NO_BIAS, M_OUTER };

typedef struct mcase {
    int op;
    bool nc;
    double beta, alpha;
} mcase;

static kn_tensor *f_matrix(kn_tensor *const *in, const void *ctx) {
    const mcase *k = ctx;
    kn_tensor *a = maybe_nc(in[0], k->nc), *b = maybe_nc(in[1], k->nc);
    switch (k->op) {
    case M_MATMUL: return kn_matmul(a, b);
    case M_BMM: return kn_bmm(a, b);
    case M_ADDMM: return kn_addmm(in[2], a, b, k->beta, k->alpha);
    case M_LINEAR: return kn_linear(a, b, in[2]);
    case M_LINEAR_NO_BIAS: return kn_linear(a, b, NULL);
    default: return kn_outer(a, b);
    }
}

static void test_matmul_forms(void) {
    const kn_shape shapes[][2] = {
        {KN_SHAPE(3, 4), KN_SHAPE(4, 5)},       {KN_SHAPE(2, 1, 3, 4), KN_SHAPE(5, 4, 2)}, /* batch broadcast */
        {KN_SHAPE(4), KN_SHAPE(4, 5)},          {KN_SHAPE(3, 4), KN_SHAPE(4)},
        {KN_SHAPE(4), KN_SHAPE(4)},             {KN_SHAPE(2, 3, 4), KN_SHAPE(4)},
        {KN_SHAPE(4), KN_SHAPE(2, 4, 5)},       {KN_SHAPE(1, 3, 4), KN_SHAPE(2, 4, 1)},
    };
    for (int i = 0; i < 8; i++)
        for (int nc = 0; nc < 2; nc++) {
            mcase k = {M_MATMUL, nc, 0, 0};
            char what[80];
            snprintf(what, sizeof what, "matmul case %d nc=%d", i, nc);
            GRADCHECK(what, f_matrix, &k, 2, GC_IN(shapes[i][0], -1, 1), GC_IN(shapes[i][1], -1, 1));
        }
    mcase mm = {M_MATMUL, true, 0, 0}, bmm = {M_BMM, true, 0, 0}, outer = {M_OUTER, false, 0, 0};
    F32_AGREES("matmul", f_matrix, &mm, 2, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(4, 5), -1, 1));
    GRADCHECK("bmm", f_matrix, &bmm, 2, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(2, 4, 5), -1, 1));
    F32_AGREES("bmm", f_matrix, &bmm, 2, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(2, 4, 5), -1, 1));
    GRADCHECK("outer", f_matrix, &outer, 2, GC_IN(KN_SHAPE(3), -1, 1), GC_IN(KN_SHAPE(4), -1, 1));
    F32_AGREES("outer", f_matrix, &outer, 2, GC_IN(KN_SHAPE(3), -1, 1), GC_IN(KN_SHAPE(4), -1, 1));
    const double coef[][2] = {{1, 1}, {0.5, 2}, {0, 1}};
    const kn_shape bias[] = {KN_SHAPE(3, 5), KN_SHAPE(5), KN_SHAPE(3, 1)};
    for (int c = 0; c < 3; c++)
        for (int b = 0; b < 3; b++) {
            mcase k = {M_ADDMM, b == 1, coef[c][0], coef[c][1]};
            char what[80];
            snprintf(what, sizeof what, "addmm beta=%g alpha=%g bias#%d", coef[c][0], coef[c][1], b);
            GRADCHECK(what, f_matrix, &k, 3, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(4, 5), -1, 1),
                      GC_IN(bias[b], -1, 1));
        }
    mcase addmm = {M_ADDMM, false, 0.5, 2}, lin = {M_LINEAR, true, 0, 0}, lin0 = {M_LINEAR_NO_BIAS, false, 0, 0};
    F32_AGREES("addmm", f_matrix, &addmm, 3, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(4, 5), -1, 1),
               GC_IN(KN_SHAPE(5), -1, 1));
    GRADCHECK("linear", f_matrix, &lin, 3, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(5, 4), -1, 1),
              GC_IN(KN_SHAPE(5), -1, 1));
    GRADCHECK("linear 1-d", f_matrix, &lin, 3, GC_IN(KN_SHAPE(4), -1, 1), GC_IN(KN_SHAPE(5, 4), -1, 1),
              GC_IN(KN_SHAPE(5), -1, 1));
    GRADCHECK("linear without bias", f_matrix, &lin0, 2, GC_IN(KN_SHAPE(3, 4), -1, 1), GC_IN(KN_SHAPE(5, 4), -1, 1));
    F32_AGREES("linear", f_matrix, &lin, 3, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(5, 4), -1, 1),
               GC_IN(KN_SHAPE(5), -1, 1));
}

/* ---- layout --------------------------------------------------------------------------------- */

enum { L_PAD, L_ROLL, L_REPEAT, L_TRIL, L_TRIU, L_FLIP, L_REPEAT_INTERLEAVE };

typedef struct lcase {
    int op;
    bool nc;
    int n;               /* pads or shifts given */
    int64_t v[8];        /* pads, shifts, or the diagonal / repeats / dim in v[0] */
    kn_shape dims;       /* roll, flip: dims; repeat: repeats */
    kn_pad_mode mode;
    double value;
} lcase;

static kn_tensor *f_layout(kn_tensor *const *in, const void *ctx) {
    const lcase *k = ctx;
    kn_tensor *x = maybe_nc(in[0], k->nc);
    switch (k->op) {
    case L_PAD: return kn_pad(x, k->v, k->n, k->mode, k->value);
    case L_ROLL: return kn_roll(x, k->v, k->dims);
    case L_REPEAT: return kn_repeat(x, k->dims);
    case L_TRIL: return kn_tril(x, k->v[0]);
    case L_TRIU: return kn_triu(x, k->v[0]);
    case L_FLIP: return kn_flip(x, k->dims);
    default: return kn_repeat_interleave(x, k->v[0], k->v[1]);
    }
}

#define LAYOUT_CHECK(what, k, shape)                                                     \
    do {                                                                                 \
        for (int nc_ = 0; nc_ < 2; nc_++) {                                              \
            lcase kk_ = (k);                                                             \
            kk_.nc = nc_;                                                                \
            GRADCHECK(what, f_layout, &kk_, 1, GC_IN(shape, -1, 1));                     \
        }                                                                                \
    } while (0)

static void test_pad(void) {
    const kn_shape s = KN_SHAPE(2, 3, 5);
    for (int m = 0; m < 3; m++) {
        lcase last = {L_PAD, .n = 2, .v = {1, 2}, .mode = (kn_pad_mode)m, .value = 0.5};
        lcase two = {L_PAD, .n = 4, .v = {2, 1, 1, 2}, .mode = (kn_pad_mode)m};
        lcase all = {L_PAD, .n = 6, .v = {0, 3, 2, 0, 1, 1}, .mode = (kn_pad_mode)m};
        LAYOUT_CHECK("pad last dim", last, s);
        LAYOUT_CHECK("pad two dims", two, s);
        LAYOUT_CHECK("pad every dim", all, s);
        all.nc = true;
        F32_AGREES("pad", f_layout, &all, 1, GC_IN(s, -1, 1));
    }
    lcase crop = {L_PAD, .n = 4, .v = {-1, 2, 1, -2}, .mode = KN_PAD_CONSTANT, .value = 3};
    LAYOUT_CHECK("pad negative", crop, s);
}

static void test_roll_repeat_triangles(void) {
    const kn_shape s = KN_SHAPE(3, 4, 5);
    lcase one = {L_ROLL, .v = {2}, .dims = KN_DIMS(1)};
    lcase two = {L_ROLL, .v = {-1, 7}, .dims = KN_DIMS(0, -1)};
    lcase same = {L_ROLL, .v = {1, 2}, .dims = KN_DIMS(2, 2)};
    lcase flat = {L_ROLL, .v = {-13}, .dims = KN_ALL_DIMS};
    LAYOUT_CHECK("roll", one, s);
    LAYOUT_CHECK("roll two dims", two, s);
    LAYOUT_CHECK("roll one dim twice", same, s);
    LAYOUT_CHECK("roll flattened", flat, s);
    F32_AGREES("roll", f_layout, &two, 1, GC_IN(s, -1, 1));
    lcase rep = {L_REPEAT, .dims = KN_SHAPE(2, 1, 3)}, lead = {L_REPEAT, .dims = KN_SHAPE(2, 1, 3, 2)};
    lcase none = {L_REPEAT, .dims = KN_SHAPE(1, 1, 1)}, empty = {L_REPEAT, .dims = KN_SHAPE(2, 0, 1)};
    LAYOUT_CHECK("repeat", rep, s);
    LAYOUT_CHECK("repeat with new dims", lead, s);
    LAYOUT_CHECK("repeat once", none, s);
    LAYOUT_CHECK("repeat zero times", empty, s);
    F32_AGREES("repeat", f_layout, &lead, 1, GC_IN(s, -1, 1));
    for (int64_t diag = -1; diag < 3; diag++) {
        lcase lo = {L_TRIL, .v = {diag}}, up = {L_TRIU, .v = {diag}};
        LAYOUT_CHECK("tril", lo, KN_SHAPE(2, 4, 5));
        LAYOUT_CHECK("triu", up, KN_SHAPE(2, 4, 5));
        if (diag == 1) {
            F32_AGREES("tril", f_layout, &lo, 1, GC_IN(KN_SHAPE(4, 5), -1, 1));
            F32_AGREES("triu", f_layout, &up, 1, GC_IN(KN_SHAPE(4, 5), -1, 1));
        }
    }
}

static void test_view_composed_layouts(void) {
    const kn_shape s = KN_SHAPE(3, 4, 5);
    lcase flip = {L_FLIP, .dims = KN_DIMS(0, 2)}, flip_last = {L_FLIP, .dims = KN_DIMS(-1)};
    LAYOUT_CHECK("flip", flip, s);
    LAYOUT_CHECK("flip last", flip_last, s);
    lcase ri = {L_REPEAT_INTERLEAVE, .v = {3, 1}}, ri0 = {L_REPEAT_INTERLEAVE, .v = {2, -1}};
    LAYOUT_CHECK("repeat_interleave", ri, s);
    LAYOUT_CHECK("repeat_interleave last", ri0, s);
    F32_AGREES("flip", f_layout, &flip, 1, GC_IN(s, -1, 1));
    F32_AGREES("repeat_interleave", f_layout, &ri, 1, GC_IN(s, -1, 1));
}

/* Joining and splitting: the pieces weighted differently, so each one's gradient differs. */
enum { J_CAT, J_STACK, J_SPLIT, J_SPLIT_SIZES, J_CHUNK, J_MESHGRID_IJ, J_MESHGRID_XY };

typedef struct jcase {
    int op;
    int64_t dim;
    bool nc;
} jcase;

static kn_tensor *weighted_flat(kn_tensor **parts, int n) {
    kn_tensor *flat[8];
    for (int i = 0; i < n; i++) flat[i] = kn_flatten(kn_mul_scalar(parts[i], i + 1), 0, -1);
    return kn_cat(flat, n, 0);
}

static kn_tensor *f_join(kn_tensor *const *in, const void *ctx) {
    const jcase *k = ctx;
    kn_tensor *x[3] = {maybe_nc(in[0], k->nc), in[1], in[2]}, *parts[8];
    int n = 0;
    switch (k->op) {
    case J_CAT: return kn_cat(x, 3, k->dim);
    case J_STACK: return kn_stack(x, 3, k->dim);
    case J_SPLIT: return kn_split(x[0], 2, k->dim, parts, 8, &n) == KN_OK ? weighted_flat(parts, n) : NULL;
    case J_SPLIT_SIZES:
        return kn_split_sizes(x[0], (int64_t[]){1, 0, 3}, 3, k->dim, parts) == KN_OK ? weighted_flat(parts, 3) : NULL;
    case J_CHUNK: return kn_chunk(x[0], 3, k->dim, parts, &n) == KN_OK ? weighted_flat(parts, n) : NULL;
    default:
        return kn_meshgrid(x, 3, k->op == J_MESHGRID_XY, parts) == KN_OK ? weighted_flat(parts, 3) : NULL;
    }
}

static void test_join_and_split(void) {
    for (int nc = 0; nc < 2; nc++) {
        jcase cat = {J_CAT, 1, nc}, stack = {J_STACK, 1, nc}, stack_last = {J_STACK, -1, nc};
        GRADCHECK("cat", f_join, &cat, 3, GC_IN(KN_SHAPE(3, 2), -1, 1), GC_IN(KN_SHAPE(3, 4), -1, 1),
                  GC_IN(KN_SHAPE(3, 1), -1, 1));
        GRADCHECK("stack", f_join, &stack, 3, GC_IN(KN_SHAPE(3, 2), -1, 1), GC_IN(KN_SHAPE(3, 2), -1, 1),
                  GC_IN(KN_SHAPE(3, 2), -1, 1));
        GRADCHECK("stack last", f_join, &stack_last, 3, GC_IN(KN_SHAPE(3, 2), -1, 1), GC_IN(KN_SHAPE(3, 2), -1, 1),
                  GC_IN(KN_SHAPE(3, 2), -1, 1));
        for (int64_t dim = 0; dim < 2; dim++) {
            jcase split = {J_SPLIT, dim, nc}, sizes = {J_SPLIT_SIZES, dim, nc}, chunk = {J_CHUNK, dim, nc};
            kn_tensor *none = kn_zeros(KN_SHAPE(1), KN_F64);
            GRADCHECK("split", f_join, &split, 3, GC_IN(KN_SHAPE(4, 5), -1, 1), GC_FIXED(none), GC_FIXED(none));
            GRADCHECK("split_sizes", f_join, &sizes, 3, GC_IN(KN_SHAPE(4, 4), -1, 1), GC_FIXED(none), GC_FIXED(none));
            GRADCHECK("chunk", f_join, &chunk, 3, GC_IN(KN_SHAPE(4, 5), -1, 1), GC_FIXED(none), GC_FIXED(none));
            kn_release(none);
        }
    }
    jcase ij = {J_MESHGRID_IJ, 0, false}, xy = {J_MESHGRID_XY, 0, false};
    GRADCHECK("meshgrid ij", f_join, &ij, 3, GC_IN(KN_SHAPE(3), -1, 1), GC_IN(KN_SHAPE(2), -1, 1),
              GC_IN(KN_SHAPE0, -1, 1));
    GRADCHECK("meshgrid xy", f_join, &xy, 3, GC_IN(KN_SHAPE(3), -1, 1), GC_IN(KN_SHAPE(2), -1, 1),
              GC_IN(KN_SHAPE(4), -1, 1));
    jcase cat = {J_CAT, 0, true}, stack = {J_STACK, 0, false};
    F32_AGREES("cat", f_join, &cat, 3, GC_IN(KN_SHAPE(2, 3), -1, 1), GC_IN(KN_SHAPE(1, 3), -1, 1),
               GC_IN(KN_SHAPE(3, 3), -1, 1));
    F32_AGREES("stack", f_join, &stack, 3, GC_IN(KN_SHAPE(2, 3), -1, 1), GC_IN(KN_SHAPE(2, 3), -1, 1),
               GC_IN(KN_SHAPE(2, 3), -1, 1));
    F32_AGREES("meshgrid", f_join, &xy, 3, GC_IN(KN_SHAPE(3), -1, 1), GC_IN(KN_SHAPE(2), -1, 1),
               GC_IN(KN_SHAPE(4), -1, 1));
}

/* cat skips 1-d empty inputs whatever the others' shapes; they get no gradient. */
static kn_tensor *f_cat_skipping(kn_tensor *const *in, const void *ctx) {
    return kn_cat((kn_tensor *[]){in[0], in[1], in[2]}, 3, 0);
}

static void test_cat_skips_empty(void) {
    GRADCHECK("cat with an empty input", f_cat_skipping, NULL, 3, GC_IN(KN_SHAPE(2, 3), -1, 1), GC_IN(KN_SHAPE(0), 0, 0),
              GC_IN(KN_SHAPE(1, 3), -1, 1));
}

/* ---- the gradient table --------------------------------------------------------------------- */

static void test_family_is_in_grad_table(void) {
    static const kn_op_id family[] = {
#define KN_OP(name, ...) KN_OP_##name,
#include "ops/defs/reduce.def"
#include "ops/defs/linalg.def"
#include "ops/defs/layout.def"
#undef KN_OP
    };
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
        const kn_grad_def *g = &kn_grad_table[family[i]];
        CHECK_MSG(g->fn || g->nondiff, "%s is in neither list of grad.def", kn_op_name(family[i]));
    }
}

int main(void) {
    RUN(test_sum_mean_prod_logsumexp);
    RUN(test_extremes);
    RUN(test_var_std);
    RUN(test_norm);
    RUN(test_max_min_and_dims);
    RUN(test_ties);
    RUN(test_nan_extremes_route_the_gradient_as_pytorch);
    RUN(test_zero_norm_and_std);
    RUN(test_prod_and_cumprod_with_zeros);
    RUN(test_scans);
    RUN(test_softmax);
    RUN(test_softmax_backward_ops_are_leaves_of_backward);
    RUN(test_matmul_forms);
    RUN(test_pad);
    RUN(test_roll_repeat_triangles);
    RUN(test_view_composed_layouts);
    RUN(test_join_and_split);
    RUN(test_cat_skips_empty);
    RUN(test_family_is_in_grad_table);
    return test_summary();
}
