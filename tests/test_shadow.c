/* Debug mode's shadow (KILN_SHADOW, kn_set_shadow): clean runs stay clean and unchanged, a
 * wrong kernel is named as the first divergent op with its inputs, element, module and
 * caller, and bad reference backends are refused. */
#define _GNU_SOURCE /* popen, readlink */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backends/backend.h"
#include "harness.h"

/* ---- a small training step: forward, backward, AdamW ------------------------------------- */

enum { B = 6, IN = 16, HID = 24 };

typedef struct step_result {
    double loss, w[IN * HID];
    int64_t argmax[B];
} step_result;

static double host_x[B * IN], host_w[IN * HID], host_b[HID];

/* The same step from the same host values and seed, so two runs can be compared bitwise.
 * Besides the ops the shadow checks, it runs three it skips: empty and argmax (outputs that
 * are not values) and masked_select (an output shape that depends on values). */
static bool model_step(step_result *r) {
    kn_manual_seed(7);
    kn_tensor *x = tensor_from(host_x, KN_SHAPE(B, IN), KN_F32);
    kn_tensor *w = kn_requires_grad(tensor_from(host_w, KN_SHAPE(IN, HID), KN_F32), true);
    kn_tensor *b = kn_requires_grad(tensor_from(host_b, KN_SHAPE(HID), KN_F32), true);
    kn_tensor *gamma = kn_requires_grad(kn_ones(KN_SHAPE(HID), KN_F32), true);
    kn_tensor *beta = kn_requires_grad(kn_zeros(KN_SHAPE(HID), KN_F32), true);
    int64_t rows[] = {4, 0, 2, 2};
    kn_tensor *idx = kn_from_host(rows, KN_I64, KN_SHAPE(4), KN_CPU);

    kn_tensor *h = kn_gelu(kn_add(kn_matmul(x, w), b));
    h = kn_dropout(kn_layer_norm(h, KN_SHAPE(HID), gamma, beta, 1e-5), 0.2, true);
    kn_tensor *p = kn_softmax(h, -1);
    kn_tensor *picked = kn_index_select(p, 0, idx);
    kn_tensor *loss = kn_sum(kn_mul(picked, kn_log(picked)), KN_ALL_DIMS, false);
    kn_tensor *top = kn_argmax(p, -1, false);
    kn_tensor *large = kn_masked_select(p, kn_gt(p, kn_full(KN_SHAPE0, 0.05, KN_F32)));
    kn_tensor *scratch = kn_empty(KN_SHAPE(3), KN_F32);
    /* an in-place copy into a view: the shadow starts from the destination's old values */
    kn_tensor *buf = kn_zeros(KN_SHAPE(B, 2 * HID), KN_F32);
    bool ok = top && large && scratch && buf && kn_copy_(kn_narrow(buf, 1, 3, HID), kn_detach(p)) == KN_OK;

    ok = ok && loss && kn_backward(loss) == KN_OK;
    kn_tensor *params[] = {w, b, gamma, beta};
    kn_param_group g = kn_adamw_group(params, 4, 1e-2, 0.1);
    kn_optimizer *opt = ok ? kn_adamw_new(&g, 1) : NULL;
    ok = opt && kn_optimizer_step(opt) == KN_OK && kn_optimizer_step(opt) == KN_OK;
    kn_optimizer_free(opt);
    ok = ok && kn_item(loss, &r->loss) == KN_OK && kn_to_host(w, r->w, sizeof r->w) == KN_OK &&
         kn_to_host(top, r->argmax, sizeof r->argmax) == KN_OK;
    return ok;
}

