/* bf16 autocast (kiln/autocast.h): which ops compute in bf16 and which in f32 (their output
 * dtypes), that an op under autocast records exactly the casts written out by hand would, the
 * gradients of f32 leaves arriving in f32 and matching a float64 run within bf16's tolerance,
 * autocast off (popped, or pushed as f32) giving the old dtypes back, and the push/pop errors.
 * Runs in every eager mode (KILN_MODE_SUITES). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static kn_tensor *leaf(kn_shape shape, double scale) {
    return kn_requires_grad(rand_tensor(shape, KN_F32, -scale, scale), true);
}

static kn_conv_opts conv_opts(void) {
    return (kn_conv_opts){.stride = {1, 1}, .padding = {1, 1}, .dilation = {1, 1}, .groups = 1};
}

#define CHECK_DTYPE(t, want)                                                                              \
    CHECK_MSG((t) && kn_dtype_of(t) == (want), "%s: %s, want %s", #t, (t) ? kn_dtype_name(kn_dtype_of(t)) : "NULL", \
              kn_dtype_name(want))

/* The ops PyTorch's autocast lists for bf16 produce bf16 from f32 inputs; f64 is never cast. */
static void test_products_compute_in_the_autocast_dtype(void) {
    kn_scope_push();
    kn_tensor *a = rand_tensor(KN_SHAPE(4, 8), KN_F32, -1, 1), *b = rand_tensor(KN_SHAPE(8, 5), KN_F32, -1, 1);
    kn_tensor *w = rand_tensor(KN_SHAPE(5, 8), KN_F32, -1, 1), *bias = rand_tensor(KN_SHAPE(5), KN_F32, -1, 1);
    kn_tensor *a3 = rand_tensor(KN_SHAPE(2, 4, 8), KN_F32, -1, 1), *b3 = rand_tensor(KN_SHAPE(2, 8, 3), KN_F32, -1, 1);
    kn_tensor *img = rand_tensor(KN_SHAPE(1, 3, 5, 5), KN_F32, -1, 1);
    kn_tensor *cw = rand_tensor(KN_SHAPE(4, 3, 3, 3), KN_F32, -1, 1), *cb = rand_tensor(KN_SHAPE(4), KN_F32, -1, 1);
    kn_tensor *tw = rand_tensor(KN_SHAPE(3, 2, 3, 3), KN_F32, -1, 1);
    kn_tensor *q = rand_tensor(KN_SHAPE(1, 2, 5, 8), KN_F32, -1, 1);
    kn_tensor *a64 = rand_tensor(KN_SHAPE(4, 8), KN_F64, -1, 1), *b64 = rand_tensor(KN_SHAPE(8, 5), KN_F64, -1, 1);
    CHECK(kn_autocast_push(KN_BF16) == KN_OK);
    CHECK(kn_autocast_dtype() == KN_BF16);
    kn_tensor *mm = kn_matmul(a, b), *bmm = kn_bmm(a3, b3), *lin = kn_linear(a, w, bias), *lin_nb = kn_linear(a, w, NULL);
    kn_tensor *addmm = kn_addmm(bias, a, b, 1, 1);
    kn_tensor *conv = kn_conv2d(img, cw, cb, conv_opts());
    kn_tensor *convt = kn_conv_transpose2d(img, tw, NULL, conv_opts());
    kn_tensor *attn = kn_scaled_dot_product_attention(q, q, q, NULL, (kn_sdpa_opts){.causal = true});
    kn_tensor *mm64 = kn_matmul(a64, b64);
    kn_tensor *mixed = kn_matmul(kn_cast(a, KN_F16), b); /* f16 is cast to the autocast dtype too */
    CHECK(kn_autocast_pop() == KN_OK);
    CHECK_DTYPE(mm, KN_BF16);
    CHECK_DTYPE(bmm, KN_BF16);
    CHECK_DTYPE(lin, KN_BF16);
    CHECK_DTYPE(lin_nb, KN_BF16);
    CHECK_DTYPE(addmm, KN_BF16);
    CHECK_DTYPE(conv, KN_BF16);
    CHECK_DTYPE(convt, KN_BF16);
    CHECK_DTYPE(attn, KN_BF16);
    CHECK_DTYPE(mm64, KN_F64);
    CHECK_DTYPE(mixed, KN_BF16);
    /* The values are the products of the bf16-rounded operands, also where an operand is a
     * transposed or permuted view (cast in its storage order and permuted back). */
    kn_tensor *bt = rand_tensor(KN_SHAPE(5, 8), KN_F32, -1, 1), *b3t = rand_tensor(KN_SHAPE(3, 2, 8), KN_F32, -1, 1);
    kn_tensor *b3p = kn_permute(b3t, KN_SHAPE(1, 2, 0));
    CHECK(kn_autocast_push(KN_BF16) == KN_OK);
    kn_tensor *got_t = kn_matmul(a, kn_transpose(bt, 0, 1)), *got_p = kn_bmm(a3, b3p);
    CHECK(kn_autocast_pop() == KN_OK);
    kn_tensor *got[] = {mm, got_t, got_p};
    kn_tensor *want[] = {kn_matmul(kn_cast(a, KN_BF16), kn_cast(b, KN_BF16)),
                         kn_matmul(kn_cast(a, KN_BF16), kn_transpose(kn_cast(bt, KN_BF16), 0, 1)),
                         kn_bmm(kn_cast(a3, KN_BF16), kn_permute(kn_cast(b3t, KN_BF16), KN_SHAPE(1, 2, 0)))};
    for (int k = 0; k < 3; k++) {
        CHECK_DTYPE(got[k], KN_BF16);
        double *g = read_f64(got[k]), *r = read_f64(want[k]);
        CHECK(g && r);
        for (int64_t i = 0; g && r && i < kn_numel(want[k]); i++)
            CHECK_MSG(g[i] == r[i], "product %d [%lld]: %g, want %g", k, (long long)i, g[i], r[i]);
        free(g);
        free(r);
    }
    /* f16 autocast, the same way */
    CHECK(kn_autocast_push(KN_F16) == KN_OK);
    kn_tensor *mm16 = kn_matmul(a, b);
    CHECK(kn_autocast_pop() == KN_OK);
    CHECK_DTYPE(mm16, KN_F16);
    kn_scope_pop();
}

