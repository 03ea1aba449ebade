/* The autograd engine: recording, views, accumulation, graph lifetime and its errors. The
 * gradients of individual ops are checked by test_grad_*.c. */
#include <stdlib.h>
#include <string.h>

#include "gradcheck.h"

static kn_tensor *leaf(kn_shape shape) { return kn_requires_grad(rand_tensor(shape, KN_F64, -1, 1), true); }

static double grad_at(kn_tensor *t, int64_t i) {
    kn_tensor *g = kn_grad(t);
    double *v = read_f64(g), out = v ? v[i] : NAN;
    free(v);
    return out;
}

static void test_chain_and_reuse(void) {
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(3));
    double *xv = read_f64(x);
    /* y = sum(x * x + x): dy/dx = 2x + 1, with x used three times. */
    kn_tensor *y = kn_sum(kn_add(kn_mul(x, x), x), KN_ALL_DIMS, false);
    CHECK(kn_needs_grad(y) && !kn_is_leaf(y) && kn_is_leaf(x));
    CHECK(kn_backward(y) == KN_OK);
    for (int i = 0; i < 3; i++) CHECK(fabs(grad_at(x, i) - (2 * xv[i] + 1)) < 1e-12);
    free(xv);
    kn_scope_pop();
}

static void test_accumulates_until_zeroed(void) {
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(2));
    for (int k = 0; k < 3; k++) CHECK(kn_backward(kn_sum(kn_mul_scalar(x, 2), KN_ALL_DIMS, false)) == KN_OK);
    CHECK(grad_at(x, 1) == 6);
    CHECK(kn_zero_grad(x) == KN_OK && kn_grad(x) == NULL);
    CHECK(kn_backward(kn_sum(x, KN_ALL_DIMS, false)) == KN_OK && grad_at(x, 0) == 1);
    kn_scope_pop();
}

static void test_retain_graph(void) {
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(2));
    kn_tensor *y = kn_sum(kn_mul(x, x), KN_ALL_DIMS, false);
    CHECK(kn_backward_ex(y, NULL, true) == KN_OK);
    CHECK(kn_backward_ex(y, NULL, false) == KN_OK);
    double *xv = read_f64(x);
    CHECK(fabs(grad_at(x, 0) - 4 * xv[0]) < 1e-12);
    free(xv);
    CHECK_ERROR(kn_backward(y) == KN_OK, KN_ERR_ARG, "second time");
    kn_scope_pop();
}

static void test_no_grad_and_detach(void) {
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(2));
    kn_no_grad_push();
    kn_no_grad_push();
    CHECK(!kn_needs_grad(kn_exp(x)));
    kn_no_grad_pop();
    CHECK(!kn_is_grad_enabled());
    kn_no_grad_pop();
    CHECK(kn_is_grad_enabled() && kn_needs_grad(kn_exp(x)));
    CHECK(!kn_needs_grad(kn_exp(kn_detach(x))));
    CHECK(!kn_needs_grad(kn_argmax(x, 0, false)));
    CHECK_ERROR(kn_backward(kn_sum(kn_detach(x), KN_ALL_DIMS, false)) == KN_OK, KN_ERR_ARG, "does not require grad");
    kn_scope_pop();
}

static void test_bad_uses(void) {
    kn_scope_push();
    CHECK_ERROR(kn_requires_grad(kn_zeros(KN_SHAPE(2), KN_I64), true) != NULL, KN_ERR_DTYPE, "only float");
    kn_tensor *x = leaf(KN_SHAPE(2, 2));
    CHECK_ERROR(kn_requires_grad(kn_exp(x), true) != NULL, KN_ERR_ARG, "not a leaf");
    CHECK_ERROR(kn_backward(kn_exp(x)) == KN_OK, KN_ERR_ARG, "seed gradient");
    CHECK_ERROR(kn_copy_(x, kn_zeros(KN_SHAPE(2, 2), KN_F64)) == KN_OK, KN_ERR_ARG, "requires grad");
    kn_tensor *buf = kn_zeros(KN_SHAPE(2, 2), KN_F64);
    CHECK_ERROR(kn_copy_(buf, kn_exp(x)) == KN_OK, KN_ERR_ARG, "existing tensor");
    CHECK_ERROR(kn_set_grad(x, kn_zeros(KN_SHAPE(3), KN_F64)) == KN_OK, KN_ERR_SHAPE, "must match");
    /* A saved input changed in place between forward and backward. */
    kn_tensor *w = kn_zeros(KN_SHAPE(2, 2), KN_F64);
    kn_tensor *y = kn_sum(kn_mul(x, w), KN_ALL_DIMS, false);
    CHECK(kn_copy_(w, kn_ones(KN_SHAPE(2, 2), KN_F64)) == KN_OK);
    CHECK_ERROR(kn_backward(y) == KN_OK, KN_ERR_ARG, "modified in place");
    kn_no_grad_push();
    CHECK(kn_copy_(x, kn_ones(KN_SHAPE(2, 2), KN_F64)) == KN_OK); /* allowed without history */
    kn_no_grad_pop();
    kn_scope_pop();
}

