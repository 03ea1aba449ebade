/* Reductions and the along-dim ops (softmax, scans) against float64 references written as
 * naive loops here, for every accepted dtype, layout and corner case. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ---- references ----------------------------------------------------------------------- */
typedef double (*ref_fn)(const double *v, int64_t n, double param);

static double ref_sum(const double *v, int64_t n, double p) { (void)p; double s = 0; for (int64_t i = 0; i < n; i++) s += v[i]; return s; }
static double ref_mean(const double *v, int64_t n, double p) { return ref_sum(v, n, p) / (double)n; }
static double ref_prod(const double *v, int64_t n, double p) { (void)p; double s = 1; for (int64_t i = 0; i < n; i++) s *= v[i]; return s; }
static double ref_amax(const double *v, int64_t n, double p) {
    (void)p;
    double m = -INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) return NAN;
        if (v[i] > m) m = v[i];
    }
    return m;
}
static double ref_amin(const double *v, int64_t n, double p) {
    (void)p;
    double m = INFINITY;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(v[i])) return NAN;
        if (v[i] < m) m = v[i];
    }
    return m;
}
static double ref_var(const double *v, int64_t n, double correction) {
    double mean = ref_mean(v, n, 0), ss = 0;
    for (int64_t i = 0; i < n; i++) ss += (v[i] - mean) * (v[i] - mean);
    return ss / fmax(0, (double)n - correction);
}
static double ref_std(const double *v, int64_t n, double correction) { return sqrt(ref_var(v, n, correction)); }
static double ref_norm(const double *v, int64_t n, double p) {
    double s = 0;
    if (isinf(p)) {
        s = fabs(v[0]);
        for (int64_t i = 1; i < n; i++) s = p > 0 ? fmax(s, fabs(v[i])) : fmin(s, fabs(v[i]));
        return s;
    }
    for (int64_t i = 0; i < n; i++) s += p == 0 ? (v[i] != 0) : pow(fabs(v[i]), p);
    return p == 0 ? s : pow(s, 1 / p);
}
static double ref_logsumexp(const double *v, int64_t n, double p) {
    (void)p;
    double s = 0;
    for (int64_t i = 0; i < n; i++) s += exp(v[i]);
    return log(s);
}
static double ref_all(const double *v, int64_t n, double p) { (void)p; for (int64_t i = 0; i < n; i++) if (v[i] == 0) return 0; return 1; }
static double ref_any(const double *v, int64_t n, double p) { (void)p; for (int64_t i = 0; i < n; i++) if (v[i] != 0) return 1; return 0; }

/* The reference of a reduction of x (values xv, shape) over dims: each output gathers its
 * reduced elements in row-major order. Returns the outputs (malloc'd) and their shape. */
static double *ref_reduce(const double *xv, kn_shape shape, kn_shape dims, bool keepdim, ref_fn fn, double param,
                          kn_shape *out_shape) {
    bool red[KN_MAX_DIMS] = {false};
    if (dims.n == 0) for (int d = 0; d < shape.n; d++) red[d] = true;
    for (int i = 0; i < dims.n; i++) red[dims.v[i] < 0 ? dims.v[i] + shape.n : dims.v[i]] = true;
    kn_shape os = {0}, kept = {0};
    int64_t inner = 1;
    for (int d = 0; d < shape.n; d++) {
        if (red[d]) inner *= shape.v[d];
        else kept.v[kept.n++] = shape.v[d];
        if (!red[d]) os.v[os.n++] = shape.v[d];
        else if (keepdim) os.v[os.n++] = 1;
    }
    int64_t outer = kn_shape_numel(kept), total = kn_shape_numel(shape);
    double *bucket = malloc(sizeof(double) * (size_t)(outer * inner + 1));
    int64_t *count = calloc((size_t)outer + 1, sizeof(int64_t));
    double *out = malloc(sizeof(double) * (size_t)(outer + 1));
    for (int64_t f = 0; f < total; f++) {
        int64_t idx[KN_MAX_DIMS], o = 0;
        unravel(f, shape, idx);
        for (int d = 0; d < shape.n; d++)
            if (!red[d]) o = o * shape.v[d] + idx[d];
        bucket[o * inner + count[o]++] = xv[f];
    }
    for (int64_t o = 0; o < outer; o++) out[o] = fn(bucket + o * inner, inner, param);
    free(bucket);
    free(count);
    *out_shape = os;
    return out;
}