static void test_clean_step_passes_and_matches_the_unshadowed_run(void) {
    rand_fill(host_x, B * IN, -2, 2);
    rand_fill(host_w, IN * HID, -0.5, 0.5);
    rand_fill(host_b, HID, -0.1, 0.1);
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    static step_result plain, shadowed;
    kn_scope_push();
    CHECK(model_step(&plain));
    kn_scope_pop();

    int64_t checked0, skipped0, checked1, skipped1;
    CHECK(kn_set_shadow("cpu") == KN_OK);
    kn_shadow_counts(&checked0, &skipped0);
    kn_scope_push();
    CHECK(model_step(&shadowed));
    kn_scope_pop();
    kn_shadow_counts(&checked1, &skipped1);
    CHECK(kn_set_shadow(NULL) == KN_OK);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);

    CHECK(memcmp(&plain, &shadowed, sizeof plain) == 0);
    CHECK_MSG(skipped1 - skipped0 == 3, "skipped %lld ops, expected empty, argmax and masked_select",
              (long long)(skipped1 - skipped0));
    CHECK_MSG(checked1 - checked0 >= 30, "only %lld ops checked", (long long)(checked1 - checked0));
}

/* ---- a wrong kernel ----------------------------------------------------------------------- */

static kn_kernel_fn real_gelu;

/* The real kernel, but f32 outputs are off by 1e-2 at element 21 ([1, 5] of a [4, 16]). */
static kn_status wrong_gelu(kn_node *n) {
    kn_status st = real_gelu(n);
    if (st == KN_OK && n->out[0]->dtype == KN_F32 && kn_numel(n->out[0]) > 21)
        ((float *)kn_tensor_data(n->out[0]))[21] += 1e-2f;
    return st;
}

/* Exported (not static, not inlined) so that the error can name it as the caller. */
__attribute__((noinline)) kn_tensor *shadow_test_forward(void *model, kn_tensor *x) {
    kn_tensor *y = kn_module_forward(model, x);
    return y ? kn_sum(y, KN_ALL_DIMS, false) : NULL;
}

__attribute__((noinline)) kn_tensor *shadow_test_plain_ops(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
    kn_tensor *y = kn_gelu(kn_add(kn_matmul(x, w), b));
    return y ? kn_sum(y, KN_ALL_DIMS, false) : NULL;
}

static void test_wrong_kernel_is_named_with_module_and_caller(void) {
    kn_module *model = kn_nn_sequential_new();
    kn_module_add(model, "mlp", kn_nn_mlp_new(8, 16, KN_ACT_GELU, false, true, KN_F32));
    model = kn_module_check(model);
    CHECK(model != NULL);
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 8), KN_F32, -2, 2);
    kn_tensor *w = rand_tensor(KN_SHAPE(8, 16), KN_F32, -1, 1), *b = rand_tensor(KN_SHAPE(16), KN_F32, -1, 1);
    real_gelu = kn_cpu_backend.kernels->op[KN_OP_gelu].fn;
    kn_cpu_backend.kernels->op[KN_OP_gelu].fn = wrong_gelu;
    bool grad = kn_set_grad_enabled(false);

    /* Without a shadow, or outside debug mode, nothing notices. */
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    CHECK(shadow_test_forward(model, x) != NULL);
    CHECK(kn_set_shadow("cpu") == KN_OK);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    CHECK(shadow_test_forward(model, x) != NULL);

    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    CHECK(shadow_test_forward(model, x) == NULL && kn_last_status() == KN_ERR_NUMERIC);
    const char *msg = kn_last_error();
    CHECK_MSG(strstr(msg, "shadow: first divergent op: gelu(f32[4, 16]) at module \"mlp\" (MLP) called from "
                          "shadow_test_forward+0x"), "message: %s", msg);
    CHECK_MSG(strstr(msg, "output 0 max abs error 1.0e-02 at index [1, 5]"), "message: %s", msg);
    CHECK_MSG(strstr(msg, "f32 tolerance rtol 0.0001 atol 1e-05; 1 of 64 values outside"), "message: %s", msg);
    kn_clear_error();

    /* Outside any module the message names the op and the caller only. */
    CHECK_ERROR(shadow_test_plain_ops(x, w, b) != NULL, KN_ERR_NUMERIC,
                "shadow: first divergent op: gelu(f32[4, 16]) called from shadow_test_plain_ops+");

    /* f64 runs the real kernel unchanged, so it agrees with its shadow. */
    kn_tensor *x64 = kn_cast(x, KN_F64), *w64 = kn_cast(w, KN_F64), *b64 = kn_cast(b, KN_F64);
    CHECK(shadow_test_plain_ops(x64, w64, b64) != NULL);

    kn_cpu_backend.kernels->op[KN_OP_gelu].fn = real_gelu;
    CHECK(shadow_test_forward(model, x) != NULL);
    CHECK(kn_set_shadow(NULL) == KN_OK);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    kn_set_grad_enabled(grad);
    kn_module_free(model);
}