/* The ops PyTorch keeps in f32 take bf16 inputs up to f32; the others compute in their widest
 * input dtype, as without autocast. */
static void test_precision_ops_compute_in_f32(void) {
    kn_scope_push();
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 6), KN_BF16, 0.5, 2), *y = rand_tensor(KN_SHAPE(4, 6), KN_BF16, 0.5, 2);
    kn_tensor *x32 = rand_tensor(KN_SHAPE(4, 6), KN_F32, 0.5, 2);
    kn_tensor *img = rand_tensor(KN_SHAPE(2, 4, 3, 3), KN_BF16, -1, 1);
    kn_tensor *rm = kn_zeros(KN_SHAPE(4), KN_F32), *rv = kn_ones(KN_SHAPE(4), KN_F32);
    double tv[4] = {0, 5, 2, 1};
    kn_tensor *target = tensor_from(tv, KN_SHAPE(4), KN_I64);
    CHECK(kn_autocast_push(KN_BF16) == KN_OK);
    kn_tensor *f32_ops[] = {
        kn_softmax(x, 1), kn_log_softmax(x, 1), kn_layer_norm(x, KN_SHAPE(6), NULL, NULL, 1e-5),
        kn_rms_norm(x, KN_SHAPE(6), NULL, 1e-5), kn_group_norm(img, 2, NULL, NULL, 1e-5),
        kn_batch_norm(img, rm, rv, NULL, NULL, true, 0.1, 1e-5),
        kn_sum(x, KN_ALL_DIMS, false), kn_mean(x, KN_DIMS(1), false), kn_prod(x, KN_DIMS(0), false),
        kn_var(x, KN_ALL_DIMS, 1, false), kn_norm(x, 2, KN_ALL_DIMS, false), kn_logsumexp(x, KN_DIMS(1), false),
        kn_cumsum(x, 1), kn_exp(x), kn_log(x), kn_pow(x, y), kn_pow_scalar(x, 1.7), kn_rsqrt(x), kn_reciprocal(x),
        kn_cross_entropy(x, target, KN_CE_OPTS_DEFAULT), kn_mse_loss(x, y, KN_REDUCTION_MEAN),
        kn_l1_loss(x, y, KN_REDUCTION_SUM),
    };
    kn_tensor *same[] = {kn_add(x, y), kn_mul(x, y), kn_gelu(x), kn_relu(x), kn_transpose(x, 0, 1)};
    kn_tensor *widest = kn_add(x, x32);
    CHECK(kn_autocast_pop() == KN_OK);
    for (size_t i = 0; i < sizeof f32_ops / sizeof *f32_ops; i++)
        CHECK_MSG(f32_ops[i] && kn_dtype_of(f32_ops[i]) == KN_F32, "f32 op %zu: %s", i,
                  f32_ops[i] ? kn_dtype_name(kn_dtype_of(f32_ops[i])) : kn_last_error());
    for (size_t i = 0; i < sizeof same / sizeof *same; i++)
        CHECK_MSG(same[i] && kn_dtype_of(same[i]) == KN_BF16, "op %zu: %s", i,
                  same[i] ? kn_dtype_name(kn_dtype_of(same[i])) : kn_last_error());
    CHECK_DTYPE(widest, KN_F32);
    /* batch_norm updated the caller's running stats (they were not swapped for casts) */
    double *mean = read_f64(rm);
    CHECK(mean && (mean[0] != 0 || mean[1] != 0 || mean[2] != 0 || mean[3] != 0));
    free(mean);
    kn_scope_pop();
}