/* ---- the generic reduction check ------------------------------------------------------ */
typedef kn_tensor *(*reduce_api)(kn_tensor *x, kn_shape dims, bool keepdim, double param);
static kn_tensor *api_sum(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_sum(x, d, k); }
static kn_tensor *api_mean(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_mean(x, d, k); }
static kn_tensor *api_prod(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_prod(x, d, k); }
static kn_tensor *api_amax(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_amax(x, d, k); }
static kn_tensor *api_amin(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_amin(x, d, k); }
static kn_tensor *api_var(kn_tensor *x, kn_shape d, bool k, double p) { return kn_var(x, d, p, k); }
static kn_tensor *api_std(kn_tensor *x, kn_shape d, bool k, double p) { return kn_std(x, d, p, k); }
static kn_tensor *api_norm(kn_tensor *x, kn_shape d, bool k, double p) { return kn_norm(x, p, d, k); }
static kn_tensor *api_lse(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_logsumexp(x, d, k); }
static kn_tensor *api_all(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_all(x, d, k); }
static kn_tensor *api_any(kn_tensor *x, kn_shape d, bool k, double p) { (void)p; return kn_any(x, d, k); }

typedef struct reduce_case {
    const char *name;
    reduce_api api;
    ref_fn ref;
    bool floats_only;
    double lo, hi; /* input range */
} reduce_case;

static const reduce_case CASES[] = {
    {"sum", api_sum, ref_sum, false, -4, 4},
    {"mean", api_mean, ref_mean, true, -4, 4},
    {"prod", api_prod, ref_prod, false, -1.6, 1.6}, /* ints -1..1 so products fit exactly */
    {"amax", api_amax, ref_amax, false, -50, 50},
    {"amin", api_amin, ref_amin, false, -50, 50},
    {"var", api_var, ref_var, true, -3, 3},
    {"std", api_std, ref_std, true, -3, 3},
    {"norm", api_norm, ref_norm, true, -3, 3},
    {"logsumexp", api_lse, ref_logsumexp, true, -5, 5},
    {"all", api_all, ref_all, false, -0.6, 1.6}, /* ints land on 0 often enough */
    {"any", api_any, ref_any, false, -0.6, 1.6},
};

static void check_one(const reduce_case *rc, kn_tensor *x, kn_shape dims, bool keepdim, double param, const char *what) {
    double *xv = read_f64(x);
    kn_shape shape = kn_shape_of(x), os;
    double *want = ref_reduce(xv, shape, dims, keepdim, rc->ref, param, &os);
    kn_tensor *y = rc->api(x, dims, keepdim, param);
    char label[160];
    snprintf(label, sizeof label, "%s %s %s dims.n=%d keepdim=%d p=%g", rc->name, kn_dtype_name(kn_dtype_of(x)), what,
             dims.n, keepdim, param);
    CHECK_MSG(y != NULL, "%s failed: %s", label, kn_last_error());
    if (y) {
        CHECK_SHAPE(y, os);
        /* Sums of up to 60 terms are rounded once from double; the reference's own rounding
         * differs only in the last bits, so the per-dtype tolerance holds. */
        CHECK_CLOSE(y, want, tol_for(kn_dtype_of(y)), label);
    }
    free(xv);
    free(want);
}

static void run_case(const reduce_case *rc, double param) {
    /* dim 0 of [3, 4, 5] leaves 20 contiguous outputs: the column path of sum and mean */
    const kn_shape dim_sets[] = {KN_DIMS(1), KN_DIMS(-1), KN_DIMS(0), KN_DIMS(0, 1), KN_DIMS(0, 2), KN_DIMS(2, 0), KN_ALL_DIMS};
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        if (rc->floats_only && !kn_dtype_is_float(dt)) continue;
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 4, 5), dt, rc->lo, rc->hi);
        kn_tensor *nc = non_contiguous_copy(x);
        for (size_t s = 0; s < sizeof dim_sets / sizeof *dim_sets; s++)
            for (int keep = 0; keep < 2; keep++) {
                check_one(rc, x, dim_sets[s], keep, param, "contiguous");
                check_one(rc, nc, dim_sets[s], keep, param, "non-contiguous");
            }
        /* A transposed view: the reduced dim is the input's outer memory dim. */
        kn_tensor *t = kn_transpose(kn_contiguous(x), 0, 2);
        check_one(rc, t, KN_DIMS(0), false, param, "transposed");
        check_one(rc, kn_scalar(rc->hi / 2, dt), KN_ALL_DIMS, false, param, "0-d");
        check_one(rc, kn_scalar(rc->hi / 2, dt), KN_DIMS(0), true, param, "0-d dim 0");
        /* Long rows: the split-across-threads paths. */
        kn_tensor *longx = rand_tensor(KN_SHAPE(2, 70000), dt, rc->lo, rc->hi);
        /* (f16 norms of 70000 elements overflow its range, as they would in PyTorch) */
        bool overflows = dt == KN_F16 && rc->ref == ref_norm;
        if (!overflows && rc->ref != ref_prod && rc->ref != ref_sum && rc->ref != ref_mean) check_one(rc, longx, KN_DIMS(1), false, param, "long");
    }
}

