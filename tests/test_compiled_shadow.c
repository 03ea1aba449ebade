/* The float64 shadow on compiled programs (KILN_SHADOW with KILN_MODE=compiled): a clean
 * training step passes and gives the bits it gives without the shadow; a wrong prebuilt
 * kernel is named as the first divergent op with the caller that recorded it (not the read
 * that ran the program); a wrong generated kernel, whose ops one by one agree with float64,
 * is named by the first value the program hands out that differs; a wrong in-place update of a
 * parameter is caught in the memory it writes; and a program on the meta device (no values, and
 * nothing to fold) is left alone. */
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "harness.h"

enum { B = 6, IN = 16, HID = 24 };

typedef struct step_result {
    double loss, w[IN * HID];
} step_result;

static double host_x[B * IN], host_w[IN * HID], host_b[HID];

/* A training step (forward, loss, backward, two AdamW updates) read back at the end: a
 * program that fuses chains, plans memory and updates parameters in place. */
__attribute__((noinline)) kn_status compiled_shadow_test_step(step_result *r) {
    kn_manual_seed(7);
    kn_tensor *x = tensor_from(host_x, KN_SHAPE(B, IN), KN_F32);
    kn_tensor *w = kn_requires_grad(tensor_from(host_w, KN_SHAPE(IN, HID), KN_F32), true);
    kn_tensor *b = kn_requires_grad(tensor_from(host_b, KN_SHAPE(HID), KN_F32), true);
    kn_tensor *h = kn_gelu(kn_add(kn_matmul(x, w), b));
    h = kn_layer_norm(h, KN_SHAPE(HID), NULL, NULL, 1e-5);
    kn_tensor *p = kn_softmax(kn_tanh(kn_mul_scalar(h, 0.5)), -1);
    kn_tensor *loss = kn_mean(kn_mul(p, kn_log(p)), KN_ALL_DIMS, false);
    kn_status st = loss ? kn_backward(loss) : kn_last_status();
    kn_tensor *params[] = {w, b};
    kn_param_group g = kn_adamw_group(params, 2, 1e-2, 0.1);
    kn_optimizer *opt = st == KN_OK ? kn_adamw_new(&g, 1) : NULL;
    if (st == KN_OK) st = opt ? kn_optimizer_step(opt) : kn_last_status();
    if (st == KN_OK) st = kn_optimizer_step(opt);
    kn_optimizer_free(opt);
    if (st == KN_OK) st = kn_item(loss, &r->loss);
    if (st == KN_OK) st = kn_to_host(w, r->w, sizeof r->w);
    return st;
}

static kn_status run_step(step_result *r) {
    kn_scope_push();
    kn_status st = compiled_shadow_test_step(r);
    kn_scope_pop();
    return st;
}

static void test_clean_step_passes_unchanged(void) {
    rand_fill(host_x, B * IN, -2, 2);
    rand_fill(host_w, IN * HID, -0.5, 0.5);
    rand_fill(host_b, HID, -0.1, 0.1);
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK);
    static step_result plain, shadowed;
    CHECK(run_step(&plain) == KN_OK);
    int64_t checked0, checked1;
    CHECK(kn_set_shadow("cpu") == KN_OK);
    kn_shadow_counts(&checked0, NULL);
    kn_status st = run_step(&shadowed);
    CHECK_MSG(st == KN_OK, "%s", kn_last_error());
    kn_shadow_counts(&checked1, NULL);
    CHECK(kn_set_shadow(NULL) == KN_OK);
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
    CHECK(memcmp(&plain, &shadowed, sizeof plain) == 0);
    CHECK_MSG(checked1 - checked0 >= 30, "only %lld ops checked", (long long)(checked1 - checked0));
}

/* ---- wrong kernels ------------------------------------------------------------------------ */

static kn_kernel_fn real_kernel;
static int64_t wrong_at; /* the element the wrong kernels move */

/* The real kernel, but output 0's f32 element wrong_at is off by 1e-2 (when it has one). */
static kn_status off_by_a_little(kn_node *n) {
    kn_status st = real_kernel(n);
    if (st == KN_OK && n->out[0]->dtype == KN_F32 && kn_numel(n->out[0]) > wrong_at)
        ((float *)kn_tensor_data(n->out[0]))[wrong_at] += 1e-2f;
    return st;
}

