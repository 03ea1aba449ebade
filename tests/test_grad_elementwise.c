/* Gradients of the elementwise family: every op of defs/unary.def and binary.def (with the
 * ternaries), copy and the scalar forms (defs/scalar.def), against finite differences in f64 (broadcast and
 * non-contiguous inputs) and against the f64 gradient in f32; PyTorch's choices at kinks and
 * ties; and the backward ops of defs/elementwise_backward.def against float64 references in
 * every float dtype. */
#include <stdlib.h>

#include "gradcheck.h"
#include "ops/grad.h"

/* One gradient case: GRADCHECK'ed in f64, then compared in f32 (check_f32). */
typedef struct gcase {
    const char *name;
    gc_fn f;
    const void *ctx;
    int n;
    gc_input in[3];
} gcase;

/* The same case with f32 inputs (f32 copies of f64 values): each gradient must be f32 and
 * close to the f64 one. */
static void check_f32(const gcase *k) {
    kn_scope_push();
    kn_tensor *x64[3], *x32[3];
    for (int i = 0; i < k->n; i++) {
        if (k->in[i].fixed) {
            x64[i] = x32[i] = k->in[i].fixed;
            continue;
        }
        x32[i] = rand_tensor(k->in[i].shape, KN_F32, k->in[i].lo, k->in[i].hi);
        x64[i] = kn_requires_grad(kn_cast(x32[i], KN_F64), true);
        kn_requires_grad(x32[i], true);
    }
    kn_tensor *y64 = k->f(x64, k->ctx), *y32 = k->f(x32, k->ctx);
    kn_tensor *r = y64 ? rand_tensor(kn_shape_of(y64), KN_F64, -1, 1) : NULL;
    kn_status s64 = kn_backward(kn_sum(kn_mul(y64, r), KN_ALL_DIMS, false));
    kn_status s32 = kn_backward(kn_sum(kn_mul(y32, kn_cast(r, KN_F32)), KN_ALL_DIMS, false));
    CHECK_MSG(s64 == KN_OK && s32 == KN_OK, "%s f32: backward failed: %s", k->name, kn_last_error());
    for (int i = 0; s64 == KN_OK && s32 == KN_OK && i < k->n; i++) {
        if (k->in[i].fixed) continue;
        kn_tensor *g32 = kn_grad(x32[i]), *g64 = kn_grad(x64[i]);
        CHECK_MSG(g32 && kn_dtype_of(g32) == KN_F32, "%s f32: gradient of input %d is not f32", k->name, i);
        double *want = read_f64(g64);
        char what[96];
        snprintf(what, sizeof what, "%s f32 gradient of input %d", k->name, i);
        if (g32 && want) CHECK_CLOSE(g32, want, ((tolerance){1e-4, 1e-5}), what);
        free(want);
    }
    kn_scope_pop();
}

static void run_cases(const gcase *cases, size_t count) {
    for (size_t i = 0; i < count; i++) {
        const gcase *k = &cases[i];
        gradcheck_at(k->name, k->f, k->ctx, k->n, k->in, __FILE__, __LINE__);
        check_f32(k);
    }
}

/* ---- unary ops and scalar forms ------------------------------------------------------------
 * The input [4, 3] is transposed (non-contiguous) before the op; `mixed` flips the sign of
 * every other element, so that a range like [0.1, 2] keeps away from a kink at 0 on both
 * sides. */
typedef struct unary {
    kn_tensor *(*op)(kn_tensor *);
    bool mixed;
} unary;

static kn_tensor *f_unary(kn_tensor *const *in, const void *ctx) {
    const unary *u = ctx;
    kn_tensor *x = kn_transpose(in[0], 0, 1);
    if (u->mixed) {
        double s[12];
        for (int i = 0; i < 12; i++) s[i] = i % 2 ? -1 : 1;
        x = kn_mul(x, tensor_from(s, KN_SHAPE(3, 4), kn_dtype_of(in[0])));
    }
    return u->op(x);
}

