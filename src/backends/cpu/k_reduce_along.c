/* CPU kernels of the ops along one dim whose output has the input's shape: cumsum, cumprod,
 * softmax, log_softmax. Each row (the dim, made contiguous by the reduce plan) is independent,
 * so rows run in parallel; results land in a [kept..., dim] buffer copied back into place
 * only when the dim was not already innermost. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/reduce_plan.h"
#include "core/error.h"

typedef void (*along_fn)(kn_dtype dt, const void *in, void *out, int64_t len, void *scratch);

typedef struct along_ctx {
    along_fn fn;
    kn_dtype dt;
    const char *src;
    char *dst;
    int64_t len;
    size_t in_size, out_size;
} along_ctx;

static void along_row(void *ctx, int64_t r, void *scratch) {
    const along_ctx *c = ctx;
    size_t at = (size_t)(r * c->len);
    c->fn(c->dt, c->src + at * c->in_size, c->dst + at * c->out_size, c->len, scratch);
}

static kn_status run_along(kn_node *n, along_fn fn) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    kn_shape reduced = KN_ATTRS(n, reduce)->dims;
    kn_reduce_plan p;
    kn_status st = kn_reduce_plan_make(&p, x, reduced);
    if (st != KN_OK) return st;
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < x->ndim; d++)
        if (reduced.n == 0 || d != reduced.v[0]) shape[nd] = out->shape[d], stride[nd++] = out->stride[d];
    if (reduced.n) shape[nd] = out->shape[reduced.v[0]], stride[nd++] = out->stride[reduced.v[0]];
    kn_tensor *target = p.scratch ? kn_tensor_alloc("along_dim", out->dtype, shape, nd, out->storage->device) : out;
    if (!target) {
        kn_reduce_plan_free(&p);
        return kn_last_status();
    }
    int64_t len = p.inner;
    along_ctx c = {.fn = fn, .dt = x->dtype, .src = p.data, .dst = kn_tensor_data(target), .len = len,
                   .in_size = kn_dtype_size(x->dtype), .out_size = kn_dtype_size(out->dtype)};
    size_t scratch = (size_t)(len > 0 ? len : 1) * sizeof(double);
    bool failed = !kn_parallel_rows(p.outer, len * 8, scratch, along_row, &c);
    kn_reduce_plan_free(&p);
    if (!failed && target != out) {
        kn_tensor *view = kn_tensor_view_of(out, shape, nd, stride, out->offset);
        st = view ? kn_cpu_copy_into(view, target) : kn_last_status();
        kn_tensor_decref(view);
    }
    if (target != out) kn_tensor_decref(target);
    if (failed) return kn_error(KN_ERR_OOM, "%s: no memory for a row buffer", kn_op_name(n->op));
    return st;
}

/* Narrows a row of doubles into a float dtype. */
static void store_row(kn_dtype dt, void *dst, const double *v, int64_t n) {
    switch (dt) {
    case KN_F32: for (int64_t i = 0; i < n; i++) ((float *)dst)[i] = (float)v[i]; break;
    case KN_F64: for (int64_t i = 0; i < n; i++) ((double *)dst)[i] = v[i]; break;
    case KN_F16: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = kn_f64_to_f16(v[i]); break;
    default: for (int64_t i = 0; i < n; i++) ((uint16_t *)dst)[i] = kn_f64_to_bf16(v[i]); break;
    }
}

/* Running sums and products, from the identity as PyTorch's are (so a leading -0.0 sums to
 * +0.0): floats accumulate in double, ints wrap in int64 (unsigned arithmetic, so overflow is
 * defined). */
#define SCAN_ROW(NAME, OP, IDENTITY)                                                        \
    static void NAME(kn_dtype dt, const void *in, void *out, int64_t len, void *scratch) {   \
        if (kn_dtype_is_float(dt)) {                                                         \
            double *v = scratch, acc = IDENTITY;                                             \
            kn_reduce_load_f64(dt, in, len, v);                                              \
            for (int64_t i = 0; i < len; i++) v[i] = acc = acc OP v[i];                      \
            store_row(dt, out, v, len);                                                      \
        } else {                                                                             \
            int64_t *v = out;                                                                \
            kn_reduce_load_i64(dt, in, len, v);                                              \
            for (int64_t i = 1; i < len; i++) v[i] = (int64_t)((uint64_t)v[i - 1] OP (uint64_t)v[i]); \
        }                                                                                    \
    }
