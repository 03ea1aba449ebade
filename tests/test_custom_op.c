/* Custom ops registered from C (include/kiln/custom_op.h): C-function kernels and source
 * kernels, forward against float64 references and backward by gradcheck, in every mode this
 * build has and on the meta device; registration, call and kernel errors. */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gradcheck.h"

/* Every mode the ops run in (a mode a build refuses would be skipped). */
static const kn_mode MODES[] = {KN_MODE_STRICT, KN_MODE_DEBUG, KN_MODE_FUSED};
#define N_MODES (int)(sizeof MODES / sizeof MODES[0])

static bool enter_mode(kn_mode m) {
    if (kn_set_mode(m) == KN_OK) return true;
    kn_clear_error();
    return false;
}

/* ---- kernels' view of tensors ------------------------------------------------------------ */

/* Offset in elements of row-major element i of t (any strides). */
static int64_t elem_offset(const kn_custom_tensor *t, int64_t i) {
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->shape[d]) * t->strides[d];
        i /= t->shape[d];
    }
    return off;
}

static double load(const kn_custom_tensor *t, int64_t i) {
    int64_t k = elem_offset(t, i);
    return t->dtype == KN_F32 ? ((const float *)t->data)[k] : ((const double *)t->data)[k];
}

static void store(const kn_custom_tensor *t, int64_t i, double v) {
    if (t->dtype == KN_F32) ((float *)t->data)[i] = (float)v;
    else ((double *)t->data)[i] = v;
}

static kn_status float_only(kn_tensor *const *in, int n_in) {
    for (int i = 0; i < n_in; i++) {
        kn_dtype d = kn_dtype_of(in[i]);
        if (d != KN_F32 && d != KN_F64)
            return kn_set_error(KN_ERR_DTYPE, "input %d is %s; the op takes f32 and f64", i, kn_dtype_name(d));
    }
    return KN_OK;
}

/* ---- my_softplus: unary, its own shape rule, a backward --------------------------------- */

static kn_status same_as_input(kn_tensor *const *in, int n_in, const kn_custom_attrs *attrs, kn_shape *shapes,
                               kn_dtype *dtypes, void *user) {
    kn_status st = float_only(in, n_in);
    shapes[0] = kn_shape_of(in[0]);
    dtypes[0] = kn_dtype_of(in[0]);
    return st;
}

static kn_status softplus_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                              const kn_custom_attrs *attrs, void *user) {
    for (int64_t i = 0; i < out->numel; i++) store(out, i, log1p(exp(load(&in[0], i))));
    return KN_OK;
}

static kn_status softplus_backward(const kn_custom_grad_ctx *c, kn_tensor *const *g, kn_tensor **gin) {
    gin[0] = kn_mul(g[0], kn_sigmoid(c->in[0]));
    return gin[0] ? KN_OK : kn_last_status();
}

/* ---- my_sincos: two outputs ---------------------------------------------------------------- */

static kn_status sincos_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                            const kn_custom_attrs *attrs, void *user) {
    for (int64_t i = 0; i < out[0].numel; i++) {
        double x = load(&in[0], i);
        store(&out[0], i, sin(x));
        store(&out[1], i, cos(x));
    }
    return KN_OK;
}

static kn_status sincos_backward(const kn_custom_grad_ctx *c, kn_tensor *const *g, kn_tensor **gin) {
    /* d sin = cos = out[1], d cos = -sin = -out[0] */
    gin[0] = kn_sub(kn_mul(g[0], c->out[1]), kn_mul(g[1], c->out[0]));
    return gin[0] ? KN_OK : kn_last_status();
}

/* ---- my_hypot: two inputs, elementwise (broadcast by kiln), scale attribute f[0] ---------- */

static kn_status hypot_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                           const kn_custom_attrs *attrs, void *user) {
    for (int64_t i = 0; i < out->numel; i++) {
        double x = load(&in[0], i), y = load(&in[1], i);
        store(out, i, attrs->f[0] * sqrt(x * x + y * y));
    }
    return KN_OK;
}

