/* Devices, streams and events: cross-stream waits, per-stream errors, blocks not reused while
 * another stream still reads them, copies between devices, and bad input. Runs with two
 * logical CPU devices. A "gate" op (a custom kernel that waits until the test opens it) holds
 * a stream still, so every ordering below is forced, never timed. */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/backend.h"
#include "harness.h"

static atomic_int gate_open;
static int gate_id, fail_id;

static kn_status gate_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                          const kn_custom_attrs *attrs, void *user) {
    while (!atomic_load(&gate_open)) {
    }
    memcpy(out->data, in->data, (size_t)in->numel * sizeof(float));
    return KN_OK;
}

static kn_status fail_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                          const kn_custom_attrs *attrs, void *user) {
    return kn_set_error(KN_ERR_ARG, "boom at element 0");
}

/* gate(x): x's values, once the gate opens (x must be contiguous f32). */
static kn_tensor *gate(kn_tensor *x) { return kn_custom_call1(gate_id, 1, &x, NULL); }

static kn_tensor *vec(const float *v, int64_t n, kn_device d) { return kn_from_host(v, KN_F32, KN_SHAPE(n), d); }

static bool values_are(kn_tensor *t, const float *want, int n) {
    float got[16];
    if (kn_to_host(t, got, sizeof got) != KN_OK) return false;
    for (int i = 0; i < n; i++)
        if (got[i] != want[i]) return false;
    return true;
}

static void test_devices_and_properties(void) {
    CHECK(kn_device_count(KN_DEVICE_CPU) == 2);
    CHECK(kn_device_count(KN_DEVICE_META) == 1);
    kn_device_props p;
    CHECK(kn_device_properties((kn_device){KN_DEVICE_CPU, 1}, &p) == KN_OK);
    CHECK(strncmp(p.name, "cpu:1", 5) == 0 && p.device.index == 1);
    CHECK(p.holds_values && p.host_memory && p.total_memory_bytes > 0);
    CHECK(p.max_streams > 1 && p.streams >= 1);
    kn_stream *s = kn_stream_new((kn_device){KN_DEVICE_CPU, 1});
    kn_device_props q;
    CHECK(kn_device_properties((kn_device){KN_DEVICE_CPU, 1}, &q) == KN_OK && q.streams == p.streams + 1);
    kn_stream_free(s);
    CHECK(kn_device_properties(KN_META, &p) == KN_OK && !p.holds_values);
    CHECK_ERROR(kn_device_properties((kn_device){KN_DEVICE_CPU, 2}, &p) == KN_OK, KN_ERR_DEVICE, "not available");
    CHECK_ERROR(kn_device_properties(KN_CPU, NULL) == KN_OK, KN_ERR_NULL, "NULL");
}

static void test_set_stream_returns_the_previous_one(void) {
    kn_stream *dflt = kn_default_stream(KN_CPU);
    kn_stream *a = kn_stream_new(KN_CPU);
    CHECK(dflt && a && a != dflt && kn_current_stream(KN_CPU) == dflt);
    kn_stream *prev = kn_set_stream(a);
    CHECK(prev == dflt && kn_current_stream(KN_CPU) == a);
    CHECK(kn_current_stream((kn_device){KN_DEVICE_CPU, 1}) == kn_default_stream((kn_device){KN_DEVICE_CPU, 1}));
    CHECK(kn_set_stream(prev) == a && kn_current_stream(KN_CPU) == dflt);
    kn_set_stream(a);
    kn_stream_free(a); /* the current stream: the thread goes back to the default one */
    CHECK(kn_current_stream(KN_CPU) == dflt);
}

/* B waits on A's event and sees A's result; while A is held, neither event fires. Without
 * the wait, B's add would read z before A wrote it. */
