/* CPU normalization kernels, backward (forward: k_nn_norm.c). Each recomputes the forward's
 * statistics from x with the forward's own code (k_nn_norm_stats.h), so that they match bit
 * for bit, rather than saving them. */
#include <math.h>
#include <stdlib.h>

#include "backends/cpu/k_nn.h"
#include "backends/cpu/k_nn_norm_stats.h"
#include "core/error.h"
#include "core/thread_pool.h"

/* The norms' backward over rows: with xhat = (x - mean) * rstd (recomputed as the forward
 * does) and gw = gy * w, dx = rstd * (gw - mean(gw) - xhat * mean(gw * xhat)) (rms_norm: no
 * centering, no mean(gw) term). dweight = sum(gy * xhat) and dbias = sum(gy) over rows
 * accumulate in per-chunk partials (`part`: chunks x 2 x inner), summed in chunk order. */
#define NORM_BACKWARD(T)                                                                         \
    typedef struct norm_backward_ctx_##T {                                                      \
        const T *gy, *x, *w;                                                                    \
        T *dx, *part;                                                                           \
        int64_t inner;                                                                          \
        double eps;                                                                             \
        bool rms;                                                                               \
    } norm_backward_ctx_##T;                                                                    \
    static void norm_backward_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {     \
        const norm_backward_ctx_##T *c = ctx;                                                   \
        const int64_t inner = c->inner, full = inner / KN_LANES * KN_LANES;                     \
        const bool rms = c->rms;                                                                \
        const T *restrict w = c->w;                                                             \
        T *restrict pw = c->part + (int64_t)chunk * 2 * inner, *restrict pb = pw + inner;       \
        for (int64_t r = begin; r < end; r++) {                                                 \
            const T *restrict xr = c->x + r * inner, *restrict gr = c->gy + r * inner;          \
            T *restrict dr = c->dx + r * inner;                                                 \
            double shift = rms ? 0 : (double)xr[0], sums[2];                              \
            run_sums_##T(xr, NULL, 1, inner, 0, shift, sums);                                           \
            double m = sums[0] / (double)inner, var = sums[1] / (double)inner - (rms ? 0 : m * m);         \
            T mean = (T)(rms ? 0 : shift + m), rstd = (T)(1.0 / sqrt((var > 0 ? var : 0) + c->eps)); \
            /* sums of gw and gw * xhat in lanes, as run_sums */                               \
            T la[KN_LANES] = {0}, lb[KN_LANES] = {0}, a = 0, b = 0;                             \
            for (int64_t i0 = 0; i0 < full; i0 += KN_LANES)                                     \
                for (int k = 0; k < KN_LANES; k++) {                                            \
                    const int64_t i = i0 + k;                                                   \
                    T xh = (xr[i] - mean) * rstd, g = gr[i], gw = g * w[i];                     \
                    la[k] += gw, lb[k] += gw * xh;                                              \
                    pw[i] += g * xh, pb[i] += g;                                                \
                }                                                                               \
            for (int64_t i = full; i < inner; i++) {                                            \
                T xh = (xr[i] - mean) * rstd, g = gr[i], gw = g * w[i];                         \
                a += gw, b += gw * xh;                                                          \
                pw[i] += g * xh, pb[i] += g;                                                    \
            }                                                                                   \
            for (int k = 0; k < KN_LANES; k++) a += la[k], b += lb[k];                          \
            T ca = rms ? 0 : a / (T)inner, cb = b / (T)inner;                                   \
            for (int64_t i = 0; i < inner; i++)                                                 \
                dr[i] = rstd * (gr[i] * w[i] - ca - (xr[i] - mean) * rstd * cb);                \
        }                                                                                       \
    }                                                                                           \
    static void norm_backward_##T(const T *gy, const T *x, T *dx, T *dw, T *db, int64_t rows, int64_t inner, \
                                  const T *w, double eps, bool rms, T *part, int chunks) {      \
        norm_backward_ctx_##T c = {.gy = gy, .x = x, .w = w, .dx = dx, .part = part, .inner = inner, .eps = eps, \
                               .rms = rms};                                                     \
        kn_parallel_run(rows, chunks, norm_backward_chunk_##T, &c);                             \
        /* a few vectors: summed here rather than in another loop */                            \
        for (int64_t i = 0; i < inner; i++) {                                                   \
            double sw = 0, sb = 0;                                                              \
            for (int t = 0; t < chunks; t++) sw += part[t * 2 * inner + i], sb += part[(t * 2 + 1) * inner + i]; \
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
    int chunks = kn_parallel_chunks(rows, inner * 4);
    void *w = kn_nn_narrow_vector(kn_nn_read_vector(KN_INPUT(n, layer_norm_backward, weight), inner, 1), inner, ct);
    void *part = calloc((size_t)(chunks * 2 * inner), es), *db = malloc((size_t)inner * es);
    kn_tensor *gy = kn_nn_work(n->in[0], ct), *x = kn_nn_work(n->in[1], ct);
    kn_tensor *dx = kn_nn_work_out(dx_out, ct), *dw = kn_nn_work_out(n->out[1], ct);
    kn_tensor *dbt = rms ? NULL : kn_nn_work_out(n->out[2], ct);
    kn_status st = w && part && db && gy && x && dx && dw && (rms || dbt)
                       ? KN_OK
                       : kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name(n->op));
    void *dbp = dbt ? kn_tensor_data(dbt) : db;
    if (st == KN_OK && ct == KN_F64)
        norm_backward_double(kn_tensor_data(gy), kn_tensor_data(x), kn_tensor_data(dx), kn_tensor_data(dw), dbp, rows,
                             inner, w, a->eps, rms, part, chunks);
    else if (st == KN_OK)
        norm_backward_float(kn_tensor_data(gy), kn_tensor_data(x), kn_tensor_data(dx), kn_tensor_data(dw), dbp, rows,
                            inner, w, a->eps, rms, part, chunks);
    free(w), free(part), free(db);
    if (gy) kn_tensor_decref(gy);
    if (x) kn_tensor_decref(x);
    st = kn_nn_finish(dx_out, dx, st);
    st = kn_nn_finish(n->out[1], dw, st);
    return rms ? st : kn_nn_finish(n->out[2], dbt, st);
}