/* Popped, or pushed off (f32) inside an autocast region, the ops give their old dtypes back. */
static void test_autocast_off_restores_behaviour(void) {
    kn_scope_push();
    kn_tensor *a = rand_tensor(KN_SHAPE(3, 4), KN_F32, -1, 1), *h = rand_tensor(KN_SHAPE(3, 4), KN_BF16, -1, 1);
    kn_tensor *before = kn_matmul(a, kn_transpose(a, 0, 1)), *sm_before = kn_softmax(h, 1);
    CHECK(kn_autocast_push(KN_BF16) == KN_OK);
    CHECK(kn_autocast_push(KN_F32) == KN_OK);
    CHECK(kn_autocast_dtype() == KN_F32);
    kn_tensor *inner = kn_matmul(a, kn_transpose(a, 0, 1)), *sm_inner = kn_softmax(h, 1);
    CHECK(kn_autocast_pop() == KN_OK);
    kn_tensor *outer = kn_matmul(a, kn_transpose(a, 0, 1));
    CHECK(kn_autocast_pop() == KN_OK);
    kn_tensor *after = kn_matmul(a, kn_transpose(a, 0, 1)), *sm_after = kn_softmax(h, 1);
    CHECK(kn_autocast_dtype() == KN_F32);
    CHECK_DTYPE(before, KN_F32);
    CHECK_DTYPE(inner, KN_F32);
    CHECK_DTYPE(outer, KN_BF16);
    CHECK_DTYPE(after, KN_F32);
    CHECK_DTYPE(sm_before, KN_BF16);
    CHECK_DTYPE(sm_inner, KN_BF16);
    CHECK_DTYPE(sm_after, KN_BF16);
    kn_scope_pop();
}

/* A pop without a push, a dtype autocast does not take, and nesting too deep are errors that
 * change nothing. */
static void test_nesting_and_pop_errors(void) {
    CHECK_ERROR(kn_autocast_pop() == KN_OK, KN_ERR_ARG, "no kn_autocast_push");
    CHECK(kn_autocast_dtype() == KN_F32);
    CHECK_ERROR(kn_autocast_push(KN_I32) == KN_OK, KN_ERR_DTYPE, "not bf16, f16 or f32");
    CHECK_ERROR(kn_autocast_push(KN_F64) == KN_OK, KN_ERR_DTYPE, "f64");
    CHECK(kn_autocast_dtype() == KN_F32);
    CHECK_ERROR(kn_autocast_pop() == KN_OK, KN_ERR_ARG, "no kn_autocast_push"); /* the refused pushes pushed nothing */
    int pushed = 0;
    while (pushed < 1000 && kn_autocast_push(pushed % 2 ? KN_F32 : KN_BF16) == KN_OK) pushed++;
    CHECK_MSG(pushed == 64, "%d pushes nested", pushed);
    CHECK(kn_last_status() == KN_ERR_ARG && strstr(kn_last_error(), "deeper than 64"));
    CHECK(kn_autocast_dtype() == KN_F32); /* the 64th push (f32) is the current one */
    for (int i = pushed - 1; i >= 0; i--) {
        CHECK(kn_autocast_dtype() == (i % 2 ? KN_F32 : KN_BF16));
        CHECK(kn_autocast_pop() == KN_OK);
    }
    CHECK(kn_autocast_dtype() == KN_F32);
    CHECK_ERROR(kn_autocast_pop() == KN_OK, KN_ERR_ARG, "no kn_autocast_push");
}