/* These tests check NaN results (var of one element, the mean of nothing) as values; debug
 * mode would report them as errors, so they run in strict mode whatever KILN_MODE says. */
static kn_mode enter_strict(void) {
    kn_mode m = kn_get_mode();
    kn_set_mode(KN_MODE_STRICT);
    return m;
}

static void test_reductions_match_reference(void) {
    kn_mode mode = enter_strict();
    for (size_t c = 0; c < sizeof CASES / sizeof *CASES; c++) {
        if (CASES[c].ref == ref_var || CASES[c].ref == ref_std) {
            run_case(&CASES[c], 1);
            run_case(&CASES[c], 0);
        } else if (CASES[c].ref == ref_norm) {
            const double ps[] = {2, 1, INFINITY, -INFINITY, 0, 3, 0.5};
            for (int i = 0; i < 7; i++) run_case(&CASES[c], ps[i]);
        } else {
            run_case(&CASES[c], 0);
        }
    }
    kn_set_mode(mode);
}

/* Long sums: block sums go to double, so f32 and the 16-bit types stay at their per-dtype
 * tolerance. An f64 sum of 1e5 terms in another order than the reference's differs by up to
 * ~n * 2^-53 * max|x| in absolute terms (its result is small, from cancellation), so its
 * absolute tolerance grows with the sum of |x|: 1e-15 * 1e5. */
static void test_long_sums_and_means(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 100000), dt, -1, 1);
        double *xv = read_f64(x);
        kn_shape os;
        double *want = ref_reduce(xv, kn_shape_of(x), KN_DIMS(1), false, ref_sum, 0, &os);
        tolerance long_tol = tol_for(dt);
        if (dt == KN_F64) long_tol.atol += 1e-15 * 1e5;
        CHECK_CLOSE(kn_sum(x, KN_DIMS(1), false), want, long_tol, "long sum");
        free(want);
        want = ref_reduce(xv, kn_shape_of(x), KN_DIMS(0), false, ref_mean, 0, &os);
        CHECK_CLOSE(kn_mean(x, KN_DIMS(0), false), want, tol_for(dt), "mean over dim 0");
        free(want);
        free(xv);
    }
}

static void test_zero_size_reductions(void) {
    kn_mode mode = enter_strict();
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        kn_tensor *x = kn_zeros(KN_SHAPE(3, 0, 2), dt);
        double zeros[6] = {0}, ones[6] = {1, 1, 1, 1, 1, 1}, nans[6] = {NAN, NAN, NAN, NAN, NAN, NAN};
        CHECK_CLOSE(kn_sum(x, KN_DIMS(1), false), zeros, tol_for(KN_F64), "sum of nothing");
        CHECK_CLOSE(kn_prod(x, KN_DIMS(1), false), ones, tol_for(KN_F64), "prod of nothing");
        CHECK_CLOSE(kn_all(x, KN_DIMS(1), false), ones, tol_for(KN_F64), "all of nothing");
        CHECK_CLOSE(kn_any(x, KN_DIMS(1), false), zeros, tol_for(KN_F64), "any of nothing");
        CHECK_SHAPE(kn_sum(x, KN_DIMS(0), true), KN_SHAPE(1, 0, 2));
        CHECK_SHAPE(kn_cumsum(x, 1), KN_SHAPE(3, 0, 2));
        if (kn_dtype_is_float(dt)) {
            kn_tensor *m = kn_mean(x, KN_DIMS(1), false);
            double *mv = read_f64(m);
            CHECK(mv && isnan(mv[0]) && isnan(mv[5]));
            free(mv);
            (void)nans;
            CHECK_SHAPE(kn_softmax(x, 1), KN_SHAPE(3, 0, 2));
            CHECK_CLOSE(kn_norm(x, 2, KN_DIMS(1), false), zeros, tol_for(KN_F64), "norm of nothing");
        }
        CHECK_ERROR(kn_amax(x, KN_DIMS(1), false) != NULL, KN_ERR_SHAPE, "amax");
        CHECK_ERROR(kn_max(x) != NULL, KN_ERR_SHAPE, "max");
        CHECK_ERROR(kn_argmin(x, 1, false) != NULL, KN_ERR_SHAPE, "argmin");
        CHECK_SHAPE(kn_amax(x, KN_DIMS(2), false), KN_SHAPE(3, 0)); /* a nonempty reduced dim is fine */
        /* no rows under the column path */
        double zeros20[20] = {0};
        kn_tensor *no_rows = kn_zeros(KN_SHAPE(0, 20), dt);
        CHECK_CLOSE(kn_sum(no_rows, KN_DIMS(0), false), zeros20, tol_for(KN_F64), "column sum of no rows");
        if (kn_dtype_is_float(dt)) {
            double *mv = read_f64(kn_mean(no_rows, KN_DIMS(0), false));
            CHECK(mv && isnan(mv[0]) && isnan(mv[19]));
            free(mv);
        }
    }
    kn_set_mode(mode);
}

