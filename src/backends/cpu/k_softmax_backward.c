/* CPU kernels of softmax_backward and log_softmax_backward: g and y contiguous [outer, len,
 * inner] (len along the dim). Each row's sum accumulates in double; when the dim is not
 * innermost, blocks of columns run together so every loop walks contiguous memory. */
#include <math.h>

#include "backends/cpu/reduce_plan.h"

#define SMB_COLS 256

/* One [len] row (inner == 1) or a block of w columns of a [len, inner] slab. */
#define SOFTMAX_BWD(T, SUF)                                                                             \
    static void softmax_bwd_##SUF(const T *restrict g, const T *restrict y, T *restrict o, int64_t len,     \
                                  int64_t inner, int64_t w, bool is_log) {                                \
        if (inner == 1) {                                                                               \
            double s = 0;                                                                               \
            if (is_log) {                                                                               \
                _Pragma("omp simd reduction(+ : s)") for (int64_t k = 0; k < len; k++) s += g[k];      \
                T st = (T)s;                                                                            \
                _Pragma("omp simd") for (int64_t k = 0; k < len; k++) o[k] = g[k] - kn_exp(y[k]) * st; \
            } else {                                                                                    \
                _Pragma("omp simd reduction(+ : s)") for (int64_t k = 0; k < len; k++) s += (double)(g[k] * y[k]); \
                T st = (T)s;                                                                            \
                _Pragma("omp simd") for (int64_t k = 0; k < len; k++) o[k] = y[k] * (g[k] - st);       \
            }                                                                                           \
            return;                                                                                     \
        }                                                                                               \
        double acc[SMB_COLS];                                                                           \
        T s[SMB_COLS];                                                                                  \
        for (int64_t j = 0; j < w; j++) acc[j] = 0;                                                     \
        for (int64_t k = 0; k < len; k++) {                                                             \
            const T *gr = g + k * inner, *yr = y + k * inner;                                           \
            if (is_log) {                                                                               \
                _Pragma("omp simd") for (int64_t j = 0; j < w; j++) acc[j] += gr[j];                    \
            } else {                                                                                    \
                _Pragma("omp simd") for (int64_t j = 0; j < w; j++) acc[j] += (double)(gr[j] * yr[j]); \
            }                                                                                           \
        }                                                                                               \
        for (int64_t j = 0; j < w; j++) s[j] = (T)acc[j];                                               \
        for (int64_t k = 0; k < len; k++) {                                                             \
            const T *gr = g + k * inner, *yr = y + k * inner;                                           \
            T *orow = o + k * inner;                                                                    \
            if (is_log) {                                                                               \
                _Pragma("omp simd") for (int64_t j = 0; j < w; j++) orow[j] = gr[j] - kn_exp(yr[j]) * s[j]; \
            } else {                                                                                    \
                _Pragma("omp simd") for (int64_t j = 0; j < w; j++) orow[j] = yr[j] * (gr[j] - s[j]);   \
            }                                                                                           \
        }                                                                                               \
    }
SOFTMAX_BWD(float, f32)
SOFTMAX_BWD(double, f64)

static kn_status softmax_bwd(kn_node *n, bool is_log) {
    kn_tensor *g = n->in[0], *y = n->in[1], *out = n->out[0];
    kn_shape reduced = KN_ATTRS(n, reduce)->dims;
    int dim = reduced.n ? (int)reduced.v[0] : -1; /* a 0-d tensor is one row of one */
    int64_t outer = 1, len = dim < 0 ? 1 : g->shape[dim], inner = 1;
    for (int d = 0; d < g->ndim; d++) {
        if (d < dim) outer *= g->shape[d];
        if (d > dim) inner *= g->shape[d];
    }
    if (outer * len * inner == 0) return KN_OK;
    int64_t width = inner < SMB_COLS ? inner : SMB_COLS;
    int64_t blocks = (inner + width - 1) / width, tasks = outer * blocks;
    size_t es = kn_dtype_size(g->dtype);
    const char *gd = kn_tensor_data(g), *yd = kn_tensor_data(y);
    char *od = kn_tensor_data(out);
#pragma omp parallel for num_threads(kn_cpu_threads_for(outer * len * inner * 4)) schedule(static)
    for (int64_t t = 0; t < tasks; t++) {
        int64_t r = t / blocks, c0 = (t % blocks) * width;
        int64_t w = inner - c0 < width ? inner - c0 : width;
        size_t at = (size_t)(r * len * inner + c0) * es;
        if (g->dtype == KN_F32)
            softmax_bwd_f32((const float *)(gd + at), (const float *)(yd + at), (float *)(od + at), len, inner, w, is_log);
        else
            softmax_bwd_f64((const double *)(gd + at), (const double *)(yd + at), (double *)(od + at), len, inner, w,
                            is_log);
    }
    return KN_OK;
}

kn_status kn_cpu_softmax_backward(kn_node *n) { return softmax_bwd(n, false); }
kn_status kn_cpu_log_softmax_backward(kn_node *n) { return softmax_bwd(n, true); }