static kn_tensor *leaky_small(kn_tensor *x) { return kn_leaky_relu(x, 0.1); }
static kn_tensor *leaky_steep(kn_tensor *x) { return kn_leaky_relu(x, 1.5); }
static kn_tensor *clamp_both(kn_tensor *x) { return kn_clamp(x, -0.5, 0.5); }
static kn_tensor *clamp_max(kn_tensor *x) { return kn_clamp(x, -INFINITY, 0.3); }
static kn_tensor *clamp_min(kn_tensor *x) { return kn_clamp(x, -0.2, INFINITY); }
static kn_tensor *softplus_torch(kn_tensor *x) { return kn_softplus(x, 1, 20); }
static kn_tensor *softplus_low(kn_tensor *x) { return kn_softplus(x, 2, 1); } /* linear above x = 0.5 */
static kn_tensor *add_s(kn_tensor *x) { return kn_add_scalar(x, 2); }
static kn_tensor *sub_s(kn_tensor *x) { return kn_sub_scalar(x, 0.5); }
static kn_tensor *mul_s(kn_tensor *x) { return kn_mul_scalar(x, -3); }
static kn_tensor *div_s(kn_tensor *x) { return kn_div_scalar(x, 0.25); }
static kn_tensor *pow_cube(kn_tensor *x) { return kn_pow_scalar(x, 3); }
static kn_tensor *pow_half(kn_tensor *x) { return kn_pow_scalar(x, 0.5); }
static kn_tensor *pow_neg(kn_tensor *x) { return kn_pow_scalar(x, -1.5); }
static kn_tensor *pow_zero(kn_tensor *x) { return kn_pow_scalar(x, 0); }
/* The exponents computed as other ops (sqrt, products, reciprocals) and a general one. */
static kn_tensor *pow_square(kn_tensor *x) { return kn_pow_scalar(x, 2); }
static kn_tensor *pow_inv_square(kn_tensor *x) { return kn_pow_scalar(x, -2); }
static kn_tensor *pow_inv(kn_tensor *x) { return kn_pow_scalar(x, -1); }
static kn_tensor *pow_inv_sqrt(kn_tensor *x) { return kn_pow_scalar(x, -0.5); }
static kn_tensor *pow_one(kn_tensor *x) { return kn_pow_scalar(x, 1); }
static kn_tensor *add_si(kn_tensor *x) { return kn_add_scalar_int(x, 3); }
static kn_tensor *sub_si(kn_tensor *x) { return kn_sub_scalar_int(x, -5); }
static kn_tensor *mul_si(kn_tensor *x) { return kn_mul_scalar_int(x, -2); }
static kn_tensor *pow_si(kn_tensor *x) { return kn_pow_scalar_int(x, 4); }
static kn_tensor *copy_layout(kn_tensor *x) { return kn_contiguous(x); }
static kn_tensor *copy_same(kn_tensor *x) { return kn_cast(x, kn_dtype_of(x)); }
/* Ops whose outputs carry no gradient: x + op(x) has the gradient of x alone. */
#define PLUS(op) \
    static kn_tensor *plus_##op(kn_tensor *x) { return kn_add(x, kn_##op(x)); }
PLUS(sign)
PLUS(floor)
PLUS(ceil)
PLUS(round)
PLUS(trunc)

