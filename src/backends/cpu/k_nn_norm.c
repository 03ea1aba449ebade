/* CPU normalization kernels. Statistics accumulate in double in one vectorized pass over
 * values shifted by the first one (which keeps x^2 - mean^2 from cancelling); the result is
 * written in a second pass in the compute type (f32, or f64). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/k_nn.h"
#include "core/error.h"

#define NORM_HELPERS(T)                                                                         \
    /* Adds the sums of (x - shift) and its square over n contiguous elements. */               \
    static void add_stats_##T(const T *restrict x, int64_t n, double shift, double *s, double *ss) { \
        double a = 0, b = 0;                                                                    \
        _Pragma("omp simd reduction(+ : a, b)") for (int64_t i = 0; i < n; i++) {               \
            double v = (double)x[i] - shift;                                                    \
            a += v;                                                                             \
            b += v * v;                                                                         \
        }                                                                                       \
        *s += a, *ss += b;                                                                      \
    }                                                                                           \
    static void scale_shift_##T(const T *restrict x, T *restrict y, int64_t n, T scale, T shift) { \
        _Pragma("omp simd") for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;        \
    }                                                                                           \
    /* Rows of layer_norm (rms: no centering, no bias). w, b: inner values of T. */             \
    static void norm_rows_##T(const T *x, T *y, int64_t rows, int64_t inner, const T *restrict w, \
                              const T *restrict b, double eps, bool rms) {                      \
        _Pragma("omp parallel for num_threads(kn_cpu_threads_for(rows * inner)) schedule(static)") \
        for (int64_t r = 0; r < rows; r++) {                                                    \
            const T *restrict xr = x + r * inner;                                               \
            T *restrict yr = y + r * inner;                                                     \
            double shift = rms ? 0 : (double)xr[0], s = 0, ss = 0;                              \
            add_stats_##T(xr, inner, shift, &s, &ss);                                           \
            double m = s / (double)inner, var = ss / (double)inner - (rms ? 0 : m * m);         \
            T mean = (T)(rms ? 0 : shift + m), rstd = (T)(1.0 / sqrt((var > 0 ? var : 0) + eps)); \
            _Pragma("omp simd") for (int64_t i = 0; i < inner; i++) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i]; \
        }                                                                                       \
    }
NORM_HELPERS(float)
NORM_HELPERS(double)

/* The double vector v as a malloc'd array of the compute dtype (float or double). */
static void *narrow_vector(double *v, int64_t n, kn_dtype ct) {
    if (!v || ct == KN_F64) return v;
    float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; f && i < n; i++) f[i] = (float)v[i];
    free(v);
    return f;
}

static kn_status trailing_norm(kn_node *n, bool rms) {
    kn_tensor *out = n->out[0];
    const kn_attrs_layer_norm *a = KN_ATTRS(n, layer_norm); /* rms_norm's too (op_table.c) */
    int64_t inner = a->inner, rows = inner ? kn_numel(out) / inner : 0;
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    void *w = narrow_vector(kn_nn_read_vector(KN_INPUT(n, layer_norm, weight), inner, 1), inner, ct);
    void *b = narrow_vector(kn_nn_read_vector(rms ? NULL : KN_INPUT(n, layer_norm, bias), inner, 0), inner, ct);
    kn_tensor *x = kn_nn_work(n->in[0], ct), *y = kn_nn_work_out(out, ct);
    kn_status st = w && b && x && y ? KN_OK : kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name(n->op));
    if (st == KN_OK && rows) {
        if (ct == KN_F64)
            norm_rows_double(kn_tensor_data(x), kn_tensor_data(y), rows, inner, w, b, a->eps, rms);
        else
            norm_rows_float(kn_tensor_data(x), kn_tensor_data(y), rows, inner, w, b, a->eps, rms);
    }
    free(w);
    free(b);
    if (x) kn_tensor_decref(x);
    return kn_nn_finish(out, y, st);
}

kn_status kn_nn_layer_norm_kernel(kn_node *n) { return trailing_norm(n, false); }
kn_status kn_nn_rms_norm_kernel(kn_node *n) { return trailing_norm(n, true); }

