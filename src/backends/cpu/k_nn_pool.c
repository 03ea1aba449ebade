/* CPU pooling and resampling kernels over [planes, H, W] (PyTorch's window and coordinate
 * formulas); each output row is independent, so rows are split across threads. */
#include <math.h>

#include "backends/cpu/k_nn.h"
#include "core/error.h"
#include "core/thread_pool.h"

typedef struct planes {
    int64_t P, H, W, OH, OW;
} planes;

static planes planes_of(const kn_node *n) {
    const kn_tensor *x = n->in[0], *o = n->out[0];
    int nd = x->ndim;
    int64_t H = x->shape[nd - 2], W = x->shape[nd - 1];
    return (planes){H * W > 0 ? kn_numel(x) / (H * W) : 0, H, W, o->shape[nd - 2], o->shape[nd - 1]};
}

static inline int64_t imin(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t imax(int64_t a, int64_t b) { return a > b ? a : b; }

/* Window rows [s, e) of output o: PyTorch's adaptive pooling bounds. */
static inline int64_t adaptive_start(int64_t o, int64_t in, int64_t out) { return (o * in) / out; }
static inline int64_t adaptive_end(int64_t o, int64_t in, int64_t out) { return ((o + 1) * in + out - 1) / out; }

/* PyTorch's nearest source index: the scale is computed in float. */
static inline int64_t nearest_src(int64_t o, int64_t in, int64_t out) {
    float scale = (float)in / (float)out;
    return imin((int64_t)floorf((float)o * scale), in - 1);
}

/* Bilinear source: the lower index, the upper index and the weight of the upper one. */
static inline void bilinear_src(int64_t o, int64_t in, int64_t out, bool align, int64_t *i0, int64_t *i1, double *l) {
    double src;
    if (align) src = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0;
    else src = fmax(((double)o + 0.5) * (double)in / (double)out - 0.5, 0);
    *i0 = imin((int64_t)src, in - 1);
    *i1 = *i0 + (*i0 < in - 1);
    *l = src - (double)*i0;
}

/* A kernel's operands; its loop runs over output rows (plane q, row oh), row = q * OH + oh. */
typedef struct pool_ctx {
    planes p;
    const void *x;
    void *y;
    int64_t *idx;                  /* max_pool2d's indices */
    const kn_attrs_max_pool2d *a;  /* avg_pool2d's too (op_table.c) */
    bool align;                    /* bilinear's align_corners */
} pool_ctx;

/* NAME_T: a chunk function over output rows [begin, end) running the body (the variadic
 * argument, which may hold commas) with c, p, x, y, row, q and oh in scope. */
#define ROWS_FN(NAME, T, ...)                                                                            \
    static void NAME##_##T(void *ctx, int64_t begin, int64_t end, int chunk) {                           \
        const pool_ctx *c = ctx;                                                                         \
        const planes *p = &c->p;                                                                         \
        const T *x = c->x;                                                                               \
        T *y = c->y;                                                                                     \
        (void)chunk;                                                                                     \
        for (int64_t row = begin; row < end; row++) {                                                    \
            int64_t q = row / p->OH, oh = row % p->OH;                                                   \
            __VA_ARGS__                                                                                  \
        }                                                                                                \
    }

/* The taps [lo, hi) of a window starting at `start` (taps `step` apart, `taps` of them) that
 * fall inside [0, size): found once per window, so the loops over them test no bounds. */
static inline void taps_inside(int64_t start, int64_t step, int64_t taps, int64_t size, int64_t *lo, int64_t *hi) {
    int64_t l = start >= 0 ? 0 : (-start + step - 1) / step;
    int64_t h = start >= size ? 0 : (size - 1 - start) / step + 1;
    *lo = imin(l, taps);
    *hi = imax(imin(h, taps), *lo);
}

/* The window attributes of max_pool2d and avg_pool2d. */
#define WINDOW(a)                                                                                        \
    const int64_t KH = a->kernel[0], KW = a->kernel[1], SH = a->stride[0], SW = a->stride[1];            \
    const int64_t PH = a->padding[0], PW = a->padding[1], DH = a->dilation[0], DW = a->dilation[1];      \
    (void)DH, (void)DW;

