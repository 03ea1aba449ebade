/* The dispatcher and the modes: asynchronous errors, debug checks, devices, dtypes, threads. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_strict_mode_reports_kernel_errors_at_sync(void) {
    kn_mode saved = debug_checks_off(); /* strict mode's deferred report, even under KILN_MODE=debug */
    kn_tensor *a = kn_full(KN_SHAPE(4), 7, KN_I32);
    kn_tensor *z = kn_zeros(KN_SHAPE(4), KN_I32);
    kn_tensor *q = kn_floor_divide(a, z); /* queued: the division runs later */
    CHECK(q != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "floor_divide: integer division by zero");
    CHECK(kn_sync() == KN_OK); /* reported once */
    debug_checks_restore(saved);
}

static void test_debug_mode_reports_kernel_errors_at_once(void) {
    CHECK(kn_set_mode(KN_MODE_DEBUG) == KN_OK);
    kn_tensor *a = kn_full(KN_SHAPE(4), 7, KN_I64);
    kn_tensor *z = kn_zeros(KN_SHAPE(4), KN_I64);
    CHECK_ERROR(kn_remainder(a, z) != NULL, KN_ERR_ARG, "remainder");
    CHECK(kn_set_mode(KN_MODE_STRICT) == KN_OK);
}

static void test_debug_mode_names_op_making_nan_from_finite_inputs(void) {
    kn_set_mode(KN_MODE_DEBUG);
    kn_tensor *x = kn_full(KN_SHAPE(2, 2), -4, KN_F32);
    CHECK_ERROR(kn_log(x) != NULL, KN_ERR_NUMERIC, "log(f32[2, 2])");
    /* A NaN that was already in the input is not this op's doing. */
    kn_tensor *nan = kn_full(KN_SHAPE(2), NAN, KN_F32);
    kn_tensor *y = kn_add_scalar(nan, 1);
    CHECK(y != NULL);
    kn_set_mode(KN_MODE_STRICT);
}

static void test_strict_and_debug_agree_bitwise(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(33, 17), KN_F32, -3, 3);
    kn_tensor *w = rand_tensor(KN_SHAPE(17, 9), KN_F32, -1, 1);
    kn_tensor *r[2];
    for (int m = 0; m < 2; m++) {
        kn_set_mode(m ? KN_MODE_DEBUG : KN_MODE_STRICT);
        r[m] = kn_mean(kn_gelu(kn_add_scalar(kn_matmul(x, w), 0.5)), KN_DIMS(1), false);
    }
    kn_set_mode(KN_MODE_STRICT);
    double *a = read_f64(r[0]), *b = read_f64(r[1]);
    CHECK(a && b && memcmp(a, b, sizeof(double) * 33) == 0);
    free(a);
    free(b);
}

/* Every mode can be set, and set back; a name that is no mode is refused. */
static void test_modes_can_be_set(void) {
    kn_mode before = kn_get_mode();
    const kn_mode modes[] = {KN_MODE_FUSED, KN_MODE_COMPILED, KN_MODE_DEBUG};
    for (int i = 0; i < 3; i++) {
        CHECK(kn_set_mode(modes[i]) == KN_OK);
        CHECK(kn_get_mode() == modes[i]);
    }
    CHECK(kn_set_mode(before) == KN_OK);
    CHECK(kn_get_mode() == before);
    CHECK_ERROR(kn_set_mode((kn_mode)KN_MODE_COUNT) == KN_OK, KN_ERR_ARG, "invalid mode");
    kn_mode m;
    CHECK(kn_mode_parse("debug", &m) && m == KN_MODE_DEBUG);
    CHECK(kn_mode_parse("fused", &m) && m == KN_MODE_FUSED);
    CHECK(kn_mode_parse("compiled", &m) && m == KN_MODE_COMPILED);
    CHECK(!kn_mode_parse("turbo", &m));
}

static void test_inputs_on_different_devices_are_refused(void) {
    kn_tensor *c = kn_ones(KN_SHAPE(3), KN_F32);
    kn_tensor *m = kn_to_device(c, KN_META);
    CHECK_ERROR(kn_mul(c, m) != NULL, KN_ERR_DEVICE, "input 1 is on meta:0 but input 0 is on cpu:0");
}

