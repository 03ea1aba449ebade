/* CPU convolutions as GEMMs: conv2d multiplies each group's weights by an im2col matrix
 * (1x1 stride-1 unpadded convolutions use the input itself), conv_transpose2d multiplies the
 * transposed weights by the input and scatters the columns back (col2im). Ungrouped
 * convolutions with fewer than BATCHED_BELOW output positions per image, whose matrices for
 * the whole batch fit in BATCHED_COLUMNS elements, make one GEMM over all images (columns [K, N*OH*OW]), its columns split among the OpenMP threads
 * on single-threaded BLAS: per image, the small outputs of a network's deep layers (OH*OW of
 * 1..64) would make each product a matrix-vector-like one that re-reads the weights per image,
 * and OpenBLAS's own threads would compete with OpenMP's spinning ones. Otherwise many (image, group)
 * products run in parallel on single-threaded BLAS; few run one by one on threaded BLAS.
 * 16-bit floats are widened to f32. */
#include <cblas.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_nn.h"
#include "core/error.h"

#define BATCHED_COLUMNS ((int64_t)1 << 25)
#define BATCHED_BELOW 1024

/* The batched path's two matrices are kept between calls: allocating them per call (tens of
 * MB at 224x224) cost more in page faults than im2col itself. A caller takes the kept buffer
 * of a slot if it is large enough (else allocates; NULL when out of memory) and gives it back
 * after; the larger of two is kept. At most BATCHED_COLUMNS elements (128 MB in f32) stay held. */
typedef struct kept_buffer {
    void *p;
    size_t n;
} kept_buffer;
static pthread_mutex_t scratch_lock = PTHREAD_MUTEX_INITIALIZER;
static kept_buffer kept[2];

static kept_buffer scratch_take(int slot, size_t bytes) {
    kept_buffer s = {0};
    pthread_mutex_lock(&scratch_lock);
    if (kept[slot].n >= bytes) s = kept[slot], kept[slot] = (kept_buffer){0};
    pthread_mutex_unlock(&scratch_lock);
    if (!s.p) s = (kept_buffer){malloc(bytes ? bytes : 1), bytes};
    return s;
}

static void scratch_give(int slot, kept_buffer s) {
    pthread_mutex_lock(&scratch_lock);
    if (s.n > kept[slot].n) {
        kept_buffer old = kept[slot];
        kept[slot] = s;
        s = old;
    }
    pthread_mutex_unlock(&scratch_lock);
    free(s.p);
}

typedef struct conv_geom {
    int64_t N, G, Cg, H, W, Coutg, KH, KW, OH, OW;
    int64_t sh, sw, ph, pw, dh, dw;
} conv_geom;

/* The geometry of x [N, C, H, W] -> out [N, Cout, OH, OW]. */
static conv_geom geom_of(const kn_node *n) {
    const kn_tensor *x = n->in[0], *w = n->in[1], *o = n->out[0];
    const kn_attrs_conv2d *a = KN_ATTRS(n, conv2d); /* conv_transpose2d's are conv2d's (op_table.c) */
    int64_t G = a->groups;
    conv_geom g = {x->shape[0], G, x->shape[1] / G, x->shape[2], x->shape[3], o->shape[1] / G,
                   w->shape[2], w->shape[3], o->shape[2], o->shape[3], a->stride[0], a->stride[1],
                   a->padding[0], a->padding[1], a->dilation[0], a->dilation[1]};
    return g;
}

/* The valid range [lo, hi) of o with 0 <= o*s + off < size. */
static void valid_range(int64_t off, int64_t s, int64_t size, int64_t count, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s, h = size - off <= 0 ? 0 : (size - off + s - 1) / s;
    *lo = l < count ? l : count;
    *hi = h < count ? (h > *lo ? h : *lo) : count;
}