#define POOL_IMPL(T)                                                                                     \
    /* One tap of a row of max_pool's windows: columns [lo, hi) read x at ow * sw + off. */         \
    static inline void max_taps_##T(const T *restrict xr, T *restrict yr, int64_t *restrict ir, int64_t lo, \
                                    int64_t hi, int64_t sw, int64_t off, int64_t base) {                 \
        for (int64_t ow = lo; ow < hi; ow++) {                                                           \
            const T v = xr[ow * sw + off];                                                               \
            /* the first tap inside, a larger value, or NaN (which wins; the last one's index is    \
             * kept), as in PyTorch */                                                               \
            const bool take = (ir[ow] < 0) | (v > yr[ow]) | (v != v);                                   \
            yr[ow] = take ? v : yr[ow];                                                                  \
            ir[ow] = take ? base + ow * sw + off : ir[ow];                                               \
        }                                                                                                \
    }                                                                                                    \
    /* Taps outer, output columns inner: the inner loop has no dependence between columns, so   \
     * it runs as vector compares and selects (per column the taps still come in (kh, kw)     \
     * order, which decides ties and NaNs). */                                                     \
    ROWS_FN(max_pool, T, {                                                                               \
        WINDOW(c->a)                                                                                     \
        T *restrict yr = y + row * p->OW;                                                                \
        int64_t *restrict ir = c->idx + row * p->OW;                                                     \
        for (int64_t ow = 0; ow < p->OW; ow++) yr[ow] = -INFINITY, ir[ow] = -1;                          \
        int64_t h0 = oh * SH - PH, kh_lo, kh_hi;                                                         \
        taps_inside(h0, DH, KH, p->H, &kh_lo, &kh_hi);                                                   \
        for (int64_t kh = kh_lo; kh < kh_hi; kh++) {                                                     \
            const int64_t ih = h0 + kh * DH;                                                             \
            const T *restrict xr = x + (q * p->H + ih) * p->W;                                           \
            for (int64_t kw = 0; kw < KW; kw++) {                                                        \
                const int64_t off = kw * DW - PW, lo = off >= 0 ? 0 : (-off + SW - 1) / SW;              \
                const int64_t hi = imin(p->W - off <= 0 ? 0 : (p->W - off + SW - 1) / SW, p->OW);        \
                /* strides 1 and 2 as constants, so that their loads vectorize */                    \
                if (SW == 2) max_taps_##T(xr, yr, ir, lo, hi, 2, off, ih * p->W);                        \
                else if (SW == 1) max_taps_##T(xr, yr, ir, lo, hi, 1, off, ih * p->W);                   \
                else max_taps_##T(xr, yr, ir, lo, hi, SW, off, ih * p->W);                               \
            }                                                                                            \
        }                                                                                                \
    })                                                                                                   \
    ROWS_FN(avg_pool, T, {                                                                               \
        WINDOW(c->a)                                                                                     \
        for (int64_t ow = 0; ow < p->OW; ow++) {                                                         \
            int64_t hs = oh * SH - PH, ws = ow * SW - PW;                                                \
            int64_t he = imin(hs + KH, p->H + PH), we = imin(ws + KW, p->W + PW);                        \
            int64_t padded = (he - hs) * (we - ws);                                                      \
            hs = imax(hs, 0), ws = imax(ws, 0), he = imin(he, p->H), we = imin(we, p->W);                \
            double acc = 0;                                                                              \
            for (int64_t ih = hs; ih < he; ih++)                                                         \
                for (int64_t iw = ws; iw < we; iw++) acc += x[(q * p->H + ih) * p->W + iw];              \
            int64_t div = c->a->exclude_pad ? (he - hs) * (we - ws) : padded;                            \
            y[row * p->OW + ow] = (T)(div ? acc / (double)div : NAN);                                    \
        }                                                                                                \
    })                                                                                                   \
    ROWS_FN(adaptive, T, {                                                                               \
        for (int64_t ow = 0; ow < p->OW; ow++) {                                                         \
            int64_t hs = adaptive_start(oh, p->H, p->OH), he = adaptive_end(oh, p->H, p->OH);            \
            int64_t ws = adaptive_start(ow, p->W, p->OW), we = adaptive_end(ow, p->W, p->OW);            \
            double acc = 0;                                                                              \
            for (int64_t ih = hs; ih < he; ih++)                                                         \
                for (int64_t iw = ws; iw < we; iw++) acc += x[(q * p->H + ih) * p->W + iw];              \
            y[row * p->OW + ow] = (T)(acc / (double)((he - hs) * (we - ws)));                            \
        }                                                                                                \
    })                                                                                                   \
    ROWS_FN(nearest, T, {                                                                                \
        const T *xr = x + (q * p->H + nearest_src(oh, p->H, p->OH)) * p->W;                              \
        T *yr = y + row * p->OW;                                                                         \
        for (int64_t ow = 0; ow < p->OW; ow++) yr[ow] = xr[nearest_src(ow, p->W, p->OW)];                \
    })                                                                                                   \
    ROWS_FN(bilinear, T, {                                                                               \
        int64_t h0, h1, w0, w1;                                                                          \
        double lh, lw;                                                                                   \
        bilinear_src(oh, p->H, p->OH, c->align, &h0, &h1, &lh);                                          \
        const T *r0 = x + (q * p->H + h0) * p->W, *r1 = x + (q * p->H + h1) * p->W;                      \
        for (int64_t ow = 0; ow < p->OW; ow++) {                                                         \
            bilinear_src(ow, p->W, p->OW, c->align, &w0, &w1, &lw);                                      \
            double top = (1 - lw) * r0[w0] + lw * r0[w1], bot = (1 - lw) * r1[w0] + lw * r1[w1];         \
            y[row * p->OW + ow] = (T)((1 - lh) * top + lh * bot);                                        \
        }                                                                                                \
    })
