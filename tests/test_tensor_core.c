/* Tensors: creation, host round trips, printing, scopes and reference counts. */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

static void test_from_host_round_trips_every_dtype(void) {
    double v[6] = {0, 1, -2, 3.5, 100, -0.25};
    for (int k = 0; k < KN_DTYPE_COUNT; k++) {
        kn_dtype d = ALL_DTYPES[k];
        kn_tensor *t = tensor_from(v, KN_SHAPE(2, 3), d);
        double want[6];
        for (int i = 0; i < 6; i++)
            want[i] = d == KN_BOOL ? v[i] != 0 : kn_dtype_is_int(d) ? trunc(v[i]) : v[i];
        CHECK_SHAPE(t, KN_SHAPE(2, 3));
        CHECK_CLOSE(t, want, tol_for(d), kn_dtype_name(d));
    }
}

static void test_item_reads_one_element(void) {
    kn_tensor *t = kn_full(KN_SHAPE(1, 1), 7.5, KN_F32);
    double v = 0;
    CHECK(kn_item(t, &v) == KN_OK && v == 7.5);
    kn_tensor *two = kn_zeros(KN_SHAPE(2), KN_F32);
    CHECK_ERROR(kn_item(two, &v) == KN_OK, KN_ERR_SHAPE, "2 elements");
}

static void test_to_host_rejects_short_buffer(void) {
    kn_tensor *t = kn_zeros(KN_SHAPE(4), KN_F32);
    float buf[2];
    CHECK_ERROR(kn_to_host(t, buf, sizeof buf) == KN_OK, KN_ERR_ARG, "needs 16 bytes");
}

static void test_print_is_readable(void) {
    kn_tensor *t = kn_arange(0, 6, 1, KN_F32);
    kn_tensor *m = kn_reshape(t, KN_SHAPE(2, 3));
    char *s = kn_to_string(m);
    CHECK(s && strstr(s, "tensor([[0, 1, 2],") && strstr(s, "f32[2, 3]"));
    free(s);
    kn_tensor *big = kn_arange(0, 5000, 1, KN_I64);
    s = kn_to_string(big);
    CHECK(s && strstr(s, "...") && strlen(s) < 200);
    free(s);
    kn_tensor *b = kn_gt(t, kn_scalar(2, KN_F32));
    s = kn_to_string(b);
    CHECK(s && strstr(s, "False") && strstr(s, "True") && strstr(s, "bool[6]"));
    free(s);
}

static void test_scope_releases_temporaries(void) {
    kn_memory_stats before, after;
    kn_sync();
    kn_memory_stats_get(KN_CPU, &before);
    kn_scope_push();
    for (int i = 0; i < 10; i++) kn_exp(kn_ones(KN_SHAPE(1000), KN_F32));
    kn_scope_pop();
    kn_sync();
    kn_memory_stats_get(KN_CPU, &after);
    CHECK_MSG(after.allocated_bytes == before.allocated_bytes, "allocated %lld before, %lld after",
              (long long)before.allocated_bytes, (long long)after.allocated_bytes);
}

static void test_keep_carries_result_out_of_scope(void) {
    kn_scope_push();
    kn_tensor *kept = kn_scope_pop_keep(kn_full(KN_SHAPE(3), 2, KN_F32));
    double want[3] = {2, 2, 2};
    CHECK_CLOSE(kept, want, tol_for(KN_F32), "kept");
}

static void test_release_outside_scope_frees(void) {
    kn_scope_push();
    kn_tensor *t = kn_zeros(KN_SHAPE(8), KN_F32);
    kn_release(t); /* early release of a scoped tensor must not double free at pop */
    kn_scope_pop();
}

static void test_allocator_reuses_blocks_and_tracks_peak(void) {
    kn_sync();
    kn_memory_reset_peak(KN_CPU);
    kn_memory_stats a, b;
    kn_memory_stats_get(KN_CPU, &a);
    kn_tensor *t = kn_zeros(KN_SHAPE(1 << 20), KN_F32);
    kn_sync();
    kn_memory_stats_get(KN_CPU, &b);
    CHECK(b.allocated_bytes - a.allocated_bytes >= (4 << 20));
    CHECK(b.peak_allocated_bytes >= b.allocated_bytes);
    kn_release(t);
    kn_sync();
    kn_memory_stats c;
    kn_memory_stats_get(KN_CPU, &c);
    CHECK(c.allocated_bytes == a.allocated_bytes);
    CHECK(c.cached_bytes >= (4 << 20));
    kn_tensor *again = kn_zeros(KN_SHAPE(1 << 20), KN_F32);
    kn_sync();
    kn_memory_stats d;
    kn_memory_stats_get(KN_CPU, &d);
    CHECK(d.cache_hits > c.cache_hits);
    CHECK(d.system_allocs == c.system_allocs);
    kn_release(again);
    kn_memory_empty_cache(KN_CPU);
    kn_memory_stats e;
    kn_memory_stats_get(KN_CPU, &e);
    CHECK(e.cached_bytes == 0);
    CHECK(e.reserved_bytes == e.allocated_bytes);
}

static void test_huge_allocation_is_an_error(void) {
    kn_tensor *t = kn_zeros(KN_SHAPE(1ll << 40, 1ll << 20), KN_F32);
    CHECK_ERROR(t != NULL, KN_ERR_OOM, "fill");
    kn_tensor *u = kn_empty(KN_SHAPE(1ll << 36), KN_F64); /* 512 GiB: refused by the system */
    CHECK_ERROR(u != NULL, KN_ERR_OOM, "bytes");
}