#define U(fn, mixed_, lo, hi) {#fn, f_unary, &(const unary){fn, mixed_}, 1, {GC_IN(KN_SHAPE(4, 3), lo, hi)}}
static void test_unary_ops(void) {
    const gcase cases[] = {
        U(kn_neg, false, -2, 2),
        U(kn_abs, true, 0.1, 2),
        U(kn_relu, true, 0.1, 2),
        U(clamp_both, false, -1, 1),
        U(clamp_max, false, -1, 1),
        U(clamp_min, false, -1, 1),
        U(kn_exp, false, -2, 2),
        U(kn_expm1, false, -2, 2),
        U(kn_log, false, 0.5, 3),
        U(kn_log1p, false, -0.5, 2),
        U(kn_log2, false, 0.5, 3),
        U(kn_sqrt, false, 0.5, 3),
        U(kn_rsqrt, false, 0.5, 3),
        U(kn_reciprocal, true, 0.5, 3),
        U(kn_sin, false, -3, 3),
        U(kn_cos, false, -3, 3),
        U(kn_tanh, false, -2, 2),
        U(kn_sigmoid, false, -4, 4),
        U(leaky_small, true, 0.1, 2),
        U(leaky_steep, true, 0.1, 2),
        U(kn_gelu, false, -3, 3),
        U(kn_gelu_tanh, false, -3, 3),
        U(kn_silu, false, -4, 4),
        U(softplus_torch, false, -3, 3),
        U(softplus_low, false, -1, 1),
        U(kn_erf, false, -2, 2),
        U(add_s, false, -2, 2),
        U(sub_s, false, -2, 2),
        U(mul_s, false, -2, 2),
        U(div_s, false, -2, 2),
        U(pow_cube, true, 0.1, 2),
        U(pow_half, false, 0.5, 3),
        U(pow_neg, false, 0.5, 3),
        U(pow_zero, true, 0.1, 2),
        U(pow_square, true, 0.1, 2),
        U(pow_inv_square, true, 0.5, 2),
        U(pow_inv, true, 0.5, 2),
        U(pow_inv_sqrt, false, 0.5, 3),
        U(pow_one, true, 0.1, 2),
        U(add_si, false, -2, 2),
        U(sub_si, false, -2, 2),
        U(mul_si, false, -2, 2),
        U(pow_si, true, 0.1, 2),
        U(copy_layout, false, -2, 2),
        U(copy_same, false, -2, 2),
        U(plus_sign, true, 0.1, 0.4), /* [0.1, 0.4] keeps clear of every step of these */
        U(plus_floor, true, 0.1, 0.4),
        U(plus_ceil, true, 0.1, 0.4),
        U(plus_round, true, 0.1, 0.4),
        U(plus_trunc, true, 0.1, 0.4),
    };
#undef U
    run_cases(cases, sizeof cases / sizeof cases[0]);
}



/* ---- binary ops ----------------------------------------------------------------------------
 * Either broadcast ([2, 1, 3] with [4, 1]) or non-contiguous ([3, 4] transposed with every
 * other column of [4, 6]), chosen by the inputs' shapes. */
typedef kn_tensor *(*binary_fn)(kn_tensor *, kn_tensor *);

static kn_tensor *f_binary(kn_tensor *const *in, const void *ctx) {
    binary_fn op = *(const binary_fn *)ctx;
    kn_tensor *a = in[0], *b = in[1];
    if (kn_ndim(a) == 2 && kn_ndim(b) == 2 && kn_size(b, 1) == 6) {
        a = kn_transpose(a, 0, 1);
        b = kn_slice(b, 1, 0, 6, 2);
    }
    return op(a, b);
}

#define BCAST(op, lo0, hi0, lo1, hi1)                     \
    {#op " broadcast", f_binary, &(const binary_fn){op}, 2, \
     {GC_IN(KN_SHAPE(2, 1, 3), lo0, hi0), GC_IN(KN_SHAPE(4, 1), lo1, hi1)}}
#define STRIDED(op, lo0, hi0, lo1, hi1)                 \
    {#op " strided", f_binary, &(const binary_fn){op}, 2, \
     {GC_IN(KN_SHAPE(3, 4), lo0, hi0), GC_IN(KN_SHAPE(4, 6), lo1, hi1)}}
#define BOTH(op, lo0, hi0, lo1, hi1) BCAST(op, lo0, hi0, lo1, hi1), STRIDED(op, lo0, hi0, lo1, hi1)
static void test_binary_ops(void) {
    const gcase cases[] = {
        BOTH(kn_add, -2, 2, -2, 2),
        BOTH(kn_sub, -2, 2, -2, 2),
        BOTH(kn_mul, -2, 2, -2, 2),
        BOTH(kn_div, -2, 2, 0.5, 2),
        BOTH(kn_remainder, -3, 3, 0.5, 2),
        BCAST(kn_remainder, -3, 3, -2, -0.5),
        BOTH(kn_pow, 0.5, 2, -2, 2),
        BOTH(kn_maximum, -1, 1, -1, 1),
        BOTH(kn_minimum, -1, 1, -1, 1),
        /* A 0-d operand that wants a gradient. */
        {"mul 0-d", f_binary, &(const binary_fn){kn_mul}, 2, {GC_IN(KN_SHAPE(2, 3), -2, 2), GC_IN(KN_SHAPE0, -2, 2)}},
        {"pow 0-d exponent", f_binary, &(const binary_fn){kn_pow}, 2,
         {GC_IN(KN_SHAPE(2, 3), 0.5, 2), GC_IN(KN_SHAPE0, -2, 2)}},
    };
#undef BOTH
#undef STRIDED
#undef BCAST
    run_cases(cases, sizeof cases / sizeof cases[0]);
}