static void test_dtype_outside_op_class_is_refused(void) {
    kn_tensor *f = kn_ones(KN_SHAPE(3), KN_F32);
    CHECK_ERROR(kn_bitwise_and(f, f) != NULL, KN_ERR_DTYPE, "bitwise_and(f32[3], f32[3]): input 0 has dtype f32");
    kn_tensor *b = kn_ones(KN_SHAPE(3), KN_BOOL);
    CHECK_ERROR(kn_sub(b, b) != NULL, KN_ERR_DTYPE, "bool");
    CHECK_ERROR(kn_cast(f, (kn_dtype)99) != NULL, KN_ERR_DTYPE, "invalid target dtype");
}

static void test_shapes_that_do_not_broadcast_are_refused(void) {
    kn_tensor *a = kn_ones(KN_SHAPE(2, 3), KN_F32), *b = kn_ones(KN_SHAPE(4, 3), KN_F32);
    CHECK_ERROR(kn_add(a, b) != NULL, KN_ERR_SHAPE, "add(f32[2, 3], f32[4, 3])");
}

static void test_creation_arguments_are_checked(void) {
    CHECK_ERROR(kn_arange(0, 10, 0, KN_F32) != NULL, KN_ERR_ARG, "nonzero step");
    CHECK_ERROR(kn_arange(0, 10, -1, KN_F32) != NULL, KN_ERR_ARG, "points away");
    CHECK_ERROR(kn_randint(5, 5, KN_SHAPE(2), KN_I64) != NULL, KN_ERR_ARG, "below high");
    CHECK_ERROR(kn_zeros(KN_SHAPE(1, 1, 1, 1, 1, 1, 1, 1), (kn_dtype)-1) != NULL, KN_ERR_DTYPE, "invalid dtype");
}

/* Several host threads recording ops on the one CPU stream at once. */
static void *worker(void *arg) {
    double v = (double)(intptr_t)arg;
    double total = 0;
    kn_scope_push();
    for (int i = 0; i < 200; i++) {
        kn_tensor *t = kn_mul_scalar(kn_full(KN_SHAPE(64), v, KN_F64), 2);
        double s = 0;
        if (kn_item(kn_sum(t, KN_ALL_DIMS, false), &s) == KN_OK) total += s;
    }
    kn_scope_pop();
    return (void *)(intptr_t)(total == 200 * 64 * 2 * v);
}

static void test_ops_from_several_host_threads(void) {
    pthread_t th[4];
    for (intptr_t i = 0; i < 4; i++) pthread_create(&th[i], NULL, worker, (void *)(i + 1));
    for (int i = 0; i < 4; i++) {
        void *ok;
        pthread_join(th[i], &ok);
        CHECK_MSG(ok != NULL, "thread %d computed a wrong total", i);
    }
}

static void test_long_queues_drain_in_order(void) {
    kn_tensor *acc = kn_zeros(KN_SHAPE(16), KN_I64);
    kn_tensor *one = kn_ones(KN_SHAPE(16), KN_I64);
    kn_scope_push();
    kn_tensor *cur = acc;
    for (int i = 0; i < 10000; i++) cur = kn_add(cur, one); /* more nodes than the ring holds */
    double first = 0;
    kn_tensor *s = kn_select(cur, 0, 3);
    CHECK(kn_item(s, &first) == KN_OK && first == 10000);
    kn_scope_pop();
}

int main(void) {
    RUN(test_strict_mode_reports_kernel_errors_at_sync);
    RUN(test_debug_mode_reports_kernel_errors_at_once);
    RUN(test_debug_mode_names_op_making_nan_from_finite_inputs);
    RUN(test_strict_and_debug_agree_bitwise);
    RUN(test_modes_can_be_set);
    RUN(test_inputs_on_different_devices_are_refused);
    RUN(test_dtype_outside_op_class_is_refused);
    RUN(test_shapes_that_do_not_broadcast_are_refused);
    RUN(test_creation_arguments_are_checked);
    RUN(test_ops_from_several_host_threads);
    RUN(test_long_queues_drain_in_order);
    return test_summary();
}