/* The norms' backward over rows: with xhat = (x - mean) * rstd (recomputed as the forward
 * does) and gw = gy * w, dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) (rms_norm: no
 * centering, no mean(gw) term). dweight = sum(gy * xhat) and dbias = sum(gy) over rows
 * accumulate in per-thread partials (`part`: threads x 2 x inner), summed at the end. */
#define NORM_BACKWARD(T)                                                                         \
    static void norm_backward_##T(const T *gy, const T *x, T *dx, T *dw, T *db, int64_t rows, int64_t inner, \
                                  const T *restrict w, double eps, bool rms, T *part, int threads) { \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                       \
        for (int64_t r = 0; r < rows; r++) {                                                    \
            T *restrict pw = part + (int64_t)omp_get_thread_num() * 2 * inner, *restrict pb = pw + inner; \
            const T *restrict xr = x + r * inner, *restrict gr = gy + r * inner;                \
            T *restrict dr = dx + r * inner;                                                    \
            double shift = rms ? 0 : (double)xr[0], s = 0, ss = 0;                              \
            add_stats_##T(xr, inner, shift, &s, &ss);                                           \
            double m = s / (double)inner, var = ss / (double)inner - (rms ? 0 : m * m);         \
            T mean = (T)(rms ? 0 : shift + m), rstd = (T)(1.0 / sqrt((var > 0 ? var : 0) + eps)); \
            T a = 0, b = 0;                                                                     \
            _Pragma("omp simd reduction(+ : a, b)") for (int64_t i = 0; i < inner; i++) {       \
                T xh = (xr[i] - mean) * rstd, g = gr[i], gw = g * w[i];                         \
                a += gw, b += gw * xh;                                                          \
                pw[i] += g * xh, pb[i] += g;                                                    \
            }                                                                                   \
            T ca = rms ? 0 : a / (T)inner, cb = b / (T)inner;                                   \
            _Pragma("omp simd") for (int64_t i = 0; i < inner; i++)                             \
                dr[i] = rstd * (gr[i] * w[i] - ca - (xr[i] - mean) * rstd * cb);                \
        }                                                                                       \
        /* a few vectors: summed here rather than behind another barrier */                     \
        for (int64_t i = 0; i < inner; i++) {                                                   \
            double sw = 0, sb = 0;                                                              \
            for (int t = 0; t < threads; t++) sw += part[t * 2 * inner + i], sb += part[(t * 2 + 1) * inner + i]; \
            dw[i] = (T)sw, db[i] = (T)sb;                                                       \
        }                                                                                       \
    }
NORM_BACKWARD(float)
NORM_BACKWARD(double)

/* layer_norm_backward / rms_norm_backward (see nn.def). dbias is computed either way. */
static kn_status norm_backward(kn_node *n, bool rms) {
    kn_tensor *dx_out = n->out[0];
    /* rms_norm_backward's attributes are layer_norm_backward's (op_table.c) */
    const kn_attrs_layer_norm_backward *a = KN_ATTRS(n, layer_norm_backward);
    int64_t inner = a->inner, rows = kn_numel(dx_out) / inner;
    kn_dtype ct = kn_nn_compute_dtype(dx_out->dtype);
    size_t es = kn_dtype_size(ct);
    int threads = kn_cpu_threads_for(rows * inner * 4);
    if (threads > rows) threads = rows > 0 ? (int)rows : 1;
    void *w = narrow_vector(kn_nn_read_vector(KN_INPUT(n, layer_norm_backward, weight), inner, 1), inner, ct);
    void *part = calloc((size_t)(threads * 2 * inner), es), *db = malloc((size_t)inner * es);
    kn_tensor *gy = kn_nn_work(n->in[0], ct), *x = kn_nn_work(n->in[1], ct);
    kn_tensor *dx = kn_nn_work_out(dx_out, ct), *dw = kn_nn_work_out(n->out[1], ct);
    kn_tensor *dbt = rms ? NULL : kn_nn_work_out(n->out[2], ct);
    kn_status st = w && part && db && gy && x && dx && dw && (rms || dbt)
                       ? KN_OK
                       : kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name(n->op));
    void *dbp = dbt ? kn_tensor_data(dbt) : db;
    if (st == KN_OK && ct == KN_F64)
        norm_backward_double(kn_tensor_data(gy), kn_tensor_data(x), kn_tensor_data(dx), kn_tensor_data(dw), dbp, rows,
                             inner, w, a->eps, rms, part, threads);
    else if (st == KN_OK)
        norm_backward_float(kn_tensor_data(gy), kn_tensor_data(x), kn_tensor_data(dx), kn_tensor_data(dw), dbp, rows,
                            inner, w, a->eps, rms, part, threads);
    free(w), free(part), free(db);
    if (gy) kn_tensor_decref(gy);
    if (x) kn_tensor_decref(x);
    st = kn_nn_finish(dx_out, dx, st);
    st = kn_nn_finish(n->out[1], dw, st);
    return rms ? st : kn_nn_finish(n->out[2], dbt, st);
}

