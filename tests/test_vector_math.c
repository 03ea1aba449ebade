/* The vectorizable float math of ops/vector_math.h against libm's double functions: max ulp
 * error over dense sweeps, random bit patterns over all floats and special values, both as
 * compiled here and through the library's f32 kernels (built with the library's flags). */
#include <float.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ops/vector_math.h"

typedef struct vm_case {
    const char *name;
    float (*fn)(float);
    double (*ref)(double);
    kn_tensor *(*op)(kn_tensor *);
    double bound; /* ulp, documented in docs/vector-math.md */
} vm_case;

static double ref_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }

static const vm_case CASES[] = {
    {"exp", kn_expf, exp, kn_exp, 1.0},
    {"expm1", kn_expm1f, expm1, kn_expm1, 2.0},
    {"log", kn_logf, log, kn_log, 1.0},
    {"log1p", kn_log1pf, log1p, kn_log1p, 2.0},
    {"log2", kn_log2f, log2, kn_log2, 1.0},
    {"sin", kn_sinf, sin, kn_sin, 1.0},
    {"cos", kn_cosf, cos, kn_cos, 1.0},
    {"tanh", kn_tanhf, tanh, kn_tanh, 2.0},
    {"erf", kn_erff, erf, kn_erf, 2.0},
    {"sigmoid", kn_sigmoidf, ref_sigmoid, kn_sigmoid, 2.0},
};
#define N_CASES ((int)(sizeof CASES / sizeof CASES[0]))

/* The spacing of floats at the correctly rounded value of w (Inf counts as 2^128). */
static double ulp_at(double w) {
    double a = fabs(w);
    if (a < 0x1p-126) return 0x1p-149;
    if (a >= 0x1p128) return 0x1p104;
    int e;
    frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
    double u = ldexp(1.0, e - 24);
    if ((float)a == ldexp(1.0, e)) u *= 2; /* rounds up to the next binade */
    return u;
}

/* Error of got in ulps of the correctly rounded want; HUGE_VAL for NaN mismatches. */
static double ulp_error(float got, double want) {
    if (isnan(want) || isnan(got)) return isnan(want) && isnan(got) ? 0 : HUGE_VAL;
    double g = isinf(got) ? copysign(0x1p128, got) : got;
    double w = want;
    if (fabs(w) >= 0x1p128 || (float)w == copysignf(INFINITY, (float)w)) w = copysign(0x1p128, w);
    if (g == w) return 0;
    if ((g < 0) != (w < 0) && g != 0 && w != 0) return HUGE_VAL; /* wrong sign */
    return fabs(g - w) / ulp_at(w);
}

/* The inputs: dense sweeps of the ranges that matter, random bit patterns, special values. */
static float *make_inputs(int64_t *count) {
    const int64_t dense = 1 << 21, random_bits = 1 << 22;
    static const struct { float lo, hi; } ranges[] = {
        {-1.0f, 1.0f}, {-10.0f, 10.0f}, {-110.0f, 110.0f}, {-1e-6f, 1e-6f}, {0.0f, 4.0f},
        {-1e5f, 1e5f}, {0.5f, 2.0f}, {-1.0f, -0.25f}, {-5e8f, 5e8f},
    };
    const int nr = (int)(sizeof ranges / sizeof ranges[0]);
    static const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, -NAN, 1.0f, -1.0f,
                                     FLT_MIN, -FLT_MIN, FLT_MAX, -FLT_MAX, 0x1p-149f, -0x1p-149f,
                                     88.72283935546875f, 88.7228317f, 89.0f, -87.33654f, -103.9f,
                                     -104.0f, 0x1p-126f * 0.75f, 3.14159274f, 1.57079637f,
                                     421657428.0f, 421657440.0f, 1e38f, -1e38f, 0x1p-25f, -0x1p-25f,
                                     -0.999999940f, 0x1p24f, 0x1p25f, 0.6f, 0.59999996f, 4.0f};
    const int ns = (int)(sizeof specials / sizeof specials[0]);
    int64_t n = (int64_t)nr * dense + random_bits + ns;
    float *x = malloc(sizeof(float) * (size_t)n);
    int64_t k = 0;
    for (int r = 0; r < nr; r++)
        for (int64_t i = 0; i < dense; i++)
            x[k++] = ranges[r].lo + (ranges[r].hi - ranges[r].lo) * ((float)i / (float)dense);
    double *u = malloc(sizeof(double) * random_bits);
    rand_fill(u, random_bits, 0, 4294967296.0);
    for (int64_t i = 0; i < random_bits; i++) {
        uint32_t b = (uint32_t)u[i];
        memcpy(&x[k++], &b, 4);
    }
    free(u);
    for (int i = 0; i < ns; i++) x[k++] = specials[i];
    *count = k;
    return x;
}