/* Ops recorded by f under autocast minus those of g without it (the casts written out). */
static int64_t ops_of(kn_tensor *(*f)(kn_tensor *const *), kn_tensor *const *in, bool autocast) {
    kn_stats s0, s1;
    kn_sync();
    kn_stats_get(&s0);
    if (autocast) kn_autocast_push(KN_BF16);
    kn_tensor *out = f(in);
    if (autocast) kn_autocast_pop();
    CHECK(out != NULL);
    kn_sync();
    kn_stats_get(&s1);
    return s1.ops_recorded - s0.ops_recorded;
}
static kn_tensor *bf(kn_tensor *t) { return kn_cast(t, KN_BF16); }
static kn_tensor *linear_auto(kn_tensor *const *in) { return kn_linear(in[0], in[1], in[2]); }
static kn_tensor *linear_hand(kn_tensor *const *in) { return kn_linear(bf(in[0]), bf(in[1]), bf(in[2])); }
static kn_tensor *conv_auto(kn_tensor *const *in) { return kn_conv2d(in[3], in[4], in[5], conv_opts()); }
static kn_tensor *conv_hand(kn_tensor *const *in) { return kn_conv2d(bf(in[3]), bf(in[4]), bf(in[5]), conv_opts()); }
static kn_tensor *attn_auto(kn_tensor *const *in) {
    return kn_scaled_dot_product_attention(in[6], in[6], in[6], NULL, (kn_sdpa_opts){.causal = true});
}
static kn_tensor *attn_hand(kn_tensor *const *in) {
    kn_tensor *q = bf(in[6]);
    return kn_scaled_dot_product_attention(q, q, q, NULL, (kn_sdpa_opts){.causal = true});
}
static kn_tensor *ce_auto(kn_tensor *const *in) { return kn_cross_entropy(in[7], in[8], KN_CE_OPTS_DEFAULT); }
static kn_tensor *ce_hand(kn_tensor *const *in) {
    return kn_cross_entropy(kn_cast(in[7], KN_F32), in[8], KN_CE_OPTS_DEFAULT);
}
static kn_tensor *mse_auto(kn_tensor *const *in) { return kn_mse_loss(in[7], in[7], KN_REDUCTION_MEAN); }
static kn_tensor *mse_hand(kn_tensor *const *in) {
    kn_tensor *x = kn_cast(in[7], KN_F32);
    return kn_mse_loss(x, x, KN_REDUCTION_MEAN);
}

/* Autocast records each cast once, as a program casting by hand would: no op function casts
 * its original inputs again after the dispatcher cast them. */
static void test_an_op_records_only_the_casts_it_needs(void) {
    kn_scope_push();
    double tv[3] = {1, 0, 3};
    kn_tensor *in[] = {rand_tensor(KN_SHAPE(3, 8), KN_F32, -1, 1),       rand_tensor(KN_SHAPE(5, 8), KN_F32, -1, 1),
                       rand_tensor(KN_SHAPE(5), KN_F32, -1, 1),          rand_tensor(KN_SHAPE(1, 3, 5, 5), KN_F32, -1, 1),
                       rand_tensor(KN_SHAPE(4, 3, 3, 3), KN_F32, -1, 1), rand_tensor(KN_SHAPE(4), KN_F32, -1, 1),
                       rand_tensor(KN_SHAPE(1, 2, 5, 8), KN_F32, -1, 1), rand_tensor(KN_SHAPE(3, 4), KN_BF16, -1, 1),
                       tensor_from(tv, KN_SHAPE(3), KN_I64)};
    struct {
        const char *what;
        kn_tensor *(*autocast)(kn_tensor *const *), *(*by_hand)(kn_tensor *const *);
    } cases[] = {{"linear", linear_auto, linear_hand}, {"conv2d", conv_auto, conv_hand},
                 {"attention", attn_auto, attn_hand},  {"cross_entropy", ce_auto, ce_hand},
                 {"mse_loss", mse_auto, mse_hand}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        int64_t got = ops_of(cases[i].autocast, in, true), want = ops_of(cases[i].by_hand, in, false);
        CHECK_MSG(got == want, "%s under autocast recorded %lld ops; with the casts by hand %lld", cases[i].what,
                  (long long)got, (long long)want);
    }
    kn_scope_pop();
}