#define CONV_IMPL(T, gemm)                                                                            \
    /* col [Cg*KH*KW, OH*OW] (rows ld apart) from one group's image x [Cg, H, W]. */                \
    static void im2col_##T(const conv_geom *g, const T *x, T *col, int64_t ld) {                     \
        for (int64_t c = 0; c < g->Cg; c++)                                                           \
            for (int64_t kh = 0; kh < g->KH; kh++)                                                    \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                              \
                    T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;                              \
                    int64_t oh_lo, oh_hi, ow_lo, ow_hi, hoff = kh * g->dh - g->ph, woff = kw * g->dw - g->pw; \
                    valid_range(hoff, g->sh, g->H, g->OH, &oh_lo, &oh_hi);                            \
                    valid_range(woff, g->sw, g->W, g->OW, &ow_lo, &ow_hi);                            \
                    memset(row, 0, sizeof(T) * (size_t)(oh_lo * g->OW));                              \
                    for (int64_t oh = oh_lo; oh < oh_hi; oh++) {                                      \
                        T *r = row + oh * g->OW;                                                      \
                        const T *xr = x + (c * g->H + oh * g->sh + hoff) * g->W + woff;               \
                        for (int64_t ow = 0; ow < ow_lo; ow++) r[ow] = 0;                             \
                        if (g->sw == 1) /* the common case: a contiguous run */                     \
                            memcpy(r + ow_lo, xr + ow_lo, sizeof(T) * (size_t)(ow_hi - ow_lo));        \
                        else                                                                          \
                            for (int64_t ow = ow_lo; ow < ow_hi; ow++) r[ow] = xr[ow * g->sw];        \
                        for (int64_t ow = ow_hi; ow < g->OW; ow++) r[ow] = 0;                         \
                    }                                                                                 \
                    memset(row + oh_hi * g->OW, 0, sizeof(T) * (size_t)((g->OH - oh_hi) * g->OW));    \
                }                                                                                     \
    }                                                                                                 \
    /* Adds col [Coutg*KH*KW, H*W] (rows ld apart) into one group's output y [Coutg, OH, OW]. */   \
    static void col2im_##T(const conv_geom *g, const T *col, T *y, int64_t ld) {                     \
        for (int64_t c = 0; c < g->Coutg; c++)                                                        \
            for (int64_t kh = 0; kh < g->KH; kh++)                                                    \
                for (int64_t kw = 0; kw < g->KW; kw++) {                                              \
                    const T *row = col + ((c * g->KH + kh) * g->KW + kw) * ld;                        \
                    int64_t ih_lo, ih_hi, iw_lo, iw_hi, hoff = kh * g->dh - g->ph, woff = kw * g->dw - g->pw; \
                    valid_range(hoff, g->sh, g->OH, g->H, &ih_lo, &ih_hi);                            \
                    valid_range(woff, g->sw, g->OW, g->W, &iw_lo, &iw_hi);                            \
                    for (int64_t ih = ih_lo; ih < ih_hi; ih++) {                                      \
                        T *yr = y + (c * g->OH + ih * g->sh + hoff) * g->OW + woff;                   \
                        const T *r = row + ih * g->W;                                                 \
                        for (int64_t iw = iw_lo; iw < iw_hi; iw++) yr[iw * g->sw] += r[iw];           \
                    }                                                                                 \
                }                                                                                     \
    }                                                                                                 \
    /* Images [N, C, P] to rows [C, N*P] (to_rows), or back. */                                    \
    static void regroup_##T(T *dst, const T *src, int64_t N, int64_t C, int64_t P, bool to_rows) {    \
        _Pragma("omp parallel for collapse(2) num_threads(kn_cpu_threads_for(N * C * P))")           \
        for (int64_t n = 0; n < N; n++)                                                               \
            for (int64_t c = 0; c < C; c++) {                                                         \
                int64_t row = (c * N + n) * P, image = (n * C + c) * P;                               \
                memcpy(dst + (to_rows ? row : image), src + (to_rows ? image : row), sizeof(T) * (size_t)P); \
            }                                                                                         \
    }                                                                                                 \
    /* C [M, Nc] = op(A) op(B), its columns split among the OpenMP threads in multiples of 16,        \
     * each thread on single-threaded BLAS. */                                                        \
    static void gemm_columns_##T(CBLAS_TRANSPOSE ta, CBLAS_TRANSPOSE tb, int64_t M, int64_t Nc, int64_t Kd,\
                                 const T *A, int64_t lda, const T *B, int64_t ldb, T *C, int64_t ldc) {\
        int threads = kn_cpu_threads_for(M * Nc * Kd / 16), saved = openblas_get_num_threads();       \
        int64_t chunk = ((Nc + threads - 1) / threads + 15) / 16 * 16;                                \
        openblas_set_num_threads(1);                                                                  \
        _Pragma("omp parallel for num_threads(threads) schedule(static)")                             \
        for (int t = 0; t < threads; t++) {                                                           \
            int64_t j0 = t * chunk, j1 = j0 + chunk < Nc ? j0 + chunk : Nc;                           \
            if (j1 > j0)                                                                              \
                gemm(CblasRowMajor, ta, tb, (int)M, (int)(j1 - j0), (int)Kd, 1, A, (int)lda,          \
                     B + j0 * (tb == CblasNoTrans ? 1 : ldb), (int)ldb, 0, C + j0, (int)ldc);         \
        }                                                                                             \
        openblas_set_num_threads(saved);                                                              \
    }                                                                                                 \
    /* Every image's columns side by side: col [Cg*KH*KW, N*OH*OW]. */                              \
    static void im2col_all_##T(const conv_geom *g, const T *x, T *col) {                             \
        int64_t OHW = g->OH * g->OW, cols = g->N * OHW;                                               \
        _Pragma("omp parallel for num_threads(kn_cpu_threads_for(g->Cg * g->KH * g->KW * cols))")    \
        for (int64_t n = 0; n < g->N; n++) im2col_##T(g, x + n * g->Cg * g->H * g->W, col + n * OHW, cols); \
    }                                                                                                 \
    /* An ungrouped convolution of the whole batch as one GEMM. */                 \
    static bool conv_batched_##T(const conv_geom *g, const T *x, const T *w, T *y, bool transposed) { \
        int64_t N = g->N, OHW = g->OH * g->OW, HW = g->H * g->W, K = g->Cg * g->KH * g->KW;          \
        int64_t Kc = g->Coutg * g->KH * g->KW, cols = N * (transposed ? HW : OHW);                   \
        kept_buffer sa = scratch_take(0, sizeof(T) * (size_t)((transposed ? g->Cg : K) * cols));      \
        kept_buffer sb = scratch_take(1, sizeof(T) * (size_t)((transposed ? Kc : g->Coutg) * cols));  \
        T *a = sa.p, *b = sb.p;                                                                       \
        if (a && b && !transposed) {                                                                  \
            im2col_all_##T(g, x, a);                                                                  \
            gemm_columns_##T(CblasNoTrans, CblasNoTrans, g->Coutg, cols, K, w, K, a, cols, b, cols);  \
            regroup_##T(y, b, N, g->Coutg, OHW, false);                                                 \
        } else if (a && b) {                                                                          \
            regroup_##T(a, x, N, g->Cg, HW, true);                                                     \
            gemm_columns_##T(CblasTrans, CblasNoTrans, Kc, cols, g->Cg, w, Kc, a, cols, b, cols);     \
            memset(y, 0, sizeof(T) * (size_t)(N * g->Coutg * OHW));                                   \
            _Pragma("omp parallel for num_threads(kn_cpu_threads_for(Kc * cols))")                    \
            for (int64_t n = 0; n < N; n++) col2im_##T(g, b + n * HW, y + n * g->Coutg * OHW, cols);  \
        }                                                                                             \
        scratch_give(0, sa);                                                                          \
        scratch_give(1, sb);                                                                          \
        return a && b;                                                                                \
    }                                                                                                 \
    /* conv2d's weight gradient as one GEMM: dw = rows(gy) [Coutg, N*OHW] col^T. */                  \
    static bool conv_weight_grad_batched_##T(const conv_geom *g, const T *gy, const T *x, T *dw) {    \
        int64_t OHW = g->OH * g->OW, cols = g->N * OHW, K = g->Cg * g->KH * g->KW;                   \
        kept_buffer sc = scratch_take(0, sizeof(T) * (size_t)(K * cols));                             \
        kept_buffer sg = scratch_take(1, sizeof(T) * (size_t)(g->Coutg * cols));                      \
        T *col = sc.p, *gyr = sg.p;                                                                   \
        if (col && gyr) {                                                                             \
            im2col_all_##T(g, x, col);                                                                \
            regroup_##T(gyr, gy, g->N, g->Coutg, OHW, true);                                           \
            gemm_columns_##T(CblasNoTrans, CblasTrans, g->Coutg, K, cols, gyr, cols, col, cols, dw, K);\
        }                                                                                             \
        scratch_give(0, sc);                                                                          \
        scratch_give(1, sg);                                                                          \
        return col && gyr;                                                                            \
    }                                                                                                 \
    /* Whether the batched form applies: no groups, small images (a larger one makes a good GEMM  \
     * of its own, without the regrouping copies), its matrices within BATCHED_COLUMNS. */          \
    static bool use_batched_##T(const conv_geom *g, bool transposed) {                               \
        int64_t rows = transposed ? g->Coutg * g->KH * g->KW + g->Cg : g->Cg * g->KH * g->KW + g->Coutg; \
        int64_t per_image = transposed ? g->H * g->W : g->OH * g->OW;                                 \
        return g->G == 1 && per_image < BATCHED_BELOW && rows * g->N * per_image <= BATCHED_COLUMNS;  \
    }                                                                                                 \
    /* One (image, group) product; scratch holds a column matrix. */                                 \
    static void conv_one_##T(const conv_geom *g, const T *x, const T *w, T *y, T *scratch, bool transposed) { \
        int64_t K = g->Cg * g->KH * g->KW, OHW = g->OH * g->OW, HW = g->H * g->W;                     \
        if (transposed) {                                                                             \
            int64_t Kc = g->Coutg * g->KH * g->KW;                                                    \
            gemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)Kc, (int)HW, (int)g->Cg, 1, w, (int)Kc, x, \
                 (int)HW, 0, scratch, (int)HW);                                                       \
            memset(y, 0, sizeof(T) * (size_t)(g->Coutg * OHW));                                       \
            col2im_##T(g, scratch, y, HW);                                                            \
            return;                                                                                   \
        }                                                                                             \
        bool direct = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0; \
        if (!direct) im2col_##T(g, x, scratch, OHW);                                                  \
        gemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)g->Coutg, (int)OHW, (int)K, 1, w, (int)K, \
             direct ? x : scratch, (int)OHW, 0, y, (int)OHW);                                         \
    }                                                                                                 \
    static bool conv_all_##T(const conv_geom *g, const T *x, const T *w, T *y, bool transposed) {     \
        if (use_batched_##T(g, transposed)) return conv_batched_##T(g, x, w, y, transposed);          \
        int64_t jobs = g->N * g->G, OHW = g->OH * g->OW, HW = g->H * g->W;                            \
        int64_t col = transposed ? g->Coutg * g->KH * g->KW * HW : g->Cg * g->KH * g->KW * OHW;       \
        int64_t x_step = g->Cg * HW, y_step = g->Coutg * OHW, w_step = g->Coutg * g->Cg * g->KH * g->KW; \
        double flops = 2.0 * (double)jobs * (double)y_step * (double)(g->Cg * g->KH * g->KW);        \
        int threads = flops < 1e6 ? 1 : kn_get_num_threads(), saved = openblas_get_num_threads();     \
        if (threads > jobs) threads = 1;                                                              \
        int ok = 1;                                                                                   \
        openblas_set_num_threads(threads > 1 ? 1 : kn_get_num_threads());                             \
        _Pragma("omp parallel num_threads(threads) reduction(& : ok)") {                             \
            T *scratch = malloc(sizeof(T) * (size_t)(col > 0 ? col : 1));                             \
            ok = scratch != NULL;                                                                     \
            _Pragma("omp for schedule(static)") for (int64_t j = 0; j < jobs; j++) if (scratch)      \
                conv_one_##T(g, x + j * x_step, w + (j % g->G) * w_step, y + j * y_step, scratch, transposed); \
            free(scratch);                                                                            \
        }                                                                                             \
        openblas_set_num_threads(saved);                                                              \
        return ok;                                                                                    \
    }                                                                                                 \
    /* conv2d's weight gradient: dw[g] = sum over images of gy[n, g] im2col(x[n, g])^T, in        \
     * per-thread partial sums (slot 0 is dw itself) when images run in parallel. */                \
    static bool conv_weight_grad_##T(const conv_geom *g, const T *gy, const T *x, T *dw) {            \
        if (use_batched_##T(g, false)) return conv_weight_grad_batched_##T(g, gy, x, dw);             \
        int64_t jobs = g->N * g->G, OHW = g->OH * g->OW, HW = g->H * g->W, K = g->Cg * g->KH * g->KW; \
        int64_t wsize = g->G * g->Coutg * K;                                                          \
        double flops = 2.0 * (double)jobs * (double)(g->Coutg * K) * (double)OHW;                    \
        int threads = flops < 1e6 ? 1 : kn_get_num_threads(), saved = openblas_get_num_threads();     \
        if (threads > jobs) threads = 1;                                                              \
        bool direct = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0; \
        T *part = threads > 1 ? calloc((size_t)((threads - 1) * wsize), sizeof(T)) : NULL;            \
        if (threads > 1 && !part) return false;                                                       \
        memset(dw, 0, sizeof(T) * (size_t)wsize);                                                     \
        int ok = 1;                                                                                   \
        openblas_set_num_threads(threads > 1 ? 1 : kn_get_num_threads());                             \
        _Pragma("omp parallel num_threads(threads) reduction(& : ok)") {                             \
            int t = omp_get_thread_num();                                                             \
            T *acc = t ? part + (t - 1) * wsize : dw;                                                 \
            T *scratch = direct ? NULL : malloc(sizeof(T) * (size_t)(K * OHW > 0 ? K * OHW : 1));     \
            ok = direct || scratch;                                                                   \
            _Pragma("omp for schedule(static)") for (int64_t j = 0; j < jobs; j++) if (ok) {          \
                const T *xj = x + j * g->Cg * HW;                                                     \
                if (!direct) im2col_##T(g, xj, scratch, OHW);                                         \
                gemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)g->Coutg, (int)K, (int)OHW, 1,     \
                     gy + j * g->Coutg * OHW, (int)OHW, direct ? xj : scratch, (int)OHW, 1,           \
                     acc + (j % g->G) * g->Coutg * K, (int)K);                                        \
            }                                                                                         \
            free(scratch);                                                                            \
            _Pragma("omp for schedule(static)") for (int64_t i = 0; i < wsize; i++)                   \
                for (int p = 0; p < threads - 1; p++) dw[i] += part[p * wsize + i];                   \
        }                                                                                             \
        openblas_set_num_threads(saved);                                                              \
        free(part);                                                                                   \
        return ok;                                                                                    \
    }