/* ---- max/min, argmax/argmin, max_dim/min_dim ---------------------------------------- */
static void ref_extreme_dim(const double *xv, kn_shape s, int dim, bool is_max, double *val, double *idx) {
    int64_t outer = 1, n = s.v[dim], inner = 1;
    for (int d = 0; d < s.n; d++) {
        if (d < dim) outer *= s.v[d];
        if (d > dim) inner *= s.v[d];
    }
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            int64_t at = 0;
            for (int64_t k = 0; k < n; k++) {
                double v = xv[(o * n + k) * inner + i], b = xv[(o * n + at) * inner + i];
                if (isnan(b)) break;
                if (isnan(v) || (is_max ? v > b : v < b)) at = k;
            }
            val[o * inner + i] = xv[(o * n + at) * inner + i];
            idx[o * inner + i] = (double)at;
        }
}

static void test_extremes_and_indices(void) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        /* few distinct values, so ties test "first index" */
        kn_tensor *x = rand_tensor(KN_SHAPE(4, 6, 3), dt, -3, 3);
        if (kn_dtype_is_float(dt)) { /* plant NaNs at (1, 2, 0) and (1, 4, 0) */
            double *xv = read_f64(x);
            xv[(1 * 6 + 2) * 3] = NAN;
            xv[(1 * 6 + 4) * 3] = NAN;
            x = tensor_from(xv, KN_SHAPE(4, 6, 3), dt);
            free(xv);
        }
        kn_tensor *inputs[2] = {x, non_contiguous_copy(x)};
        double *xv = read_f64(x);
        for (int in = 0; in < 2; in++)
            for (int dim = -3; dim < 3; dim++)
                for (int is_max = 0; is_max < 2; is_max++) {
                    int d = dim < 0 ? dim + 3 : dim;
                    double val[72], idx[72];
                    ref_extreme_dim(xv, KN_SHAPE(4, 6, 3), d, is_max, val, idx);
                    kn_tensor *v = NULL, *i = NULL;
                    kn_status st = (is_max ? kn_max_dim : kn_min_dim)(inputs[in], dim, in == 1, &v, &i);
                    CHECK(st == KN_OK);
                    if (st != KN_OK) continue;
                    CHECK_CLOSE(v, val, tol_for(dt), "max_dim values");
                    CHECK_CLOSE(i, idx, tol_for(KN_F64), "max_dim indices");
                    CHECK(kn_dtype_of(i) == KN_I64 && kn_dtype_of(v) == dt);
                    kn_tensor *a = (is_max ? kn_argmax : kn_argmin)(inputs[in], dim, false);
                    CHECK_CLOSE(a, idx, tol_for(KN_F64), "argmax");
                }
        /* Over everything: reference on the flattened values. */
        for (int is_max = 0; is_max < 2; is_max++) {
            double val, idx;
            ref_extreme_dim(xv, KN_SHAPE(72), 0, is_max, &val, &idx);
            kn_tensor *m = is_max ? kn_max(inputs[1]) : kn_min(inputs[1]);
            CHECK_SHAPE(m, KN_SHAPE0);
            CHECK_CLOSE(m, &val, tol_for(dt), "max over all");
            CHECK_CLOSE(is_max ? kn_argmax_all(inputs[1]) : kn_argmin_all(inputs[1]), &idx, tol_for(KN_F64), "argmax_all");
        }
        free(xv);
        /* Either output of max_dim may be skipped; 0-d inputs reduce to themselves. */
        kn_tensor *only = NULL;
        CHECK(kn_max_dim(x, 1, false, NULL, &only) == KN_OK && only != NULL);
        double zero = 0, two = dt == KN_BOOL ? 1 : 2;
        CHECK_CLOSE(kn_argmax(kn_scalar(2, dt), 0, false), &zero, tol_for(KN_F64), "argmax of 0-d");
        CHECK_CLOSE(kn_max(kn_scalar(2, dt)), &two, tol_for(dt), "max of 0-d");
    }
}