/* Runs model(params, data) under bf16 autocast on f32 leaves, and without autocast on float64
 * copies of them (autocast never casts f64: the reference), then compares each gradient: f32,
 * and within bf16's tolerance of the float64 one. */
typedef kn_tensor *(*model_fn)(kn_tensor *const *p, kn_tensor *const *data);
static void check_grads_against_f64(const char *what, model_fn model, int n_params, const kn_shape *shapes,
                                    kn_tensor *const *data32, kn_tensor *const *data64) {
    kn_scope_push();
    kn_tensor *p32[8], *p64[8];
    for (int i = 0; i < n_params; i++) {
        p32[i] = leaf(shapes[i], 0.5);
        p64[i] = kn_requires_grad(kn_detach(kn_cast(p32[i], KN_F64)), true);
    }
    CHECK(kn_autocast_push(KN_BF16) == KN_OK);
    kn_tensor *loss = model(p32, data32);
    CHECK(kn_autocast_pop() == KN_OK);
    CHECK_DTYPE(loss, KN_F32);
    CHECK(kn_backward(loss) == KN_OK);
    CHECK(kn_backward(model(p64, data64)) == KN_OK);
    tolerance tol = tol_for(KN_BF16);
    for (int i = 0; i < n_params; i++) {
        kn_tensor *g = kn_grad(p32[i]);
        CHECK_MSG(g && kn_dtype_of(g) == KN_F32, "%s: parameter %d's gradient is %s", what, i,
                  g ? kn_dtype_name(kn_dtype_of(g)) : "missing");
        double *want = read_f64(kn_grad(p64[i]));
        char name[64];
        snprintf(name, sizeof name, "%s: gradient of parameter %d", what, i);
        CHECK(want && check_close(g, want, tol, name));
        free(want);
    }
    kn_scope_pop();
}

/* An MLP's cross-entropy: x @ W1^T + b1, GELU, @ W2^T + b2. */
static kn_tensor *mlp(kn_tensor *const *p, kn_tensor *const *d) {
    kn_tensor *h = kn_gelu(kn_linear(d[0], p[0], p[1]));
    return kn_cross_entropy(kn_linear(h, p[2], p[3]), d[1], KN_CE_OPTS_DEFAULT);
}

/* conv2d, GELU, conv_transpose2d, then a mean-squared error. Smooth: a ReLU turns bf16's
 * rounding of a value near 0 into a whole term of the gradient, and batch_norm's weight and bias
 * gradients are sums that cancel to a fraction of their terms; neither is a test of autocast. */
static kn_tensor *convnet(kn_tensor *const *p, kn_tensor *const *d) {
    kn_tensor *h = kn_gelu(kn_conv2d(d[0], p[0], p[1], conv_opts()));
    return kn_mse_loss(kn_conv_transpose2d(h, p[2], NULL, conv_opts()), d[1], KN_REDUCTION_MEAN);
}

/* Attention over projected inputs, then layer_norm and the mean of its square. */
static kn_tensor *attention(kn_tensor *const *p, kn_tensor *const *d) {
    kn_tensor *q = kn_matmul(d[0], p[0]), *k = kn_matmul(d[0], p[1]), *v = kn_matmul(d[0], p[2]);
    kn_tensor *a = kn_scaled_dot_product_attention(q, k, v, NULL, (kn_sdpa_opts){.causal = true});
    kn_tensor *n = kn_layer_norm(kn_add(a, d[0]), KN_SHAPE(8), p[3], NULL, 1e-5);
    return kn_mean(kn_mul(n, n), KN_ALL_DIMS, false);
}