SCAN_ROW(cumsum_row, +, 0.0)
SCAN_ROW(cumprod_row, *, 1.0)

/* Softmax of one contiguous row in T (float for f32/f16/bf16, double for f64): the max is
 * subtracted first so exp never overflows; the sum accumulates in double. A row of only
 * -inf gives NaN (-inf - -inf), as in PyTorch. The exponentials are taken again in the
 * writing sweep rather than stored by the summing one, which keeps that sum in lanes. */
#define SOFTMAX_ROW(T, SUF)                                                                  \
    static void softmax_row_##SUF(const T *restrict x, T *restrict y, int64_t n, bool take_log) { \
        T m;                                                                                 \
        double sum;                                                                          \
        KN_ROW_MAX_SUMEXP(T, (T), x, n, m, sum);                                             \
        if (take_log) {                                                                      \
            T shift = m + (T)log(sum);                                                       \
            for (int64_t i = 0; i < n; i++) y[i] = x[i] - shift;                             \
        } else {                                                                             \
            T inv = (T)(1.0 / sum);                                                          \
            for (int64_t i = 0; i < n; i++) y[i] = kn_exp((T)(x[i] - m)) * inv;              \
        }                                                                                    \
    }
SOFTMAX_ROW(float, f32)
SOFTMAX_ROW(double, f64)

static void softmax_any(kn_dtype dt, const void *in, void *out, int64_t len, void *scratch, bool take_log) {
    if (dt == KN_F32) return softmax_row_f32(in, out, len, take_log);
    if (dt == KN_F64) return softmax_row_f64(in, out, len, take_log);
    /* f16/bf16: widen the row to float, scratch holds the input and output halves */
    float *xf = scratch, *yf = xf + len;
    const uint16_t *h = in;
    uint16_t *o = out;
    bool is_f16 = dt == KN_F16;
    for (int64_t i = 0; i < len; i++) xf[i] = is_f16 ? kn_half_to_f32_f16(h[i]) : kn_half_to_f32_bf16(h[i]);
    softmax_row_f32(xf, yf, len, take_log);
    for (int64_t i = 0; i < len; i++) o[i] = is_f16 ? kn_half_from_f32_f16(yf[i]) : kn_half_from_f32_bf16(yf[i]);
}
static void softmax_row(kn_dtype dt, const void *in, void *out, int64_t len, void *scratch) {
    softmax_any(dt, in, out, len, scratch, false);
}
static void log_softmax_row(kn_dtype dt, const void *in, void *out, int64_t len, void *scratch) {
    softmax_any(dt, in, out, len, scratch, true);
}

/* Softmax along a dim followed by `inner` contiguous elements (x contiguous [outer, len,
 * inner]): a block of w columns is handled together, so every loop runs along contiguous
 * memory instead of through a transposing copy. m holds the maxima, then the shifts or
 * scales; acc the sums. */