static void test_cross_stream_wait(void) {
    const float v[4] = {1, 2, 3, 4};
    kn_scope_push();
    kn_tensor *x = vec(v, 4, KN_CPU);
    CHECK(kn_sync() == KN_OK); /* x is written on the default stream, which A does not wait for */
    kn_stream *a = kn_stream_new(KN_CPU), *b = kn_stream_new(KN_CPU);
    kn_event *start = kn_event_new(), *done_a = kn_event_new(), *done_b = kn_event_new();
    atomic_store(&gate_open, 0);

    kn_stream *prev = kn_set_stream(a);
    CHECK(kn_event_record(start, a) == KN_OK);
    kn_tensor *z = kn_mul_scalar(gate(x), 2);
    CHECK(kn_event_record(done_a, a) == KN_OK);
    kn_set_stream(b);
    CHECK(kn_stream_wait_event(b, done_a) == KN_OK);
    kn_tensor *w = kn_add_scalar(z, 1);
    CHECK(kn_event_record(done_b, b) == KN_OK);
    kn_set_stream(prev);

    CHECK(!kn_event_query(done_a) && !kn_event_query(done_b));
    atomic_store(&gate_open, 1);
    CHECK(kn_stream_sync(b) == KN_OK);
    CHECK(kn_event_query(done_a) && kn_event_query(done_b));
    const float want[4] = {3, 5, 7, 9};
    CHECK(values_are(w, want, 4));
    double ms = -1;
    CHECK(kn_event_elapsed_ms(start, done_a, &ms) == KN_OK && ms >= 0);
    CHECK(kn_event_sync(done_b) == KN_OK);
    kn_event_free(start);
    kn_event_free(done_a);
    kn_event_free(done_b);
    kn_scope_pop();
    kn_stream_free(a);
    kn_stream_free(b);
}

/* x is freed by its owner while stream B (held by the gate) still has to read it; a block of
 * the same size is then taken and written on stream A. B must still read x's values, and x's
 * block goes back to the pool only once B has run. */
static void test_block_not_reused_while_another_stream_reads_it(void) {
    const float v[4] = {1, 2, 3, 4}, other[4] = {-7, -7, -7, -7};
    kn_stream *a = kn_stream_new(KN_CPU), *b = kn_stream_new(KN_CPU);
    CHECK(kn_sync() == KN_OK);
    kn_scope_push();
    kn_tensor *x = kn_keep(vec(v, 4, KN_CPU));
    kn_tensor *held = kn_keep(vec(v, 4, KN_CPU));
    CHECK(kn_sync() == KN_OK);
    atomic_store(&gate_open, 0);

    kn_stream *prev = kn_set_stream(b);
    kn_tensor *r = kn_keep(kn_add(gate(held), x)); /* B: held back by the gate, then reads x */
    kn_set_stream(prev);
    kn_scope_pop();
    kn_memory_stats before;
    kn_memory_stats_get(KN_CPU, &before);
    kn_release(x);
    kn_memory_stats after_free;
    kn_memory_stats_get(KN_CPU, &after_free);
    CHECK(after_free.allocated_bytes == before.allocated_bytes); /* still in use on B */

    kn_set_stream(a);
    kn_tensor *y = vec(other, 4, KN_CPU); /* same size, written on A */
    kn_set_stream(prev);
    CHECK(kn_stream_sync(a) == KN_OK); /* y is written while B still waits to read x */

    atomic_store(&gate_open, 1);
    CHECK(kn_stream_sync(b) == KN_OK);
    const float want[4] = {2, 4, 6, 8};
    CHECK(values_are(r, want, 4));
    CHECK(values_are(y, other, 4));
    kn_release(y);
    CHECK(kn_sync() == KN_OK);
    kn_memory_stats done;
    kn_memory_stats_get(KN_CPU, &done);
    CHECK(done.allocated_bytes < before.allocated_bytes); /* x's block came back once B had run */
    CHECK(done.cached_bytes > before.cached_bytes);
    kn_release(r);
    kn_release(held);
    kn_stream_free(a);
    kn_stream_free(b);
}

/* An error on A is A's: B's sync is clean, A's sync and an event recorded after it report it
 * (naming the op, its input and the device), and kn_sync reports the next one. */