/* f32 rows long enough for the lane pass (an argmax over a vocabulary): ties of the extreme
 * across lanes and in the tail, 0 against -0, NaNs after the extreme and an infinity (the NaN
 * probe without a NaN), each against the reference's first index and value. */
static void test_long_f32_rows_find_the_first_extreme(void) {
    enum { N = 1003 };
    double *xv = malloc(sizeof(double) * 4 * N);
    for (int r = 0; r < 4; r++)
        for (int i = 0; i < N; i++) xv[r * N + i] = (double)((i * 7919 + r * 31) % 97) - 48; /* -48..48 */
    xv[0 * N + 500] = 60, xv[0 * N + 37] = 60, xv[0 * N + 1001] = 60;        /* row 0: ties, first at 37 */
    xv[0 * N + 3] = -60, xv[0 * N + 999] = -60;                               /*        and for the minimum */
    for (int i = 0; i < N; i++) xv[1 * N + i] = i % 3 ? -1 : 0;             /* row 1: 0 first at 0 ... */
    xv[1 * N + 0] = -0.0, xv[1 * N + 17] = 0.0;                              /*        -0 and 0 tie */
    xv[2 * N + 800] = NAN, xv[2 * N + 900] = NAN, xv[2 * N + 10] = 70;       /* row 2: NaN after the max */
    xv[3 * N + 1002] = 99, xv[3 * N + 5] = -INFINITY;                        /* row 3: the max in the tail, -inf */
    kn_tensor *x = tensor_from(xv, KN_SHAPE(4, N), KN_F32);
    double *rounded = read_f64(x);
    for (int is_max = 0; is_max < 2; is_max++) {
        double val[4], idx[4];
        ref_extreme_dim(rounded, KN_SHAPE(4, N), 1, is_max, val, idx);
        kn_tensor *v = NULL, *i = NULL;
        CHECK((is_max ? kn_max_dim : kn_min_dim)(x, 1, false, &v, &i) == KN_OK);
        CHECK_CLOSE(i, idx, tol_for(KN_F64), is_max ? "argmax of long f32 rows" : "argmin of long f32 rows");
        CHECK_CLOSE(v, val, tol_for(KN_F32), "max of long f32 rows");
        double all_val, all_idx;
        ref_extreme_dim(rounded, KN_SHAPE(4 * N), 0, is_max, &all_val, &all_idx);
        CHECK_CLOSE(is_max ? kn_argmax_all(x) : kn_argmin_all(x), &all_idx, tol_for(KN_F64), "argmax_all of long rows");
    }
    free(rounded);
    free(xv);
}

/* ---- along one dim: softmax, log_softmax, cumsum, cumprod ------------------------------ */
typedef void (*line_fn)(const double *x, double *y, int64_t n);
static void line_softmax(const double *x, double *y, int64_t n) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, x[i]);
    for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
    for (int64_t i = 0; i < n; i++) y[i] = exp(x[i] - m) / s;
}
static void line_log_softmax(const double *x, double *y, int64_t n) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < n; i++) m = fmax(m, x[i]);
    for (int64_t i = 0; i < n; i++) s += exp(x[i] - m);
    for (int64_t i = 0; i < n; i++) y[i] = x[i] - m - log(s);
}
static void line_cumsum(const double *x, double *y, int64_t n) { double s = 0; for (int64_t i = 0; i < n; i++) y[i] = s += x[i]; }
static void line_cumprod(const double *x, double *y, int64_t n) { double s = 1; for (int64_t i = 0; i < n; i++) y[i] = s *= x[i]; }

static double *ref_along(const double *xv, kn_shape s, int dim, line_fn fn) {
    int64_t total = kn_shape_numel(s), outer = 1, n = s.n ? s.v[dim] : 1, inner = 1;
    for (int d = 0; d < s.n; d++) {
        if (d < dim) outer *= s.v[d];
        if (d > dim) inner *= s.v[d];
    }
    double *y = malloc(sizeof(double) * (size_t)(total + 1)), *lx = malloc(sizeof(double) * (size_t)(n + 1)),
           *ly = malloc(sizeof(double) * (size_t)(n + 1));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            for (int64_t k = 0; k < n; k++) lx[k] = xv[(o * n + k) * inner + i];
            fn(lx, ly, n);
            for (int64_t k = 0; k < n; k++) y[(o * n + k) * inner + i] = ly[k];
        }
    free(lx);
    free(ly);
    return y;
}