static kn_status hypot_backward(const kn_custom_grad_ctx *c, kn_tensor *const *g, kn_tensor **gin) {
    /* d/dx s*sqrt(x^2 + y^2) = s^2 x / out */
    kn_tensor *k = kn_mul_scalar(kn_div(g[0], c->out[0]), c->attrs->f[0] * c->attrs->f[0]);
    if (c->needs[0]) gin[0] = kn_mul(k, c->in[0]);
    if (c->needs[1]) gin[1] = kn_mul(k, c->in[1]);
    return k ? KN_OK : kn_last_status();
}

/* ---- my_rowsum: a shape rule that refuses inputs; no backward ----------------------------- */

static kn_status rowsum_infer(kn_tensor *const *in, int n_in, const kn_custom_attrs *attrs, kn_shape *shapes,
                              kn_dtype *dtypes, void *user) {
    if (kn_ndim(in[0]) != 2) return kn_set_error(KN_ERR_SHAPE, "expects a 2-d input, got %d-d", kn_ndim(in[0]));
    shapes[0] = KN_SHAPE(kn_size(in[0], 0));
    dtypes[0] = kn_dtype_of(in[0]);
    return float_only(in, n_in);
}

static kn_status rowsum_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                            const kn_custom_attrs *attrs, void *user) {
    int64_t cols = in[0].shape[1];
    for (int64_t r = 0; r < out->numel; r++) {
        double s = 0;
        for (int64_t k = 0; k < cols; k++) s += load(&in[0], r * cols + k);
        store(out, r, s);
    }
    return KN_OK;
}

/* ---- my_checked: a kernel that reports a data-dependent error ------------------------------ */

static kn_status checked_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                             const kn_custom_attrs *attrs, void *user) {
    for (int64_t i = 0; i < out->numel; i++) {
        double x = load(&in[0], i);
        if (x < 0) return kn_set_error(KN_ERR_ARG, "element %lld is negative", (long long)i);
        store(out, i, sqrt(x));
    }
    return KN_OK;
}

/* ---- source kernels: my_swish (unary, attribute a) and my_gate (two inputs, a and b) ------ */

#define SWISH_SOURCE "x * kn_sigmoid(a * x)"

static kn_status swish_backward(const kn_custom_grad_ctx *c, kn_tensor *const *g, kn_tensor **gin) {
    /* d/dx x s(ax) = s + a x s (1 - s) */
    double a = c->attrs->f[0];
    kn_tensor *s = kn_sigmoid(kn_mul_scalar(c->in[0], a));
    kn_tensor *ds = kn_mul(kn_mul_scalar(c->in[0], a), kn_mul(s, kn_add_scalar(kn_neg(s), 1)));
    gin[0] = kn_mul(g[0], kn_add(s, ds));
    return gin[0] ? KN_OK : kn_last_status();
}

static kn_status gate_backward(const kn_custom_grad_ctx *c, kn_tensor *const *g, kn_tensor **gin) {
    /* x s(a y) + b: dx = s, dy = a x s (1 - s) */
    double a = c->attrs->f[0];
    kn_tensor *s = kn_sigmoid(kn_mul_scalar(c->in[1], a));
    if (c->needs[0]) gin[0] = kn_mul(g[0], s);
    if (c->needs[1]) gin[1] = kn_mul(g[0], kn_mul_scalar(kn_mul(c->in[0], kn_mul(s, kn_add_scalar(kn_neg(s), 1))), a));
    return s ? KN_OK : kn_last_status();
}

/* ---- my_count_positive: an integer output, which needs no gradient ------------------------ */

static kn_status count_infer(kn_tensor *const *in, int n_in, const kn_custom_attrs *attrs, kn_shape *shapes,
                             kn_dtype *dtypes, void *user) {
    shapes[0] = KN_SHAPE0;
    dtypes[0] = KN_I64;
    return float_only(in, n_in);
}

static kn_status count_cpu(const kn_custom_tensor *in, int n_in, const kn_custom_tensor *out, int n_out,
                           const kn_custom_attrs *attrs, void *user) {
    int64_t count = 0;
    for (int64_t i = 0; i < in[0].numel; i++) count += load(&in[0], i) > 0;
    *(int64_t *)out->data = count;
    return KN_OK;
}

static int count_id, softplus_id, sincos_id, hypot_id, rowsum_id, checked_id, cuda_only_id, swish_id, gate_id;

