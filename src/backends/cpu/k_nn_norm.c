/* CPU normalization kernels, forward (backward: k_nn_norm_backward.c). Statistics accumulate
 * in double in one vectorized pass (k_nn_norm_stats.h); the result is written in a second
 * pass in the compute type (f32, or f64). */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/k_nn.h"
#include "backends/cpu/k_nn_norm_stats.h"
#include "core/error.h"
#include "core/thread_pool.h"

#define NORM_HELPERS(T)                                                                         \
    static void scale_shift_##T(const T *restrict x, T *restrict y, int64_t n, T scale, T shift) { \
        for (int64_t i = 0; i < n; i++) y[i] = x[i] * scale + shift;                            \
    }                                                                                           \
    /* Rows of layer_norm (rms: no centering, no bias). w, b: inner values of T. */             \
    typedef struct norm_rows_ctx_##T {                                                          \
        const T *x, *w, *b;                                                                     \
        T *y;                                                                                   \
        int64_t inner;                                                                          \
        double eps;                                                                             \
        bool rms;                                                                               \
    } norm_rows_ctx_##T;                                                                        \
    static void norm_rows_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {         \
        const norm_rows_ctx_##T *c = ctx;                                                       \
        const int64_t inner = c->inner;                                                         \
        const T *restrict w = c->w, *restrict b = c->b;                                         \
        for (int64_t r = begin; r < end; r++) {                                                 \
            const T *restrict xr = c->x + r * inner;                                            \
            T *restrict yr = c->y + r * inner;                                                  \
            double shift = c->rms ? 0 : (double)xr[0], sums[2];                           \
            run_sums_##T(xr, NULL, 1, inner, 0, shift, sums);                                           \
            double m = sums[0] / (double)inner, var = sums[1] / (double)inner - (c->rms ? 0 : m * m);      \
            T mean = (T)(c->rms ? 0 : shift + m), rstd = (T)(1.0 / sqrt((var > 0 ? var : 0) + c->eps)); \
            for (int64_t i = 0; i < inner; i++) yr[i] = (xr[i] - mean) * rstd * w[i] + b[i];    \
        }                                                                                       \
    }
NORM_HELPERS(float)
NORM_HELPERS(double)

static kn_status trailing_norm(kn_node *n, bool rms) {
    kn_tensor *out = n->out[0];
    const kn_attrs_layer_norm *a = KN_ATTRS(n, layer_norm); /* rms_norm's too (op_table.c) */
    int64_t inner = a->inner, rows = inner ? kn_numel(out) / inner : 0;
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    void *w = kn_nn_narrow_vector(kn_nn_read_vector(KN_INPUT(n, layer_norm, weight), inner, 1), inner, ct);
    void *b = kn_nn_narrow_vector(kn_nn_read_vector(rms ? NULL : KN_INPUT(n, layer_norm, bias), inner, 0), inner, ct);
    kn_tensor *x = kn_nn_work(n->in[0], ct), *y = kn_nn_work_out(out, ct);
    kn_status st = w && b && x && y ? KN_OK : kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name(n->op));
    if (st == KN_OK && ct == KN_F64) {
        norm_rows_ctx_double c = {.x = kn_tensor_data(x), .y = kn_tensor_data(y), .w = w, .b = b, .inner = inner,
                              .eps = a->eps, .rms = rms};
        kn_parallel_for(rows, inner, norm_rows_chunk_double, &c);
    } else if (st == KN_OK) {
        norm_rows_ctx_float c = {.x = kn_tensor_data(x), .y = kn_tensor_data(y), .w = w, .b = b, .inner = inner,
                             .eps = a->eps, .rms = rms};
        kn_parallel_for(rows, inner, norm_rows_chunk_float, &c);
    }
    free(w);
    free(b);
    if (x) kn_tensor_decref(x);
    return kn_nn_finish(out, y, st);
}

kn_status kn_nn_layer_norm_kernel(kn_node *n) { return trailing_norm(n, false); }
kn_status kn_nn_rms_norm_kernel(kn_node *n) { return trailing_norm(n, true); }

