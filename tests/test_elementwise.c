/* Elementwise unary, binary and ternary ops against float64 references written here, for
 * every dtype of each op's class, plus broadcasting corners, layouts and type promotion. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

enum { C_FLOAT, C_NUMERIC, C_INT, C_ALL };

static bool in_class(int cls, kn_dtype d) {
    switch (cls) {
    case C_FLOAT: case C_ALL: return true;
    case C_NUMERIC: return d != KN_BOOL;
    default: return kn_dtype_is_int(d) || d == KN_BOOL;
    }
}

/* The dtype an op of class cls computes an input of dtype d in. */
static kn_dtype compute_dtype(int cls, kn_dtype d) { return cls == C_FLOAT && !kn_dtype_is_float(d) ? KN_F32 : d; }

/* Rounds a double reference to what storing it in dtype d does (integers wrap as C does). */
static double as_dtype(double v, kn_dtype d) {
    switch (d) {
    case KN_F32: return (float)v;
    case KN_I32: return (double)(int32_t)(int64_t)v;
    case KN_BOOL: return v != 0;
    default: return v;
    }
}

/* ---- unary ------------------------------------------------------------------------------ */
static double r_neg(double x) { return -x; }
static double r_sign(double x) { return (x > 0) - (x < 0); } /* torch.sign(nan) is 0 */
static double r_relu(double x) { return x < 0 ? 0 : x; }
static double r_rsqrt(double x) { return 1 / sqrt(x); }
static double r_recip(double x) { return 1 / x; }
static double r_sigmoid(double x) { return 1 / (1 + exp(-x)); }
static double r_leaky(double x) { return x < 0 ? 0.125 * x : x; }
static double r_gelu(double x) { return 0.5 * x * (1 + erf(x / sqrt(2.0))); }
static double r_gelu_tanh(double x) { return 0.5 * x * (1 + tanh(sqrt(2 / 3.14159265358979323846) * (x + 0.044715 * x * x * x))); }
static double r_silu(double x) { return x / (1 + exp(-x)); }
static double r_softplus(double x) { return 2 * x > 20 ? x : log1p(exp(2 * x)) / 2; }
static double r_clamp(double x) { return isnan(x) ? x : x < -1 ? -1 : x > 2 ? 2 : x; }
static double r_lognot(double x) { return x == 0; }
static double r_isnan(double x) { return isnan(x); }
static double r_isinf(double x) { return isinf(x); }
static double r_isfinite(double x) { return isfinite(x); }
static kn_tensor *leaky(kn_tensor *x) { return kn_leaky_relu(x, 0.125); }
static kn_tensor *softplus2(kn_tensor *x) { return kn_softplus(x, 2, 20); }
static kn_tensor *clamp(kn_tensor *x) { return kn_clamp(x, -1, 2); }

typedef struct unary_case {
    const char *name;
    kn_tensor *(*op)(kn_tensor *);
    double (*ref)(double);
    int cls;
    bool bool_out;
    double lo, hi;
} unary_case;

static const unary_case UNARY[] = {
    {"neg", kn_neg, r_neg, C_NUMERIC, false, -5, 5},
    {"abs", kn_abs, fabs, C_NUMERIC, false, -5, 5},
    {"sign", kn_sign, r_sign, C_ALL, false, -3, 3},
    {"relu", kn_relu, r_relu, C_NUMERIC, false, -3, 3},
    {"clamp", clamp, r_clamp, C_FLOAT, false, -3, 3}, /* float bounds: integers clamp in f32 */
    {"exp", kn_exp, exp, C_FLOAT, false, -8, 8},
    {"expm1", kn_expm1, expm1, C_FLOAT, false, -3, 3},
    {"log", kn_log, log, C_FLOAT, false, 1, 50},
    {"log1p", kn_log1p, log1p, C_FLOAT, false, 0, 50},
    {"log2", kn_log2, log2, C_FLOAT, false, 1, 50},
    {"sqrt", kn_sqrt, sqrt, C_FLOAT, false, 0, 50},
    {"rsqrt", kn_rsqrt, r_rsqrt, C_FLOAT, false, 1, 50},
    {"reciprocal", kn_reciprocal, r_recip, C_FLOAT, false, 1, 9},
    {"sin", kn_sin, sin, C_FLOAT, false, -10, 10},
    {"cos", kn_cos, cos, C_FLOAT, false, -10, 10},
    {"tanh", kn_tanh, tanh, C_FLOAT, false, -4, 4},
    {"sigmoid", kn_sigmoid, r_sigmoid, C_FLOAT, false, -8, 8},
    {"leaky_relu", leaky, r_leaky, C_FLOAT, false, -4, 4},
    {"gelu", kn_gelu, r_gelu, C_FLOAT, false, -4, 4},
    {"gelu_tanh", kn_gelu_tanh, r_gelu_tanh, C_FLOAT, false, -4, 4},
    {"silu", kn_silu, r_silu, C_FLOAT, false, -6, 6},
    {"softplus", softplus2, r_softplus, C_FLOAT, false, -6, 12},
    {"erf", kn_erf, erf, C_FLOAT, false, -3, 3},
    {"floor", kn_floor, floor, C_NUMERIC, false, -4, 4}, /* integers: themselves */
    {"ceil", kn_ceil, ceil, C_NUMERIC, false, -4, 4},
    {"round", kn_round, nearbyint, C_NUMERIC, false, -4, 4},
    {"trunc", kn_trunc, trunc, C_NUMERIC, false, -4, 4},
    {"logical_not", kn_logical_not, r_lognot, C_ALL, true, -2, 2},
    {"isnan", kn_isnan, r_isnan, C_ALL, true, -2, 2},
    {"isinf", kn_isinf, r_isinf, C_ALL, true, -2, 2},
    {"isfinite", kn_isfinite, r_isfinite, C_ALL, true, -2, 2},
};