static void register_ops(void) {
    softplus_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_softplus", .n_inputs = 1, .n_outputs = 1,
                                                            .infer = same_as_input,
                                                            .kernels[KN_DEVICE_CPU] = softplus_cpu,
                                                            .backward = softplus_backward});
    sincos_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_sincos", .n_inputs = 1, .n_outputs = 2,
                                                          .infer = NULL, .kernels[KN_DEVICE_CPU] = sincos_cpu,
                                                          .backward = sincos_backward});
    hypot_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_hypot", .n_inputs = 2, .n_outputs = 1,
                                                         .kernels[KN_DEVICE_CPU] = hypot_cpu,
                                                         .backward = hypot_backward});
    rowsum_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_rowsum", .n_inputs = 1, .n_outputs = 1,
                                                          .infer = rowsum_infer, .kernels[KN_DEVICE_CPU] = rowsum_cpu});
    checked_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_checked", .n_inputs = 1, .n_outputs = 1,
                                                           .kernels[KN_DEVICE_CPU] = checked_cpu});
    swish_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_swish", .n_inputs = 1, .n_outputs = 1,
                                                         .source = SWISH_SOURCE, .backward = swish_backward});
    gate_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_gate", .n_inputs = 2, .n_outputs = 1,
                                                        .source = "x * kn_sigmoid(a * y) + b",
                                                        .backward = gate_backward});
    count_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_count_positive", .n_inputs = 1, .n_outputs = 1,
                                                         .infer = count_infer, .kernels[KN_DEVICE_CPU] = count_cpu});
    cuda_only_id = kn_custom_op_register(&(kn_custom_op_def){.name = "my_cuda_only", .n_inputs = 1, .n_outputs = 1,
                                                             .kernels[KN_DEVICE_CUDA] = softplus_cpu});
}

/* ---- forward and backward in every mode ---------------------------------------------------- */

static kn_tensor *f_softplus(kn_tensor *const *in, const void *ctx) { return kn_custom_call1(softplus_id, 1, in, NULL); }

static kn_tensor *f_sincos(kn_tensor *const *in, const void *ctx) {
    kn_tensor *out[2];
    if (kn_custom_call(sincos_id, 1, in, NULL, out) != KN_OK) return NULL;
    /* ctx picks which outputs reach the loss: 0 sin only, 1 cos only, 2 both */
    int which = *(const int *)ctx;
    return which == 0 ? out[0] : which == 1 ? out[1] : kn_add(out[0], kn_mul_scalar(out[1], 3));
}

static kn_tensor *f_hypot(kn_tensor *const *in, const void *ctx) {
    return kn_custom_call1(hypot_id, 2, in, &(kn_custom_attrs){.f = {1.5}});
}