/* An integer operand is promoted (cast) into the float op, and takes no gradient. */
static void test_binary_with_integer_operand(void) {
    kn_scope_push();
    double iv[4] = {1, -2, 3, 0};
    kn_tensor *ints = tensor_from(iv, KN_SHAPE(4), KN_I32);
    binary_fn ops[] = {kn_mul, kn_add, kn_div, kn_pow};
    const char *names[] = {"mul i32", "add i32", "div i32", "pow i32"};
    for (int k = 0; k < 4; k++) {
        gcase c = {names[k], f_binary, &ops[k], 2, {GC_IN(KN_SHAPE(3, 4), 0.5, 2), GC_FIXED(ints)}};
        if (ops[k] == kn_div) c.in[1] = GC_FIXED(tensor_from((double[]){1, -2, 3, 4}, KN_SHAPE(4), KN_I32));
        run_cases(&c, 1);
    }
    kn_scope_pop();
}

/* ---- ternary ops -------------------------------------------------------------------------- */
typedef struct ternary {
    int kind; /* 0 where, 1 lerp, 2 lerp_scalar, 3 addcmul, 4 addcdiv */
    double value;
    bool strided;
} ternary;

static kn_tensor *f_ternary(kn_tensor *const *in, const void *ctx) {
    const ternary *t = ctx;
    kn_tensor *a = in[0], *b = in[1], *c = t->kind == 2 ? NULL : in[2];
    if (t->strided) b = kn_transpose(b, 0, 1); /* [3, 4] -> [4, 3] */
    switch (t->kind) {
    case 0: return kn_where(a, b, c);
    case 1: return kn_lerp(a, b, c);
    case 2: return kn_lerp_scalar(a, b, t->value);
    case 3: return kn_addcmul(a, b, c, t->value);
    default: return kn_addcdiv(a, b, c, t->value);
    }
}

static void test_ternary_ops(void) {
    kn_scope_push();
    double cv[6] = {1, 0, 0, 1, 1, 0};
    kn_tensor *cond = tensor_from(cv, KN_SHAPE(2, 1, 3), KN_BOOL);
    kn_tensor *cond_f = tensor_from(cv, KN_SHAPE(2, 1, 3), KN_F64); /* takes no gradient either */
#define T(name, kind, value, strided, in0, lo1, hi1, lo2, hi2) \
    {name, f_ternary, &(const ternary){kind, value, strided}, 3, \
     {in0, GC_IN(strided ? KN_SHAPE(3, 4) : KN_SHAPE(4, 3), lo1, hi1), GC_IN(KN_SHAPE(2, 4, 1), lo2, hi2)}}
    const gcase cases[] = {
        T("where", 0, 0, false, GC_FIXED(cond), -2, 2, -2, 2),
        T("where strided", 0, 0, true, GC_FIXED(cond), -2, 2, -2, 2),
        T("where float condition", 0, 0, false, GC_FIXED(cond_f), -2, 2, -2, 2),
        T("lerp", 1, 0, false, GC_IN(KN_SHAPE(2, 1, 3), -2, 2), -2, 2, -0.5, 1.5),
        T("lerp strided", 1, 0, true, GC_IN(KN_SHAPE(2, 1, 3), -2, 2), -2, 2, -0.5, 1.5),
        T("addcmul", 3, 1, false, GC_IN(KN_SHAPE(2, 1, 3), -2, 2), -2, 2, -2, 2),
        T("addcmul value -0.5 strided", 3, -0.5, true, GC_IN(KN_SHAPE(2, 1, 3), -2, 2), -2, 2, -2, 2),
        T("addcdiv", 4, 1, false, GC_IN(KN_SHAPE(2, 1, 3), -2, 2), -2, 2, 0.5, 2),
        T("addcdiv value 2.5 strided", 4, 2.5, true, GC_IN(KN_SHAPE(2, 1, 3), -2, 2), -2, 2, -2, -0.5),
        {"lerp_scalar 0.3", f_ternary, &(const ternary){2, 0.3, false}, 2,
         {GC_IN(KN_SHAPE(2, 1, 3), -2, 2), GC_IN(KN_SHAPE(4, 3), -2, 2)}},
        {"lerp_scalar 0.7 strided", f_ternary, &(const ternary){2, 0.7, true}, 2,
         {GC_IN(KN_SHAPE(4, 3), -2, 2), GC_IN(KN_SHAPE(3, 4), -2, 2)}},
    };
#undef T
    run_cases(cases, sizeof cases / sizeof cases[0]);
    kn_scope_pop();
}