/* Applies one unary op to x (any layout) and checks it against the reference. */
static void check_unary(const unary_case *u, kn_tensor *x, const char *layout) {
    kn_dtype d = kn_dtype_of(x), cd = compute_dtype(u->cls, d), od = u->bool_out ? KN_BOOL : cd;
    double *v = read_f64(x);
    int64_t n = kn_numel(x);
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) want[i] = as_dtype(u->ref(v[i]), od);
    /* Where the reference makes NaN/Inf from finite inputs (log, rsqrt, 1/x of a bool's 0),
     * the case checks those values: debug mode would refuse the op, so it runs without. */
    bool nonfinite = all_finite(v, n) && !all_finite(want, n);
    kn_mode saved = nonfinite ? debug_checks_off() : kn_get_mode();
    kn_tensor *y = u->op(x);
    if (nonfinite) debug_checks_restore(saved);
    char what[96];
    snprintf(what, sizeof what, "%s %s (%s)", u->name, kn_dtype_name(d), layout);
    if (y && kn_dtype_of(y) != od) test_fail(__FILE__, __LINE__, "%s: output dtype %s, expected %s", what,
                                             kn_dtype_name(kn_dtype_of(y)), kn_dtype_name(od));
    CHECK_CLOSE(y, want, tol_for(od), what);
    free(v);
    free(want);
}

static void test_unary_ops_every_dtype(void) {
    for (size_t k = 0; k < sizeof UNARY / sizeof UNARY[0]; k++)
        for (int j = 0; j < KN_DTYPE_COUNT; j++) {
            if (!in_class(UNARY[k].cls, ALL_DTYPES[j])) continue;
            kn_tensor *x = rand_tensor(KN_SHAPE(5, 37), ALL_DTYPES[j], UNARY[k].lo, UNARY[k].hi);
            check_unary(&UNARY[k], x, "contiguous");
            check_unary(&UNARY[k], non_contiguous_copy(x), "transposed");
            check_unary(&UNARY[k], kn_slice(x, 1, -1, -38, -2), "reversed step -2");
            check_unary(&UNARY[k], kn_select(x, 0, 2), "row");
            check_unary(&UNARY[k], kn_select(kn_select(x, 0, 1), 0, 3), "0-d");
            check_unary(&UNARY[k], kn_narrow(x, 0, 1, 0), "zero-size");
        }
}

static void test_unary_special_values(void) {
    double v[] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, -1.0, 1e30, -1e30};
    kn_tensor *x = tensor_from(v, KN_SHAPE(8), KN_F32);
    for (size_t k = 0; k < sizeof UNARY / sizeof UNARY[0]; k++) check_unary(&UNARY[k], x, "special values");
    kn_tensor *i = tensor_from((double[]){-7, 0, 5, -1}, KN_SHAPE(4), KN_I32);
    double *got = read_f64(kn_bitwise_not(i));
    CHECK(got && got[0] == 6 && got[1] == -1 && got[2] == -6 && got[3] == 0);
    free(got);
    kn_tensor *b = tensor_from((double[]){0, 1}, KN_SHAPE(2), KN_BOOL);
    got = read_f64(kn_bitwise_not(b));
    CHECK(got && got[0] == 1 && got[1] == 0);
    free(got);
    kn_tensor *big = tensor_from((double[]){-2147483648.0}, KN_SHAPE(1), KN_I32);
    CHECK_CLOSE(kn_abs(big), ((double[]){-2147483648.0}), tol_for(KN_I32), "abs(INT32_MIN) wraps");
}

/* ---- binary ----------------------------------------------------------------------------- */
static double b_add(double x, double y) { return x + y; }
static double b_sub(double x, double y) { return x - y; }
static double b_mul(double x, double y) { return x * y; }
static double b_div(double x, double y) { return x / y; }
/* Python's x // y as c10's div_floor_floating computes it. */
static double b_floordiv(double x, double y) {
    if (y == 0) return x / y;
    double mod = fmod(x, y), div = (x - mod) / y;
    if (mod != 0 && (y < 0) != (mod < 0)) div -= 1;
    if (div == 0) return copysign(0, x / y);
    return div - floor(div) > 0.5 ? floor(div) + 1 : floor(div);
}
static double b_rem(double x, double y) { double r = fmod(x, y); return r != 0 && (r < 0) != (y < 0) ? r + y : r; }
static double b_max(double x, double y) { return isnan(x) || isnan(y) ? NAN : x > y ? x : y; }
static double b_min(double x, double y) { return isnan(x) || isnan(y) ? NAN : x < y ? x : y; }
static double b_eq(double x, double y) { return x == y; }
static double b_ne(double x, double y) { return x != y; }
static double b_lt(double x, double y) { return x < y; }
static double b_le(double x, double y) { return x <= y; }
static double b_gt(double x, double y) { return x > y; }
static double b_ge(double x, double y) { return x >= y; }
static double b_land(double x, double y) { return x != 0 && y != 0; }
static double b_lor(double x, double y) { return x != 0 || y != 0; }
static double b_lxor(double x, double y) { return (x != 0) != (y != 0); }
static double b_band(double x, double y) { return (double)((int64_t)x & (int64_t)y); }
static double b_bor(double x, double y) { return (double)((int64_t)x | (int64_t)y); }
static double b_bxor(double x, double y) { return (double)((int64_t)x ^ (int64_t)y); }
static double b_shl(double x, double y) { return (double)(int64_t)((uint64_t)(int64_t)x << (int)y); }
static double b_shr(double x, double y) { return (double)((int64_t)x >> (int)y); }

typedef struct binary_case {
    const char *name;
    kn_tensor *(*op)(kn_tensor *, kn_tensor *);
    double (*ref)(double, double);
    int cls;
    bool bool_out, nonzero_y, pow_like, shift;
} binary_case;