/* An empty tensor's strides are products of its non-zero dims: ones past int64 are refused. */
static void test_empty_tensor_with_overflowing_strides_is_an_error(void) {
    int64_t big = (int64_t)1 << 53;
    CHECK_ERROR(kn_empty(KN_SHAPE(0, big, big), KN_F32) != NULL, KN_ERR_SHAPE, "multiply past 2^63");
    kn_tensor *t = kn_empty(KN_SHAPE(0, (int64_t)1 << 31, (int64_t)1 << 31), KN_F32);
    CHECK(t && kn_numel(t) == 0 && kn_stride(t, 0) == (int64_t)1 << 62 && kn_stride(t, 1) == (int64_t)1 << 31);
    kn_release(t);
}

static void test_negative_size_is_an_error(void) {
    CHECK_ERROR(kn_zeros(KN_SHAPE(2, -3), KN_F32) != NULL, KN_ERR_SHAPE, "negative size");
}

static void test_null_inputs_keep_first_error(void) {
    kn_tensor *bad = kn_matmul(kn_zeros(KN_SHAPE(2, 3), KN_F32), kn_zeros(KN_SHAPE(2, 3), KN_F32));
    CHECK(bad == NULL);
    kn_tensor *r = kn_exp(kn_add(bad, bad));
    CHECK(r == NULL);
    CHECK_ERROR(r != NULL, KN_ERR_SHAPE, "matmul");
    CHECK_ERROR(kn_exp(NULL) != NULL, KN_ERR_NULL, "exp: input 0 is NULL");
}

static void test_meta_device_has_shapes_without_values(void) {
    kn_tensor *a = kn_to_device(kn_ones(KN_SHAPE(64, 128), KN_F32), KN_META);
    kn_tensor *b = kn_to_device(kn_ones(KN_SHAPE(128, 32), KN_F32), KN_META);
    kn_meta_trace_reset();
    kn_tensor *c = kn_relu(kn_matmul(a, b));
    CHECK_SHAPE(c, KN_SHAPE(64, 32));
    CHECK(kn_device_of(c).type == KN_DEVICE_META);
    kn_meta_trace tr;
    kn_meta_trace_get(&tr);
    CHECK(tr.ops == 2);
    CHECK(tr.flops >= 2.0 * 64 * 32 * 128);
    CHECK(kn_meta_trace_op_count("matmul") == 1);
    float buf[64 * 32];
    CHECK_ERROR(kn_to_host(c, buf, sizeof buf) == KN_OK, KN_ERR_DEVICE, "meta");
    CHECK_ERROR(kn_to_device(c, KN_CPU) != NULL, KN_ERR_DEVICE, "no values");
    CHECK_ERROR(kn_add(c, kn_ones(KN_SHAPE(64, 32), KN_F32)) != NULL, KN_ERR_DEVICE, "meta");
}

static void test_meta_counts_conv_and_attention_flops(void) {
    kn_set_default_device(KN_META);
    kn_tensor *x = kn_empty(KN_SHAPE(8, 64, 32, 32), KN_F32), *w = kn_empty(KN_SHAPE(128, 64, 3, 3), KN_F32);
    kn_tensor *q = kn_empty(KN_SHAPE(2, 4, 128, 64), KN_F32);
    kn_set_default_device(KN_CPU);
    kn_meta_trace_reset();
    kn_tensor *y = kn_conv2d(x, w, NULL, (kn_conv_opts){.padding = {1, 1}});
    kn_meta_trace tr;
    kn_meta_trace_get(&tr);
    CHECK_SHAPE(y, KN_SHAPE(8, 128, 32, 32));
    CHECK(tr.flops == 2.0 * 8 * 128 * 32 * 32 * 64 * 9);
    kn_meta_trace_reset();
    kn_tensor *o = kn_scaled_dot_product_attention(q, q, q, NULL, (kn_sdpa_opts){.causal = true});
    kn_meta_trace_get(&tr);
    CHECK_SHAPE(o, KN_SHAPE(2, 4, 128, 64));
    CHECK(tr.flops == 4.0 * 2 * 4 * 128 * 128 * 64);
}

static void test_meta_traces_huge_model_without_memory(void) {
    kn_set_default_device(KN_META);
    kn_tensor *x = kn_empty(KN_SHAPE(1 << 14, 1 << 14), KN_F32); /* 1 GiB if it were real */
    kn_tensor *y = kn_matmul(x, x);
    kn_set_default_device(KN_CPU);
    CHECK_SHAPE(y, KN_SHAPE(1 << 14, 1 << 14));
    kn_memory_stats cpu;
    kn_memory_stats_get(KN_CPU, &cpu);
    CHECK(cpu.allocated_bytes < (1 << 30));
}

int main(void) {
    RUN(test_from_host_round_trips_every_dtype);
    RUN(test_item_reads_one_element);
    RUN(test_to_host_rejects_short_buffer);
    RUN(test_print_is_readable);
    RUN(test_scope_releases_temporaries);
    RUN(test_keep_carries_result_out_of_scope);
    RUN(test_release_outside_scope_frees);
    RUN(test_allocator_reuses_blocks_and_tracks_peak);
    RUN(test_huge_allocation_is_an_error);
    RUN(test_empty_tensor_with_overflowing_strides_is_an_error);
    RUN(test_negative_size_is_an_error);
    RUN(test_null_inputs_keep_first_error);
    RUN(test_meta_device_has_shapes_without_values);
    RUN(test_meta_counts_conv_and_attention_flops);
    RUN(test_meta_traces_huge_model_without_memory);
    return test_summary();
}