/* ---- casts ------------------------------------------------------------------------------------ */

static double grad_at(kn_tensor *t, int64_t i) {
    double *v = read_f64(kn_grad(t)), out = v ? v[i] : NAN;
    free(v);
    return out;
}

/* Through f32 <-> f64 <-> f16 <-> bf16: the gradient arrives in the leaf's dtype. Inputs
 * exact in bf16 and scales by powers of two keep the forward values exact in each dtype. */
static void test_casts(void) {
    kn_scope_push();
    const kn_dtype floats[] = {KN_F64, KN_F32, KN_F16, KN_BF16}; /* by falling precision */
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) {
            kn_tensor *x = kn_requires_grad(kn_cast(rand_tensor(KN_SHAPE(2, 3), KN_BF16, -2, 2), floats[i]), true);
            kn_tensor *y = kn_mul_scalar(kn_cast(x, floats[j]), 4);
            kn_tensor *z = kn_cast(kn_mul(kn_cast(y, KN_BF16), kn_cast(y, KN_F16)), KN_F64); /* 16 x^2 */
            CHECK(kn_backward(kn_sum(kn_add(z, kn_cast(y, KN_F64)), KN_ALL_DIMS, false)) == KN_OK);
            kn_tensor *g = kn_grad(x);
            double *xv = read_f64(x);
            CHECK_MSG(g && kn_dtype_of(g) == floats[i], "cast %s -> %s: gradient dtype", kn_dtype_name(floats[i]),
                      kn_dtype_name(floats[j]));
            double want[6];
            for (int k = 0; k < 6; k++) want[k] = 32 * xv[k] + 4; /* d(16 x^2 + 4x) */
            CHECK_CLOSE(g, want, tol_for(floats[i > j ? i : j]), "cast chain"); /* summed in both dtypes */
            free(xv);
        }
    /* f32 next to f64 computes in f64; the f32 operand's gradient comes back f32. */
    kn_tensor *a = kn_requires_grad(rand_tensor(KN_SHAPE(3), KN_F32, -1, 1), true);
    kn_tensor *b = rand_tensor(KN_SHAPE(3), KN_F64, -1, 1);
    CHECK(kn_backward(kn_sum(kn_mul(a, b), KN_ALL_DIMS, false)) == KN_OK);
    double *bv = read_f64(b);
    CHECK(kn_dtype_of(kn_grad(a)) == KN_F32 && fabs(grad_at(a, 2) - (float)bv[2]) == 0);
    free(bv);
    /* To an integer: no gradient flows (the result is not float). */
    CHECK(!kn_needs_grad(kn_cast(a, KN_I32)) && !kn_needs_grad(kn_cast(a, KN_BOOL)));
    kn_scope_pop();
}

/* ---- PyTorch's choices at kinks and ties -------------------------------------------------------- */

static double *grads_of(kn_tensor *(*f)(kn_tensor *, kn_tensor *), const double *av, const double *bv, int n,
                        double **gb) {
    kn_tensor *a = kn_requires_grad(tensor_from(av, KN_SHAPE(n), KN_F64), true);
    kn_tensor *b = kn_requires_grad(tensor_from(bv, KN_SHAPE(n), KN_F64), true);
    CHECK(kn_backward(kn_sum(f(a, b), KN_ALL_DIMS, false)) == KN_OK);
    *gb = read_f64(kn_grad(b));
    return read_f64(kn_grad(a));
}