typedef kn_tensor *(*along_api)(kn_tensor *x, int64_t dim);
static void check_along(const char *name, along_api api, line_fn fn, bool floats_only, double lo, double hi) {
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype dt = ALL_DTYPES[k];
        if (floats_only && !kn_dtype_is_float(dt)) continue;
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 5, 7), dt, lo, hi);
        kn_tensor *inputs[3] = {x, non_contiguous_copy(x), kn_scalar(hi / 2, dt)};
        double *xv = read_f64(x);
        for (int in = 0; in < 3; in++)
            for (int dim = -3; dim < 3; dim++) {
                if (in == 2 && dim != 0 && dim != -1) continue;
                kn_shape s = in == 2 ? KN_SHAPE0 : KN_SHAPE(3, 5, 7);
                double scalar = hi / 2;
                double *src = in == 2 ? read_f64(inputs[2]) : xv;
                double *want = ref_along(src, s, in == 2 ? 0 : (dim < 0 ? dim + 3 : dim), fn);
                kn_tensor *y = api(inputs[in], dim);
                char label[96];
                snprintf(label, sizeof label, "%s %s input %d dim %d", name, kn_dtype_name(dt), in, dim);
                CHECK_MSG(y != NULL, "%s failed: %s", label, kn_last_error());
                if (y) {
                    CHECK_SHAPE(y, s);
                    /* scans chain up to 7 roundings of the 16-bit dtypes in double; one rounding at the end */
                    CHECK_CLOSE(y, want, tol_for(kn_dtype_of(y)), label);
                }
                if (in == 2) free(src);
                free(want);
                (void)scalar;
            }
        free(xv);
    }
}

static void test_softmax_and_scans_match_reference(void) {
    check_along("softmax", kn_softmax, line_softmax, true, -5, 5);
    check_along("log_softmax", kn_log_softmax, line_log_softmax, true, -5, 5);
    check_along("cumsum", kn_cumsum, line_cumsum, false, -5, 5);
    check_along("cumprod", kn_cumprod, line_cumprod, false, -1.6, 1.6);
    CHECK(kn_dtype_of(kn_cumsum(kn_zeros(KN_SHAPE(2), KN_I32), 0)) == KN_I64);
    CHECK(kn_dtype_of(kn_cumprod(kn_zeros(KN_SHAPE(2), KN_BOOL), 0)) == KN_I64);
}

static void test_softmax_is_stable(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        kn_tensor *x = rand_tensor(KN_SHAPE(8, 300), dt, -1e4, 1e4);
        double *xv = read_f64(x);
        double *want = ref_along(xv, KN_SHAPE(8, 300), 1, line_softmax);
        kn_tensor *y = kn_softmax(x, 1);
        CHECK_CLOSE(y, want, tol_for(dt), "softmax of huge inputs");
        double *yv = read_f64(y);
        for (int r = 0; yv && r < 8; r++) {
            double s = 0;
            for (int i = 0; i < 300; i++) {
                CHECK(isfinite(yv[r * 300 + i]));
                s += yv[r * 300 + i];
            }
            CHECK_MSG(fabs(s - 1) < 0.02, "softmax row %d sums to %g", r, s);
        }
        free(yv);
        free(want);
        want = ref_along(xv, KN_SHAPE(8, 300), 1, line_log_softmax);
        /* log_softmax values reach -2e4: the absolute error scales with their magnitude */
        tolerance wide = {tol_for(dt).rtol, tol_for(dt).rtol * 1e4};
        CHECK_CLOSE(kn_log_softmax(x, 1), want, wide, "log_softmax of huge inputs");
        free(want);
        free(xv);
        /* A row of only -inf: softmax NaN (as PyTorch), logsumexp -inf. */
        kn_tensor *ninf = kn_full(KN_SHAPE(2, 3), -INFINITY, dt);
        double *sv = read_f64(kn_softmax(ninf, 1)), *lv = read_f64(kn_logsumexp(ninf, KN_DIMS(1), false));
        CHECK(sv && isnan(sv[0]) && isnan(sv[5]));
        CHECK(lv && lv[0] == -INFINITY && lv[1] == -INFINITY);
        free(sv);
        free(lv);
    }
}