static const binary_case BINARY[] = {
    {"add", kn_add, b_add, C_ALL, false, false, false, false}, /* bool: or */
    {"sub", kn_sub, b_sub, C_NUMERIC, false, false, false, false},
    {"mul", kn_mul, b_mul, C_ALL, false, false, false, false}, /* bool: and */
    {"div", kn_div, b_div, C_FLOAT, false, true, false, false},
    {"floor_divide", kn_floor_divide, b_floordiv, C_NUMERIC, false, true, false, false},
    {"remainder", kn_remainder, b_rem, C_NUMERIC, false, true, false, false},
    {"pow", kn_pow, pow, C_NUMERIC, false, false, true, false},
    {"maximum", kn_maximum, b_max, C_ALL, false, false, false, false},
    {"minimum", kn_minimum, b_min, C_ALL, false, false, false, false},
    {"eq", kn_eq, b_eq, C_ALL, true, false, false, false},
    {"ne", kn_ne, b_ne, C_ALL, true, false, false, false},
    {"lt", kn_lt, b_lt, C_ALL, true, false, false, false},
    {"le", kn_le, b_le, C_ALL, true, false, false, false},
    {"gt", kn_gt, b_gt, C_ALL, true, false, false, false},
    {"ge", kn_ge, b_ge, C_ALL, true, false, false, false},
    {"logical_and", kn_logical_and, b_land, C_ALL, true, false, false, false},
    {"logical_or", kn_logical_or, b_lor, C_ALL, true, false, false, false},
    {"logical_xor", kn_logical_xor, b_lxor, C_ALL, true, false, false, false},
    {"bitwise_and", kn_bitwise_and, b_band, C_INT, false, false, false, false},
    {"bitwise_or", kn_bitwise_or, b_bor, C_INT, false, false, false, false},
    {"bitwise_xor", kn_bitwise_xor, b_bxor, C_INT, false, false, false, false},
    {"bitwise_left_shift", kn_bitwise_left_shift, b_shl, C_INT, false, false, false, true},
    {"bitwise_right_shift", kn_bitwise_right_shift, b_shr, C_INT, false, false, false, true},
};

/* Operands for one case: small integers (so integer results are exact) with the sign mix
 * the op needs; no zero divisor, non-negative integer exponents, shifts below 8. */
static void binary_operands(const binary_case *b, kn_dtype d, kn_shape sx, kn_shape sy, kn_tensor **x, kn_tensor **y) {
    bool fl = kn_dtype_is_float(d);
    if (b->pow_like) {
        *x = rand_tensor(sx, d, fl ? 0.25 : -4, fl ? 3 : 5);
        *y = rand_tensor(sy, d, fl ? -2 : 0, fl ? 2 : 4);
    } else if (b->shift) {
        *x = rand_tensor(sx, d, -100, 100);
        *y = rand_tensor(sy, d, 0, d == KN_BOOL ? 1 : 8);
    } else {
        *x = rand_tensor(sx, d, -20, 20);
        int64_t n = kn_shape_numel(sy);
        double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
        rand_fill(v, n, -7, 7);
        for (int64_t i = 0; i < n; i++) {
            if (!fl) v[i] = floor(v[i]);
            if (b->nonzero_y && fabs(v[i]) < 0.5) v[i] = 3;
            if (d == KN_BOOL) v[i] = v[i] > 0;
        }
        *y = tensor_from(v, sy, d);
        free(v);
    }
}

static void check_binary(const binary_case *b, kn_tensor *x, kn_tensor *y, const char *layout) {
    kn_dtype d = kn_dtype_of(x), cd = compute_dtype(b->cls, d), od = b->bool_out ? KN_BOOL : cd;
    kn_shape sx = kn_shape_of(x), sy = kn_shape_of(y), so;
    CHECK(kn_broadcast_shapes("test", sx, sy, &so));
    double *vx = read_f64(x), *vy = read_f64(y);
    int64_t n = kn_shape_numel(so);
    double *want = malloc(sizeof(double) * (size_t)(n ? n : 1));
    int64_t idx[KN_MAX_DIMS];
    for (int64_t i = 0; i < n; i++) {
        unravel(i, so, idx);
        double a = vx[ravel_broadcast(idx, so.n, sx)], c = vy[ravel_broadcast(idx, so.n, sy)];
        want[i] = as_dtype(b->ref(a, c), od);
    }
    /* Where the reference makes NaN/Inf from finite inputs (a bool divisor's 0), the case
     * checks those values: debug mode would refuse the op, so it runs without. */
    bool nonfinite = all_finite(vx, kn_numel(x)) && all_finite(vy, kn_numel(y)) && !all_finite(want, n);
    kn_mode saved = nonfinite ? debug_checks_off() : kn_get_mode();
    kn_tensor *z = b->op(x, y);
    if (nonfinite) debug_checks_restore(saved);
    char what[128];
    snprintf(what, sizeof what, "%s %s (%s)", b->name, kn_dtype_name(d), layout);
    if (z && kn_dtype_of(z) != od) test_fail(__FILE__, __LINE__, "%s: output dtype %s, expected %s", what,
                                             kn_dtype_name(kn_dtype_of(z)), kn_dtype_name(od));
    if (z) check_shape(z, so, __FILE__, __LINE__);
    CHECK_CLOSE(z, want, tol_for(od), what);
    free(vx);
    free(vy);
    free(want);
}

static void test_binary_ops_every_dtype_and_broadcast(void) {
    static const struct { kn_shape x, y; const char *what; } shapes[] = {
        {KN_SHAPE(4, 33), KN_SHAPE(4, 33), "same shape"},
        {KN_SHAPE(4, 1), KN_SHAPE(1, 33), "size-1 dims"},
        {KN_SHAPE0, KN_SHAPE(3, 5), "0-d with dimensioned"},
        {KN_SHAPE(2, 3, 5), KN_SHAPE0, "dimensioned with 0-d"},
        {KN_SHAPE(0, 5), KN_SHAPE(1, 5), "zero-size"},
        {KN_SHAPE(7), KN_SHAPE(2, 7), "rank broadcast"},
    };
    for (size_t k = 0; k < sizeof BINARY / sizeof BINARY[0]; k++)
        for (int j = 0; j < KN_DTYPE_COUNT; j++) {
            kn_dtype d = ALL_DTYPES[j];
            if (!in_class(BINARY[k].cls, d) || (BINARY[k].shift && d == KN_BOOL)) continue;
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
                kn_tensor *x, *y;
                binary_operands(&BINARY[k], d, shapes[s].x, shapes[s].y, &x, &y);
                check_binary(&BINARY[k], x, y, shapes[s].what);
            }
            kn_tensor *x, *y;
            binary_operands(&BINARY[k], d, KN_SHAPE(6, 9), KN_SHAPE(9, 6), &x, &y);
            check_binary(&BINARY[k], non_contiguous_copy(x), kn_transpose(y, 0, 1), "transposed");
            check_binary(&BINARY[k], kn_slice(x, 1, -1, -10, -1), kn_slice(kn_transpose(y, 0, 1), 0, -1, -7, -1),
                         "negative strides");
        }
}