/* Per-channel affine y = x * scale[k] + shift[k] over x [N, C, inner], k = n * C + c: slabs
 * [begin, end) of the flat [N * C]. */
#define APPLY_CHANNELS(T)                                                                        \
    typedef struct apply_channels_ctx_##T {                                                      \
        const T *x;                                                                              \
        T *y;                                                                                    \
        int64_t inner;                                                                           \
        const double *scale, *shift;                                                             \
    } apply_channels_ctx_##T;                                                                    \
    static void apply_channels_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {     \
        const apply_channels_ctx_##T *c = ctx;                                                   \
        for (int64_t k = begin; k < end; k++)                                                    \
            scale_shift_##T(c->x + k * c->inner, c->y + k * c->inner, c->inner, (T)c->scale[k], (T)c->shift[k]); \
    }
APPLY_CHANNELS(float)
APPLY_CHANNELS(double)

/* Statistics of `chunks` runs of `len` elements each, `step` apart, starting at x, about its
 * first value. */
static void chunk_stats(kn_dtype ct, const void *x, int64_t chunks, int64_t len, int64_t step, double *mean,
                        double *var) {
    double shift = 0, sums[2];
    if (chunks && len) shift = ct == KN_F64 ? ((const double *)x)[0] : ((const float *)x)[0];
    if (ct == KN_F64) run_sums_double(x, NULL, chunks, len, step, shift, sums);
    else run_sums_float(x, NULL, chunks, len, step, shift, sums);
    stats_from_sums(sums, (double)(chunks * len), shift, mean, var);
}

/* Normalizes x [N, C, inner] with per-(n, c) scale/shift tables (entry c + n*C). */
static kn_status apply_tables(kn_node *n, kn_tensor *x, const double *scale, const double *shift) {
    kn_tensor *out = n->out[0];
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    kn_tensor *y = kn_nn_work_out(out, ct);
    if (!y) return kn_last_status();
    int64_t N = out->shape[0], C = out->shape[1], inner = N * C > 0 ? kn_numel(out) / (N * C) : 0;
    if (ct == KN_F64) {
        apply_channels_ctx_double c = {.x = kn_tensor_data(x), .y = kn_tensor_data(y), .inner = inner, .scale = scale, .shift = shift};
        kn_parallel_for(N * C, inner, apply_channels_chunk_double, &c);
    } else {
        apply_channels_ctx_float c = {.x = kn_tensor_data(x), .y = kn_tensor_data(y), .inner = inner, .scale = scale, .shift = shift};
        kn_parallel_for(N * C, inner, apply_channels_chunk_float, &c);
    }
    return kn_nn_finish(out, y, KN_OK);
}

/* What the group and batch norms' statistics chunks read and write: per-(n, c) scale and
 * shift tables (and batch_norm's running mean and var, updated in place when training). */
typedef struct norm_tables {
    kn_dtype ct;
    const char *x; /* [N, C, inner] in ct */
    size_t es;
    int64_t N, C, G, inner;
    double eps, momentum;
    bool training;
    const double *w, *b;
    double *mean, *var, *scale, *shift;
} norm_tables;

/* Groups [begin, end) of the flat [N, G]. */
static void group_tables_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const norm_tables *t = ctx;
    const int64_t Cg = t->C / t->G;
    for (int64_t ng = begin; ng < end; ng++) {
        double mean, var;
        chunk_stats(t->ct, t->x + (size_t)(ng * Cg * t->inner) * t->es, 1, Cg * t->inner, 0, &mean, &var);
        double rstd = 1.0 / sqrt(var + t->eps);
        for (int64_t c = (ng % t->G) * Cg; c < (ng % t->G + 1) * Cg; c++) {
            int64_t k = (ng / t->G) * t->C + c;
            t->scale[k] = rstd * t->w[c];
            t->shift[k] = t->b[c] - mean * rstd * t->w[c];
        }
    }
}