static void test_softplus_c_kernel_forward_in_every_mode(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        for (int k = 0; k < 2; k++) {
            kn_dtype dt = k ? KN_F64 : KN_F32;
            kn_tensor *x = rand_tensor(KN_SHAPE(4, 5), dt, -4, 4);
            kn_tensor *xt = kn_transpose(x, 0, 1); /* non-contiguous input */
            double *v = read_f64(xt), want[20];
            for (int i = 0; i < 20; i++) want[i] = log1p(exp(v[i]));
            kn_tensor *y = kn_custom_call1(softplus_id, 1, &xt, NULL);
            CHECK(y && kn_dtype_of(y) == dt);
            CHECK_SHAPE(y, KN_SHAPE(5, 4));
            char what[64];
            snprintf(what, sizeof what, "my_softplus %s %s", kn_dtype_name(dt), kn_mode_name(MODES[m]));
            CHECK_CLOSE(y, want, tol_for(dt), what);
            free(v);
        }
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_softplus_c_kernel_gradient_in_every_mode(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        GRADCHECK("my_softplus", f_softplus, NULL, 1, GC_IN(KN_SHAPE(3, 4), -3, 3));
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_two_output_op_forward_and_gradient(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        kn_tensor *x = rand_tensor(KN_SHAPE(2, 3), KN_F64, -3, 3), *out[2] = {0};
        CHECK(kn_custom_call(sincos_id, 1, &x, NULL, out) == KN_OK);
        double *v = read_f64(x), want_sin[6], want_cos[6];
        for (int i = 0; i < 6; i++) {
            want_sin[i] = sin(v[i]);
            want_cos[i] = cos(v[i]);
        }
        CHECK_CLOSE(out[0], want_sin, tol_for(KN_F64), "my_sincos output 0");
        CHECK_CLOSE(out[1], want_cos, tol_for(KN_F64), "my_sincos output 1");
        free(v);
        for (int which = 0; which < 3; which++) /* outputs no gradient reaches get zeros */
            GRADCHECK("my_sincos", f_sincos, &which, 1, GC_IN(KN_SHAPE(2, 3), -3, 3));
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_two_input_op_broadcasts_forward_and_gradient(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 1), KN_F32, 0.5, 2), *y = rand_tensor(KN_SHAPE(4), KN_F64, 0.5, 2);
        kn_tensor *z = f_hypot((kn_tensor *[]){x, y}, NULL);
        CHECK(z && kn_dtype_of(z) == KN_F64); /* promoted as a built-in op would be */
        CHECK_SHAPE(z, KN_SHAPE(3, 4));
        double *xv = read_f64(x), *yv = read_f64(y), want[12];
        for (int i = 0; i < 12; i++) want[i] = 1.5 * hypot(xv[i / 4], yv[i % 4]);
        CHECK_CLOSE(z, want, tol_for(KN_F64), "my_hypot");
        free(xv);
        free(yv);
        GRADCHECK("my_hypot", f_hypot, NULL, 2, GC_IN(KN_SHAPE(3, 1), 0.5, 2), GC_IN(KN_SHAPE(4), 0.5, 2));
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_custom_op_traces_shapes_on_meta(void) {
    kn_meta_trace_reset();
    kn_tensor *x = kn_to_device(rand_tensor(KN_SHAPE(6, 7), KN_F32, -1, 1), KN_META);
    kn_tensor *y = kn_custom_call1(softplus_id, 1, &x, NULL), *s = kn_custom_call1(rowsum_id, 1, &y, NULL);
    CHECK(y && s && kn_device_of(s).type == KN_DEVICE_META);
    CHECK_SHAPE(s, KN_SHAPE(6));
    CHECK(kn_meta_trace_op_count("custom") == 2);
    kn_tensor *out[2] = {0};
    CHECK(kn_custom_call(sincos_id, 1, &x, NULL, out) == KN_OK);
    CHECK_SHAPE(out[1], KN_SHAPE(6, 7));
    /* meta runs no kernels, so an op with a kernel for another device only traces too */
    kn_tensor *c = kn_custom_call1(cuda_only_id, 1, &x, NULL);
    CHECK(c != NULL);
    CHECK_SHAPE(c, KN_SHAPE(6, 7));
}

static double swish(double x, double a) { return x / (1 + exp(-a * x)); }

static kn_tensor *f_swish(kn_tensor *const *in, const void *ctx) {
    return kn_custom_call1(swish_id, 1, in, &(kn_custom_attrs){.f = {0.7}});
}

static kn_tensor *f_gate(kn_tensor *const *in, const void *ctx) {
    return kn_custom_call1(gate_id, 2, in, &(kn_custom_attrs){.f = {1.3, -0.25}});
}

static void test_source_kernel_forward_every_float_dtype_and_mode(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        for (int k = 0; k < 4; k++) {
            kn_dtype dt = FLOAT_DTYPES[k];
            kn_tensor *x = kn_transpose(rand_tensor(KN_SHAPE(5, 3), dt, -4, 4), 0, 1); /* non-contiguous */
            double *v = read_f64(x), want[15];
            for (int i = 0; i < 15; i++) want[i] = swish(v[i], 0.7);
            kn_tensor *y = f_swish(&x, NULL);
            CHECK(y && kn_dtype_of(y) == dt);
            CHECK_SHAPE(y, KN_SHAPE(3, 5));
            char what[64];
            snprintf(what, sizeof what, "my_swish %s %s", kn_dtype_name(dt), kn_mode_name(MODES[m]));
            CHECK_CLOSE(y, want, tol_for(dt), what);
            free(v);
        }
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_source_kernel_broadcasts_and_promotes(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        /* f32 [3, 1] with f64 [4] -> f64 [3, 4]; an integer operand computes in f32 */
        kn_tensor *x = rand_tensor(KN_SHAPE(3, 1), KN_F32, -2, 2), *y = rand_tensor(KN_SHAPE(4), KN_F64, -2, 2);
        kn_tensor *z = f_gate((kn_tensor *[]){x, y}, NULL);
        CHECK(z && kn_dtype_of(z) == KN_F64);
        CHECK_SHAPE(z, KN_SHAPE(3, 4));
        double *xv = read_f64(x), *yv = read_f64(y), want[12];
        for (int i = 0; i < 12; i++) want[i] = xv[i / 4] / (1 + exp(-1.3 * yv[i % 4])) - 0.25;
        CHECK_CLOSE(z, want, tol_for(KN_F64), "my_gate broadcast");
        double iv[3] = {-1, 0, 2};
        kn_tensor *xi = tensor_from(iv, KN_SHAPE(3), KN_I32), *zi = f_gate((kn_tensor *[]){xi, xi}, NULL);
        CHECK(zi && kn_dtype_of(zi) == KN_F32);
        double want_i[3];
        for (int i = 0; i < 3; i++) want_i[i] = iv[i] / (1 + exp(-1.3 * iv[i])) - 0.25;
        CHECK_CLOSE(zi, want_i, tol_for(KN_F32), "my_gate of i32");
        free(xv);
        free(yv);
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_source_kernel_gradient_in_every_mode(void) {
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        GRADCHECK("my_swish", f_swish, NULL, 1, GC_IN(KN_SHAPE(3, 4), -3, 3));
        GRADCHECK("my_gate", f_gate, NULL, 2, GC_IN(KN_SHAPE(3, 1), -2, 2), GC_IN(KN_SHAPE(4), -2, 2));
    }
    kn_set_mode(KN_MODE_STRICT);
}

/* The first call of a (source, dtype) compiles it or loads it from the disk cache; later
 * calls reuse it, and another op with the same source shares the compiled kernel. */
static void test_source_kernel_compiles_once(void) {
    kn_custom_op_def def = {.name = "my_cube", .n_inputs = 1, .n_outputs = 1, .source = "x * x * x + a"};
    int cube = kn_custom_op_register(&def);
    def.name = "my_cube_again";
    int again = kn_custom_op_register(&def);
    kn_tensor *x = rand_tensor(KN_SHAPE(8), KN_F32, -1, 1);
    kn_stats s0, s1, s2, s3;
    kn_stats_get(&s0);
    CHECK(kn_custom_call1(cube, 1, &x, NULL) != NULL);
    kn_stats_get(&s1);
    CHECK(s1.compiles + s1.cache_disk_hits - s0.compiles - s0.cache_disk_hits == 1);
    CHECK(kn_custom_call1(cube, 1, &x, NULL) != NULL);
    kn_stats_get(&s2);
    CHECK(s2.compiles == s1.compiles && s2.cache_disk_hits == s1.cache_disk_hits);
    CHECK(kn_custom_call1(again, 1, &x, NULL) != NULL);
    kn_stats_get(&s3);
    CHECK(s3.compiles == s2.compiles && s3.cache_memory_hits == s2.cache_memory_hits + 1);
}

static void test_source_kernel_traces_on_meta_without_compiling(void) {
    kn_tensor *x = kn_to_device(rand_tensor(KN_SHAPE(2, 1), KN_F16, -1, 1), KN_META);
    kn_tensor *y = kn_to_device(rand_tensor(KN_SHAPE(5), KN_F16, -1, 1), KN_META);
    kn_stats s0, s1;
    kn_stats_get(&s0);
    kn_tensor *z = f_gate((kn_tensor *[]){x, y}, NULL);
    kn_stats_get(&s1);
    CHECK(z && kn_dtype_of(z) == KN_F16 && kn_device_of(z).type == KN_DEVICE_META);
    CHECK_SHAPE(z, KN_SHAPE(2, 5));
    CHECK(s1.compiles == s0.compiles);
}

static void test_source_kernel_errors(void) {
    static int broken = -1, domain = -1;
    if (broken < 0) {
        broken = kn_custom_op_register(&(kn_custom_op_def){.name = "my_broken", .n_inputs = 1, .n_outputs = 1,
                                                           .source = "x +* no_such_function(x)"});
        domain = kn_custom_op_register(&(kn_custom_op_def){.name = "my_domain", .n_inputs = 1, .n_outputs = 1,
                                                           .source = "(x < KC(0) ? (bad = 1) : 0, kn_sqrt(x))"});
    }
    kn_tensor *x = rand_tensor(KN_SHAPE(3), KN_F32, -1, -0.5);
    CHECK_ERROR(kn_custom_call1(broken, 1, &x, NULL) != NULL, KN_ERR_ARG,
                "my_broken(f32[3]): its source kernel for f32 does not build: kiln jit:");
    CHECK(kn_custom_call1(domain, 1, &x, NULL) != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "my_domain(f32[3]): its source kernel reported a domain error");
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_registration_errors(void) {
    kn_custom_op_def ok = {.name = "my_fresh", .n_inputs = 1, .n_outputs = 1, .kernels[KN_DEVICE_CPU] = softplus_cpu};
    kn_custom_op_def d;
    CHECK_ERROR(kn_custom_op_register(NULL) >= 0, KN_ERR_NULL, "definition is NULL");
    d = ok, d.name = NULL;
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "needs a name");
    d = ok, d.name = "my_softplus";
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "already registered");
    d = ok, d.kernels[KN_DEVICE_CPU] = NULL;
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "neither a kernel nor a source");
    d = ok, d.n_outputs = 5;
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "n_outputs is 5");
    d = ok, d.n_inputs = -1;
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "n_inputs is -1");
    d = ok, d.source = "x", d.infer = same_as_input;
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "infer must be NULL");
    d = ok, d.source = "x", d.n_inputs = 4;
    CHECK_ERROR(kn_custom_op_register(&d) >= 0, KN_ERR_ARG, "1 to 3 inputs");
    CHECK_ERROR(kn_custom_op_lookup("no_such_op") >= 0, KN_ERR_ARG, "no_such_op");
    CHECK(kn_custom_op_lookup("my_hypot") == hypot_id);
    CHECK(strcmp(kn_custom_op_name(sincos_id), "my_sincos") == 0 && !kn_custom_op_name(-1));
}

