/* CPU kernels of the reductions over dims. Float sums accumulate in double lanes; each output's
 * reduction runs in one chunk of the thread pool (or, for few long rows, each row is split into
 * chunks whose partial sums add up in chunk order). */
#include <math.h>
#include <string.h>

#include "backends/cpu/reduce_plan.h"

/* Sum of n contiguous elements of a float dtype, in double: SUM_LANES independent lanes (enough
 * parallel add chains to keep up with memory instead of waiting on one add's latency) over
 * blocks of SUM_BLOCK elements, then the block sums. */
#define SUM_LANES 32
#define SUM_BLOCK 1024
#define SUM_ROW(unused, SUF, DT, ST, CT, LOAD, STORE)                                 \
    static double sum_row_##SUF(const void *data, int64_t n) {                        \
        const ST *restrict x = data;                                                  \
        double acc = 0;                                                               \
        int64_t i = 0;                                                                \
        for (; i + SUM_BLOCK <= n; i += SUM_BLOCK) {                                  \
            double lane[SUM_LANES] = {0};                                             \
            for (int64_t j = 0; j < SUM_BLOCK; j += SUM_LANES)                        \
                for (int k = 0; k < SUM_LANES; k++) lane[k] += (double)LOAD(x[i + j + k]); \
            double block = 0;                                                         \
            for (int k = 0; k < SUM_LANES; k++) block += lane[k];                     \
            acc += block;                                                             \
        }                                                                             \
        for (; i < n; i++) acc += (double)LOAD(x[i]);                                 \
        return acc;                                                                   \
    }
KN_DTYPES_FLOAT(SUM_ROW, ~)

static double sum_row_float(kn_dtype dt, const void *data, int64_t n) {
    switch (dt) {
    case KN_F32: return sum_row_f32(data, n);
    case KN_F64: return sum_row_f64(data, n);
    case KN_F16: return sum_row_f16(data, n);
    default: return sum_row_bf16(data, n);
    }
}

static int64_t sum_row_int(kn_dtype dt, const void *data, int64_t n) {
    int64_t acc = 0;
    if (dt == KN_I32) {
        const int32_t *x = data;
        for (int64_t i = 0; i < n; i++) acc += x[i];
    } else if (dt == KN_I64) {
        const int64_t *x = data;
        for (int64_t i = 0; i < n; i++) acc += x[i];
    } else {
        const uint8_t *x = data;
        for (int64_t i = 0; i < n; i++) acc += x[i] != 0;
    }
    return acc;
}

/* Column sums, for a contiguous x whose leading dims are reduced (as in summing [N, C]
 * over dim 0): a block of columns accumulates across all rows in double, so the inner loop
 * runs along contiguous memory and no transposing copy is made. */
#define COL_BLOCK 512
#define COL_SUM(unused, SUF, DT, ST, CT, LOAD, STORE)                                             \
    static void col_sum_##SUF(const void *data, int64_t rows, int64_t cols, int64_t c0, int64_t w, \
                              double *restrict acc) {                                            \
        const ST *x = data;                                                                      \
        for (int64_t j = 0; j < w; j++) acc[j] = 0;                                              \
        for (int64_t r = 0; r < rows; r++) {                                                     \
            const ST *restrict row = x + r * cols + c0;                                          \
            for (int64_t j = 0; j < w; j++) acc[j] += (double)LOAD(row[j]);                      \
        }                                                                                        \
    }
KN_DTYPES_FLOAT(COL_SUM, ~)

/* Whether the column path fits: x contiguous, float, dims 0..k-1 reduced for some k below
 * ndim, and rows of at least 16 outputs (narrower ones are cheaper to transpose). */
static bool leading_reduced(const kn_tensor *x, kn_shape reduced, int64_t *rows, int64_t *cols) {
    if (!kn_dtype_is_float(x->dtype) || !kn_tensor_is_contiguous(x) || reduced.n == 0 || reduced.n >= x->ndim)
        return false;
    *rows = 1, *cols = 1;
    for (int d = 0; d < x->ndim; d++) {
        if (d < reduced.n && reduced.v[d] != d) return false;
        if (d < reduced.n) *rows *= x->shape[d];
        else *cols *= x->shape[d];
    }
    return *cols >= 16;
}

