/* CPU convolutions as GEMMs on kiln's pool: conv2d multiplies each group's weights by an
 * im2col matrix (1x1 stride-1 unpadded convolutions use the input itself), conv_transpose2d
 * multiplies the transposed weights by the input and scatters the columns back (col2im).
 * Ungrouped convolutions with fewer than BATCHED_BELOW output positions per image, whose
 * matrices for the whole batch fit in BATCHED_COLUMNS elements, make one GEMM over all images
 * (columns [K, N*OH*OW]) split over the pool (gemm_tiles.h): per image, the small outputs of a
 * network's deep layers (OH*OW of 1..64) would make each product a matrix-vector-like one that
 * re-reads the weights per image. Otherwise the (image, group) products are the pool's items,
 * each chunk with its own column scratch and single-threaded products; when they make one
 * chunk, they run on the calling thread and each product is split over the pool instead. The
 * products run on the provider matmul takes for the compute dtype (gemm_provider.h: oneDNN's
 * f32 blocks where OpenBLAS lacks the CPU's AVX-512, at about twice its rate). 16-bit floats
 * are widened to f32, or go to oneDNN's convolution (conv_onednn.h) when it is chosen. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/conv_onednn.h"
#include "backends/cpu/gemm_provider.h"
#include "backends/cpu/gemm_tiles.h"
#include "backends/cpu/k_nn.h"
#include "core/error.h"
#include "core/thread_pool.h"

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

/* The valid range [lo, hi) of o with 0 <= o*s + off < size. */
static void valid_range(int64_t off, int64_t s, int64_t size, int64_t count, int64_t *lo, int64_t *hi) {
    int64_t l = off >= 0 ? 0 : (-off + s - 1) / s, h = size - off <= 0 ? 0 : (size - off + s - 1) / s;
    *lo = l < count ? l : count;
    *hi = h < count ? (h > *lo ? h : *lo) : count;
}

/* C [M, N] (+= when acc) A [M, K] B [K, N] by element strides on provider fn's blocks, split
 * over the pool (inline when called from a chunk); false when it could not allocate. */
static bool product(kn_gemm_block_fn fn, kn_dtype dt, int64_t M, int64_t N, int64_t K, const void *a, int64_t ars, int64_t acs,
                    const void *b, int64_t brs, int64_t bcs, void *c, int64_t ldc, bool acc) {
    kn_gemm_block blk = {.dt = dt, .a = a, .b = b, .c = c, .ars = ars, .acs = acs, .brs = brs, .bcs = bcs,
                         .ldc = ldc, .M = M, .N = N, .K = K, .batches = 1, .accumulate = acc};
    return kn_gemm_tiled(&blk, fn) == KN_GEMM_DONE;
}

/* Runs jobs split into `chunks`: on the pool when there are several, else on this thread, so
 * that the products inside may spread over the pool themselves. */
static void run_jobs(int64_t jobs, int chunks, kn_chunk_fn fn, void *ctx) {
    if (chunks > 1)
        kn_parallel_run(jobs, chunks, fn, ctx);
    else
        fn(ctx, 0, jobs, 0);
}

/* Images [N, C, P] to rows [C, N*P] (to_rows), or back: items are the N*C runs of P elements. */
typedef struct regroup_job {
    char *dst;
    const char *src;
    int64_t N, C, bytes; /* bytes per run */
    bool to_rows;
} regroup_job;

static void regroup_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const regroup_job *r = ctx;
    for (int64_t i = begin; i < end; i++) {
        int64_t n = i / r->C, c = i % r->C, row = (c * r->N + n) * r->bytes, image = (n * r->C + c) * r->bytes;
        memcpy(r->dst + (r->to_rows ? row : image), r->src + (r->to_rows ? image : row), (size_t)r->bytes);
    }
}

static void regroup(void *dst, const void *src, size_t es, int64_t N, int64_t C, int64_t P, bool to_rows) {
    regroup_job r = {dst, src, N, C, (int64_t)es * P, to_rows};
    kn_parallel_for(N * C, P, regroup_chunk, &r);
}