/* A user's custom op whose f32 kernel takes a shortcut (exp by its first three Taylor terms)
 * while its f64 kernel is exact: the shadow, which runs the op in f64, names it. */
static kn_status taylor_softplus_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                                     const kn_custom_attrs *attrs, void *user) {
    for (int64_t i = 0; i < out->numel; i++) {
        if (in->dtype == KN_F64) {
            ((double *)out->data)[i] = log1p(exp(((const double *)in->data)[i]));
        } else {
            float x = ((const float *)in->data)[i];
            ((float *)out->data)[i] = logf(1 + (1 + x + 0.5f * x * x));
        }
    }
    return KN_OK;
}

__attribute__((noinline)) kn_tensor *shadow_test_custom_ops(int op, kn_tensor *x) {
    kn_tensor *y = kn_custom_call1(op, 1, (kn_tensor *[]){kn_mul_scalar(x, 2.0)}, NULL);
    return y ? kn_sum(kn_tanh(y), KN_ALL_DIMS, false) : NULL;
}

static void test_wrong_custom_kernel_is_the_first_divergent_op(void) {
    int op = kn_custom_op_register(&(kn_custom_op_def){
        .name = "taylor_softplus", .n_inputs = 1, .n_outputs = 1, .kernels[KN_DEVICE_CPU] = taylor_softplus_cpu});
    CHECK(op >= 0);
    kn_tensor *x = rand_tensor(KN_SHAPE(6, 5), KN_F32, 1, 2); /* where three terms are far from exp */
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    CHECK(shadow_test_custom_ops(op, x) != NULL); /* no shadow: nothing notices */
    CHECK(kn_set_shadow("cpu") == KN_OK);
    CHECK_ERROR(shadow_test_custom_ops(op, x) != NULL, KN_ERR_NUMERIC,
                "shadow: first divergent op: taylor_softplus(f32[6, 5]) called from shadow_test_custom_ops+");
    CHECK(kn_set_shadow(NULL) == KN_OK);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
}

static void test_module_path_names_nested_children(void) {
    kn_module *root = kn_nn_sequential_new();
    kn_module *h = kn_module_add(root, "h", kn_nn_sequential_new());
    kn_module_add(h, NULL, kn_nn_linear_new(4, 4, true, KN_F32));
    kn_module_add(h, NULL, kn_nn_mlp_new(4, 8, KN_ACT_GELU, false, true, KN_F32));
    root = kn_module_check(root);
    CHECK(root != NULL);
    kn_tensor *x = rand_tensor(KN_SHAPE(2, 4), KN_F32, -1, 1);
    real_gelu = kn_cpu_backend.kernels->op[KN_OP_gelu].fn;
    kn_cpu_backend.kernels->op[KN_OP_gelu].fn = wrong_gelu; /* [2, 8]: element 21 is out of range */
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK && kn_set_shadow("cpu") == KN_OK);
    CHECK(kn_module_forward(root, x) != NULL);
    kn_tensor *x6 = rand_tensor(KN_SHAPE(6, 4), KN_F32, -1, 1); /* [6, 8]: element 21 is [2, 5] */
    CHECK(kn_module_forward(root, x6) == NULL && kn_last_status() == KN_ERR_NUMERIC);
    CHECK_MSG(strstr(kn_last_error(), "gelu(f32[6, 8]) at module \"h.1\" (MLP) called from "), "message: %s",
              kn_last_error());
    CHECK_MSG(strstr(kn_last_error(), "at index [2, 5]"), "message: %s", kn_last_error());
    kn_clear_error();
    kn_cpu_backend.kernels->op[KN_OP_gelu].fn = real_gelu;
    CHECK(kn_set_shadow(NULL) == KN_OK && kn_set_mode(KN_MODE_STRICT) == KN_OK);
    kn_module_free(root);
}

/* ---- half precision --------------------------------------------------------------------- */