/* Reduced dims before a size-1 kept dim: the plan may not read such an input in place. */
static void test_reduced_dims_around_size_one_dims(void) {
    double v[24];
    for (int i = 0; i < 24; i++) v[i] = i;
    kn_tensor *x = tensor_from(v, KN_SHAPE(2, 1, 4), KN_F64);
    CHECK_CLOSE(kn_sum(x, KN_DIMS(0), true), ((double[]){4, 6, 8, 10}), tol_for(KN_F64), "sum [2, 1, 4] over dim 0");
    kn_tensor *y = tensor_from(v, KN_SHAPE(2, 1, 3, 1, 4), KN_F64);
    double want[4] = {0};
    for (int i = 0; i < 24; i++) want[i % 4] += v[i];
    CHECK_CLOSE(kn_sum(y, KN_DIMS(0, 2), false), want, tol_for(KN_F64), "sum [2, 1, 3, 1, 4] over dims 0, 2");
}

/* softmax_backward, log_softmax_backward: from g and y along the dim, against loops here. */
static void check_softmax_backward(bool is_log, kn_dtype dt, kn_shape s, int dim, bool strided) {
    kn_tensor *x = rand_tensor(s, dt, -3, 3), *g = rand_tensor(s, dt, -1, 1);
    kn_tensor *y = is_log ? kn_log_softmax(x, dim) : kn_softmax(x, dim);
    double *gv = read_f64(g), *yv = read_f64(y);
    int64_t total = kn_shape_numel(s), outer = 1, n = s.n ? s.v[dim] : 1, inner = 1;
    for (int d = 0; d < s.n; d++) {
        if (d < dim) outer *= s.v[d];
        if (d > dim) inner *= s.v[d];
    }
    double *want = malloc(sizeof(double) * (size_t)(total + 1));
    for (int64_t o = 0; o < outer; o++)
        for (int64_t i = 0; i < inner; i++) {
            double sum = 0;
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (o * n + k) * inner + i;
                sum += is_log ? gv[at] : gv[at] * yv[at];
            }
            for (int64_t k = 0; k < n; k++) {
                int64_t at = (o * n + k) * inner + i;
                want[at] = is_log ? gv[at] - exp(yv[at]) * sum : yv[at] * (gv[at] - sum);
            }
        }
    kn_tensor *got = is_log ? kn_log_softmax_backward(strided ? non_contiguous_copy(g) : g, y, dim)
                            : kn_softmax_backward(strided ? non_contiguous_copy(g) : g, y, dim);
    char label[96];
    snprintf(label, sizeof label, "%s %s dim %d%s", is_log ? "log_softmax_backward" : "softmax_backward",
             kn_dtype_name(dt), dim, strided ? " strided" : "");
    CHECK_MSG(got && kn_dtype_of(got) == (dt == KN_F64 ? KN_F64 : KN_F32), "%s: %s", label, kn_last_error());
    /* the sums over a row of 20 round once more than an elementwise op */
    tolerance tol = tol_for(kn_dtype_of(got));
    tol.rtol *= 10, tol.atol *= 10;
    if (got) CHECK_CLOSE(got, want, tol, label);
    free(gv);
    free(yv);
    free(want);
}

static void test_softmax_backward_matches_reference(void) {
    for (int is_log = 0; is_log < 2; is_log++)
        for (int k = 0; k < 4; k++) {
            kn_dtype dt = FLOAT_DTYPES[k];
            check_softmax_backward(is_log, dt, KN_SHAPE(4, 7), 1, false);
            check_softmax_backward(is_log, dt, KN_SHAPE(4, 7), 0, true);
            check_softmax_backward(is_log, dt, KN_SHAPE(3, 5, 20), 1, false); /* by columns */
            check_softmax_backward(is_log, dt, KN_SHAPE(2, 3, 300), 1, dt == KN_F32); /* more columns than a block */
            check_softmax_backward(is_log, dt, KN_SHAPE(6), 0, false);
            check_softmax_backward(is_log, dt, KN_SHAPE0, 0, false);
            check_softmax_backward(is_log, dt, KN_SHAPE(3, 0, 2), 1, false);
        }
    kn_tensor *y = kn_ones(KN_SHAPE(2, 3), KN_F32);
    CHECK_ERROR(kn_softmax_backward(kn_ones(KN_SHAPE(3, 2), KN_F32), y, 1) != NULL, KN_ERR_SHAPE, "differ in shape");
    CHECK_ERROR(kn_log_softmax_backward(y, y, 2) != NULL, KN_ERR_INDEX, "log_softmax_backward");
    CHECK_ERROR(kn_softmax_backward(kn_ones(KN_SHAPE(2, 3), KN_I64), y, 1) != NULL, KN_ERR_DTYPE, "softmax_backward");
}