static void test_python_integer_division(void) {
    double xs[] = {7, -7, 7, -7, 0, -1, 6, -6};
    double ys[] = {2, 2, -2, -2, 3, 5, -4, 4};
    double fd[] = {3, -4, -4, 3, 0, -1, -2, -2};
    double rm[] = {1, 1, -1, -1, 0, 4, -2, 2};
    for (int k = 0; k < 2; k++) {
        kn_dtype d = k ? KN_I64 : KN_I32;
        kn_tensor *x = tensor_from(xs, KN_SHAPE(8), d), *y = tensor_from(ys, KN_SHAPE(8), d);
        CHECK_CLOSE(kn_floor_divide(x, y), fd, tol_for(d), "floor_divide");
        CHECK_CLOSE(kn_remainder(x, y), rm, tol_for(d), "remainder");
    }
    kn_tensor *x = tensor_from(xs, KN_SHAPE(8), KN_F32), *y = tensor_from(ys, KN_SHAPE(8), KN_F32);
    CHECK_CLOSE(kn_floor_divide(x, y), fd, tol_for(KN_F32), "float floor_divide");
    CHECK_CLOSE(kn_remainder(x, y), rm, tol_for(KN_F32), "float remainder");
}

static void test_integer_domain_errors(void) {
    kn_tensor *x = tensor_from((double[]){1, 2, 3}, KN_SHAPE(3), KN_I32);
    kn_tensor *zero = tensor_from((double[]){1, 0, 1}, KN_SHAPE(3), KN_I32);
    /* Strict mode reports these kernel errors at the next sync; debug mode reports them at
     * the op (test_dispatch checks that). */
    kn_mode saved = debug_checks_off();
    kn_tensor *q = kn_floor_divide(x, zero); /* strict mode: reported at the next sync */
    (void)q;
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "floor_divide");
    kn_remainder(x, zero);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "division by zero");
    /* Float division by zero is not an error (but debug mode refuses the Inf it makes from
     * finite inputs, so this too runs without debug checks). */
    double want[3] = {INFINITY, INFINITY, INFINITY};
    CHECK_CLOSE(kn_div(x, kn_zeros(KN_SHAPE(3), KN_I32)), want, tol_for(KN_F32), "1/0");
    debug_checks_restore(saved);
    CHECK_ERROR(kn_add(x, kn_zeros(KN_SHAPE(4), KN_I32)) != NULL, KN_ERR_SHAPE, "add");
    CHECK_ERROR(kn_add(x, NULL) != NULL, KN_ERR_NULL, "add");
    CHECK_ERROR(kn_neg(kn_zeros(KN_SHAPE(2), KN_BOOL)) != NULL, KN_ERR_DTYPE, "bool");
    CHECK_ERROR(kn_bitwise_and(kn_zeros(KN_SHAPE(2), KN_F32), kn_zeros(KN_SHAPE(2), KN_F32)) != NULL, KN_ERR_DTYPE,
                "bitwise_and");
    CHECK_ERROR(kn_softplus(x, 0, 20) != NULL, KN_ERR_ARG, "softplus");
}

/* A domain error found by a chunk that runs on a pool worker is raised on the calling thread:
 * the zero divisor is the last of 2^18 elements, far past the first chunk. The quotient is
 * chained into an add and into a sum (one long row), so fused mode runs it in both kinds of
 * generated kernel. */
static void test_domain_error_in_a_far_chunk(void) {
    enum { N = 1 << 18 };
    int threads = kn_get_num_threads();
    kn_set_num_threads(4);
    double *v = malloc(N * sizeof *v);
    CHECK(v);
    if (!v) return;
    for (int i = 0; i < N; i++) v[i] = 1;
    kn_tensor *x = tensor_from(v, KN_SHAPE(N), KN_I32);
    v[N - 1] = 0;
    kn_tensor *y = tensor_from(v, KN_SHAPE(N), KN_I32);
    free(v);
    kn_mode saved = debug_checks_off(); /* strict mode's deferred report */
    kn_add(kn_floor_divide(x, y), x);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "integer division by zero");
    kn_sum(kn_floor_divide(x, y), KN_ALL_DIMS, false);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "integer division by zero");
    debug_checks_restore(saved);
    kn_set_num_threads(threads);
}

static void test_nan_propagation(void) {
    kn_tensor *x = tensor_from((double[]){NAN, 1, NAN, -INFINITY}, KN_SHAPE(4), KN_F32);
    kn_tensor *y = tensor_from((double[]){2, NAN, NAN, 0}, KN_SHAPE(4), KN_F32);
    CHECK_CLOSE(kn_maximum(x, y), ((double[]){NAN, NAN, NAN, 0}), tol_for(KN_F32), "maximum");
    CHECK_CLOSE(kn_minimum(x, y), ((double[]){NAN, NAN, NAN, -INFINITY}), tol_for(KN_F32), "minimum");
    CHECK_CLOSE(kn_clamp(x, -1, 0.5), ((double[]){NAN, 0.5, NAN, -1}), tol_for(KN_F32), "clamp");
    CHECK_CLOSE(kn_clamp(x, -INFINITY, INFINITY), ((double[]){NAN, 1, NAN, -INFINITY}), tol_for(KN_F32), "clamp inf");
    CHECK_CLOSE(kn_eq(x, x), ((double[]){0, 1, 0, 1}), tol_for(KN_BOOL), "NaN != NaN");
}