static void test_half_precision_ops_pass_at_their_tolerance(void) {
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK && kn_set_shadow("cpu") == KN_OK);
    kn_dtype halves[] = {KN_F16, KN_BF16};
    for (int i = 0; i < 2; i++) {
        kn_dtype dt = halves[i];
        kn_tensor *x = rand_tensor(KN_SHAPE(16, 64), dt, -3, 3), *y = rand_tensor(KN_SHAPE(16, 64), dt, 0.5, 2);
        kn_tensor *e = kn_add(kn_mul(kn_exp(kn_div(x, y)), kn_tanh(x)), kn_gelu(y));
        kn_tensor *s = kn_sum(kn_sigmoid(e), KN_DIMS(1), false);
        kn_tensor *m = kn_mean(kn_softmax(e, -1), KN_ALL_DIMS, false);
        kn_tensor *n = kn_layer_norm(e, KN_SHAPE(64), NULL, NULL, 1e-5);
        kn_tensor *z = kn_matmul(n, kn_transpose(x, 0, 1));
        CHECK_MSG(s && m && n && z, "%s: %s", kn_dtype_name(dt), kn_last_error());
    }
    CHECK(kn_set_shadow(NULL) == KN_OK && kn_set_mode(KN_MODE_STRICT) == KN_OK);
}

/* ---- choosing the reference --------------------------------------------------------------- */

static void test_reference_must_be_a_backend_with_values(void) {
    CHECK(kn_get_shadow() == NULL);
    CHECK_ERROR(kn_set_shadow("nonsense") == KN_OK, KN_ERR_ARG, "set_shadow(\"nonsense\"): no backend has that name (try cpu)");
    CHECK_ERROR(kn_set_shadow("meta") == KN_OK, KN_ERR_DEVICE, "the meta backend holds no values");
    CHECK(kn_get_shadow() == NULL);
    CHECK(kn_set_shadow("cpu") == KN_OK && kn_get_shadow() && strcmp(kn_get_shadow(), "cpu") == 0);
    CHECK(kn_set_shadow("") == KN_OK && kn_get_shadow() == NULL);
}

/* KILN_SHADOW is read at start-up, so these run the test binary again in a fresh process. */
static bool run_child(const char *env, char *out, size_t size) {
    char cmd[PATH_MAX + 128];
    snprintf(cmd, sizeof cmd, "env -u KILN_MODE %s '%s' --startup-child 2>&1", env, self_executable());
    FILE *p = popen(cmd, "r");
    if (!p) return false;
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    return pclose(p) == 0;
}

static void test_kiln_shadow_is_read_at_start_up(void) {
    char out[1024];
    CHECK_MSG(run_child("KILN_SHADOW=cpu", out, sizeof out) && strstr(out, "mode debug, shadow cpu"), "child: %s", out);
    CHECK_MSG(run_child("KILN_SHADOW=cpu KILN_MODE=strict", out, sizeof out) && strstr(out, "mode strict, shadow cpu"),
              "child: %s", out);
    run_child("KILN_SHADOW=nonsense", out, sizeof out);
    CHECK_MSG(strstr(out, "kiln start-up: KILN_SHADOW=nonsense: no backend has that name"), "child: %s", out);
}

static int startup_child(void) {
    kn_tensor *t = kn_ones(KN_SHAPE(2), KN_F32);
    if (!t) {
        printf("%s\n", kn_last_error());
        return 1;
    }
    kn_release(t);
    const char *shadow = kn_get_shadow();
    printf("mode %s, shadow %s\n", kn_mode_name(kn_get_mode()), shadow ? shadow : "off");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--startup-child") == 0) return startup_child();
    RUN(test_reference_must_be_a_backend_with_values);
    RUN(test_clean_step_passes_and_matches_the_unshadowed_run);
    RUN(test_wrong_kernel_is_named_with_module_and_caller);
    RUN(test_wrong_custom_kernel_is_the_first_divergent_op);
    RUN(test_module_path_names_nested_children);
    RUN(test_half_precision_ops_pass_at_their_tolerance);
    RUN(test_kiln_shadow_is_read_at_start_up);
    return test_summary();
}