/* Exported (not static, not inlined) so that the errors can name them as the callers. Their
 * temporaries go with their scope, so that only the result is handed out. */
__attribute__((noinline)) kn_tensor *compiled_shadow_test_ops(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
    kn_scope_push();
    return kn_scope_pop_keep(kn_gelu(kn_add(kn_matmul(x, w), b)));
}

__attribute__((noinline)) kn_tensor *compiled_shadow_test_gelu(kn_tensor *x) {
    kn_scope_push();
    return kn_scope_pop_keep(kn_gelu(x));
}

__attribute__((noinline)) kn_status compiled_shadow_test_update(kn_tensor *w, kn_tensor *grad) {
    kn_status st = kn_sgd_update(w, grad, NULL, 0.1, 0, 0, 0.01, false, false);
    return st == KN_OK ? kn_sync() : st;
}

/* Runs compiled_shadow_test_ops under the shadow with op's kernel wrong; the read's status. */
static kn_status with_wrong_kernel(kn_op_id op, int64_t at) {
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 8), KN_F32, -2, 2);
    kn_tensor *w = rand_tensor(KN_SHAPE(8, 16), KN_F32, -1, 1), *b = rand_tensor(KN_SHAPE(16), KN_F32, -1, 1);
    float host[64];
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK && kn_set_shadow("cpu") == KN_OK);
    real_kernel = kn_cpu_backend.kernels->op[op].fn;
    kn_cpu_backend.kernels->op[op].fn = off_by_a_little;
    wrong_at = at;
    kn_tensor *y = compiled_shadow_test_ops(x, w, b);
    kn_status st = y ? kn_to_host(y, host, sizeof host) : kn_last_status();
    kn_cpu_backend.kernels->op[op].fn = real_kernel;
    CHECK(kn_set_shadow(NULL) == KN_OK && kn_set_mode(KN_MODE_STRICT) == KN_OK);
    return st;
}

static void test_wrong_prebuilt_kernel_is_named_with_its_caller(void) {
    /* A lone gelu keeps its prebuilt kernel in the program and in the ops one by one. */
    kn_tensor *x = rand_tensor(KN_SHAPE(4, 16), KN_F32, -2, 2);
    float host[64];
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK && kn_set_shadow("cpu") == KN_OK);
    real_kernel = kn_cpu_backend.kernels->op[KN_OP_gelu].fn;
    kn_cpu_backend.kernels->op[KN_OP_gelu].fn = off_by_a_little;
    wrong_at = 21;
    kn_tensor *y = compiled_shadow_test_gelu(x);
    kn_status st = y ? kn_to_host(y, host, sizeof host) : kn_last_status();
    kn_cpu_backend.kernels->op[KN_OP_gelu].fn = real_kernel;
    CHECK(kn_set_shadow(NULL) == KN_OK && kn_set_mode(KN_MODE_STRICT) == KN_OK);
    CHECK(st == KN_ERR_NUMERIC);
    CHECK_MSG(strstr(kn_last_error(), "shadow: first divergent op: gelu(f32[4, 16]) called from "
                                      "compiled_shadow_test_gelu+"),
              "message: %s", kn_last_error());
    CHECK_MSG(strstr(kn_last_error(), "max abs error 1.0e-02 at index [1, 5]"), "message: %s", kn_last_error());
    kn_clear_error();

    /* Fused with the add, gelu is the generated kernel's; the ops one by one still run it. */
    CHECK(with_wrong_kernel(KN_OP_gelu, 21) == KN_ERR_NUMERIC);
    CHECK_MSG(strstr(kn_last_error(), "shadow: first divergent op: gelu(f32[4, 16]) called from compiled_shadow_test_ops+"),
              "message: %s", kn_last_error());
    kn_clear_error();
}

static void test_wrong_generated_kernel_is_named_by_the_value_it_hands_out(void) {
    CHECK(with_wrong_kernel(KN_OP_fused, 37) == KN_ERR_NUMERIC);
    const char *msg = kn_last_error();
    CHECK_MSG(strstr(msg, "differs from its ops run one by one at the value of gelu(f32[4, 16]) called from "
                          "compiled_shadow_test_ops+"), "message: %s", msg);
    CHECK_MSG(strstr(msg, "output 0: max abs error 1.0e-02 at index [2, 5]"), "message: %s", msg);
    kn_clear_error();
}