/* ---- PyTorch's values at the edges: each expected value is PyTorch 2.15's (the expression in
 * the comment), checked exactly: NaN for NaN, the sign of zero, the dtype. ------------------ */

static const kn_dtype FLOATS[] = {KN_F32, KN_F64, KN_BF16, KN_F16};

static void check_exact_at(kn_tensor *t, kn_dtype d, const double *want, const char *what, int line) {
    if (!t || kn_dtype_of(t) != d) {
        test_fail(__FILE__, line, "%s: %s %s, expected %s", what, t ? "dtype" : "no tensor:",
                  t ? kn_dtype_name(kn_dtype_of(t)) : kn_last_error(), kn_dtype_name(d));
        return;
    }
    double *got = read_f64(t);
    for (int64_t i = 0; i < kn_numel(t); i++) {
        bool same = got && (isnan(want[i]) ? isnan(got[i]) : got[i] == want[i] && signbit(got[i]) == signbit(want[i]));
        if (!same) {
            test_fail(__FILE__, line, "%s (%s): element %lld is %.17g, expected %.17g", what, kn_dtype_name(d),
                      (long long)i, got ? got[i] : NAN, want[i]);
            break;
        }
    }
    free(got);
}
#define CHECK_EXACT(t, d, want, what) check_exact_at((t), (d), (want), (what), __LINE__)

/* An i64 tensor with values a double cannot hold, and the check that t holds exactly want. */
static kn_tensor *i64_from(const int64_t *v, int64_t n) { return kn_from_host(v, KN_I64, KN_SHAPE(n), KN_CPU); }
static void check_i64_at(kn_tensor *t, const int64_t *want, int64_t n, const char *what, int line) {
    int64_t got[8] = {0};
    bool ok = t && kn_dtype_of(t) == KN_I64 && kn_numel(t) == n && kn_to_host(t, got, sizeof got) == KN_OK;
    for (int64_t i = 0; ok && i < n; i++) ok = got[i] == want[i];
    if (!ok) test_fail(__FILE__, line, "%s: not the exact i64 values expected (%s)", what, t ? "" : kn_last_error());
}
#define CHECK_I64(t, want, n, what) check_i64_at((t), (want), (n), (what), __LINE__)

static void test_rounding_an_integer_tensor_keeps_it(void) {
    kn_tensor *(*const ops[])(kn_tensor *) = {kn_floor, kn_ceil, kn_round, kn_trunc};
    static const char *const names[] = {"floor", "ceil", "round", "trunc"};
    /* torch.floor(torch.tensor([2**31 - 1, -2**31, 2**24 + 1], dtype=torch.int32)): the same
     * int32 tensor (through f32, 2**24 + 1 would come back as 2**24) */
    double i32[] = {2147483647, -2147483648.0, 16777217};
    int64_t i64[] = {(INT64_C(1) << 62) + 3, -(INT64_C(1) << 62) - 3};
    for (int k = 0; k < 4; k++) {
        CHECK_EXACT(ops[k](tensor_from(i32, KN_SHAPE(3), KN_I32)), KN_I32, i32, names[k]);
        CHECK_I64(ops[k](i64_from(i64, 2)), i64, 2, names[k]); /* torch.floor(torch.tensor([2**62 + 3, ...])) */
        /* torch.floor(torch.tensor([True])): "floor_vml_cpu" not implemented for 'Bool' */
        CHECK_ERROR(ops[k](kn_ones(KN_SHAPE(2), KN_BOOL)) != NULL, KN_ERR_DTYPE, names[k]);
    }
}

static void test_clamp_is_min_of_max_as_in_pytorch(void) {
    /* x = torch.tensor([-2., 0.5, 3., nan, -0.0]); xi = torch.tensor([-5, 0, 5, 2**31 - 1], dtype=torch.int32) */
    kn_tensor *x = tensor_from((double[]){-2, 0.5, 3, NAN, -0.0}, KN_SHAPE(5), KN_F32);
    double nans[5] = {NAN, NAN, NAN, NAN, NAN};
    CHECK_EXACT(kn_clamp(x, NAN, INFINITY), KN_F32, nans, "torch.clamp(x, min=nan)");
    CHECK_EXACT(kn_clamp(x, -INFINITY, NAN), KN_F32, nans, "torch.clamp(x, max=nan)");
    CHECK_EXACT(kn_clamp(x, 2, 1), KN_F32, ((double[]){1, 1, 1, NAN, 1}), "torch.clamp(x, 2., 1.)");
    /* Float bounds make an integer (or bool) tensor f32, as a float operand does in PyTorch. */
    kn_tensor *xi = tensor_from((double[]){-5, 0, 5, 2147483647}, KN_SHAPE(4), KN_I32);
    CHECK_EXACT(kn_clamp(xi, -1.5, 2.5), KN_F32, ((double[]){-1.5, 0, 2.5, 2.5}), "torch.clamp(xi, -1.5, 2.5)");
    CHECK_EXACT(kn_clamp(xi, 0.5, INFINITY), KN_F32, ((double[]){0.5, 0.5, 5, 2147483648.0}), "torch.clamp(xi, min=0.5)");
    kn_tensor *b = tensor_from((double[]){0, 1}, KN_SHAPE(2), KN_BOOL);
    CHECK_EXACT(kn_clamp(b, 0.5, INFINITY), KN_F32, ((double[]){0.5, 1}), "torch.clamp(tensor([False, True]), min=0.5)");
    /* Integer bounds keep an integer tensor's dtype. */
    CHECK_EXACT(kn_clamp_int(xi, 2, 1), KN_I32, ((double[]){1, 1, 1, 1}), "torch.clamp(xi, 2, 1)");
    CHECK_EXACT(kn_clamp_int(xi, -(INT64_C(1) << 40), 3), KN_I32, ((double[]){-5, 0, 3, 3}), "torch.clamp(xi, -2**40, 3)");
    CHECK_EXACT(kn_clamp_int(xi, INT64_MIN, 3), KN_I32, ((double[]){-5, 0, 3, 3}), "torch.clamp(xi, max=3)");
    CHECK_EXACT(kn_clamp_int(xi, 0, INT64_MAX), KN_I32, ((double[]){0, 0, 5, 2147483647}), "torch.clamp(xi, min=0)");
    CHECK_EXACT(kn_clamp_int(b, 0, 1), KN_I64, ((double[]){0, 1}), "torch.clamp(tensor([False, True]), 0, 1)");
    CHECK_EXACT(kn_clamp_int(tensor_from((double[]){-2.5, 0.5, 3.5}, KN_SHAPE(3), KN_F32), -1, 2), KN_F32,
                ((double[]){-1, 0.5, 2}), "torch.clamp(tensor([-2.5, 0.5, 3.5]), -1, 2)");
    /* torch.clamp(torch.tensor([-(2**62 + 3), 0, 2**62 + 3]), -(2**62 + 1), 2**62 + 1): exact bounds */
    int64_t big = (INT64_C(1) << 62) + 1;
    CHECK_I64(kn_clamp_int(i64_from((int64_t[]){-big - 2, 0, big + 2}, 3), -big, big), ((int64_t[]){-big, 0, big}), 3,
              "clamp_int beyond 2^53");
    CHECK_ERROR(kn_clamp_int(NULL, 0, 1) != NULL, KN_ERR_NULL, "clamp_int");
}

