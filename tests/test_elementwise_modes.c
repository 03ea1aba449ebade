/* Strict and debug modes compute bit-identical elementwise results, and debug mode reports
 * NaN/Inf that an op makes from finite inputs (naming the op) but not NaN it propagates. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* A chain of elementwise ops over x, read back as raw f32 bytes. */
static float *chain(kn_tensor *x, int64_t n) {
    kn_scope_push();
    kn_tensor *a = kn_gelu(kn_mul_scalar(x, 1.5));
    kn_tensor *b = kn_add(kn_tanh(a), kn_sigmoid(kn_neg(x)));
    kn_tensor *c = kn_div(kn_exp(kn_sin(b)), kn_add_scalar(kn_abs(x), 1));
    kn_tensor *d = kn_where(kn_gt(c, kn_scalar(1, KN_F32)), kn_log1p(c), kn_erf(c));
    kn_tensor *h = kn_cast(kn_cast(kn_silu(d), KN_BF16), KN_F32);
    kn_tensor *e = kn_lerp_scalar(kn_maximum(h, kn_cos(x)), kn_expm1(kn_clamp(x, -1, 1)), 0.25);
    kn_tensor *out = kn_add(e, kn_uniform(kn_shape_of(x), -1, 1, KN_F32));
    float *buf = malloc(sizeof(float) * (size_t)n);
    if (!out || kn_to_host(out, buf, sizeof(float) * (size_t)n) != KN_OK) {
        free(buf);
        buf = NULL;
    }
    kn_scope_pop();
    return buf;
}

static void test_strict_and_debug_bit_identical(void) {
    int64_t n = 37 * 129;
    kn_tensor *x = rand_tensor(KN_SHAPE(37, 129), KN_F32, -4, 4);
    kn_tensor *xt = non_contiguous_copy(x);
    kn_manual_seed(42);
    float *strict = chain(x, n), *strict_t = chain(xt, n);
    kn_set_mode(KN_MODE_DEBUG);
    kn_manual_seed(42);
    float *debug = chain(x, n), *debug_t = chain(xt, n);
    kn_set_mode(KN_MODE_STRICT);
    CHECK(strict && debug && memcmp(strict, debug, sizeof(float) * (size_t)n) == 0);
    CHECK(strict_t && debug_t && memcmp(strict_t, debug_t, sizeof(float) * (size_t)n) == 0);
    free(strict), free(debug), free(strict_t), free(debug_t);
}

static void test_debug_reports_new_nonfinite_values(void) {
    kn_set_mode(KN_MODE_DEBUG);
    kn_tensor *neg = tensor_from((double[]){2, -1, 3}, KN_SHAPE(3), KN_F32);
    CHECK_ERROR(kn_log(neg) != NULL, KN_ERR_NUMERIC, "log");
    CHECK_ERROR(kn_sqrt(neg) != NULL, KN_ERR_NUMERIC, "sqrt");
    CHECK_ERROR(kn_exp(kn_full(KN_SHAPE(2), 100, KN_F32)) != NULL, KN_ERR_NUMERIC, "exp");
    CHECK_ERROR(kn_div(neg, kn_zeros(KN_SHAPE(3), KN_F32)) != NULL, KN_ERR_NUMERIC, "div");
    /* An integer division by zero is an error at the op itself in debug mode. */
    kn_tensor *i = kn_full(KN_SHAPE(2), 3, KN_I32);
    CHECK_ERROR(kn_remainder(i, kn_zeros(KN_SHAPE(2), KN_I32)) != NULL, KN_ERR_ARG, "remainder");
    /* NaN and Inf that come in are propagated without a report. */
    kn_tensor *nan_in = tensor_from((double[]){NAN, 1, INFINITY}, KN_SHAPE(3), KN_F32);
    kn_tensor *e = kn_exp(nan_in);
    CHECK(e != NULL);
    CHECK_CLOSE(e, ((double[]){NAN, exp(1.0), INFINITY}), tol_for(KN_F32), "exp of NaN, 1, Inf");
    CHECK(kn_log(kn_add(nan_in, kn_ones(KN_SHAPE(3), KN_F32))) != NULL);
    CHECK(kn_sigmoid(kn_full(KN_SHAPE(2), -1e30, KN_F32)) != NULL); /* finite: 0, never NaN */
    CHECK(kn_tanh(kn_full(KN_SHAPE(2), 1e30, KN_F32)) != NULL);
    kn_set_mode(KN_MODE_STRICT);
    CHECK(kn_log(neg) != NULL); /* strict mode computes NaN silently */
}

int main(void) {
    RUN(test_strict_and_debug_bit_identical);
    RUN(test_debug_reports_new_nonfinite_values);
    return test_summary();
}