static void test_async_error_belongs_to_its_stream(void) {
    const float v[4] = {1, 2, 3, 4};
    kn_scope_push();
    kn_tensor *x = vec(v, 4, KN_CPU);
    kn_stream *a = kn_stream_new(KN_CPU), *b = kn_stream_new(KN_CPU);
    kn_event *e = kn_event_new();
    CHECK(kn_sync() == KN_OK);
    kn_stream *prev = kn_set_stream(a);
    CHECK(kn_custom_call1(fail_id, 1, &x, NULL) != NULL); /* queued: fails later, on A */
    CHECK(kn_event_record(e, a) == KN_OK);
    kn_set_stream(b);
    kn_tensor *ok = kn_add_scalar(x, 1);
    kn_set_stream(prev);
    CHECK(kn_stream_sync(b) == KN_OK);
    CHECK_ERROR(kn_event_sync(e) == KN_OK, KN_ERR_ARG, "boom at element 0");
    CHECK(kn_stream_sync(a) == KN_ERR_ARG);
    const char *msg = kn_last_error();
    CHECK_MSG(strstr(msg, "boom at element 0") && strstr(msg, "by stream_fail(f32[4]) on cpu:0, stream"),
              "the error names the op, its input, the device and the stream: %s", msg);
    CHECK(kn_stream_sync(a) == KN_OK); /* reported once */
    const float want[4] = {2, 3, 4, 5};
    CHECK(values_are(ok, want, 4));

    kn_set_stream(a);
    CHECK(kn_custom_call1(fail_id, 1, &x, NULL) != NULL);
    kn_set_stream(prev);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "boom at element 0");
    CHECK(kn_sync() == KN_OK);
    kn_event_free(e);
    kn_scope_pop();
    kn_stream_free(a);
    kn_stream_free(b);
}

/* cpu:0 -> cpu:1 and back: one copy on the source's stream, which cpu:1's stream waits for;
 * the gate holds the source so that a copy that did not wait would read too early. */
static void test_device_to_device_copy(void) {
    const float v[6] = {1, 2, 3, 4, 5, 6};
    kn_device cpu1 = {KN_DEVICE_CPU, 1};
    kn_scope_push();
    kn_memory_stats s1;
    kn_memory_stats_get(cpu1, &s1);
    atomic_store(&gate_open, 0);
    kn_tensor *x = gate(kn_reshape(vec(v, 6, KN_CPU), KN_SHAPE(2, 3)));
    kn_tensor *y = kn_to_device(kn_transpose(x, 0, 1), cpu1); /* [3, 2], not contiguous on cpu:0 */
    CHECK(y && kn_device_of(y).type == KN_DEVICE_CPU && kn_device_of(y).index == 1);
    kn_tensor *y2 = kn_mul_scalar(y, 10); /* on cpu:1's stream */
    atomic_store(&gate_open, 1);
    const float want[6] = {10, 40, 20, 50, 30, 60};
    CHECK(values_are(y2, want, 6));
    kn_memory_stats t1;
    kn_memory_stats_get(cpu1, &t1);
    CHECK(t1.alloc_count > s1.alloc_count); /* cpu:1 has its own pool */
    kn_tensor *back = kn_to_device(y2, KN_CPU);
    CHECK(back && kn_device_of(back).index == 0 && values_are(back, want, 6));
    CHECK(kn_to_device(back, KN_CPU) != NULL); /* on one device: the same values, no copy */
    CHECK_ERROR(kn_add(back, y2) != NULL, KN_ERR_DEVICE, "cpu:1");
    kn_scope_pop();
}

static void test_bad_input(void) {
    kn_device cpu9 = {KN_DEVICE_CPU, 9};
    CHECK_ERROR(kn_stream_new(cpu9) != NULL, KN_ERR_DEVICE, "cpu:9 is not available");
    CHECK_ERROR(kn_default_stream(cpu9) != NULL, KN_ERR_DEVICE, "cpu:9");
    CHECK_ERROR(kn_stream_sync(NULL) == KN_OK, KN_ERR_NULL, "stream_sync: the stream is NULL");
    CHECK_ERROR(kn_set_stream(NULL) != NULL, KN_ERR_NULL, "set_stream");
    kn_stream *s = kn_stream_new(KN_CPU);
    kn_stream_free(s);
    CHECK_ERROR(kn_stream_sync(s) == KN_OK, KN_ERR_ARG, "the stream was freed");
    kn_clear_error();
    kn_stream_free(s);
    CHECK(kn_last_status() == KN_ERR_ARG);
    kn_clear_error();
    kn_stream_free(kn_default_stream(KN_CPU));
    CHECK_ERROR(false, KN_ERR_ARG, "the default stream of cpu:0 cannot be freed");
    kn_stream_free(NULL); /* a no-op */

    kn_event *e = kn_event_new(), *f = kn_event_new();
    CHECK_ERROR(kn_event_record(NULL, kn_default_stream(KN_CPU)) == KN_OK, KN_ERR_NULL, "event_record: the event is NULL");
    CHECK_ERROR(kn_event_record(e, NULL) == KN_OK, KN_ERR_NULL, "event_record: the stream is NULL");
    CHECK_ERROR(kn_stream_wait_event(kn_default_stream(KN_CPU), NULL) == KN_OK, KN_ERR_NULL, "stream_wait_event");
    CHECK(kn_event_query(e)); /* never recorded: nothing to wait for */
    CHECK(kn_event_sync(e) == KN_OK);
    double ms;
    CHECK_ERROR(kn_event_elapsed_ms(e, f, &ms) == KN_OK, KN_ERR_ARG, "never recorded");
    CHECK(kn_event_record(e, kn_default_stream(KN_CPU)) == KN_OK);
    CHECK(kn_event_record(f, kn_default_stream((kn_device){KN_DEVICE_CPU, 1})) == KN_OK);
    CHECK_ERROR(kn_event_elapsed_ms(e, f, &ms) == KN_OK, KN_ERR_DEVICE, "recorded on cpu:0 and cpu:1");
    CHECK_ERROR(kn_event_elapsed_ms(e, e, NULL) == KN_OK, KN_ERR_NULL, "output pointer");
    kn_event_free(f);
    CHECK_ERROR(kn_event_sync(f) == KN_OK, KN_ERR_ARG, "the event was freed");
    CHECK_ERROR(kn_event_query(f), KN_ERR_ARG, "event_query: the event was freed");
    CHECK(kn_event_elapsed_ms(e, e, &ms) == KN_OK && ms == 0);
    kn_event_free(e);
    kn_event_free(NULL);
}