/* Channels [begin, end). */
static void batch_tables_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const norm_tables *t = ctx;
    const int64_t N = t->N, C = t->C, inner = t->inner;
    const double count = (double)(N * inner), momentum = t->momentum;
    for (int64_t c = begin; c < end; c++) {
        double bm = t->mean[c], bv = t->var[c];
        if (t->training) {
            chunk_stats(t->ct, t->x + (size_t)(c * inner) * t->es, N, inner, C * inner, &bm, &bv);
            /* running stats: momentum blend with the unbiased batch variance, as PyTorch */
            t->mean[c] = (1 - momentum) * t->mean[c] + momentum * bm;
            t->var[c] = (1 - momentum) * t->var[c] + momentum * bv * count / (count - 1);
        }
        double rstd = 1.0 / sqrt(bv + t->eps);
        for (int64_t i = 0; i < N; i++) {
            t->scale[i * C + c] = rstd * t->w[c];
            t->shift[i * C + c] = t->b[c] - bm * rstd * t->w[c];
        }
    }
}

kn_status kn_nn_group_norm_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    int64_t N = out->shape[0], C = out->shape[1], G = KN_ATTRS(n, group_norm)->groups;
    int64_t inner = N * C > 0 ? kn_numel(out) / (N * C) : 0, Cg = C / G;
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    double *w = kn_nn_read_vector(KN_INPUT(n, group_norm, weight), C, 1);
    double *b = kn_nn_read_vector(KN_INPUT(n, group_norm, bias), C, 0);
    double *scale = malloc(sizeof(double) * (size_t)(N * C + 1)), *shift = malloc(sizeof(double) * (size_t)(N * C + 1));
    kn_tensor *x = kn_nn_work(n->in[0], ct);
    kn_status st = w && b && scale && shift && x ? KN_OK : kn_error(KN_ERR_OOM, "group_norm: out of memory");
    if (st == KN_OK) {
        norm_tables c = {.ct = ct, .x = kn_tensor_data(x), .es = kn_dtype_size(ct), .C = C, .G = G, .inner = inner,
                         .eps = KN_ATTRS(n, group_norm)->eps, .w = w, .b = b, .scale = scale, .shift = shift};
        kn_parallel_for(N * G, Cg * inner, group_tables_chunk, &c);
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
    kn_tensor *rm = KN_INPUT(n, batch_norm, running_mean), *rv = KN_INPUT(n, batch_norm, running_var);
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    double *w = kn_nn_read_vector(KN_INPUT(n, batch_norm, weight), C, 1);
    double *b = kn_nn_read_vector(KN_INPUT(n, batch_norm, bias), C, 0);
    double *mean = kn_nn_read_vector(rm, C, 0), *var = kn_nn_read_vector(rv, C, 1);
    double *scale = malloc(sizeof(double) * (size_t)(N * C + 1)), *shift = malloc(sizeof(double) * (size_t)(N * C + 1));
    kn_tensor *x = kn_nn_work(n->in[0], ct);
    kn_status st = w && b && mean && var && scale && shift && x ? KN_OK : kn_error(KN_ERR_OOM, "batch_norm: out of memory");
    if (st == KN_OK) {
        norm_tables c = {.ct = ct, .x = kn_tensor_data(x), .es = kn_dtype_size(ct), .N = N, .C = C, .inner = inner,
                         .eps = a->eps, .momentum = a->momentum, .training = training, .w = w, .b = b, .mean = mean,
                         .var = var, .scale = scale, .shift = shift};
        kn_parallel_for(C, training ? N * inner : 1, batch_tables_chunk, &c);
        st = apply_tables(n, x, scale, shift);
        if (st == KN_OK && training && rm) st = kn_nn_write_vector(n->out[1], mean);
        if (st == KN_OK && training && rm) st = kn_nn_write_vector(n->out[2], var);
    }
    free(w), free(b), free(mean), free(var), free(scale), free(shift);
    if (x) kn_tensor_decref(x);
    return st;
}