/* What the chunks of a sum read and write (each chunk uses what its loop needs). */
typedef struct sum_ctx {
    kn_tensor *out;
    kn_dtype dt;
    const char *data;
    size_t esize;
    int64_t rows, cols, inner;
    double scale;
    bool mean;
    double *part; /* one partial per chunk (sum_split_chunk) */
} sum_ctx;

/* Blocks [begin, end) of COL_BLOCK columns. */
static void column_sums_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const sum_ctx *c = ctx;
    for (int64_t b = begin; b < end; b++) {
        double acc[COL_BLOCK];
        int64_t c0 = b * COL_BLOCK, w = c->cols - c0 < COL_BLOCK ? c->cols - c0 : COL_BLOCK;
        switch (c->dt) {
        case KN_F32: col_sum_f32(c->data, c->rows, c->cols, c0, w, acc); break;
        case KN_F64: col_sum_f64(c->data, c->rows, c->cols, c0, w, acc); break;
        case KN_F16: col_sum_f16(c->data, c->rows, c->cols, c0, w, acc); break;
        default: col_sum_bf16(c->data, c->rows, c->cols, c0, w, acc); break;
        }
        for (int64_t j = 0; j < w; j++)
            kn_reduce_store_f64(c->out, c0 + j, c->rows ? acc[j] * c->scale : (c->mean ? NAN : 0));
    }
}

static kn_status column_sums(kn_node *n, bool mean, int64_t rows, int64_t cols) {
    kn_tensor *x = n->in[0];
    sum_ctx c = {.out = n->out[0], .dt = x->dtype, .data = kn_tensor_data(x), .rows = rows, .cols = cols,
                 .scale = mean ? 1.0 / (double)rows : 1.0, .mean = mean};
    int64_t blocks = (cols + COL_BLOCK - 1) / COL_BLOCK;
    kn_parallel_for(blocks, rows * (cols / blocks), column_sums_chunk, &c);
    return KN_OK;
}

/* Rows [begin, end) of an integer sum, into int64. */
static void int_sums_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const sum_ctx *c = ctx;
    int64_t *o = kn_tensor_data(c->out);
    for (int64_t r = begin; r < end; r++) o[r] = sum_row_int(c->dt, c->data + (size_t)(r * c->inner) * c->esize, c->inner);
}

/* Rows [begin, end) of a float sum, times scale. */
static void float_sums_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const sum_ctx *c = ctx;
    for (int64_t r = begin; r < end; r++)
        kn_reduce_store_f64(c->out, r, sum_row_float(c->dt, c->data + (size_t)(r * c->inner) * c->esize, c->inner) * c->scale);
}

/* Elements [begin, end) of one row (c->data), into the chunk's partial. */
static void sum_split_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    const sum_ctx *c = ctx;
    c->part[chunk] = sum_row_float(c->dt, c->data + (size_t)begin * c->esize, end - begin);
}

/* Sums (or means, with scale = 1/inner) of every output row. */
static kn_status sum_like(kn_node *n, bool mean) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    int64_t rows, cols;
    if (leading_reduced(x, KN_ATTRS(n, reduce)->dims, &rows, &cols)) return column_sums(n, mean, rows, cols);
    kn_reduce_plan p;
    kn_status st = kn_reduce_plan_make(&p, x, KN_ATTRS(n, reduce)->dims);
    if (st != KN_OK) return st;
    int64_t outer = p.outer, inner = p.inner;
    sum_ctx c = {.out = out, .dt = x->dtype, .data = p.data, .esize = kn_dtype_size(x->dtype), .inner = inner,
                 .scale = mean ? 1.0 / (double)inner : 1.0};
    if (!kn_dtype_is_float(c.dt)) {
        kn_parallel_for(outer, inner, int_sums_chunk, &c);
    } else if (outer >= kn_pool_threads() || inner < 65536) {
        kn_parallel_for(outer, inner, float_sums_chunk, &c);
    } else {
        /* Few long rows: split each row into chunks, whose partials add up in chunk order. */
        double part[KN_MAX_CHUNKS];
        const char *data = p.data;
        c.part = part;
        for (int64_t r = 0; r < outer; r++) {
            c.data = data + (size_t)(r * inner) * c.esize;
            int chunks = kn_parallel_chunks(inner, 1);
            kn_parallel_run(inner, chunks, sum_split_chunk, &c);
            double total = 0;
            for (int k = 0; k < chunks; k++) total += part[k];
            kn_reduce_store_f64(out, r, mean ? total / (double)inner : total);
        }
    }
    kn_reduce_plan_free(&p);
    if (mean && inner == 0) { /* the mean of nothing is NaN, as in PyTorch */
        for (int64_t r = 0; r < outer; r++) kn_reduce_store_f64(out, r, NAN);
    }
    return KN_OK;
}