static void test_call_errors_name_the_op(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(2, 3), KN_F32, 0, 1), *x3 = rand_tensor(KN_SHAPE(2, 3, 4), KN_F32, 0, 1);
    kn_tensor *xi = kn_zeros(KN_SHAPE(2, 3), KN_I32), *out[2];
    CHECK_ERROR(kn_custom_call1(softplus_id, 2, (kn_tensor *[]){x, x}, NULL) != NULL, KN_ERR_ARG,
                "my_softplus(): takes 1 input, given 2");
    CHECK_ERROR(kn_custom_call(12345, 1, &x, NULL, out) == KN_OK, KN_ERR_ARG, "no custom op has id 12345");
    CHECK_ERROR(kn_custom_call1(rowsum_id, 1, &x3, NULL) != NULL, KN_ERR_SHAPE,
                "my_rowsum(f32[2, 3, 4]): expects a 2-d input, got 3-d");
    CHECK_ERROR(kn_custom_call1(softplus_id, 1, &xi, NULL) != NULL, KN_ERR_DTYPE,
                "my_softplus(i32[2, 3]): input 0 is i32");
    CHECK_ERROR(kn_custom_call1(hypot_id, 2, (kn_tensor *[]){x, x3}, NULL) != NULL, KN_ERR_SHAPE, "my_hypot(");
    kn_tensor *null_in = NULL;
    CHECK_ERROR(kn_custom_call1(softplus_id, 1, &null_in, NULL) != NULL, KN_ERR_NULL, "my_softplus");
    kn_tensor *m = kn_to_device(x, KN_META);
    CHECK_ERROR(kn_custom_call1(hypot_id, 2, (kn_tensor *[]){x, m}, NULL) != NULL, KN_ERR_DEVICE,
                "my_hypot(f32[2, 3], f32[2, 3]): input 1 is on meta:0");
}