static kn_tensor *relu_of_first(kn_tensor *a, kn_tensor *b) { return kn_add(kn_relu(a), kn_mul_scalar(b, 0)); }
static kn_tensor *abs_of_first(kn_tensor *a, kn_tensor *b) { return kn_add(kn_abs(a), kn_mul_scalar(b, 0)); }
static kn_tensor *leaky_of_first(kn_tensor *a, kn_tensor *b) {
    return kn_add(kn_leaky_relu(a, 0.25), kn_mul_scalar(b, 0));
}
static kn_tensor *clamp_of_first(kn_tensor *a, kn_tensor *b) {
    return kn_add(kn_clamp(a, -1, 1), kn_mul_scalar(b, 0));
}

static void check_grads(const char *what, kn_tensor *(*f)(kn_tensor *, kn_tensor *), const double *av,
                        const double *bv, const double *want_a, const double *want_b, int n) {
    kn_scope_push();
    double *gb = NULL, *ga = grads_of(f, av, bv, n, &gb);
    for (int i = 0; ga && gb && i < n; i++) {
        bool ok = (ga[i] == want_a[i] || (isnan(ga[i]) && isnan(want_a[i]))) &&
                  (!want_b || gb[i] == want_b[i] || (isnan(gb[i]) && isnan(want_b[i])));
        CHECK_MSG(ok, "%s element %d: gradients %g, %g; want %g, %g", what, i, ga[i], gb[i], want_a[i],
                  want_b ? want_b[i] : 0.0);
    }
    free(ga);
    free(gb);
    kn_scope_pop();
}

static void test_kinks_and_ties(void) {
    const double zero3[] = {0, 0, 0};
    check_grads("relu at 0", relu_of_first, (double[]){0, -1, 2}, zero3, (double[]){0, 0, 1}, NULL, 3);
    check_grads("abs at 0", abs_of_first, (double[]){0, -1, 2}, zero3, (double[]){0, -1, 1}, NULL, 3);
    check_grads("leaky_relu at 0", leaky_of_first, (double[]){0, -1, 2}, zero3, (double[]){0.25, 0.25, 1}, NULL, 3);
    /* x = torch.tensor([-1., 1., 0.5], requires_grad=True); torch.clamp(x, -1., 1.).sum().backward():
     * x.grad is [0, 0, 1] (PyTorch 2.15 passes no gradient at a bound) */
    check_grads("clamp at its bounds", clamp_of_first, (double[]){-1, 1, 0.5}, zero3, (double[]){0, 0, 1}, NULL, 3);
    check_grads("maximum ties", kn_maximum, (double[]){1, 2, 3, NAN}, (double[]){1, 0, 5, 1}, (double[]){0.5, 1, 0, 1},
                (double[]){0.5, 0, 1, 1}, 4);
    check_grads("minimum ties", kn_minimum, (double[]){1, 2, 3, NAN}, (double[]){1, 0, 5, 1}, (double[]){0.5, 0, 1, 1},
                (double[]){0.5, 1, 0, 1}, 4);
    /* d/dy x^y = x^y log x: 0 at x = 0 for y >= 0; NaN for x < 0. d/dx = 0 for y = 0. The
     * NaN is the point, and debug mode refuses NaN from finite inputs. */
    kn_mode saved = debug_checks_off();
    check_grads("pow at base 0", kn_pow, (double[]){0, 0, -2, 2}, (double[]){2, 0, 2, 0}, (double[]){0, 0, -4, 0},
                (double[]){0, 0, NAN, log(2)}, 4);
    debug_checks_restore(saved);
}

/* Comparisons, logical and bit ops: their outputs never require grad. */
static void test_non_differentiable_outputs(void) {
    kn_scope_push();
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(3), KN_F32, -2, 2), true);
    kn_tensor *outs[] = {kn_sign(x), kn_floor(x), kn_ceil(x), kn_round(x), kn_trunc(x), kn_isnan(x), kn_isinf(x),
                         kn_isfinite(x), kn_logical_not(x), kn_eq(x, x), kn_lt(x, x), kn_logical_and(x, x),
                         kn_floor_divide(x, x)};
    for (size_t i = 0; i < sizeof outs / sizeof outs[0]; i++)
        CHECK_MSG(outs[i] && !kn_needs_grad(outs[i]), "output %zu requires grad", i);
    kn_scope_pop();
}