static kn_status sum_kernel(kn_node *n) { return sum_like(n, false); }
static kn_status mean_kernel(kn_node *n) { return sum_like(n, true); }


/* ---- extremes: floats compare in double (NaN wins), ints in int64 --------------------- */
#define EXTREME_ROW(T, NAME, BETTER)                                                         \
    static int64_t NAME(const T *v, int64_t n, T *best_out) {                                \
        T best = v[0];                                                                       \
        int64_t at = 0;                                                                      \
        for (int64_t i = 1; i < n && best == best; i++)                                      \
            if (BETTER(v[i], best) || v[i] != v[i]) best = v[i], at = i;                     \
        *best_out = best;                                                                    \
        return at;                                                                           \
    }
#define KN_GREATER(a, b) ((a) > (b))
#define KN_LESS(a, b) ((a) < (b))
EXTREME_ROW(double, max_row_f64, KN_GREATER)
EXTREME_ROW(double, min_row_f64, KN_LESS)
EXTREME_ROW(int64_t, max_row_i64, KN_GREATER)
EXTREME_ROW(int64_t, min_row_i64, KN_LESS)

static bool op_is_max(kn_op_id op) {
    return op == KN_OP_amax || op == KN_OP_max || op == KN_OP_max_dim || op == KN_OP_argmax || op == KN_OP_argmax_all;
}
static bool op_is_index_only(kn_op_id op) {
    return op == KN_OP_argmax || op == KN_OP_argmin || op == KN_OP_argmax_all || op == KN_OP_argmin_all;
}

/* The same answer for f32 rows without widening them to double (an argmax over a 32000-token
 * vocabulary took ~140 us, 2% of a small model's decode step): the extreme's value in one pass
 * over vectors of 8 lanes (GCC's vector types: compares give lane masks, selects are bitwise;
 * an array of float lanes stayed scalar under GCC 12), beside a probe that turns NaN when an element is
 * NaN or infinite (x * 0); then the first index holding the value (0 and -0 compare equal, so
 * that is the first of either, as the double loop finds), or after a NaN probe, the first NaN
 * if there is one. */
typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
#define EXTREME_F32(NAME, BETTER)                                                             \
    static int64_t NAME(const float *v, int64_t n) {                                         \
        f32x8 lane, probe = {0};                                                             \
        for (int l = 0; l < 8; l++) lane[l] = v[0];                                          \
        int64_t i = 0;                                                                       \
        for (; i + 8 <= n; i += 8) {                                                         \
            f32x8 x;                                                                         \
            memcpy(&x, v + i, sizeof x);                                                     \
            const i32x8 take = BETTER(x, lane);                                              \
            lane = (f32x8)(((i32x8)x & take) | ((i32x8)lane & ~take));                       \
            probe += x * 0.0f;                                                               \
        }                                                                                    \
        float best = lane[0], p = 0;                                                         \
        for (int l = 0; l < 8; l++) p += probe[l], best = BETTER(lane[l], best) ? lane[l] : best; \
        for (; i < n; i++) p += v[i] * 0.0f, best = BETTER(v[i], best) ? v[i] : best;        \
        if (p != p)                                                                          \
            for (i = 0; i < n; i++)                                                          \
                if (v[i] != v[i]) return i;                                                  \
        for (i = 0; i < n; i++)                                                              \
            if (v[i] == best) return i;                                                      \
        return 0;                                                                            \
    }