static float *inputs;
static int64_t n_inputs;

/* Max error of got[] for CASES[c]; reports the worst input. */
static void check_results(const vm_case *c, const float *got, const char *path) {
    double worst = 0;
    float worst_x = 0, worst_got = 0;
    for (int64_t i = 0; i < n_inputs; i++) {
        double e = ulp_error(got[i], c->ref((double)inputs[i]));
        if (e > worst) worst = e, worst_x = inputs[i], worst_got = got[i];
    }
    printf("  %-8s %-7s max error %.3f ulp (at x = %a: got %a, want %a)\n", c->name, path, worst,
           (double)worst_x, (double)worst_got, c->ref((double)worst_x));
    CHECK_MSG(worst <= c->bound, "%s (%s): %.3f ulp at x = %a (got %a, want %.17g); bound %.1f", c->name, path,
              worst, (double)worst_x, (double)worst_got, c->ref((double)worst_x), c->bound);
}

static void test_header_functions_within_bounds(void) {
    float *got = malloc(sizeof(float) * (size_t)n_inputs);
    for (int c = 0; c < N_CASES; c++) {
        for (int64_t i = 0; i < n_inputs; i++) got[i] = CASES[c].fn(inputs[i]);
        check_results(&CASES[c], got, "header");
    }
    free(got);
}

static void test_library_kernels_within_bounds(void) {
    kn_tensor *x = kn_from_host(inputs, KN_F32, KN_SHAPE(n_inputs), KN_CPU);
    float *got = malloc(sizeof(float) * (size_t)n_inputs);
    for (int c = 0; c < N_CASES; c++) {
        kn_tensor *y = CASES[c].op(x);
        CHECK(y && kn_to_host(y, got, sizeof(float) * (size_t)n_inputs) == KN_OK);
        check_results(&CASES[c], got, "kernel");
        kn_release(y);
    }
    kn_release(x);
    free(got);
}

/* Exact special values the brief of each function promises. */
static void test_special_values(void) {
    CHECK(kn_expf(89.0f) == INFINITY && kn_expf(INFINITY) == INFINITY && kn_expf(-INFINITY) == 0.0f);
    CHECK(kn_expf(-104.0f) == 0.0f && kn_expf(-100.0f) > 0.0f && kn_expf(-100.0f) < FLT_MIN);
    CHECK(kn_expf(0.0f) == 1.0f && isnan(kn_expf(NAN)));
    CHECK(kn_expm1f(-INFINITY) == -1.0f && kn_expm1f(INFINITY) == INFINITY && signbit(kn_expm1f(-0.0f)));
    CHECK(isnan(kn_logf(-1.0f)) && kn_logf(0.0f) == -INFINITY && kn_logf(-0.0f) == -INFINITY);
    CHECK(kn_logf(INFINITY) == INFINITY && isnan(kn_logf(NAN)) && kn_logf(1.0f) == 0.0f);
    CHECK(isnan(kn_log2f(-INFINITY)) && kn_log2f(0x1p-149f) == -149.0f && kn_log2f(0x1p100f) == 100.0f);
    CHECK(isnan(kn_log1pf(-2.0f)) && kn_log1pf(-1.0f) == -INFINITY && signbit(kn_log1pf(-0.0f)));
    CHECK(kn_log1pf(INFINITY) == INFINITY && kn_log1pf(0x1p-30f) == 0x1p-30f);
    CHECK(isnan(kn_sinf(INFINITY)) && isnan(kn_cosf(-INFINITY)) && isnan(kn_sinf(NAN)));
    CHECK(signbit(kn_sinf(-0.0f)) && kn_cosf(0.0f) == 1.0f);
    CHECK(kn_tanhf(20.0f) == 1.0f && kn_tanhf(-INFINITY) == -1.0f && signbit(kn_tanhf(-0.0f)));
    CHECK(kn_erff(INFINITY) == 1.0f && kn_erff(-10.0f) == -1.0f && signbit(kn_erff(-0.0f)));
    CHECK(isnan(kn_tanhf(NAN)) && isnan(kn_erff(NAN)) && isnan(kn_sigmoidf(NAN)));
    CHECK(kn_sigmoidf(INFINITY) == 1.0f && kn_sigmoidf(-INFINITY) == 0.0f && kn_sigmoidf(-FLT_MAX) == 0.0f);
    CHECK(kn_sigmoidf(-100.0f) > 0.0f); /* subnormal, not flushed */
}

int main(void) {
    inputs = make_inputs(&n_inputs);
    printf("# %lld inputs per function\n", (long long)n_inputs);
    RUN(test_special_values);
    RUN(test_header_functions_within_bounds);
    RUN(test_library_kernels_within_bounds);
    free(inputs);
    return test_summary();
}