CONV_IMPL(float, cblas_sgemm)
CONV_IMPL(double, cblas_dgemm)

/* Adds bias[c] to every element of channel c of y [N, C, P]. */
#define ADD_BIAS(T)                                                                                 \
    static void add_bias_##T(T *y, const double *bias, int64_t N, int64_t C, int64_t P) {           \
        _Pragma("omp parallel for collapse(2) num_threads(kn_cpu_threads_for(N * C * P))")          \
        for (int64_t i = 0; i < N; i++)                                                             \
            for (int64_t c = 0; c < C; c++) {                                                       \
                T *r = y + (i * C + c) * P, b = (T)bias[c];                                         \
                _Pragma("omp simd") for (int64_t p = 0; p < P; p++) r[p] += b;                      \
            }                                                                                       \
    }
ADD_BIAS(float)
ADD_BIAS(double)

static kn_status conv_kernel(kn_node *n, bool transposed) {
    kn_tensor *out = n->out[0];
    if (kn_numel(out) == 0) return KN_OK;
    conv_geom g = geom_of(n);
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    kn_tensor *bias_t = KN_INPUT(n, conv2d, bias);
    double *bias = bias_t ? kn_nn_read_vector(bias_t, out->shape[1], 0) : NULL;
    kn_tensor *x = kn_nn_work(n->in[0], ct), *w = kn_nn_work(n->in[1], ct), *y = kn_nn_work_out(out, ct);
    bool ok = x && w && y && (bias || !bias_t);
    if (ok && ct == KN_F64) ok = conv_all_double(&g, kn_tensor_data(x), kn_tensor_data(w), kn_tensor_data(y), transposed);
    else if (ok) ok = conv_all_float(&g, kn_tensor_data(x), kn_tensor_data(w), kn_tensor_data(y), transposed);
    if (ok && bias && ct == KN_F64) add_bias_double(kn_tensor_data(y), bias, g.N, out->shape[1], g.OH * g.OW);
    else if (ok && bias) add_bias_float(kn_tensor_data(y), bias, g.N, out->shape[1], g.OH * g.OW);
    free(bias);
    if (x) kn_tensor_decref(x);
    if (w) kn_tensor_decref(w);
    return kn_nn_finish(out, y, ok ? KN_OK : kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name(n->op)));
}