/* ---- the backward ops ------------------------------------------------------------------------- */

static double sigm(double x) { return 1 / (1 + exp(-x)); }
static double pdf(double x) { return exp(-x * x / 2) / sqrt(2 * 3.14159265358979323846); }

static double d_relu(double g, double y, double z) { return y > 0 ? g : 0; }
static double d_leaky(double g, double y, double z) { return y > 0 ? g : 0.2 * g; }
static double d_clamp(double g, double y, double z) { return y > -0.5 && y < 0.7 ? g : 0; }
static double d_softplus(double g, double y, double z) { return 2 * y > 3 ? g : g * sigm(2 * y); }
static double d_sigmoid(double g, double y, double z) { return g * y * (1 - y); }
static double d_tanh(double g, double y, double z) { return g * (1 - y * y); }
static double d_gelu(double g, double y, double z) { return g * (0.5 * (1 + erf(y / sqrt(2))) + y * pdf(y)); }
static double d_gelu_tanh(double g, double y, double z) {
    double k = sqrt(2 / 3.14159265358979323846), t = tanh(k * (y + 0.044715 * y * y * y));
    return g * (0.5 * (1 + t) + 0.5 * y * (1 - t * t) * k * (1 + 3 * 0.044715 * y * y));
}
static double d_silu(double g, double y, double z) { return g * (sigm(y) + y * sigm(y) * (1 - sigm(y))); }
static double d_erf(double g, double y, double z) { return g * 2 / sqrt(3.14159265358979323846) * exp(-y * y); }
static double d_pow(double g, double y, double z) { return z == 0 ? 0 : g * z * pow(y, z - 1); }
static double d_pow_exp(double g, double y, double z) { return y == 0 && z >= 0 ? 0 : g * pow(y, z) * log(y); }
static double d_max(double g, double y, double z) { return y == z ? g / 2 : y > z ? g : 0; }
static double d_min(double g, double y, double z) { return y == z ? g / 2 : y < z ? g : 0; }

static kn_tensor *b_leaky(kn_tensor *g, kn_tensor *y, kn_tensor *z) { return kn_leaky_relu_backward(g, y, 0.2); }
static kn_tensor *b_clamp(kn_tensor *g, kn_tensor *y, kn_tensor *z) { return kn_clamp_backward(g, y, -0.5, 0.7); }
static kn_tensor *b_softplus(kn_tensor *g, kn_tensor *y, kn_tensor *z) { return kn_softplus_backward(g, y, 2, 3); }
#define B2(name) \
    static kn_tensor *b_##name(kn_tensor *g, kn_tensor *y, kn_tensor *z) { return kn_##name##_backward(g, y); }
#define B3(name) \
    static kn_tensor *b_##name(kn_tensor *g, kn_tensor *y, kn_tensor *z) { return kn_##name##_backward(g, y, z); }
B2(relu)
B2(sigmoid)
B2(tanh)
B2(gelu)
B2(gelu_tanh)
B2(silu)
B2(erf)
B3(pow)
static kn_tensor *b_pow_exponent(kn_tensor *g, kn_tensor *y, kn_tensor *z) { return kn_pow_backward_exponent(g, y, z); }
B3(maximum)
B3(minimum)

typedef struct backward_case {
    const char *name;
    kn_tensor *(*op)(kn_tensor *, kn_tensor *, kn_tensor *);
    double (*ref)(double, double, double);
    double lo, hi, zlo, zhi; /* y's range and z's (ternary ops); `ties` rounds y and z */
    bool ternary, ties;
} backward_case;