static void test_seeded_root_and_leaf_root(void) {
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(3));
    double seed[3] = {1, 2, 3};
    CHECK(kn_backward_ex(kn_mul_scalar(x, 3), tensor_from(seed, KN_SHAPE(3), KN_F64), false) == KN_OK);
    CHECK(grad_at(x, 2) == 9);
    kn_tensor *s = kn_requires_grad(kn_full(KN_SHAPE0, 2, KN_F32), true);
    CHECK(kn_backward(s) == KN_OK && grad_at(s, 0) == 1);
    /* A leaf root's seed stays the caller's: writing it later leaves the gradient alone. */
    kn_tensor *r = leaf(KN_SHAPE(3)), *rs = tensor_from(seed, KN_SHAPE(3), KN_F64);
    CHECK(kn_backward_ex(r, rs, false) == KN_OK);
    CHECK(kn_init_constant_(rs, 7) == KN_OK && grad_at(r, 1) == 2);
    kn_scope_pop();
}

/* One gradient that flows to two leaves (an add's backward hands both the same tensor) gives
 * each its own buffer: writing one leaves the other alone. */
static void test_two_leaves_never_share_a_gradient(void) {
    const kn_mode modes[] = {KN_MODE_STRICT, KN_MODE_DEBUG};
    for (int m = 0; m < 2; m++) {
        kn_set_mode(modes[m]);
        kn_scope_push();
        kn_tensor *a = leaf(KN_SHAPE(5)), *b = leaf(KN_SHAPE(5));
        CHECK(kn_backward(kn_sum(kn_add(a, b), KN_ALL_DIMS, false)) == KN_OK);
        kn_tensor *ga = kn_grad(a);
        CHECK(kn_init_constant_(ga, 5) == KN_OK);
        CHECK_MSG(grad_at(b, 3) == 1 && grad_at(a, 3) == 5, "%s mode", kn_mode_name(modes[m]));
        kn_scope_pop();
    }
    kn_set_mode(KN_MODE_STRICT);
}

/* Views: each kind maps the gradient back, including overlapping windows. */
static kn_tensor *f_views(kn_tensor *const *in, const void *ctx) {
    kn_tensor *x = in[0]; /* [4, 6] */
    kn_tensor *a = kn_transpose(kn_reshape(x, KN_SHAPE(2, 12)), 0, 1);        /* [12, 2] */
    kn_tensor *b = kn_slice(kn_view(kn_contiguous(a), KN_SHAPE(24)), 0, 1, 24, 3); /* strided */
    kn_tensor *c = kn_unfold(x, 1, 3, 2);                                       /* overlapping */
    kn_tensor *d = kn_select(kn_expand(kn_unsqueeze(x, 0), KN_SHAPE(3, 4, 6)), 0, 1);
    kn_tensor *e = kn_as_strided(x, KN_SHAPE(3, 3), KN_SHAPE(1, 2), 5);         /* overlapping */
    kn_tensor *parts[] = {kn_flatten(b, 0, -1), kn_flatten(c, 0, -1), kn_flatten(d, 0, -1),
                          kn_flatten(kn_permute(e, KN_DIMS(1, 0)), 0, -1)};
    const int *only = ctx;
    return only ? parts[*only] : kn_cat(parts, 4, 0);
}

static kn_tensor *f_broadcast(kn_tensor *const *in, const void *ctx) {
    return kn_div(kn_mul(in[0], in[1]), kn_sub(in[2], kn_full(KN_SHAPE0, 3, KN_F64)));
}

static kn_tensor *f_matmul(kn_tensor *const *in, const void *ctx) {
    return kn_exp(kn_mean(kn_matmul(in[0], kn_transpose(in[1], -1, -2)), KN_DIMS(-1), true));
}

static void test_views_and_broadcasting(void) {
    for (int k = 0; k < 4; k++) GRADCHECK("one view", f_views, &k, 1, GC_IN(KN_SHAPE(4, 6), -1, 1));
    GRADCHECK("views", f_views, NULL, 1, GC_IN(KN_SHAPE(4, 6), -1, 1));
    GRADCHECK("broadcast", f_broadcast, NULL, 3, GC_IN(KN_SHAPE(2, 1, 3), -1, 1), GC_IN(KN_SHAPE(4, 1), -1, 1),
              GC_IN(KN_SHAPE0, 0.5, 1));
    GRADCHECK("matmul", f_matmul, NULL, 2, GC_IN(KN_SHAPE(2, 3, 4), -1, 1), GC_IN(KN_SHAPE(5, 4), -1, 1));
}