static void test_integer_pow_of_negative_exponent(void) {
    /* torch.pow(torch.tensor([0, 1, -1, 2, -2, 1, -1, -1], dtype=torch.int32),
     *           torch.tensor([-1, -2, -3, -1, -1, -2**31, -2**31, -2**31 + 1], dtype=torch.int32)) */
    double base[] = {0, 1, -1, 2, -2, 1, -1, -1}, expo[] = {-1, -2, -3, -1, -1, -2147483648.0, -2147483648.0, -2147483647};
    double want[] = {0, 1, -1, 0, 0, 1, 1, -1};
    for (kn_dtype d = KN_I32; d <= KN_I64; d++)
        CHECK_EXACT(kn_pow(tensor_from(base, KN_SHAPE(8), d), tensor_from(expo, KN_SHAPE(8), d)), d, want, "pow");
}

static void test_float_floor_divide_and_remainder_are_pythons(void) {
    double a[] = {INFINITY, -INFINITY, INFINITY, 1, 7.5, -7.5, 0, -0.0, 1, -1, 0, 5, -5, 1};
    double b[] = {3, 3, -2, 0.1, 2, 2, 3, 3, 0, 0, 0, INFINITY, INFINITY, -INFINITY};
    /* torch.floor_divide(a, b), torch.remainder(a, b) for each dtype; f16 rounds 0.1 below it */
    double fd[] = {NAN, NAN, NAN, 9, 3, -4, 0, -0.0, INFINITY, -INFINITY, NAN, 0, -1, -1};
    double rm[] = {NAN, NAN, NAN, 0, 1.5, 0.5, 0, -0.0, NAN, NAN, NAN, 5, INFINITY, -INFINITY};
    static const double rm_tenth[] = {0.09999998658895493, 0.09999999999999995, 0.09912109375, 0.000244140625};
    for (int k = 0; k < 4; k++) {
        kn_dtype d = FLOATS[k];
        fd[3] = d == KN_F16 ? 10 : 9;
        rm[3] = rm_tenth[k];
        kn_tensor *x = tensor_from(a, KN_SHAPE(14), d), *y = tensor_from(b, KN_SHAPE(14), d);
        CHECK_EXACT(kn_floor_divide(x, y), d, fd, "floor_divide");
        CHECK_EXACT(kn_remainder(x, y), d, rm, "remainder");
    }
}

static void test_sign_of_nan_is_zero_and_of_bool_itself(void) {
    /* torch.sign(torch.tensor([nan, -0.0, 0.0, -3., inf, -inf])): [0., 0., 0., -1., 1., -1.] */
    double x[] = {NAN, -0.0, 0, -3, INFINITY, -INFINITY}, want[] = {0, 0, 0, -1, 1, -1};
    for (int k = 0; k < 4; k++) CHECK_EXACT(kn_sign(tensor_from(x, KN_SHAPE(6), FLOATS[k])), FLOATS[k], want, "sign");
    /* torch.sign(torch.tensor([False, True])): tensor([False, True]) */
    double b[] = {0, 1};
    CHECK_EXACT(kn_sign(tensor_from(b, KN_SHAPE(2), KN_BOOL)), KN_BOOL, b, "sign of bool");
}

/* PyTorch's scalar loop returns the first operand of a tie; its vectorized loop (16 or more f32
 * with AVX-512) returns the second. kiln gives the first at every size. */
static void test_maximum_minimum_of_zeros_give_the_first(void) {
    /* torch.maximum(torch.tensor([-0.0]), torch.tensor([0.0])): -0.0; of (0.0, -0.0): 0.0; minimum alike */
    double x[] = {-0.0, 0}, y[] = {0, -0.0};
    for (int k = 0; k < 4; k++) {
        kn_tensor *a = tensor_from(x, KN_SHAPE(2), FLOATS[k]), *b = tensor_from(y, KN_SHAPE(2), FLOATS[k]);
        CHECK_EXACT(kn_maximum(a, b), FLOATS[k], x, "maximum");
        CHECK_EXACT(kn_minimum(a, b), FLOATS[k], x, "minimum");
    }
}