kn_status kn_nn_layer_norm_backward_kernel(kn_node *n) { return norm_backward(n, false); }
kn_status kn_nn_rms_norm_backward_kernel(kn_node *n) { return norm_backward(n, true); }

/* Per-channel affine y = x * scale[c] + shift[c] over x [N, C, inner]. */
#define APPLY_CHANNELS(T)                                                                        \
    static void apply_channels_##T(const T *x, T *y, int64_t N, int64_t C, int64_t inner, const double *scale, \
                                   const double *shift) {                                        \
        _Pragma("omp parallel for collapse(2) num_threads(kn_cpu_threads_for(N * C * inner)) schedule(static)") \
        for (int64_t i = 0; i < N; i++)                                                          \
            for (int64_t c = 0; c < C; c++) {                                                    \
                int64_t off = (i * C + c) * inner;                                               \
                scale_shift_##T(x + off, y + off, inner, (T)scale[c + i * C], (T)shift[c + i * C]); \
            }                                                                                    \
    }
APPLY_CHANNELS(float)
APPLY_CHANNELS(double)

/* Statistics of `chunks` runs of `len` elements each, `step` apart, starting at x. */
static void chunk_stats(kn_dtype ct, const void *x, int64_t chunks, int64_t len, int64_t step, double *mean,
                        double *var) {
    double shift = 0, s = 0, ss = 0;
    if (chunks && len) shift = ct == KN_F64 ? ((const double *)x)[0] : ((const float *)x)[0];
    for (int64_t k = 0; k < chunks; k++) {
        if (ct == KN_F64) add_stats_double((const double *)x + k * step, len, shift, &s, &ss);
        else add_stats_float((const float *)x + k * step, len, shift, &s, &ss);
    }
    double count = (double)(chunks * len), m = count ? s / count : 0, v = count ? ss / count - m * m : 0;
    *mean = shift + m;
    *var = v > 0 ? v : 0;
}

/* Normalizes x [N, C, inner] with per-(n, c) scale/shift tables (entry c + n*C). */
static kn_status apply_tables(kn_node *n, kn_tensor *x, const double *scale, const double *shift) {
    kn_tensor *out = n->out[0];
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    kn_tensor *y = kn_nn_work_out(out, ct);
    if (!y) return kn_last_status();
    int64_t N = out->shape[0], C = out->shape[1], inner = N * C > 0 ? kn_numel(out) / (N * C) : 0;
    if (ct == KN_F64) apply_channels_double(kn_tensor_data(x), kn_tensor_data(y), N, C, inner, scale, shift);
    else apply_channels_float(kn_tensor_data(x), kn_tensor_data(y), N, C, inner, scale, shift);
    return kn_nn_finish(out, y, KN_OK);
}