kn_status kn_nn_conv2d_kernel(kn_node *n) { return conv_kernel(n, false); }
kn_status kn_nn_conv_transpose2d_kernel(kn_node *n) { return conv_kernel(n, true); }

/* conv2d_backward_weight (see nn.def): in[0] gy plays conv2d's output, in[1] x its input. */
kn_status kn_nn_conv2d_backward_weight_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    const kn_tensor *gyt = n->in[0], *xt = n->in[1];
    const kn_attrs_conv2d_backward_weight *a = KN_ATTRS(n, conv2d_backward_weight);
    int64_t G = a->groups;
    conv_geom g = {xt->shape[0], G, xt->shape[1] / G, xt->shape[2], xt->shape[3], gyt->shape[1] / G,
                   out->shape[2], out->shape[3], gyt->shape[2], gyt->shape[3], a->stride[0], a->stride[1],
                   a->padding[0], a->padding[1], a->dilation[0], a->dilation[1]};
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    kn_tensor *gy = kn_nn_work(n->in[0], ct), *x = kn_nn_work(n->in[1], ct), *dw = kn_nn_work_out(out, ct);
    bool ok = gy && x && dw;
    if (ok && ct == KN_F64) ok = conv_weight_grad_double(&g, kn_tensor_data(gy), kn_tensor_data(x), kn_tensor_data(dw));
    else if (ok) ok = conv_weight_grad_float(&g, kn_tensor_data(gy), kn_tensor_data(x), kn_tensor_data(dw));
    if (gy) kn_tensor_decref(gy);
    if (x) kn_tensor_decref(x);
    return kn_nn_finish(out, dw, ok ? KN_OK : kn_error(KN_ERR_OOM, "conv2d_backward_weight: out of memory"));
}