static void test_bool_add_mul_maximum_minimum_stay_bool(void) {
    kn_tensor *a = tensor_from((double[]){0, 0, 1, 1}, KN_SHAPE(4), KN_BOOL);
    kn_tensor *b = tensor_from((double[]){0, 1, 0, 1}, KN_SHAPE(4), KN_BOOL);
    double any[] = {0, 1, 1, 1}, all[] = {0, 0, 0, 1}; /* true + true is true, not 2 */
    CHECK_EXACT(kn_add(a, b), KN_BOOL, any, "torch.add(a, b)");
    CHECK_EXACT(kn_mul(a, b), KN_BOOL, all, "torch.mul(a, b)");
    CHECK_EXACT(kn_maximum(a, b), KN_BOOL, any, "torch.maximum(a, b)");
    CHECK_EXACT(kn_minimum(a, b), KN_BOOL, all, "torch.minimum(a, b)");
    /* a + true and its square: torch.add(a, torch.tensor(True)) is all True */
    kn_tensor *t = kn_add(a, kn_scalar(1, KN_BOOL));
    CHECK_EXACT(kn_mul(t, t), KN_BOOL, ((double[]){1, 1, 1, 1}), "(a + True) * (a + True)");
    /* torch refuses a - b of bools ("Use the `^` or `logical_xor()` operator instead") */
    CHECK_ERROR(kn_sub(a, b) != NULL, KN_ERR_DTYPE, "sub");
}

static void test_lerp_of_a_negative_weight_is_pytorchs(void) {
    /* torch.lerp(torch.tensor([0.1, inf]), torch.tensor([3.0, -inf]), torch.tensor([-1.5, -1.0])): [-4.25, nan]
     * (|weight| >= 0.5 takes the form from the end; start + w (end - start) gives -4.2500005 and inf) */
    kn_tensor *x = tensor_from((double[]){0.1, INFINITY}, KN_SHAPE(2), KN_F32);
    kn_tensor *y = tensor_from((double[]){3.0, -INFINITY}, KN_SHAPE(2), KN_F32);
    CHECK_EXACT(kn_lerp(x, y, tensor_from((double[]){-1.5, -1}, KN_SHAPE(2), KN_F32)), KN_F32,
                ((double[]){-4.25, NAN}), "lerp");
    /* torch.lerp(torch.tensor([0.7], dtype=torch.float64), torch.tensor([2.0], ...), -0.6) */
    kn_tensor *d = kn_lerp_scalar(kn_full(KN_SHAPE(1), 0.7, KN_F64), kn_full(KN_SHAPE(1), 2, KN_F64), -0.6);
    CHECK_EXACT(d, KN_F64, ((double[]){-0.08000000000000018}), "lerp_scalar f64");
}

static void test_addcmul_rounds_once_as_pytorch(void) {
    /* torch.addcmul(torch.tensor([1.0, -1.0]), torch.tensor([0.3, 3.3]), torch.tensor([-3.1, 2.9]), value=0.3):
     * [0.7210000157356262, 1.8710001707077026], one rounding of x + (0.3 y) z (two give 0.72099996, 1.8710001) */
    kn_tensor *x = tensor_from((double[]){1, -1}, KN_SHAPE(2), KN_F32);
    kn_tensor *y = tensor_from((double[]){0.3, 3.3}, KN_SHAPE(2), KN_F32);
    kn_tensor *z = tensor_from((double[]){-3.1, 2.9}, KN_SHAPE(2), KN_F32);
    CHECK_EXACT(kn_addcmul(x, y, z, 0.3), KN_F32, ((double[]){0.7210000157356262, 1.8710001707077026}), "addcmul");
}

static void test_expm1_of_tiny_values_is_the_value(void) {
    /* torch.expm1(torch.tensor([1e-45, -1e-45, 1e-40, -0.0, 1e-8, 5.9e-8])): each input itself */
    double x[] = {1.401298464324817e-45, -1.401298464324817e-45, 9.99994610111476e-41, -0.0, 9.99999993922529e-09,
                  5.900000132896821e-08};
    CHECK_EXACT(kn_expm1(tensor_from(x, KN_SHAPE(6), KN_F32)), KN_F32, x, "expm1");
}

/* ---- promotion ---------------------------------------------------------------------------- */
static void test_type_promotion(void) {
    static const struct { kn_dtype a; bool a0; kn_dtype b; bool b0; kn_dtype want; } rules[] = {
        {KN_I32, false, KN_F16, false, KN_F16},  {KN_F16, false, KN_BF16, false, KN_F32},
        {KN_I64, true, KN_F32, false, KN_F32},   {KN_F64, true, KN_F32, false, KN_F32},
        {KN_BOOL, false, KN_I32, false, KN_I32}, {KN_I32, false, KN_I64, false, KN_I64},
        {KN_F32, false, KN_F64, false, KN_F64},  {KN_F32, true, KN_I64, false, KN_F32},
        {KN_I64, true, KN_I32, false, KN_I32},   {KN_F64, true, KN_F32, true, KN_F64},
        {KN_BOOL, false, KN_BOOL, false, KN_BOOL},
    };
    for (size_t k = 0; k < sizeof rules / sizeof rules[0]; k++) {
        kn_tensor *a = rules[k].a0 ? kn_scalar(3, rules[k].a) : kn_full(KN_SHAPE(2, 3), 1, rules[k].a);
        kn_tensor *b = rules[k].b0 ? kn_scalar(2, rules[k].b) : kn_full(KN_SHAPE(2, 3), 1, rules[k].b);
        kn_tensor *s = rules[k].a == KN_BOOL && rules[k].b == KN_BOOL ? kn_logical_or(a, b) : kn_add(a, b);
        CHECK_MSG(s && kn_dtype_of(s) == rules[k].want, "%s%s + %s%s gave %s, expected %s", kn_dtype_name(rules[k].a),
                  rules[k].a0 ? " 0-d" : "", kn_dtype_name(rules[k].b), rules[k].b0 ? " 0-d" : "",
                  s ? kn_dtype_name(kn_dtype_of(s)) : "NULL", kn_dtype_name(rules[k].want));
        kn_tensor *m = kn_dtype_of(s) == KN_BOOL ? kn_logical_and(b, a) : kn_mul(b, a);
        CHECK(m && kn_dtype_of(m) == kn_dtype_of(s));
    }
    kn_tensor *i = kn_full(KN_SHAPE(3), 2, KN_I32);
    kn_tensor *f = kn_add_scalar(i, 0.5);
    CHECK(f && kn_dtype_of(f) == KN_F32);
    CHECK_CLOSE(f, ((double[]){2.5, 2.5, 2.5}), tol_for(KN_F32), "int + 0.5");
    kn_tensor *j = kn_add_scalar_int(i, 3);
    CHECK(j && kn_dtype_of(j) == KN_I32);
    kn_mode saved = debug_checks_off(); /* the overflow to inf is the point; debug mode refuses it */
    kn_tensor *h = kn_mul_scalar(kn_full(KN_SHAPE(2), 1.5, KN_F16), 1e10); /* does not widen f16 */
    debug_checks_restore(saved);
    CHECK(h && kn_dtype_of(h) == KN_F16);
    CHECK_CLOSE(h, ((double[]){INFINITY, INFINITY}), tol_for(KN_F16), "f16 * 1e10 overflows");
    kn_tensor *bl = kn_add_scalar_int(kn_full(KN_SHAPE(2), 1, KN_BOOL), 2);
    CHECK(bl && kn_dtype_of(bl) == KN_I64);
    CHECK_CLOSE(kn_div(i, kn_full(KN_SHAPE(3), 4, KN_I64)), ((double[]){0.5, 0.5, 0.5}), tol_for(KN_F32), "int / int");
}