static void test_nan_propagates(void) {
    double v[4] = {1, NAN, 3, -2};
    kn_tensor *x = tensor_from(v, KN_SHAPE(4), KN_F32);
    double *a = read_f64(kn_amax(x, KN_ALL_DIMS, false)), *b = read_f64(kn_min(x));
    CHECK(a && isnan(a[0]) && b && isnan(b[0]));
    double one = 1;
    CHECK_CLOSE(kn_argmax_all(x), &one, tol_for(KN_F64), "argmax finds the NaN");
    CHECK_CLOSE(kn_argmin(x, 0, false), &one, tol_for(KN_F64), "argmin finds the NaN");
    free(a);
    free(b);
}

/* PyTorch's running sums start from +0.0 and products from 1, so a leading -0.0 sums to +0.0
 * and multiplies to -0.0 (values from PyTorch 2.15). */
static void test_scans_start_from_the_identity_as_pytorch(void) {
    for (int k = 0; k < 4; k++) {
        kn_dtype dt = FLOAT_DTYPES[k];
        /* torch.cumsum(torch.tensor([-0., -0., 1., -inf, inf, 2.]), 0) */
        double xs[6] = {-0.0, -0.0, 1, -INFINITY, INFINITY, 2}, ws[6] = {0, 0, 1, -INFINITY, NAN, NAN};
        kn_tensor *s = kn_cumsum(tensor_from(xs, KN_SHAPE(6), dt), 0);
        CHECK_CLOSE(s, ws, tol_for(dt), "cumsum");
        double *sv = read_f64(s);
        CHECK(sv && !signbit(sv[0]) && !signbit(sv[1]));
        free(sv);
        /* torch.cumprod(torch.tensor([-0., 2., inf]), 0) */
        double xp[3] = {-0.0, 2, INFINITY}, wp[3] = {-0.0, -0.0, NAN};
        kn_tensor *p = kn_cumprod(tensor_from(xp, KN_SHAPE(3), dt), 0);
        CHECK_CLOSE(p, wp, tol_for(dt), "cumprod");
        double *pv = read_f64(p);
        CHECK(pv && signbit(pv[0]) && signbit(pv[1]));
        free(pv);
    }
}

static void test_errors_name_the_op(void) {
    kn_tensor *x = kn_ones(KN_SHAPE(2, 3), KN_F32);
    CHECK_ERROR(kn_sum(x, KN_DIMS(2), false) != NULL, KN_ERR_INDEX, "sum");
    CHECK_ERROR(kn_amax(x, KN_DIMS(-3), false) != NULL, KN_ERR_INDEX, "out of range");
    CHECK_ERROR(kn_prod(x, KN_DIMS(1, -1), false) != NULL, KN_ERR_ARG, "listed twice");
    CHECK_ERROR(kn_mean(kn_ones(KN_SHAPE(2), KN_I32), KN_ALL_DIMS, false) != NULL, KN_ERR_DTYPE, "mean");
    CHECK_ERROR(kn_softmax(kn_ones(KN_SHAPE(2), KN_I64), 0) != NULL, KN_ERR_DTYPE, "softmax");
    CHECK_ERROR(kn_var(kn_ones(KN_SHAPE(2), KN_I32), KN_ALL_DIMS, 1, false) != NULL, KN_ERR_DTYPE, "var");
    CHECK_ERROR(kn_log_softmax(x, 2) != NULL, KN_ERR_INDEX, "log_softmax");
    CHECK_ERROR(kn_cumsum(x, -3) != NULL, KN_ERR_INDEX, "cumsum");
    CHECK_ERROR(kn_argmax(x, 5, false) != NULL, KN_ERR_INDEX, "argmax");
    kn_tensor *v = NULL, *i = NULL;
    CHECK_ERROR(kn_max_dim(x, 2, false, &v, &i) == KN_OK, KN_ERR_INDEX, "max_dim");
    CHECK(v == NULL && i == NULL);
    CHECK_ERROR(kn_norm(x, -1, KN_ALL_DIMS, false) != NULL, KN_ERR_ARG, "norm");
    CHECK_ERROR(kn_sum(NULL, KN_ALL_DIMS, false) != NULL, KN_ERR_NULL, "sum");
}

int main(void) {
    RUN(test_reductions_match_reference);
    RUN(test_long_sums_and_means);
    RUN(test_zero_size_reductions);
    RUN(test_extremes_and_indices);
    RUN(test_long_f32_rows_find_the_first_extreme);
    RUN(test_softmax_and_scans_match_reference);
    RUN(test_softmax_is_stable);
    RUN(test_reduced_dims_around_size_one_dims);
    RUN(test_softmax_backward_matches_reference);
    RUN(test_nan_propagates);
    RUN(test_scans_start_from_the_identity_as_pytorch);
    RUN(test_errors_name_the_op);
    return test_summary();
}