static void test_graph_is_freed(void) {
    int64_t before = kn_autograd_live_nodes();
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(4));
    kn_tensor *y = x;
    for (int i = 0; i < 100000; i++) y = kn_add_scalar(y, 1e-6); /* a long chain: freed without recursion */
    CHECK(kn_autograd_live_nodes() >= before + 100000);
    CHECK(kn_backward(kn_sum(y, KN_ALL_DIMS, false)) == KN_OK && grad_at(x, 3) == 1);
    kn_scope_pop();
    CHECK(kn_autograd_live_nodes() == before);
}

static void test_integer_inputs_mix(void) {
    kn_scope_push();
    kn_tensor *x = leaf(KN_SHAPE(3));
    double iv[3] = {1, 2, 3};
    kn_tensor *i = tensor_from(iv, KN_SHAPE(3), KN_I64);
    CHECK(kn_backward(kn_sum(kn_mul(x, i), KN_ALL_DIMS, false)) == KN_OK);
    CHECK(grad_at(x, 2) == 3);
    kn_tensor *h = kn_requires_grad(rand_tensor(KN_SHAPE(3), KN_F32, -1, 1), true);
    CHECK(kn_backward(kn_sum(kn_cast(kn_mul_scalar(kn_cast(h, KN_F64), 2), KN_F32), KN_ALL_DIMS, false)) == KN_OK);
    kn_tensor *g = kn_grad(h);
    CHECK(g && kn_dtype_of(g) == KN_F32 && grad_at(h, 1) == 2);
    kn_scope_pop();
}

/* A linear layer's parameters get their gradients as computed, not copies: the backward of
 * sum(linear(x, w, b)) traces no copy op on the meta backend, and runs no copy kernel on the
 * cpu in strict mode (where the node still computing a gradient holds its memory too) or
 * debug mode. It used to copy every parameter's gradient. */
static int64_t copies_run(kn_profile_row *rows, int n) {
    for (int i = 0; i < n; i++)
        if (strcmp(rows[i].op, "copy") == 0) return rows[i].calls;
    return 0;
}

static void test_leaf_gradients_are_not_copied(void) {
    const kn_device devices[] = {KN_META, KN_CPU, KN_CPU};
    const kn_mode modes[] = {KN_MODE_STRICT, KN_MODE_STRICT, KN_MODE_DEBUG};
    for (int c = 0; c < 3; c++) {
        kn_scope_push();
        kn_set_default_device(devices[c]);
        kn_set_mode(modes[c]);
        kn_meta_trace_reset();
        kn_tensor *x = kn_ones(KN_SHAPE(8, 16, 32), KN_F32);
        kn_tensor *w = kn_requires_grad(kn_ones(KN_SHAPE(64, 32), KN_F32), true);
        kn_tensor *b = kn_requires_grad(kn_ones(KN_SHAPE(64), KN_F32), true);
        kn_tensor *y = kn_sum(kn_linear(x, w, b), KN_ALL_DIMS, false);
        kn_sync();
        kn_profile_start();
        CHECK(kn_backward(y) == KN_OK);
        kn_sync();
        kn_profile_stop();
        kn_profile_row rows[64];
        int n = kn_profile_rows(rows, 64);
        int64_t copies = devices[c].type == KN_META.type ? kn_meta_trace_op_count("copy") : copies_run(rows, n < 64 ? n : 64);
        CHECK_MSG(copies == 0, "%s, %s mode: %lld copies", devices[c].type == KN_META.type ? "meta" : "cpu",
                  kn_mode_name(modes[c]), (long long)copies);
        if (devices[c].type != KN_META.type) { /* and the gradients are right: dw = 128, db = 128 */
            double *gw = read_f64(kn_grad(w)), *gb = read_f64(kn_grad(b));
            CHECK(gw && gb && gw[0] == 128 && gw[64 * 32 - 1] == 128 && gb[0] == 128 && gb[63] == 128);
            free(gw), free(gb);
        }
        kn_set_default_device(KN_CPU);
        kn_set_mode(KN_MODE_STRICT);
        kn_scope_pop();
    }
}

int main(void) {
    RUN(test_chain_and_reuse);
    RUN(test_leaf_gradients_are_not_copied);
    RUN(test_accumulates_until_zeroed);
    RUN(test_retain_graph);
    RUN(test_no_grad_and_detach);
    RUN(test_bad_uses);
    RUN(test_seeded_root_and_leaf_root);
    RUN(test_two_leaves_never_share_a_gradient);
    RUN(test_views_and_broadcasting);
    RUN(test_graph_is_freed);
    RUN(test_integer_inputs_mix);
    return test_summary();
}