static void test_device_without_kernel_is_refused(void) {
    kn_tensor *x = rand_tensor(KN_SHAPE(3), KN_F32, 0, 1);
    CHECK_ERROR(kn_custom_call1(cuda_only_id, 1, &x, NULL) != NULL, KN_ERR_UNSUPPORTED,
                "the cpu backend has no kernel for custom op my_cuda_only");
}

static void test_kernel_error_is_reported_like_a_builtin_kernels(void) {
    double v[4] = {1, 4, -1, 9};
    kn_tensor *x = tensor_from(v, KN_SHAPE(4), KN_F32);
    /* strict: the call returns, the error comes with the next sync */
    kn_tensor *y = kn_custom_call1(checked_id, 1, &x, NULL);
    CHECK(y != NULL);
    CHECK_ERROR(kn_sync() == KN_OK, KN_ERR_ARG, "my_checked(f32[4]): element 2 is negative (reported asynchronously)");
    /* debug: the call itself fails */
    if (enter_mode(KN_MODE_DEBUG)) {
        CHECK_ERROR(kn_custom_call1(checked_id, 1, &x, NULL) != NULL, KN_ERR_ARG, "my_checked(f32[4]): element 2");
        kn_set_mode(KN_MODE_STRICT);
    }
    kn_tensor *ok = kn_custom_call1(checked_id, 1, (kn_tensor *[]){kn_abs(x)}, NULL);
    double want[4] = {1, 2, 1, 3};
    CHECK_CLOSE(ok, want, tol_for(KN_F32), "my_checked of |x|");
}