/* An in-place SGD update, wrong in the program's run only: the memory it writes differs. */
static int update_calls;
static kn_status wrong_in_the_first_run(kn_node *n) {
    kn_status st = real_kernel(n);
    if (st == KN_OK && update_calls++ == 0) ((float *)kn_tensor_data(n->out[0]))[3] += 1e-2f;
    return st;
}

static void test_wrong_in_place_update_is_caught_in_the_memory_it_writes(void) {
    kn_tensor *w = rand_tensor(KN_SHAPE(8, 4), KN_F32, -1, 1), *grad = rand_tensor(KN_SHAPE(8, 4), KN_F32, -1, 1);
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK && kn_set_shadow("cpu") == KN_OK);
    /* right: the ops one by one start from the parameter as it was before the program */
    kn_status st = compiled_shadow_test_update(w, grad);
    CHECK_MSG(st == KN_OK, "%s", kn_last_error());
    real_kernel = kn_cpu_backend.kernels->op[KN_OP_sgd_update].fn;
    kn_cpu_backend.kernels->op[KN_OP_sgd_update].fn = wrong_in_the_first_run;
    update_calls = 0;
    st = compiled_shadow_test_update(w, grad);
    kn_cpu_backend.kernels->op[KN_OP_sgd_update].fn = real_kernel;
    CHECK(kn_set_shadow(NULL) == KN_OK && kn_set_mode(KN_MODE_STRICT) == KN_OK);
    CHECK(st == KN_ERR_NUMERIC);
    CHECK_MSG(strstr(kn_last_error(), "differs from its ops run one by one at the memory written in place by "
                                      "sgd_update(f32[8, 4], f32[8, 4]) called from "
                                      "compiled_shadow_test_update+"),
              "message: %s", kn_last_error());
    CHECK_MSG(strstr(kn_last_error(), "max abs error 1.0e-02 at index [3]"), "message: %s", kn_last_error());
    kn_clear_error();
}

/* A program on the meta device has no values to check: the shadow leaves it alone (shapes
 * still come out), and a later program on the CPU is checked again. */
static void test_programs_without_values_are_not_checked(void) {
    CHECK(kn_set_mode(KN_MODE_COMPILED) == KN_OK && kn_set_shadow("cpu") == KN_OK);
    int64_t checked0, checked1;
    kn_shadow_counts(&checked0, NULL);
    CHECK(kn_set_default_device(KN_META) == KN_OK);
    kn_scope_push();
    kn_tensor *m = kn_sum(kn_gelu(kn_mul_scalar(kn_ones(KN_SHAPE(64, 32), KN_F32), 0.5)), KN_DIMS(1), false);
    CHECK(m && kn_sync() == KN_OK && kn_numel(m) == 64 && kn_device_of(m).type == KN_DEVICE_META);
    kn_scope_pop();
    CHECK(kn_set_default_device(KN_CPU) == KN_OK);
    kn_shadow_counts(&checked1, NULL);
    CHECK_MSG(checked1 == checked0, "%lld ops checked on meta", (long long)(checked1 - checked0));
    kn_scope_push();
    kn_tensor *c = kn_sum(kn_gelu(kn_ones(KN_SHAPE(4, 4), KN_F32)), KN_DIMS(1), false);
    CHECK(c && kn_sync() == KN_OK);
    kn_scope_pop();
    kn_shadow_counts(&checked1, NULL);
    CHECK(checked1 > checked0);
    CHECK(kn_set_shadow(NULL) == KN_OK && kn_set_mode(KN_MODE_STRICT) == KN_OK);
}

int main(void) {
    RUN(test_clean_step_passes_unchanged);
    RUN(test_wrong_prebuilt_kernel_is_named_with_its_caller);
    RUN(test_wrong_generated_kernel_is_named_by_the_value_it_hands_out);
    RUN(test_wrong_in_place_update_is_caught_in_the_memory_it_writes);
    RUN(test_programs_without_values_are_not_checked);
    return test_summary();
}