static const backward_case BACKWARD[] = {
    {"relu_backward", b_relu, d_relu, -2, 2, 0, 0, false, false},
    {"leaky_relu_backward", b_leaky, d_leaky, -2, 2, 0, 0, false, false},
    {"clamp_backward", b_clamp, d_clamp, -1, 1, 0, 0, false, false},
    {"softplus_backward", b_softplus, d_softplus, -3, 3, 0, 0, false, false},
    {"sigmoid_backward", b_sigmoid, d_sigmoid, 0, 1, 0, 0, false, false},
    {"tanh_backward", b_tanh, d_tanh, -1, 1, 0, 0, false, false},
    {"gelu_backward", b_gelu, d_gelu, -4, 4, 0, 0, false, false},
    {"gelu_tanh_backward", b_gelu_tanh, d_gelu_tanh, -4, 4, 0, 0, false, false},
    {"silu_backward", b_silu, d_silu, -6, 6, 0, 0, false, false},
    {"erf_backward", b_erf, d_erf, -3, 3, 0, 0, false, false},
    {"pow_backward", b_pow, d_pow, 0.5, 2, -2, 2, true, false},
    {"pow_backward_exponent", b_pow_exponent, d_pow_exp, 0.25, 2, -2, 2, true, false},
    {"maximum_backward", b_maximum, d_max, -1.5, 1.5, -1.5, 1.5, true, true},
    {"minimum_backward", b_minimum, d_min, -1.5, 1.5, -1.5, 1.5, true, true},
};

/* The op on g [5, 37] and y, z of that shape (transposed copies) or y broadcast from [37]. */
static void check_backward_op(const backward_case *b, kn_dtype d, bool broadcast) {
    kn_scope_push();
    kn_shape ys = broadcast ? KN_SHAPE(37) : KN_SHAPE(5, 37);
    kn_tensor *g = rand_tensor(KN_SHAPE(5, 37), d, -2, 2);
    kn_tensor *y = rand_tensor(ys, d, b->lo, b->hi), *z = b->ternary ? rand_tensor(ys, d, b->zlo, b->zhi) : NULL;
    if (b->ties) y = kn_round(y), z = kn_round(z);
    if (!broadcast) y = non_contiguous_copy(y), z = z ? non_contiguous_copy(z) : NULL;
    double *gv = read_f64(g), *yv = read_f64(y), *zv = z ? read_f64(z) : NULL, want[5 * 37];
    for (int i = 0; i < 5 * 37; i++) {
        int j = broadcast ? i % 37 : i;
        want[i] = b->ref(gv[i], yv[j], zv ? zv[j] : 0);
    }
    kn_tensor *out = b->op(g, y, z);
    char what[96];
    snprintf(what, sizeof what, "%s %s%s", b->name, kn_dtype_name(d), broadcast ? " broadcast" : "");
    CHECK_MSG(out && kn_dtype_of(out) == d, "%s: output dtype", what);
    CHECK_CLOSE(out, want, tol_for(d), what);
    free(gv);
    free(yv);
    free(zv);
    kn_scope_pop();
}

static void test_backward_ops(void) {
    for (size_t k = 0; k < sizeof BACKWARD / sizeof BACKWARD[0]; k++) {
        for (int j = 0; j < 4; j++) check_backward_op(&BACKWARD[k], FLOAT_DTYPES[j], false);
        check_backward_op(&BACKWARD[k], KN_F64, true);
    }
}

/* ---- the table ---------------------------------------------------------------------------------- */

/* Every op of the family is in grad.def: a formula, or marked as carrying no gradient. */
static void test_family_listed_in_grad_table(void) {
    static const struct {
        kn_op_id op;
        const char *name;
    } family[] = {
#define KN_OP(name, ...) {KN_OP_##name, #name},
#define KN_UNARY(name, ...) {KN_OP_##name, #name},
#define KN_BINARY KN_UNARY
#define KN_TERNARY KN_UNARY
#include "ops/defs/creation.def"
#include "ops/defs/unary.def"
#include "ops/defs/binary.def"
#include "ops/defs/elementwise_backward.def"
#include "ops/defs/scalar.def"
#undef KN_OP
#undef KN_UNARY
#undef KN_BINARY
#undef KN_TERNARY
    };
    for (size_t i = 0; i < sizeof family / sizeof family[0]; i++) {
        const kn_grad_def *g = &kn_grad_table[family[i].op];
        CHECK_MSG(g->fn || g->nondiff, "%s is not in grad.def", family[i].name);
    }
}

int main(void) {
    RUN(test_unary_ops);
    RUN(test_binary_ops);
    RUN(test_binary_with_integer_operand);
    RUN(test_ternary_ops);
    RUN(test_casts);
    RUN(test_kinks_and_ties);
    RUN(test_non_differentiable_outputs);
    RUN(test_backward_ops);
    RUN(test_family_listed_in_grad_table);
    return test_summary();
}