static void test_registry_refuses_bad_backends(void) {
    CHECK_ERROR(kn_backend_register(NULL) == KN_OK, KN_ERR_NULL, "NULL");
    static kn_backend twin;
    twin = kn_cpu_backend;
    twin.name = "twin";
    CHECK_ERROR(kn_backend_register(&twin) == KN_OK, KN_ERR_ARG, "the cpu backend is registered for cpu devices already");
    static kn_backend no_kernels;
    no_kernels = kn_cpu_backend;
    no_kernels.name = "no_kernels";
    no_kernels.type = KN_DEVICE_CUDA;
    no_kernels.kernels = NULL;
    CHECK_ERROR(kn_backend_register(&no_kernels) == KN_OK, KN_ERR_ARG, "backend_register(no_kernels): it has no kernel table");
    CHECK(kn_backend_for(KN_DEVICE_CUDA) != &no_kernels);
    CHECK(kn_backend_for(KN_DEVICE_CPU) == &kn_cpu_backend);
    CHECK(kn_backend_for(KN_DEVICE_CUDA) != NULL || kn_device_count(KN_DEVICE_CUDA) == 0);
}

/* Meta streams and events do nothing, and say so consistently. */
static void test_meta_streams(void) {
    kn_stream *m = kn_stream_new(KN_META);
    kn_event *e = kn_event_new();
    CHECK(m && kn_event_record(e, m) == KN_OK && kn_event_query(e));
    kn_stream *prev = kn_set_stream(m);
    const float v[4] = {1, 2, 3, 4};
    kn_tensor *h = vec(v, 4, KN_CPU), *t = kn_to_device(h, KN_META);
    kn_tensor *u = kn_add(t, t);
    CHECK(u != NULL && kn_stream_sync(m) == KN_OK);
    kn_set_stream(prev);
    kn_release(u);
    kn_release(t);
    kn_release(h);
    kn_event_free(e);
    kn_stream_free(m);
}

int main(void) {
    setenv("KILN_CPU_DEVICES", "2", 1);
    gate_id = kn_custom_op_register(
        &(kn_custom_op_def){.name = "stream_gate", .n_inputs = 1, .n_outputs = 1, .kernels[KN_DEVICE_CPU] = gate_cpu});
    fail_id = kn_custom_op_register(
        &(kn_custom_op_def){.name = "stream_fail", .n_inputs = 1, .n_outputs = 1, .kernels[KN_DEVICE_CPU] = fail_cpu});
    CHECK_MSG(gate_id >= 0 && fail_id >= 0, "registration failed: %s", kn_last_error());
    RUN(test_devices_and_properties);
    RUN(test_set_stream_returns_the_previous_one);
    RUN(test_cross_stream_wait);
    RUN(test_block_not_reused_while_another_stream_reads_it);
    RUN(test_async_error_belongs_to_its_stream);
    RUN(test_device_to_device_copy);
    RUN(test_bad_input);
    RUN(test_registry_refuses_bad_backends);
    RUN(test_meta_streams);
    return test_summary();
}