kn_status kn_nn_layer_norm_backward_kernel(kn_node *n) { return norm_backward(n, false); }
kn_status kn_nn_rms_norm_backward_kernel(kn_node *n) { return norm_backward(n, true); }

/* batch_norm's backward over x [N, C, inner], channels [begin, end) of a chunk. Pass 1 reads
 * the channel's x and gy once (run_sums_grad): the forward's statistics (training; inference
 * takes the running ones) and, about the same shift, sum(gy) and sum(gy * (x - shift)), from
 * which sum(gy * xhat) = rstd * (sum(gy * (x - shift)) - (mean - shift) * sum(gy)) follows
 * without knowing the mean beforehand. Pass 2 writes dx = rstd * w * (gy - mean(gy) - xhat *
 * mean(gy * xhat)) as gy * a + (x - mean) * b + d in T (inference: gy * rstd * w). Each
 * channel's sums are its own (dweight = sum(gy * xhat), dbias = sum(gy)): no partials to
 * combine, so any pool size gives the same bits. */
typedef struct bn_backward_ctx {
    const void *gy, *x;
    void *dx;
    int64_t N, C, inner;
    double eps;
    bool training;
    const double *w, *rmean, *rvar; /* [C]; running statistics read in inference only */
    double *dw, *db;                /* [C] */
} bn_backward_ctx;