#define SOFTMAX_COLS 256
#define SOFTMAX_COLS_FN(T, SUF)                                                                      \
    static void softmax_cols_##SUF(const T *restrict x, T *restrict y, int64_t len, int64_t inner, int64_t w, \
                                   bool take_log) {                                                  \
        T m[SOFTMAX_COLS];                                                                           \
        double acc[SOFTMAX_COLS];                                                                    \
        for (int64_t j = 0; j < w; j++) m[j] = -INFINITY, acc[j] = 0;                                \
        for (int64_t k = 0; k < len; k++) {                                                          \
            const T *row = x + k * inner;                                                            \
            for (int64_t j = 0; j < w; j++) m[j] = row[j] > m[j] ? row[j] : m[j];                    \
        }                                                                                            \
        for (int64_t k = 0; k < len; k++) {                                                          \
            const T *row = x + k * inner;                                                            \
            T *orow = y + k * inner;                                                                 \
            for (int64_t j = 0; j < w; j++) {                                                        \
                T e = kn_exp(row[j] - m[j]);                                                         \
                if (!take_log) orow[j] = e;                                                          \
                acc[j] += e;                                                                         \
            }                                                                                        \
        }                                                                                            \
        for (int64_t j = 0; j < w; j++) m[j] = take_log ? m[j] + (T)log(acc[j]) : (T)(1.0 / acc[j]); \
        for (int64_t k = 0; k < len; k++) {                                                          \
            const T *row = x + k * inner;                                                            \
            T *orow = y + k * inner;                                                                 \
            if (take_log) {                                                                          \
                for (int64_t j = 0; j < w; j++) orow[j] = row[j] - m[j];                             \
            } else {                                                                                 \
                for (int64_t j = 0; j < w; j++) orow[j] *= m[j];                                     \
            }                                                                                        \
        }                                                                                            \
    }
SOFTMAX_COLS_FN(float, f32)
SOFTMAX_COLS_FN(double, f64)

typedef struct softmax_cols_ctx {
    kn_dtype dt;
    const char *src;
    char *dst;
    int64_t len, inner, blocks;
    bool take_log;
} softmax_cols_ctx;

/* Tasks [begin, end): task t is column block t % blocks of slab t / blocks. */
static void softmax_cols_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const softmax_cols_ctx *c = ctx;
    size_t es = kn_dtype_size(c->dt);
    for (int64_t t = begin; t < end; t++) {
        int64_t o = t / c->blocks, c0 = (t % c->blocks) * SOFTMAX_COLS;
        int64_t w = c->inner - c0 < SOFTMAX_COLS ? c->inner - c0 : SOFTMAX_COLS;
        size_t at = (size_t)(o * c->len * c->inner + c0) * es;
        if (c->dt == KN_F32)
            softmax_cols_f32((const float *)(c->src + at), (float *)(c->dst + at), c->len, c->inner, w, c->take_log);
        else
            softmax_cols_f64((const double *)(c->src + at), (double *)(c->dst + at), c->len, c->inner, w, c->take_log);
    }
}

/* The column path when it fits (f32/f64, contiguous, at least 16 elements after the dim);
 * false to take the row path. */
static bool softmax_by_columns(kn_node *n, bool take_log) {
    kn_tensor *x = n->in[0];
    kn_shape reduced = KN_ATTRS(n, reduce)->dims;
    if ((x->dtype != KN_F32 && x->dtype != KN_F64) || !kn_tensor_is_contiguous(x) || reduced.n != 1) return false;
    int dim = (int)reduced.v[0];
    int64_t outer = 1, len = x->shape[dim], inner = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < dim) outer *= x->shape[d];
        if (d > dim) inner *= x->shape[d];
    }
    if (inner < 16) return false;
    if (outer * len == 0) return true; /* nothing to write */
    int64_t blocks = (inner + SOFTMAX_COLS - 1) / SOFTMAX_COLS;
    softmax_cols_ctx c = {.dt = x->dtype, .src = kn_tensor_data(x), .dst = kn_tensor_data(n->out[0]), .len = len,
                          .inner = inner, .blocks = blocks, .take_log = take_log};
    kn_parallel_for(outer * blocks, len * (inner / blocks) * 8, softmax_cols_chunk, &c);
    return true;
}

kn_status kn_cpu_cumsum(kn_node *n) { return run_along(n, cumsum_row); }
kn_status kn_cpu_cumprod(kn_node *n) { return run_along(n, cumprod_row); }
kn_status kn_cpu_softmax(kn_node *n) { return softmax_by_columns(n, false) ? KN_OK : run_along(n, softmax_row); }
kn_status kn_cpu_log_softmax(kn_node *n) {
    return softmax_by_columns(n, true) ? KN_OK : run_along(n, log_softmax_row);
}
