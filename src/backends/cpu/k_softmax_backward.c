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
            double s;                                                                                   \
            if (is_log) {                                                                               \
                KN_LANE_SUM(s, len, k, (double)g[k]);                                                   \
                T st = (T)s;                                                                            \
                for (int64_t k = 0; k < len; k++) o[k] = g[k] - kn_exp(y[k]) * st;                      \
            } else {                                                                                    \
                KN_LANE_SUM(s, len, k, (double)(g[k] * y[k]));                                          \
                T st = (T)s;                                                                            \
                for (int64_t k = 0; k < len; k++) o[k] = y[k] * (g[k] - st);                            \
            }                                                                                           \
            return;                                                                                     \
        }                                                                                               \
        double acc[SMB_COLS];                                                                           \
        T s[SMB_COLS];                                                                                  \
        for (int64_t j = 0; j < w; j++) acc[j] = 0;                                                     \
        for (int64_t k = 0; k < len; k++) {                                                             \
            const T *gr = g + k * inner, *yr = y + k * inner;                                           \
            if (is_log) {                                                                               \
                for (int64_t j = 0; j < w; j++) acc[j] += gr[j];                                        \
            } else {                                                                                    \
                for (int64_t j = 0; j < w; j++) acc[j] += (double)(gr[j] * yr[j]);                      \
            }                                                                                           \
        }                                                                                               \
        for (int64_t j = 0; j < w; j++) s[j] = (T)acc[j];                                               \
        for (int64_t k = 0; k < len; k++) {                                                             \
            const T *gr = g + k * inner, *yr = y + k * inner;                                           \
            T *orow = o + k * inner;                                                                    \
            if (is_log) {                                                                               \
                for (int64_t j = 0; j < w; j++) orow[j] = gr[j] - kn_exp(yr[j]) * s[j];                 \
            } else {                                                                                    \
                for (int64_t j = 0; j < w; j++) orow[j] = yr[j] * (gr[j] - s[j]);                       \
            }                                                                                           \
        }                                                                                               \
    }
SOFTMAX_BWD(float, f32)
SOFTMAX_BWD(double, f64)

typedef struct softmax_bwd_ctx {
    kn_dtype dt;
    const char *g, *y;
    char *o;
    int64_t len, inner, width, blocks;
    bool is_log;
} softmax_bwd_ctx;

/* Tasks [begin, end): task t is column block t % blocks of row t / blocks. */
static void softmax_bwd_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const softmax_bwd_ctx *c = ctx;
    size_t es = kn_dtype_size(c->dt);
    for (int64_t t = begin; t < end; t++) {
        int64_t r = t / c->blocks, c0 = (t % c->blocks) * c->width;
        int64_t w = c->inner - c0 < c->width ? c->inner - c0 : c->width;
        size_t at = (size_t)(r * c->len * c->inner + c0) * es;
        if (c->dt == KN_F32)
            softmax_bwd_f32((const float *)(c->g + at), (const float *)(c->y + at), (float *)(c->o + at), c->len,
                            c->inner, w, c->is_log);
        else
            softmax_bwd_f64((const double *)(c->g + at), (const double *)(c->y + at), (double *)(c->o + at), c->len,
                            c->inner, w, c->is_log);
    }
}

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
    int64_t blocks = (inner + width - 1) / width;
    softmax_bwd_ctx c = {.dt = g->dtype, .g = kn_tensor_data(g), .y = kn_tensor_data(y), .o = kn_tensor_data(out),
                         .len = len, .inner = inner, .width = width, .blocks = blocks, .is_log = is_log};
    kn_parallel_for(outer * blocks, len * (inner / blocks) * 4, softmax_bwd_chunk, &c);
    return KN_OK;
}

kn_status kn_cpu_softmax_backward(kn_node *n) { return softmax_bwd(n, false); }
kn_status kn_cpu_log_softmax_backward(kn_node *n) { return softmax_bwd(n, true); }