/* The work of one loop over images or (image, group) jobs; each T's chunk functions read it. */
typedef struct conv_job {
    const kn_conv_geom *g;
    kn_gemm_block_fn fn; /* the products' provider */
    const void *x, *w, *gy;
    void *y, *dw, *part; /* part: partial weight gradients of chunks 1.. (chunk 0's is dw) */
    int64_t cols, wsize;  /* the batched column matrix's width; the weight gradient's size */
    bool transposed;
    atomic_bool failed; /* a chunk could not allocate */
} conv_job;

/* Adds the chunks' partial weight gradients into dw in chunk order: items are dw's elements. */
#define SUM_PARTS(T)                                                                                 \
    static void sum_parts_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {               \
        const conv_job *j = ctx;                                                                     \
        T *dw = j->dw;                                                                               \
        const T *part = j->part;                                                                     \
        int parts = (int)j->cols;                                                                    \
        for (int p = 0; p < parts; p++)                                                              \
            for (int64_t i = begin; i < end; i++) dw[i] += part[p * j->wsize + i];                   \
    }
SUM_PARTS(float)
SUM_PARTS(double)

#define CONV_IMPL(T, DT)                                                                              \
    /* col [Cg*KH*KW, OH*OW] (rows ld apart) from one group's image x [Cg, H, W]. */                \
    static void im2col_##T(const kn_conv_geom *g, const T *x, T *col, int64_t ld) {                     \
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
    static void col2im_##T(const kn_conv_geom *g, const T *col, T *y, int64_t ld) {                     \
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
    /* Items are images: im2col of each into its columns of col [Cg*KH*KW, N*OH*OW] (j->y). */     \
    static void im2col_all_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {               \
        const conv_job *j = ctx;                                                                      \
        const kn_conv_geom *g = j->g;                                                                    \
        int64_t OHW = g->OH * g->OW;                                                                  \
        for (int64_t n = begin; n < end; n++)                                                         \
            im2col_##T(g, (const T *)j->x + n * g->Cg * g->H * g->W, (T *)j->y + n * OHW, j->cols);   \
    }                                                                                                 \
    static void im2col_all_##T(const kn_conv_geom *g, const T *x, T *col) {                             \
        conv_job j = {.g = g, .x = x, .y = col, .cols = g->N * g->OH * g->OW};                        \
        kn_parallel_for(g->N, g->Cg * g->KH * g->KW * g->OH * g->OW, im2col_all_chunk_##T, &j);       \
    }                                                                                                 \
    /* Items are images: col2im of each one's columns of b [Kc, N*H*W] (j->x) into y. */           \
    static void col2im_all_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {               \
        const conv_job *j = ctx;                                                                      \
        const kn_conv_geom *g = j->g;                                                                    \
        for (int64_t n = begin; n < end; n++)                                                         \
            col2im_##T(g, (const T *)j->x + n * g->H * g->W, (T *)j->y + n * g->Coutg * g->OH * g->OW, j->cols); \
    }                                                                                                 \
    /* An ungrouped convolution of the whole batch as one GEMM. */                                   \
    static bool conv_batched_##T(const kn_conv_geom *g, kn_gemm_block_fn fn, const T *x, const T *w, T *y, bool transposed) { \
        int64_t N = g->N, OHW = g->OH * g->OW, HW = g->H * g->W, K = g->Cg * g->KH * g->KW;          \
        int64_t Kc = g->Coutg * g->KH * g->KW, cols = N * (transposed ? HW : OHW);                   \
        kept_buffer sa = scratch_take(0, sizeof(T) * (size_t)((transposed ? g->Cg : K) * cols));      \
        kept_buffer sb = scratch_take(1, sizeof(T) * (size_t)((transposed ? Kc : g->Coutg) * cols));  \
        T *a = sa.p, *b = sb.p;                                                                       \
        bool ok = a && b;                                                                             \
        if (ok && !transposed) {                                                                      \
            im2col_all_##T(g, x, a);                                                                  \
            ok = product(fn, DT, g->Coutg, cols, K, w, K, 1, a, cols, 1, b, cols, false);                 \
            if (ok) regroup(y, b, sizeof(T), N, g->Coutg, OHW, false);                                \
        } else if (ok) {                                                                              \
            regroup(a, x, sizeof(T), N, g->Cg, HW, true);                                             \
            ok = product(fn, DT, Kc, cols, g->Cg, w, 1, Kc, a, cols, 1, b, cols, false);                  \
            memset(y, 0, sizeof(T) * (size_t)(N * g->Coutg * OHW));                                   \
            conv_job j = {.g = g, .x = b, .y = y, .cols = cols};                                      \
            if (ok) kn_parallel_for(N, Kc * HW, col2im_all_chunk_##T, &j);                            \
        }                                                                                             \
        scratch_give(0, sa);                                                                          \
        scratch_give(1, sb);                                                                          \
        return ok;                                                                                    \
    }                                                                                                 \
    /* conv2d's weight gradient as one GEMM: dw = rows(gy) [Coutg, N*OHW] col^T. */                  \
    static bool conv_weight_grad_batched_##T(const kn_conv_geom *g, kn_gemm_block_fn fn, const T *gy, const T *x, T *dw) {    \
        int64_t OHW = g->OH * g->OW, cols = g->N * OHW, K = g->Cg * g->KH * g->KW;                   \
        kept_buffer sc = scratch_take(0, sizeof(T) * (size_t)(K * cols));                             \
        kept_buffer sg = scratch_take(1, sizeof(T) * (size_t)(g->Coutg * cols));                      \
        T *col = sc.p, *gyr = sg.p;                                                                   \
        bool ok = col && gyr;                                                                         \
        if (ok) {                                                                                     \
            im2col_all_##T(g, x, col);                                                                \
            regroup(gyr, gy, sizeof(T), g->N, g->Coutg, OHW, true);                                   \
            ok = product(fn, DT, g->Coutg, K, cols, gyr, cols, 1, col, 1, cols, dw, K, false);            \
        }                                                                                             \
        scratch_give(0, sc);                                                                          \
        scratch_give(1, sg);                                                                          \
        return ok;                                                                                    \
    }                                                                                                 \
    /* Whether the batched form applies: no groups, small images (a larger one makes a good GEMM  \
     * of its own, without the regrouping copies), its matrices within BATCHED_COLUMNS. */          \
    static bool use_batched_##T(const kn_conv_geom *g, bool transposed) {                               \
        int64_t rows = transposed ? g->Coutg * g->KH * g->KW + g->Cg : g->Cg * g->KH * g->KW + g->Coutg; \
        int64_t per_image = transposed ? g->H * g->W : g->OH * g->OW;                                 \
        return g->G == 1 && per_image < BATCHED_BELOW && rows * g->N * per_image <= BATCHED_COLUMNS;  \
    }                                                                                                 \
    /* One (image, group) product; scratch holds a column matrix. */                                 \
    static bool conv_one_##T(const kn_conv_geom *g, kn_gemm_block_fn fn, const T *x, const T *w, T *y, T *scratch, bool transposed) { \
        int64_t K = g->Cg * g->KH * g->KW, OHW = g->OH * g->OW, HW = g->H * g->W;                     \
        if (transposed) {                                                                             \
            int64_t Kc = g->Coutg * g->KH * g->KW;                                                    \
            if (!product(fn, DT, Kc, HW, g->Cg, w, 1, Kc, x, HW, 1, scratch, HW, false)) return false;    \
            memset(y, 0, sizeof(T) * (size_t)(g->Coutg * OHW));                                       \
            col2im_##T(g, scratch, y, HW);                                                            \
            return true;                                                                              \
        }                                                                                             \
        bool direct = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0; \
        if (!direct) im2col_##T(g, x, scratch, OHW);                                                  \
        return product(fn, DT, g->Coutg, OHW, K, w, K, 1, direct ? x : scratch, OHW, 1, y, OHW, false);   \
    }                                                                                                 \
    /* Items are (image, group) jobs; the chunk's own column scratch. */                             \
    static void conv_jobs_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {               \
        conv_job *j = ctx;                                                                            \
        const kn_conv_geom *g = j->g;                                                                    \
        int64_t x_step = g->Cg * g->H * g->W, y_step = g->Coutg * g->OH * g->OW;                      \
        int64_t w_step = g->Coutg * g->Cg * g->KH * g->KW;                                            \
        T *scratch = malloc(sizeof(T) * (size_t)(j->cols > 0 ? j->cols : 1));                         \
        bool ok = scratch != NULL;                                                                    \
        for (int64_t i = begin; i < end && ok; i++)                                                   \
            ok = conv_one_##T(g, j->fn, (const T *)j->x + i * x_step, (const T *)j->w + (i % g->G) * w_step,  \
                              (T *)j->y + i * y_step, scratch, j->transposed);                        \
        free(scratch);                                                                                \
        if (!ok) atomic_store(&j->failed, true);                                                      \
    }                                                                                                 \
    static bool conv_all_##T(const kn_conv_geom *g, kn_gemm_block_fn fn, const T *x, const T *w, T *y, bool transposed) {     \
        if (use_batched_##T(g, transposed)) return conv_batched_##T(g, fn, x, w, y, transposed);          \
        int64_t jobs = g->N * g->G, OHW = g->OH * g->OW, HW = g->H * g->W;                            \
        int64_t col = transposed ? g->Coutg * g->KH * g->KW * HW : g->Cg * g->KH * g->KW * OHW;       \
        int64_t flops = 2 * g->Coutg * OHW * g->Cg * g->KH * g->KW;                                   \
        conv_job j = {.g = g, .fn = fn, .x = x, .w = w, .y = y, .cols = col, .transposed = transposed};         \
        run_jobs(jobs, kn_parallel_chunks(jobs, flops / KN_GEMM_FLOPS_PER_COST + col), conv_jobs_chunk_##T, &j); \
        return !atomic_load(&j.failed);                                                               \
    }                                                                                                 \
    /* Items are (image, group) jobs, summed into the chunk's own partial weight gradient. */      \
    static void weight_grad_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {             \
        conv_job *j = ctx;                                                                            \
        const kn_conv_geom *g = j->g;                                                                    \
        int64_t OHW = g->OH * g->OW, K = g->Cg * g->KH * g->KW;                                       \
        bool direct = g->KH == 1 && g->KW == 1 && g->sh == 1 && g->sw == 1 && g->ph == 0 && g->pw == 0; \
        T *acc = chunk ? (T *)j->part + (chunk - 1) * j->wsize : j->dw;                               \
        T *scratch = direct ? NULL : malloc(sizeof(T) * (size_t)(K * OHW > 0 ? K * OHW : 1));         \
        bool ok = direct || scratch;                                                                  \
        for (int64_t i = begin; i < end && ok; i++) {                                                 \
            const T *xi = (const T *)j->x + i * g->Cg * g->H * g->W;                                  \
            if (!direct) im2col_##T(g, xi, scratch, OHW);                                             \
            ok = product(j->fn, DT, g->Coutg, K, OHW, (const T *)j->gy + i * g->Coutg * OHW, OHW, 1,         \
                         direct ? xi : scratch, 1, OHW, acc + (i % g->G) * g->Coutg * K, K, true);    \
        }                                                                                             \
        free(scratch);                                                                                \
        if (!ok) atomic_store(&j->failed, true);                                                      \
    }                                                                                                 \
    /* conv2d's weight gradient: dw[g] = sum over images of gy[n, g] im2col(x[n, g])^T, one partial \
     * sum per chunk (chunk 0's is dw itself), added up in chunk order. */                          \
    static bool conv_weight_grad_##T(const kn_conv_geom *g, kn_gemm_block_fn fn, const T *gy, const T *x, T *dw) {            \
        if (use_batched_##T(g, false)) return conv_weight_grad_batched_##T(g, fn, gy, x, dw);             \
        int64_t jobs = g->N * g->G, OHW = g->OH * g->OW, K = g->Cg * g->KH * g->KW;                   \
        int64_t wsize = g->G * g->Coutg * K, flops = 2 * g->Coutg * K * OHW;                          \
        int chunks = kn_parallel_chunks(jobs, flops / KN_GEMM_FLOPS_PER_COST + K * OHW);                      \
        T *part = chunks > 1 ? calloc((size_t)((chunks - 1) * wsize), sizeof(T)) : NULL;              \
        if (chunks > 1 && !part) return false;                                                        \
        memset(dw, 0, sizeof(T) * (size_t)wsize);                                                     \
        conv_job j = {.g = g, .fn = fn, .x = x, .gy = gy, .dw = dw, .part = part, .wsize = wsize};              \
        run_jobs(jobs, chunks, weight_grad_chunk_##T, &j);                                            \
        j.cols = chunks - 1; /* the partials to add */                                                \
        if (chunks > 1) kn_parallel_for(wsize, chunks, sum_parts_chunk_##T, &j);                      \
        free(part);                                                                                   \
        return !atomic_load(&j.failed);                                                               \
    }
CONV_IMPL(float, KN_F32)
CONV_IMPL(double, KN_F64)

/* Adds bias[c] to every element of channel c of y [N, C, P]: items are the N*C channels. */
typedef struct bias_job {
    void *y;
    const double *bias;
    int64_t C, P;
} bias_job;

#define ADD_BIAS(T)                                                                                 \
    static void add_bias_chunk_##T(void *ctx, int64_t begin, int64_t end, int chunk) {              \
        const bias_job *b = ctx;                                                                    \
        for (int64_t i = begin; i < end; i++) {                                                     \
            T *r = (T *)b->y + i * b->P, v = (T)b->bias[i % b->C];                                  \
            for (int64_t p = 0; p < b->P; p++) r[p] += v;                                           \
        }                                                                                           \
    }
ADD_BIAS(float)
ADD_BIAS(double)

static void add_bias(kn_dtype ct, void *y, const double *bias, int64_t N, int64_t C, int64_t P) {
    bias_job b = {y, bias, C, P};
    kn_parallel_for(N * C, P, ct == KN_F64 ? add_bias_chunk_double : add_bias_chunk_float, &b);
}

/* The geometry of x [N, C, H, W] -> out [N, Cout, OH, OW]. */
static kn_conv_geom geom_of(const kn_node *n) {
    const kn_tensor *x = n->in[0], *w = n->in[1], *o = n->out[0];
    const kn_attrs_conv2d *a = KN_ATTRS(n, conv2d); /* conv_transpose2d's are conv2d's (op_table.c) */
    int64_t G = a->groups;
    kn_conv_geom g = {x->shape[0], G, x->shape[1] / G, x->shape[2], x->shape[3], o->shape[1] / G,
                      w->shape[2], w->shape[3], o->shape[2], o->shape[3], a->stride[0], a->stride[1],
                      a->padding[0], a->padding[1], a->dilation[0], a->dilation[1]};
    return g;
}

/* Inputs a and b of node n in the dtype the chosen provider reads (oneDNN: the tensors' own;
 * im2col: the compute dtype), out's work tensor in the compute dtype, and the result of
 * running kind through oneDNN when it is chosen. KN_GEMM_TURNED_DOWN leaves a and b in the
 * compute dtype for im2col, and counts the fallback. */
typedef struct conv_operands {
    kn_tensor *a, *b, *out;
    bool onednn;
    kn_gemm_block_fn gemm; /* im2col's products: the provider matmul takes in the compute dtype */
} conv_operands;

static kn_status operands_of(kn_node *n, kn_conv_kind kind, const kn_conv_geom *dg, conv_operands *o) {
    kn_tensor *out = n->out[0];
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    *o = (conv_operands){0};
    kn_status st = kn_conv_select(kind, out->dtype, dg, &o->onednn);
    if (st == KN_OK) st = kn_gemm_select_block(ct, &o->gemm);
    if (st != KN_OK) return st;
    kn_dtype rt = o->onednn ? out->dtype : ct;
    o->a = kn_nn_work(n->in[0], rt), o->b = kn_nn_work(n->in[1], rt), o->out = kn_nn_work_out(out, ct);
    if (!o->a || !o->b || !o->out) return KN_ERR_OOM;
    if (!o->onednn) return KN_OK;
    kn_gemm_result r = kn_conv_onednn(kind, dg, rt, kn_tensor_data(o->a), kn_tensor_data(o->b), kn_tensor_data(o->out));
    if (r == KN_GEMM_DONE) return KN_OK;
    if (r == KN_GEMM_NO_MEMORY) return KN_ERR_OOM;
    if (r == KN_GEMM_FAILED) return kn_error(KN_ERR_INTERNAL, "%s: oneDNN failed", kn_op_name(n->op));
    kn_conv_count_fallback(out->dtype);
    o->onednn = false;
    if (rt == ct) return KN_OK;
    kn_tensor_decref(o->a);
    kn_tensor_decref(o->b);
    o->a = kn_nn_work(n->in[0], ct), o->b = kn_nn_work(n->in[1], ct);
    return o->a && o->b ? KN_OK : KN_ERR_OOM;
}

/* Drops the operands and narrows the result into out. */
static kn_status finish(kn_node *n, conv_operands *o, kn_status st) {
    if (o->a) kn_tensor_decref(o->a);
    if (o->b) kn_tensor_decref(o->b);
    if (st == KN_ERR_OOM) st = kn_error(KN_ERR_OOM, "%s: out of memory", kn_op_name(n->op));
    return kn_nn_finish(n->out[0], o->out, st);
}

static kn_status conv_kernel(kn_node *n, bool transposed) {
    kn_tensor *out = n->out[0];
    if (kn_numel(out) == 0) return KN_OK;
    kn_conv_geom g = geom_of(n);
    /* oneDNN sees conv_transpose2d as the input gradient of the convolution from out to x. */
    kn_conv_geom d = !transposed ? g
                                 : (kn_conv_geom){g.N, g.G, g.Coutg, g.OH, g.OW, g.Cg, g.KH, g.KW, g.H, g.W,
                                                  g.sh, g.sw, g.ph, g.pw, g.dh, g.dw};
    kn_tensor *bias_t = KN_INPUT(n, conv2d, bias);
    double *bias = bias_t ? kn_nn_read_vector(bias_t, out->shape[1], 0) : NULL;
    conv_operands o;
    kn_status st = bias || !bias_t ? operands_of(n, transposed ? KN_CONV_BACKWARD_DATA : KN_CONV_FORWARD, &d, &o)
                                   : KN_ERR_OOM;
    kn_dtype ct = kn_nn_compute_dtype(out->dtype);
    void *x = o.a ? kn_tensor_data(o.a) : NULL, *w = o.b ? kn_tensor_data(o.b) : NULL;
    void *y = o.out ? kn_tensor_data(o.out) : NULL;
    if (st == KN_OK && !o.onednn)
        st = (ct == KN_F64 ? conv_all_double(&g, o.gemm, x, w, y, transposed) : conv_all_float(&g, o.gemm, x, w, y, transposed))
                 ? KN_OK
                 : KN_ERR_OOM;
    if (st == KN_OK && bias) add_bias(ct, y, bias, g.N, out->shape[1], g.OH * g.OW);
    free(bias);
    return finish(n, &o, st);
}

kn_status kn_nn_conv2d_kernel(kn_node *n) { return conv_kernel(n, false); }
kn_status kn_nn_conv_transpose2d_kernel(kn_node *n) { return conv_kernel(n, true); }

/* conv2d_backward_weight (see nn.def): in[0] gy plays conv2d's output, in[1] x its input. */
kn_status kn_nn_conv2d_backward_weight_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    const kn_tensor *gyt = n->in[0], *xt = n->in[1];
    const kn_attrs_conv2d_backward_weight *a = KN_ATTRS(n, conv2d_backward_weight);
    int64_t G = a->groups;
    kn_conv_geom g = {xt->shape[0], G, xt->shape[1] / G, xt->shape[2], xt->shape[3], gyt->shape[1] / G,
                      out->shape[2], out->shape[3], gyt->shape[2], gyt->shape[3], a->stride[0], a->stride[1],
                      a->padding[0], a->padding[1], a->dilation[0], a->dilation[1]};
    conv_operands o;
    kn_status st = operands_of(n, KN_CONV_WEIGHT_GRAD, &g, &o);
    if (st == KN_OK && !o.onednn) {
        void *gy = kn_tensor_data(o.a), *x = kn_tensor_data(o.b), *dw = kn_tensor_data(o.out);
        bool ok = kn_nn_compute_dtype(out->dtype) == KN_F64 ? conv_weight_grad_double(&g, o.gemm, gy, x, dw)
                                                            : conv_weight_grad_float(&g, o.gemm, gy, x, dw);
        st = ok ? KN_OK : KN_ERR_OOM;
    }
    return finish(n, &o, st);
}