POOL_IMPL(float)
POOL_IMPL(double)

/* Runs chunk function FN (FN_float or FN_double) over the output rows, with x and y the
 * compute dtype's arrays, over widened copies for 16-bit; `cost`: work per output row. */
#define RUN_PLANES(n, FN, cost, ...)                                                                                         \
    do {                                                                                                                     \
        kn_tensor *out_ = (n)->out[0];                                                                                       \
        kn_dtype ct_ = kn_nn_compute_dtype(out_->dtype);                                                                     \
        pool_ctx c_ = {.p = planes_of(n), __VA_ARGS__};                                                                      \
        kn_tensor *xw_ = kn_nn_work((n)->in[0], ct_), *yw_ = kn_nn_work_out(out_, ct_);                                      \
        if (xw_ && yw_ && kn_numel(out_)) {                                                                                  \
            const planes *p = &c_.p;                                                                                         \
            c_.x = kn_tensor_data(xw_);                                                                                      \
            c_.y = kn_tensor_data(yw_);                                                                                      \
            kn_parallel_for(p->P * p->OH, (cost), ct_ == KN_F64 ? FN##_double : FN##_float, &c_);                            \
        }                                                                                                                    \
        if (xw_) kn_tensor_decref(xw_);                                                                                      \
        return kn_nn_finish(out_, yw_, xw_ && yw_ ? KN_OK : kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name((n)->op))); \
    } while (0)

kn_status kn_nn_max_pool2d_kernel(kn_node *n) {
    const kn_attrs_max_pool2d *a = KN_ATTRS(n, max_pool2d);
    RUN_PLANES(n, max_pool, p->OW * a->kernel[0] * a->kernel[1], .a = a, .idx = kn_tensor_data(n->out[1]));
}
kn_status kn_nn_avg_pool2d_kernel(kn_node *n) {
    const kn_attrs_max_pool2d *a = KN_ATTRS(n, max_pool2d); /* avg_pool2d's too (op_table.c) */
    RUN_PLANES(n, avg_pool, p->OW * a->kernel[0] * a->kernel[1], .a = a);
}
kn_status kn_nn_adaptive_avg_pool2d_kernel(kn_node *n) {
    RUN_PLANES(n, adaptive, p->H * p->W / (p->OH ? p->OH : 1) + p->OW, .a = NULL);
}
kn_status kn_nn_upsample_nearest2d_kernel(kn_node *n) {
    RUN_PLANES(n, nearest, p->OW, .a = NULL);
}
kn_status kn_nn_upsample_bilinear2d_kernel(kn_node *n) {
    RUN_PLANES(n, bilinear, 4 * p->OW, .align = KN_ATTRS(n, upsample_bilinear2d)->align_corners);
}