kn_status kn_nn_group_norm_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    int64_t N = out->shape[0], C = out->shape[1], G = KN_ATTRS(n, group_norm)->groups;
    int64_t inner = N * C > 0 ? kn_numel(out) / (N * C) : 0, Cg = C / G;
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    size_t es = kn_dtype_size(ct);
    double *w = kn_nn_read_vector(KN_INPUT(n, group_norm, weight), C, 1);
    double *b = kn_nn_read_vector(KN_INPUT(n, group_norm, bias), C, 0);
    double *scale = malloc(sizeof(double) * (size_t)(N * C + 1)), *shift = malloc(sizeof(double) * (size_t)(N * C + 1));
    kn_tensor *x = kn_nn_work(n->in[0], ct);
    kn_status st = w && b && scale && shift && x ? KN_OK : kn_error(KN_ERR_OOM, "group_norm: out of memory");
    if (st == KN_OK) {
        const char *base = kn_tensor_data(x);
        double eps = KN_ATTRS(n, group_norm)->eps;
#pragma omp parallel for num_threads(kn_cpu_threads_for(N * C * inner)) schedule(static)
        for (int64_t ng = 0; ng < N * G; ng++) {
            double mean, var;
            chunk_stats(ct, base + (size_t)(ng * Cg * inner) * es, 1, Cg * inner, 0, &mean, &var);
            double rstd = 1.0 / sqrt(var + eps);
            for (int64_t c = (ng % G) * Cg; c < (ng % G + 1) * Cg; c++) {
                int64_t k = (ng / G) * C + c;
                scale[k] = rstd * w[c];
                shift[k] = b[c] - mean * rstd * w[c];
            }
        }
        st = apply_tables(n, x, scale, shift);
    }
    free(w), free(b), free(scale), free(shift);
    if (x) kn_tensor_decref(x);
    return st;
}

kn_status kn_nn_batch_norm_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    int64_t N = out->shape[0], C = out->shape[1], inner = N * C > 0 ? kn_numel(out) / (N * C) : 0;
    const kn_attrs_batch_norm *a = KN_ATTRS(n, batch_norm);
    bool training = a->training;
    double momentum = a->momentum, eps = a->eps;
    kn_tensor *rm = KN_INPUT(n, batch_norm, running_mean), *rv = KN_INPUT(n, batch_norm, running_var);
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    size_t es = kn_dtype_size(ct);
    double *w = kn_nn_read_vector(KN_INPUT(n, batch_norm, weight), C, 1);
    double *b = kn_nn_read_vector(KN_INPUT(n, batch_norm, bias), C, 0);
    double *mean = kn_nn_read_vector(rm, C, 0), *var = kn_nn_read_vector(rv, C, 1);
    double *scale = malloc(sizeof(double) * (size_t)(N * C + 1)), *shift = malloc(sizeof(double) * (size_t)(N * C + 1));
    kn_tensor *x = kn_nn_work(n->in[0], ct);
    kn_status st = w && b && mean && var && scale && shift && x ? KN_OK : kn_error(KN_ERR_OOM, "batch_norm: out of memory");
    if (st == KN_OK) {
        const char *base = kn_tensor_data(x);
        double count = (double)(N * inner);
#pragma omp parallel for num_threads(kn_cpu_threads_for(training ? N * C * inner : 0)) schedule(static)
        for (int64_t c = 0; c < C; c++) {
            double bm = mean[c], bv = var[c];
            if (training) {
                chunk_stats(ct, base + (size_t)(c * inner) * es, N, inner, C * inner, &bm, &bv);
                /* running stats: momentum blend with the unbiased batch variance, as PyTorch */
                mean[c] = (1 - momentum) * mean[c] + momentum * bm;
                var[c] = (1 - momentum) * var[c] + momentum * bv * count / (count - 1);
            }
            double rstd = 1.0 / sqrt(bv + eps);
            for (int64_t i = 0; i < N; i++) {
                scale[i * C + c] = rstd * w[c];
                shift[i * C + c] = b[c] - bm * rstd * w[c];
            }
        }
        st = apply_tables(n, x, scale, shift);
        if (st == KN_OK && training && rm) st = kn_nn_write_vector(n->out[1], mean);
        if (st == KN_OK && training && rm) st = kn_nn_write_vector(n->out[2], var);
    }
    free(w), free(b), free(mean), free(var), free(scale), free(shift);
    if (x) kn_tensor_decref(x);
    return st;
}