static void test_op_without_backward_refuses_grad(void) {
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(2, 3), KN_F32, 0, 1), true);
    CHECK_ERROR(kn_custom_call1(rowsum_id, 1, &x, NULL) != NULL, KN_ERR_UNSUPPORTED,
                "my_rowsum(f32[2, 3]): custom op my_rowsum has no gradient");
    kn_no_grad_push();
    kn_tensor *s = kn_custom_call1(rowsum_id, 1, &x, NULL);
    kn_no_grad_pop();
    CHECK(s && !kn_needs_grad(s));
    CHECK(kn_custom_call1(rowsum_id, 1, (kn_tensor *[]){kn_detach(x)}, NULL) != NULL);
}

static void test_integer_output_needs_no_gradient(void) {
    double v[5] = {-1, 2, 0, 3, -4};
    kn_tensor *x = kn_requires_grad(tensor_from(v, KN_SHAPE(5), KN_F32), true);
    kn_tensor *n = kn_custom_call1(count_id, 1, &x, NULL);
    double got = -1;
    CHECK(n && kn_dtype_of(n) == KN_I64 && !kn_needs_grad(n) && kn_item(n, &got) == KN_OK && got == 2);
}

/* Whether a custom call records history is autograd's interposer's decision, the same in
 * every mode: no backward refuses it, integer outputs record none. */
static void test_history_is_decided_by_autograd_in_every_mode(void) {
    double v[5] = {-1, 2, 0, 3, -4};
    kn_tensor *x = kn_requires_grad(tensor_from(v, KN_SHAPE(5), KN_F32), true);
    kn_tensor *r = kn_requires_grad(rand_tensor(KN_SHAPE(2, 3), KN_F32, 0, 1), true);
    for (int m = 0; m < N_MODES; m++) {
        if (!enter_mode(MODES[m])) continue;
        int64_t nodes = kn_autograd_live_nodes();
        CHECK_ERROR(kn_custom_call1(rowsum_id, 1, &r, NULL) != NULL, KN_ERR_UNSUPPORTED,
                    "my_rowsum(f32[2, 3]): custom op my_rowsum has no gradient (it was registered without backward)");
        kn_tensor *n = kn_custom_call1(count_id, 1, &x, NULL);
        CHECK(n && !kn_needs_grad(n) && kn_autograd_live_nodes() == nodes);
        double got = -1;
        CHECK_MSG(kn_item(n, &got) == KN_OK && got == 2, "count in %s", kn_mode_name(MODES[m]));
    }
    kn_set_mode(KN_MODE_STRICT);
}