EXTREME_F32(max_row_f32, KN_GREATER)
EXTREME_F32(min_row_f32, KN_LESS)

static void extreme_row(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch) {
    kn_dtype dt = n->in[0]->dtype;
    bool is_max = op_is_max(n->op);
    int64_t at;
    kn_tensor *values = op_is_index_only(n->op) ? NULL : n->out[0];
    kn_tensor *indices = op_is_index_only(n->op) ? n->out[0] : n->n_out > 1 ? n->out[1] : NULL;
    if (dt == KN_F32 && len > 0) {
        const float *v = row;
        at = is_max ? max_row_f32(v, len) : min_row_f32(v, len);
        if (values) kn_reduce_store_f64(values, r, v[at]);
    } else if (kn_dtype_is_float(dt)) {
        double best;
        kn_reduce_load_f64(dt, row, len, scratch);
        at = is_max ? max_row_f64(scratch, len, &best) : min_row_f64(scratch, len, &best);
        if (values) kn_reduce_store_f64(values, r, best);
    } else {
        int64_t best;
        kn_reduce_load_i64(dt, row, len, scratch);
        at = is_max ? max_row_i64(scratch, len, &best) : min_row_i64(scratch, len, &best);
        if (values) kn_reduce_store_i64(values, r, best);
    }
    if (indices) ((int64_t *)kn_tensor_data(indices))[r] = at;
}
static kn_status extreme_kernel(kn_node *n) { return kn_reduce_rows(n, extreme_row); }

/* ---- products and truth tests --------------------------------------------------------- */
static void prod_row(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch) {
    kn_dtype dt = n->in[0]->dtype;
    if (kn_dtype_is_float(dt)) {
        double *v = scratch, acc = 1;
        kn_reduce_load_f64(dt, row, len, v);
        for (int64_t i = 0; i < len; i++) acc *= v[i];
        kn_reduce_store_f64(n->out[0], r, acc);
    } else {
        int64_t *v = scratch;
        uint64_t acc = 1; /* wraps on overflow like PyTorch's int64, without signed UB */
        kn_reduce_load_i64(dt, row, len, v);
        for (int64_t i = 0; i < len; i++) acc *= (uint64_t)v[i];
        kn_reduce_store_i64(n->out[0], r, (int64_t)acc);
    }
}
static kn_status prod_kernel(kn_node *n) { return kn_reduce_rows(n, prod_row); }

static void truth_row(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch) {
    double *v = scratch; /* every dtype's zero test is exact in double (NaN is nonzero) */
    kn_reduce_load_f64(n->in[0]->dtype, row, len, v);
    bool want_all = n->op == KN_OP_all, result = want_all;
    for (int64_t i = 0; i < len; i++)
        if ((v[i] != 0) != want_all) {
            result = !want_all;
            break;
        }
    ((uint8_t *)kn_tensor_data(n->out[0]))[r] = result;
}
static kn_status truth_kernel(kn_node *n) { return kn_reduce_rows(n, truth_row); }

/* ---- statistics (float inputs, double math) ------------------------------------------- */
static void var_row(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch) {
    double *v = scratch, mean = 0, ss = 0;
    kn_reduce_load_f64(n->in[0]->dtype, row, len, v);
    for (int64_t i = 0; i < len; i++) mean += v[i];
    mean /= (double)len;
    for (int64_t i = 0; i < len; i++) ss += (v[i] - mean) * (v[i] - mean);
    double correction = n->op == KN_OP_std ? KN_ATTRS(n, std)->correction : KN_ATTRS(n, var)->correction;
    double var = ss / fmax(0.0, (double)len - correction);
    kn_reduce_store_f64(n->out[0], r, n->op == KN_OP_std ? sqrt(var) : var);
}
static kn_status var_kernel(kn_node *n) { return kn_reduce_rows(n, var_row); }