/* ---- ternary ------------------------------------------------------------------------------ */
static void test_ternary_ops(void) {
    for (int j = 0; j < KN_DTYPE_COUNT; j++) {
        kn_dtype d = ALL_DTYPES[j];
        kn_tensor *c = rand_tensor(KN_SHAPE(3, 1), KN_BOOL, 0, 1);
        kn_tensor *a = rand_tensor(KN_SHAPE(3, 8), d, -9, 9), *b = rand_tensor(KN_SHAPE(8), d, -9, 9);
        double *vc = read_f64(c), *va = read_f64(a), *vb = read_f64(b), want[24];
        for (int i = 0; i < 24; i++) want[i] = vc[i / 8] != 0 ? va[i] : vb[i % 8];
        CHECK_CLOSE(kn_where(c, a, b), want, tol_for(d), kn_dtype_name(d));
        CHECK_CLOSE(kn_where(c, non_contiguous_copy(a), kn_slice(kn_slice(b, 0, -1, -9, -1), 0, -1, -9, -1)), want, tol_for(d),
                    "where, strided");
        if (d == KN_BOOL) {
            free(vc), free(va), free(vb);
            continue;
        }
        kn_tensor *z = rand_tensor(KN_SHAPE(3, 8), d, 1, 4);
        double *vz = read_f64(z);
        if (kn_dtype_is_float(d)) {
            for (int i = 0; i < 24; i++) want[i] = va[i] + 0.5 * vb[i % 8] * vz[i];
            CHECK_CLOSE(kn_addcmul(a, b, z, 0.5), want, tol_for(d), "addcmul");
            for (int i = 0; i < 24; i++) want[i] = va[i] + 0.5 * vb[i % 8] / vz[i];
            CHECK_CLOSE(kn_addcdiv(a, b, z, 0.5), want, tol_for(d), "addcdiv");
            kn_tensor *w = rand_tensor(KN_SHAPE(3, 8), d, 0, 1);
            double *vw = read_f64(w);
            for (int i = 0; i < 24; i++) want[i] = va[i] + vw[i] * (vb[i % 8] - va[i]);
            tolerance t = tol_for(d);
            t.atol *= 20; /* |end - start| reaches 18 */
            CHECK_CLOSE(kn_lerp(a, b, w), want, t, "lerp");
            for (int i = 0; i < 24; i++) want[i] = va[i] + 0.25 * (vb[i % 8] - va[i]);
            CHECK_CLOSE(kn_lerp_scalar(a, b, 0.25), want, t, "lerp_scalar");
            free(vw);
        } else {
            for (int i = 0; i < 24; i++) want[i] = va[i] + 2 * vb[i % 8] * vz[i];
            CHECK_CLOSE(kn_addcmul(a, b, z, 2), want, tol_for(d), "integer addcmul");
        }
        free(vc), free(va), free(vb), free(vz);
    }
    kn_tensor *one = kn_ones(KN_SHAPE(2), KN_F32);
    CHECK_CLOSE(kn_lerp_scalar(one, kn_full(KN_SHAPE(2), 3, KN_F32), 1.0), ((double[]){3, 3}), tol_for(KN_F32), "lerp end exact");
    CHECK_ERROR(kn_where(NULL, one, one) != NULL, KN_ERR_NULL, "where");
    CHECK_ERROR(kn_where(kn_ones(KN_SHAPE(3), KN_BOOL), one, one) != NULL, KN_ERR_SHAPE, "where");
}

int main(void) {
    RUN(test_unary_ops_every_dtype);
    RUN(test_unary_special_values);
    RUN(test_binary_ops_every_dtype_and_broadcast);
    RUN(test_python_integer_division);
    RUN(test_integer_domain_errors);
    RUN(test_domain_error_in_a_far_chunk);
    RUN(test_nan_propagation);
    RUN(test_rounding_an_integer_tensor_keeps_it);
    RUN(test_clamp_is_min_of_max_as_in_pytorch);
    RUN(test_integer_pow_of_negative_exponent);
    RUN(test_float_floor_divide_and_remainder_are_pythons);
    RUN(test_sign_of_nan_is_zero_and_of_bool_itself);
    RUN(test_maximum_minimum_of_zeros_give_the_first);
    RUN(test_bool_add_mul_maximum_minimum_stay_bool);
    RUN(test_lerp_of_a_negative_weight_is_pytorchs);
    RUN(test_addcmul_rounds_once_as_pytorch);
    RUN(test_expm1_of_tiny_values_is_the_value);
    RUN(test_type_promotion);
    RUN(test_ternary_ops);
    return test_summary();
}