#define BATCH_NORM_BACKWARD(T)                                                                   \
    static void bn_backward_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {       \
        const bn_backward_ctx *c = ctx;                                                         \
        const int64_t N = c->N, inner = c->inner, step = c->C * inner;                          \
        const double count = (double)(N * inner), per = count ? 1 / count : 0;                  \
        for (int64_t ch = begin; ch < end; ch++) {                                              \
            const T *x0 = (const T *)c->x + ch * inner, *g0 = (const T *)c->gy + ch * inner;    \
            T *d0 = (T *)c->dx + ch * inner;                                                    \
            double shift = !c->training ? c->rmean[ch] : count ? (double)x0[0] : 0, sums[4];      \
            double mean = c->rmean[ch], var = c->rvar[ch];                                      \
            run_sums_grad_##T(x0, g0, N, inner, step, shift, sums);                                  \
            if (c->training) stats_from_sums(sums, count, shift, &mean, &var); /* as chunk_stats */ \
            double sg = sums[2], sgx = sums[3];                                                 \
            double rstd = 1.0 / sqrt(var + c->eps), sgxh = rstd * (sgx - (mean - shift) * sg);  \
            double k = rstd * c->w[ch];                                                         \
            c->dw[ch] = sgxh, c->db[ch] = sg;                                                   \
            const T a = (T)k, b = (T)(-k * rstd * sgxh * per), d = (T)(-k * sg * per), m = (T)mean; \
            for (int64_t n = 0; n < N; n++) {                                                   \
                const T *restrict xr = x0 + n * step, *restrict gr = g0 + n * step;             \
                T *restrict dr = d0 + n * step;                                                 \
                if (c->training)                                                                \
                    for (int64_t i = 0; i < inner; i++) dr[i] = gr[i] * a + (xr[i] - m) * b + d; \
                else                                                                            \
                    for (int64_t i = 0; i < inner; i++) dr[i] = gr[i] * a;                      \
            }                                                                                   \
        }                                                                                       \
    }
BATCH_NORM_BACKWARD(float)
BATCH_NORM_BACKWARD(double)

kn_status kn_nn_batch_norm_backward_kernel(kn_node *n) {
    kn_tensor *dx_out = n->out[0];
    const kn_attrs_batch_norm_backward *a = KN_ATTRS(n, batch_norm_backward);
    int64_t N = dx_out->shape[0], C = dx_out->shape[1], inner = N * C > 0 ? kn_numel(dx_out) / (N * C) : 0;
    kn_dtype ct = kn_nn_compute_dtype(dx_out->dtype);
    double *w = kn_nn_read_vector(KN_INPUT(n, batch_norm_backward, weight), C, 1);
    double *rmean = kn_nn_read_vector(KN_INPUT(n, batch_norm_backward, running_mean), C, 0);
    double *rvar = kn_nn_read_vector(KN_INPUT(n, batch_norm_backward, running_var), C, 1);
    double *dw = malloc(sizeof(double) * (size_t)(C + 1)), *db = malloc(sizeof(double) * (size_t)(C + 1));
    kn_tensor *gy = kn_nn_work(n->in[0], ct), *x = kn_nn_work(n->in[1], ct), *dx = kn_nn_work_out(dx_out, ct);
    kn_status st = w && rmean && rvar && dw && db && gy && x && dx
                       ? KN_OK
                       : kn_error(KN_ERR_OOM, "batch_norm_backward: out of memory");
    if (st == KN_OK) {
        bn_backward_ctx c = {.gy = kn_tensor_data(gy), .x = kn_tensor_data(x), .dx = kn_tensor_data(dx), .N = N,
                             .C = C, .inner = inner, .eps = a->eps, .training = a->training, .w = w, .rmean = rmean,
                             .rvar = rvar, .dw = dw, .db = db};
        kn_parallel_for(C, N * inner * 4, ct == KN_F64 ? bn_backward_chunk_double : bn_backward_chunk_float, &c);
    }
    st = kn_nn_finish(dx_out, dx, st);
    if (st == KN_OK) st = kn_nn_write_vector(n->out[1], dw);
    if (st == KN_OK) st = kn_nn_write_vector(n->out[2], db);
    free(w), free(rmean), free(rvar), free(dw), free(db);
    if (gy) kn_tensor_decref(gy);
    if (x) kn_tensor_decref(x);
    return st;
}