static void test_gradients_of_f32_leaves_arrive_f32_and_match_f64(void) {
    kn_scope_push();
    double tv[6] = {0, 4, 2, 1, 3, 4};
    kn_tensor *x = rand_tensor(KN_SHAPE(6, 16), KN_F32, -1, 1), *t = tensor_from(tv, KN_SHAPE(6), KN_I64);
    check_grads_against_f64("mlp", mlp, 4, (kn_shape[]){KN_SHAPE(12, 16), KN_SHAPE(12), KN_SHAPE(5, 12), KN_SHAPE(5)},
                            (kn_tensor *[]){x, t}, (kn_tensor *[]){kn_cast(x, KN_F64), t});
    kn_tensor *img = rand_tensor(KN_SHAPE(2, 3, 5, 5), KN_F32, -1, 1), *y = rand_tensor(KN_SHAPE(2, 2, 5, 5), KN_F32, -1, 1);
    check_grads_against_f64("convnet", convnet, 3, (kn_shape[]){KN_SHAPE(4, 3, 3, 3), KN_SHAPE(4), KN_SHAPE(4, 2, 3, 3)},
                            (kn_tensor *[]){img, y}, (kn_tensor *[]){kn_cast(img, KN_F64), kn_cast(y, KN_F64)});
    kn_tensor *seq = rand_tensor(KN_SHAPE(1, 2, 6, 8), KN_F32, -1, 1);
    check_grads_against_f64("attention", attention, 4,
                            (kn_shape[]){KN_SHAPE(8, 8), KN_SHAPE(8, 8), KN_SHAPE(8, 8), KN_SHAPE(8)}, (kn_tensor *[]){seq},
                            (kn_tensor *[]){kn_cast(seq, KN_F64)});
    kn_scope_pop();
}

/* Backward called inside an autocast region runs its formulas with autocast off: the same
 * gradients, bit for bit, as backward called after the pop. */
static void test_backward_inside_autocast_matches_backward_after_it(void) {
    kn_scope_push();
    double tv[6] = {0, 4, 2, 1, 3, 4};
    kn_tensor *d[] = {rand_tensor(KN_SHAPE(6, 16), KN_F32, -1, 1), tensor_from(tv, KN_SHAPE(6), KN_I64)};
    kn_tensor *p[] = {leaf(KN_SHAPE(12, 16), 0.5), leaf(KN_SHAPE(12), 0.5), leaf(KN_SHAPE(5, 12), 0.5), leaf(KN_SHAPE(5), 0.5)};
    double *first[4];
    for (int round = 0; round < 2; round++) {
        for (int i = 0; i < 4; i++) kn_zero_grad(p[i]);
        CHECK(kn_autocast_push(KN_BF16) == KN_OK);
        kn_tensor *loss = mlp(p, d);
        if (round == 0) CHECK(kn_backward(loss) == KN_OK);
        CHECK(kn_autocast_pop() == KN_OK);
        if (round == 1) CHECK(kn_backward(loss) == KN_OK);
        for (int i = 0; i < 4; i++) {
            double *g = read_f64(kn_grad(p[i]));
            CHECK(g != NULL);
            if (round == 0) first[i] = g;
            for (int64_t j = 0; round == 1 && g && first[i] && j < kn_numel(p[i]); j++)
                CHECK_MSG(g[j] == first[i][j], "parameter %d [%lld]: %g inside, %g after", i, (long long)j, first[i][j], g[j]);
            if (round == 1) free(g), free(first[i]);
        }
    }
    kn_scope_pop();
}

int main(void) {
    RUN(test_products_compute_in_the_autocast_dtype);
    RUN(test_precision_ops_compute_in_f32);
    RUN(test_autocast_off_restores_behaviour);
    RUN(test_nesting_and_pop_errors);
    RUN(test_an_op_records_only_the_casts_it_needs);
    RUN(test_gradients_of_f32_leaves_arrive_f32_and_match_f64);
    RUN(test_backward_inside_autocast_matches_backward_after_it);
    return test_summary();
}