static void test_saved_input_modified_in_place_is_caught(void) {
    kn_tensor *x = kn_requires_grad(rand_tensor(KN_SHAPE(3), KN_F64, -1, 1), true);
    kn_tensor *h = kn_mul_scalar(x, 2);
    kn_tensor *y = kn_custom_call1(softplus_id, 1, &h, NULL);
    kn_no_grad_push();
    CHECK(kn_copy_(h, kn_zeros(KN_SHAPE(3), KN_F64)) == KN_OK);
    kn_no_grad_pop();
    CHECK_ERROR(kn_backward(kn_sum(y, KN_ALL_DIMS, false)) == KN_OK, KN_ERR_ARG, "my_softplus");
}

/* ---- registration from several threads ------------------------------------------------------ */

static atomic_int shared_wins;

static void *register_many(void *arg) {
    int t = (int)(intptr_t)arg;
    for (int k = 0; k < 16; k++) {
        char name[32];
        snprintf(name, sizeof name, "thread%d_op%d", t, k);
        int id = kn_custom_op_register(&(kn_custom_op_def){.name = name, .n_inputs = 1, .n_outputs = 1,
                                                           .kernels[KN_DEVICE_CPU] = softplus_cpu});
        if (id < 0 || kn_custom_op_lookup(name) != id || strcmp(kn_custom_op_name(id), name) != 0) return (void *)1;
    }
    if (kn_custom_op_register(&(kn_custom_op_def){.name = "thread_shared", .n_inputs = 1, .n_outputs = 1,
                                                  .kernels[KN_DEVICE_CPU] = softplus_cpu}) >= 0)
        atomic_fetch_add(&shared_wins, 1);
    kn_clear_error();
    return NULL;
}

static void test_registration_is_thread_safe(void) {
    pthread_t th[4];
    for (int t = 0; t < 4; t++) pthread_create(&th[t], NULL, register_many, (void *)(intptr_t)t);
    for (int t = 0; t < 4; t++) {
        void *r;
        pthread_join(th[t], &r);
        CHECK_MSG(r == NULL, "thread %d lost a registration", t);
    }
    CHECK(atomic_load(&shared_wins) == 1);
}

static void test_table_has_one_custom_op(void) {
    int found = 0;
    for (int i = 0; i < kn_op_count(); i++) {
        kn_op_info info;
        kn_op_get_info(i, &info);
        found += strcmp(info.name, "custom") == 0;
    }
    CHECK(found == 1);
}

int main(void) {
    /* Source kernels compile into a cache of this run's own unless the caller chose one. */
    char cache_dir[] = "/tmp/kiln-test-custom-op-XXXXXX";
    bool own_cache = !getenv("KILN_CACHE_DIR") && mkdtemp(cache_dir);
    if (own_cache) setenv("KILN_CACHE_DIR", cache_dir, 1);
    register_ops();
    CHECK_MSG(softplus_id >= 0 && sincos_id >= 0 && hypot_id >= 0 && rowsum_id >= 0 && checked_id >= 0 &&
                  cuda_only_id >= 0 && count_id >= 0 && swish_id >= 0 && gate_id >= 0,
              "registration failed: %s", kn_last_error());
    RUN(test_softplus_c_kernel_forward_in_every_mode);
    RUN(test_softplus_c_kernel_gradient_in_every_mode);
    RUN(test_two_output_op_forward_and_gradient);
    RUN(test_two_input_op_broadcasts_forward_and_gradient);
    RUN(test_custom_op_traces_shapes_on_meta);
    RUN(test_source_kernel_forward_every_float_dtype_and_mode);
    RUN(test_source_kernel_broadcasts_and_promotes);
    RUN(test_source_kernel_gradient_in_every_mode);
    RUN(test_source_kernel_compiles_once);
    RUN(test_source_kernel_traces_on_meta_without_compiling);
    RUN(test_source_kernel_errors);
    RUN(test_registration_errors);
    RUN(test_call_errors_name_the_op);
    RUN(test_device_without_kernel_is_refused);
    RUN(test_kernel_error_is_reported_like_a_builtin_kernels);
    RUN(test_op_without_backward_refuses_grad);
    RUN(test_integer_output_needs_no_gradient);
    RUN(test_history_is_decided_by_autograd_in_every_mode);
    RUN(test_saved_input_modified_in_place_is_caught);
    RUN(test_registration_is_thread_safe);
    RUN(test_table_has_one_custom_op);
    if (own_cache) remove_tree(cache_dir);
    return test_summary();
}