static void norm_row(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch) {
    double *v = scratch, p = KN_ATTRS(n, norm)->p, acc = 0;
    kn_reduce_load_f64(n->in[0]->dtype, row, len, v);
    for (int64_t i = 0; i < len; i++) v[i] = fabs(v[i]);
    if (p == INFINITY || p == -INFINITY) {
        (p > 0 ? max_row_f64 : min_row_f64)(v, len, &acc);
    } else if (p == 0) {
        for (int64_t i = 0; i < len; i++) acc += v[i] != 0;
    } else if (p == 1) {
        for (int64_t i = 0; i < len; i++) acc += v[i];
    } else if (p == 2) {
        for (int64_t i = 0; i < len; i++) acc += v[i] * v[i];
        acc = sqrt(acc);
    } else {
        for (int64_t i = 0; i < len; i++) acc += pow(v[i], p);
        acc = pow(acc, 1.0 / p);
    }
    kn_reduce_store_f64(n->out[0], r, acc);
}
static kn_status norm_kernel(kn_node *n) { return kn_reduce_rows(n, norm_row); }

static void logsumexp_row(kn_node *n, const void *row, int64_t len, int64_t r, void *scratch) {
    double *v = scratch, m = -INFINITY, acc = 0;
    kn_reduce_load_f64(n->in[0]->dtype, row, len, v);
    for (int64_t i = 0; i < len; i++) m = v[i] > m || v[i] != v[i] ? v[i] : m;
    if (isinf(m) || isnan(m)) { /* only -inf (or empty) stays -inf; +inf and NaN pass through */
        kn_reduce_store_f64(n->out[0], r, m);
        return;
    }
    for (int64_t i = 0; i < len; i++) acc += exp(v[i] - m);
    kn_reduce_store_f64(n->out[0], r, m + log(acc));
}
static kn_status logsumexp_kernel(kn_node *n) { return kn_reduce_rows(n, logsumexp_row); }

const kn_kernel_reg kn_cpu_kernels_reduce[] = {
    {KN_OP_sum, sum_kernel, KN_DTS_ALL},
    {KN_OP_mean, mean_kernel, KN_DTS_FLOAT},
    {KN_OP_prod, prod_kernel, KN_DTS_ALL},
    {KN_OP_amax, extreme_kernel, KN_DTS_ALL},
    {KN_OP_amin, extreme_kernel, KN_DTS_ALL},
    {KN_OP_max, extreme_kernel, KN_DTS_ALL},
    {KN_OP_min, extreme_kernel, KN_DTS_ALL},
    {KN_OP_max_dim, extreme_kernel, KN_DTS_ALL},
    {KN_OP_min_dim, extreme_kernel, KN_DTS_ALL},
    {KN_OP_argmax, extreme_kernel, KN_DTS_ALL},
    {KN_OP_argmin, extreme_kernel, KN_DTS_ALL},
    {KN_OP_argmax_all, extreme_kernel, KN_DTS_ALL},
    {KN_OP_argmin_all, extreme_kernel, KN_DTS_ALL},
    {KN_OP_var, var_kernel, KN_DTS_FLOAT},
    {KN_OP_std, var_kernel, KN_DTS_FLOAT},
    {KN_OP_norm, norm_kernel, KN_DTS_FLOAT},
    {KN_OP_logsumexp, logsumexp_kernel, KN_DTS_FLOAT},
    {KN_OP_all, truth_kernel, KN_DTS_ALL},
    {KN_OP_any, truth_kernel, KN_DTS_ALL},
    {KN_OP_cumsum, kn_cpu_cumsum, KN_DTS_ALL},
    {KN_OP_cumprod, kn_cpu_cumprod, KN_DTS_ALL},
    {KN_OP_softmax, kn_cpu_softmax, KN_DTS_FLOAT},
    {KN_OP_log_softmax, kn_cpu_log_softmax, KN_DTS_FLOAT},
    {KN_OP_softmax_backward, kn_cpu_softmax_backward, KN_DT(KN_F32) | KN_DT(KN_F64)},
    {KN_OP_log_softmax_backward, kn_cpu_log_softmax_backward, KN_DT(KN_F32) | KN_DT(KN_F64)},
    {0},
};
