/* CPU kernels of the index family built on the axis walk: index_select, embedding, gather,
 * scatter (src and value forms) and the accumulating scatters (scatter_add, scatter_reduce,
 * index_add); the family's registration list. */
#include <stdlib.h>

#include "backends/cpu/k_index_common.h"
#include "kiln/op_enums.h"

/* ---- range checks ----------------------------------------------------------------------- */

#define RANGE_INNER(T, SUF)                                                                           \
    static int in_range_##SUF(char *const *p, const int64_t *s, int64_t n, const void *ctx) {         \
        const T *x = (const T *)p[0];                                                                 \
        const int64_t *bounds = ctx, lo = bounds[0], hi = bounds[1], s0 = s[0];                       \
        int bad = 0;                                                                                  \
        for (int64_t i = 0; i < n; i++) bad |= x[i * s0] < lo || x[i * s0] >= hi;                     \
        return bad;                                                                                   \
    }
RANGE_INNER(int32_t, i32)
RANGE_INNER(int64_t, i64)

kn_status kn_index_check_range(kn_tensor *idx, int64_t lo, int64_t hi, const char *op, int64_t dim) {
    int64_t count = kn_numel(idx);
    if (count == 0) return KN_OK;
    bool is64 = idx->dtype == KN_I64;
    if (!kn_ew_run_operands(&idx, 1, is64 ? in_range_i64 : in_range_i32, (int64_t[]){lo, hi})) return KN_OK;
    /* Only on failure: find the first bad value in row-major order for the message. */
    const void *base = kn_tensor_data(idx);
    for (int64_t f = 0; f < count; f++) {
        int64_t rest = f, off = 0;
        for (int d = idx->ndim - 1; d >= 0; d--) {
            off += (rest % idx->shape[d]) * idx->stride[d];
            rest /= idx->shape[d];
        }
        int64_t v = kn_index_load(base, is64, off);
        if (v < lo || v >= hi)
            return kn_error(KN_ERR_INDEX, "%s: index %lld is out of range for dim %lld of size %lld", op, (long long)v,
                            (long long)dim, (long long)hi);
    }
    return KN_ERR_INTERNAL;
}


/* ---- the walk ------------------------------------------------------------------------------ */

kn_status kn_axis_walk_make(kn_axis_walk *w, const int64_t *shape, int ndim, int dim,
                            const int64_t stride[KN_AX_COUNT][KN_MAX_DIMS], const kn_tensor *index) {
    *w = (kn_axis_walk){0};
    int64_t one = 1;
    int64_t zeros[KN_AX_COUNT][KN_MAX_DIMS] = {{0}};
    if (ndim == 0) { /* a 0-d W is one element that no operand moves through */
        shape = &one;
        ndim = 1;
        dim = 0;
        stride = (const int64_t(*)[KN_MAX_DIMS])zeros;
    }
    w->outer = w->inner = 1;
    for (int d = 0; d < dim; d++) w->outer *= shape[d];
    for (int d = dim + 1; d < ndim; d++) w->inner *= shape[d];
    w->n = shape[dim];
    w->index = kn_tensor_data(index);
    w->index_i64 = index->dtype == KN_I64;
    for (int k = 0; k < KN_AX_COUNT; k++) {
        w->dim_stride[k] = stride[k][dim];
        w->outer_off[k] = malloc(sizeof(int64_t) * (size_t)(w->outer ? w->outer : 1));
        w->inner_off[k] = malloc(sizeof(int64_t) * (size_t)(w->inner ? w->inner : 1));
        if (!w->outer_off[k] || !w->inner_off[k]) {
            kn_axis_walk_free(w);
            return kn_error(KN_ERR_OOM, "index walk: out of host memory");
        }
        for (int64_t o = 0; o < w->outer; o++) {
            int64_t rest = o, off = 0;
            for (int d = dim - 1; d >= 0; d--) {
                off += (rest % shape[d]) * stride[k][d];
                rest /= shape[d];
            }
            w->outer_off[k][o] = off;
        }
        for (int64_t i = 0; i < w->inner; i++) {
            int64_t rest = i, off = 0;
            for (int d = ndim - 1; d > dim; d--) {
                off += (rest % shape[d]) * stride[k][d];
                rest /= shape[d];
            }
            w->inner_off[k][i] = off;
        }
    }
    if (w->outer == 0 || w->n == 0 || w->inner == 0) return KN_OK; /* tasks = 0 */
    /* Enough tasks to feed every thread even when outer is small. */
    int64_t want = 4 * (int64_t)kn_get_num_threads();
    int64_t blocks = w->outer >= want ? 1 : (want + w->outer - 1) / w->outer;
    if (blocks > w->inner) blocks = w->inner;
    w->block = (w->inner + blocks - 1) / blocks;
    w->tasks = w->outer * ((w->inner + w->block - 1) / w->block);
    return KN_OK;
}

void kn_axis_walk_free(kn_axis_walk *w) {
    for (int k = 0; k < KN_AX_COUNT; k++) {
        free(w->outer_off[k]);
        free(w->inner_off[k]);
        w->outer_off[k] = w->inner_off[k] = NULL;
    }
}

/* ---- moves: element bytes, whatever the dtype ------------------------------------------------ */

#define ELEMENT_SIZES(X) X(uint8_t, 1) X(uint16_t, 2) X(uint32_t, 4) X(uint64_t, 8)

typedef struct move_ctx {
    const kn_axis_walk *walk;
    void *dst;
    const void *src; /* the source, or the fill value */
} move_ctx;

#define MOVES(E, SIZE)                                                                     \
    KN_AXIS_WALK_FN(read_##SIZE, move_ctx, E *restrict d = ctx->dst; const E *restrict s = ctx->src;, \
                    { d[o_off] = s[t_off]; })                                              \
    KN_AXIS_WALK_FN(write_##SIZE, move_ctx, E *restrict d = ctx->dst; const E *restrict s = ctx->src;, \
                    { d[t_off] = s[o_off]; })                                              \
    KN_AXIS_WALK_FN(fill_##SIZE, move_ctx, E *restrict d = ctx->dst; E v = *(const E *)ctx->src;, \
                    { d[t_off] = v; })
ELEMENT_SIZES(MOVES)

typedef kn_chunk_fn move_fn;
typedef enum { MOVE_READ, MOVE_WRITE, MOVE_FILL } move_kind;

static move_fn move_for(size_t esize, move_kind kind) {
#define MOVE_CASE(E, SIZE) \
    case SIZE: return kind == MOVE_READ ? read_##SIZE : kind == MOVE_WRITE ? write_##SIZE : fill_##SIZE;
    switch (esize) {
        ELEMENT_SIZES(MOVE_CASE)
    default: return NULL;
    }
#undef MOVE_CASE
}

/* Size along dim of a tensor (a 0-d tensor counts as one element). */
static int64_t dim_size(const kn_tensor *t, int64_t dim) { return t->ndim ? t->shape[dim] : 1; }

/* Builds the walk over a W of this shape, checks the index against TARGET's size along dim,
 * runs fn, frees. */
static kn_status run_walk(kn_node *n, const int64_t *w_shape, int w_ndim, int dim,
                          int64_t strides[KN_AX_COUNT][KN_MAX_DIMS], kn_tensor *index, int64_t target_size, move_fn fn,
                          void *dst, const void *src) {
    kn_status st = kn_index_check_range(index, 0, target_size, kn_op_name(n->op), dim);
    if (st != KN_OK) return st;
    kn_axis_walk w;
    if ((st = kn_axis_walk_make(&w, w_shape, w_ndim, dim, strides, index)) != KN_OK) return st;
    kn_axis_walk_run(&w, fn, &(move_ctx){.walk = &w, .dst = dst, .src = src});
    kn_axis_walk_free(&w);
    return KN_OK;
}

static void copy_strides(int64_t *dst, const kn_tensor *t) {
    for (int d = 0; d < t->ndim; d++) dst[d] = t->stride[d];
}

/* index_select and embedding: out[.., j, ..] = x[.., index[j], ..], index read flat. */
static kn_status select_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *index = n->in[1], *out = n->out[0];
    int dim = n->op == KN_OP_embedding ? 0 : (int)KN_ATTRS(n, index_select)->dim;
    int64_t s[KN_AX_COUNT][KN_MAX_DIMS] = {{0}};
    copy_strides(s[KN_AX_TARGET], x);
    s[KN_AX_INDEX][dim] = index->ndim ? index->stride[0] : 0;
    /* Only the geometry is copied: the worker must not read the header fields the host thread
     * updates meanwhile (reference counts, scope, autograd). */
    const int64_t *w_shape = out->shape;
    int w_ndim = out->ndim;
    int64_t flat_shape[2];
    if (n->op == KN_OP_embedding) { /* the output [..., D] is walked as the [N, D] it is in memory */
        flat_shape[0] = kn_numel(index);
        flat_shape[1] = x->shape[1];
        w_shape = flat_shape;
        w_ndim = 2;
        s[KN_AX_OTHER][0] = x->shape[1];
        s[KN_AX_OTHER][1] = 1;
        s[KN_AX_INDEX][0] = 1; /* contiguous, any shape */
    } else {
        copy_strides(s[KN_AX_OTHER], out);
    }
    return run_walk(n, w_shape, w_ndim, dim, s, index, dim_size(x, dim), move_for(kn_dtype_size(x->dtype), MOVE_READ),
                    kn_tensor_data(out), kn_tensor_data(x));
}

static kn_status gather_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *index = n->in[1], *out = n->out[0];
    int dim = (int)KN_ATTRS(n, gather)->dim;
    int64_t s[KN_AX_COUNT][KN_MAX_DIMS] = {{0}};
    copy_strides(s[KN_AX_TARGET], x);
    copy_strides(s[KN_AX_INDEX], index);
    copy_strides(s[KN_AX_OTHER], out);
    return run_walk(n, index->shape, index->ndim, dim, s, index, dim_size(x, dim), move_for(kn_dtype_size(x->dtype), MOVE_READ),
                    kn_tensor_data(out), kn_tensor_data(x));
}

/* scatter and scatter_value: out = x, then out[.., index[..], ..] = src[..] (or value). */
static kn_status scatter_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *index = n->in[1], *out = n->out[0];
    bool fill = n->op == KN_OP_scatter_value;
    int dim = (int)(fill ? KN_ATTRS(n, scatter_value)->dim : KN_ATTRS(n, scatter)->dim);
    kn_status st = kn_cpu_copy_into(out, x);
    if (st != KN_OK) return st;
    int64_t s[KN_AX_COUNT][KN_MAX_DIMS] = {{0}};
    copy_strides(s[KN_AX_TARGET], out);
    copy_strides(s[KN_AX_INDEX], index);
    uint64_t value = 0;
    const void *src = &value;
    if (fill) {
        kn_cpu_store_f64(&value, out->dtype, 0, KN_ATTRS(n, scatter_value)->value);
    } else {
        copy_strides(s[KN_AX_OTHER], n->in[2]);
        src = kn_tensor_data(n->in[2]);
    }
    return run_walk(n, index->shape, index->ndim, dim, s, index, dim_size(out, dim),
                    move_for(kn_dtype_size(out->dtype), fill ? MOVE_FILL : MOVE_WRITE), kn_tensor_data(out), src);
}

/* ---- accumulating scatters ---------------------------------------------------------------------
 * They work on a buffer of the accumulator dtype (out itself when out has that dtype). Integer
 * arithmetic wraps, as two's complement tensors do in PyTorch. */

static inline float acc_add_f32(float a, float b) { return a + b; }
static inline double acc_add_f64(double a, double b) { return a + b; }
static inline int64_t acc_add_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a + (uint64_t)b); }
static inline float acc_mul_f32(float a, float b) { return a * b; }
static inline double acc_mul_f64(double a, double b) { return a * b; }
static inline int64_t acc_mul_i64(int64_t a, int64_t b) { return (int64_t)((uint64_t)a * (uint64_t)b); }
static inline bool acc_nan_f32(float a) { return isnan(a); }
static inline bool acc_nan_f64(double a) { return isnan(a); }
static inline bool acc_nan_i64(int64_t a) { return false; }
static inline float acc_div_f32(float a, int64_t c) { return a / (float)c; }
static inline double acc_div_f64(double a, int64_t c) { return a / (double)c; }
static inline int64_t acc_div_i64(int64_t a, int64_t c) { /* floor division, as PyTorch's integer mean */
    int64_t q = a / c;
    return (a % c != 0 && (a < 0) != (c < 0)) ? q - 1 : q;
}

/* The walks of one accumulator type CT and their context; ACC_VARS gives them t, s, alpha and
 * identity. */
#define ACC_VARS(CT)                                                                                       \
    CT *restrict t = ctx->t;                                                                               \
    const CT *restrict s = ctx->s;                                                                         \
    CT alpha = ctx->alpha, identity = ctx->identity;                                                       \
    (void)s, (void)alpha, (void)identity;

#define ACCUMULATE(CT, SUF, LOWEST, HIGHEST)                                                               \
    typedef struct acc_ctx_##SUF {                                                                         \
        const kn_axis_walk *walk;                                                                          \
        CT *t;          /* the accumulator buffer */                                                       \
        const CT *s;    /* the source */                                                                   \
        CT alpha, identity;                                                                                \
        int64_t *count; /* mean: contributions per element */                                              \
        bool include_self;                                                                                 \
    } acc_ctx_##SUF;                                                                                       \
    KN_AXIS_WALK_FN(acc_init_##SUF, acc_ctx_##SUF, ACC_VARS(CT), { t[t_off] = identity; })                 \
    KN_AXIS_WALK_FN(acc_sum_##SUF, acc_ctx_##SUF, ACC_VARS(CT), { t[t_off] = acc_add_##SUF(t[t_off], s[o_off]); }) \
    KN_AXIS_WALK_FN(acc_sum_alpha_##SUF, acc_ctx_##SUF, ACC_VARS(CT),                                      \
                    { t[t_off] = acc_add_##SUF(t[t_off], acc_mul_##SUF(alpha, s[o_off])); })               \
    KN_AXIS_WALK_FN(acc_prod_##SUF, acc_ctx_##SUF, ACC_VARS(CT), { t[t_off] = acc_mul_##SUF(t[t_off], s[o_off]); }) \
    KN_AXIS_WALK_FN(acc_amax_##SUF, acc_ctx_##SUF, ACC_VARS(CT), {                                         \
        CT v = s[o_off];                                                                                   \
        if (v > t[t_off] || acc_nan_##SUF(v)) t[t_off] = v;                                                \
    })                                                                                                     \
    KN_AXIS_WALK_FN(acc_amin_##SUF, acc_ctx_##SUF, ACC_VARS(CT), {                                         \
        CT v = s[o_off];                                                                                   \
        if (v < t[t_off] || acc_nan_##SUF(v)) t[t_off] = v;                                                \
    })                                                                                                     \
    KN_AXIS_WALK_FN(acc_mean_##SUF, acc_ctx_##SUF, ACC_VARS(CT), {                                         \
        t[t_off] = acc_add_##SUF(t[t_off], s[o_off]);                                                      \
        ctx->count[t_off]++;                                                                               \
    })                                                                                                     \
    /* the mean's division, over elements [begin, end) */                                                  \
    static void acc_divide_##SUF(void *ctx_, int64_t begin, int64_t end, int chunk) {                      \
        const acc_ctx_##SUF *ctx = ctx_;                                                                   \
        (void)chunk;                                                                                       \
        for (int64_t e = begin; e < end; e++)                                                              \
            if (ctx->count[e]) ctx->t[e] = acc_div_##SUF(ctx->t[e], ctx->count[e] + (ctx->include_self ? 1 : 0)); \
    }                                                                                                      \
    static void accumulate_##SUF(const kn_axis_walk *w, CT *restrict t, const CT *restrict s, int op,      \
                                 bool include_self, CT alpha, int64_t *restrict count, int64_t numel) {    \
        acc_ctx_##SUF c = {.walk = w, .t = t, .s = s, .alpha = alpha, .count = count, .include_self = include_self}; \
        if (!include_self) {                                                                               \
            c.identity = op == KN_SCATTER_PROD ? (CT)1 : op == KN_SCATTER_AMAX ? LOWEST                    \
                       : op == KN_SCATTER_AMIN ? HIGHEST : (CT)0;                                          \
            kn_axis_walk_run(w, acc_init_##SUF, &c);                                                       \
        }                                                                                                  \
        switch (op) {                                                                                      \
        case KN_SCATTER_SUM: kn_axis_walk_run(w, alpha == (CT)1 ? acc_sum_##SUF : acc_sum_alpha_##SUF, &c); break; \
        case KN_SCATTER_PROD: kn_axis_walk_run(w, acc_prod_##SUF, &c); break;                              \
        case KN_SCATTER_AMAX: kn_axis_walk_run(w, acc_amax_##SUF, &c); break;                              \
        case KN_SCATTER_AMIN: kn_axis_walk_run(w, acc_amin_##SUF, &c); break;                              \
        default: /* mean */                                                                                \
            kn_axis_walk_run(w, acc_mean_##SUF, &c);                                                       \
            kn_parallel_for(numel, 1, acc_divide_##SUF, &c);                                               \
        }                                                                                                  \
    }
ACCUMULATE(float, f32, -INFINITY, INFINITY)
ACCUMULATE(double, f64, -INFINITY, INFINITY)
ACCUMULATE(int64_t, i64, INT64_MIN, INT64_MAX)

/* scatter_add, scatter_reduce, index_add (whose attributes are scatter_reduce's: op_table.c). */
static kn_status accumulate_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *index = n->in[1], *src = n->in[2], *out = n->out[0];
    const kn_attrs_scatter_reduce *a = KN_ATTRS(n, scatter_reduce);
    int dim = (int)a->dim, op = (int)a->reduce;
    bool include_self = a->include_self;
    kn_dtype acc = kn_index_acc_dtype(out->dtype);
    kn_tensor *buf = out->dtype == acc ? out : kn_tensor_alloc(kn_op_name(n->op), acc, out->shape, out->ndim, KN_CPU);
    if (!buf) return kn_last_status();
    int64_t numel = kn_numel(buf);
    int64_t *count = NULL;
    kn_status st = kn_cpu_copy_into(buf, x);
    if (st == KN_OK && op == KN_SCATTER_MEAN && !(count = calloc((size_t)(numel ? numel : 1), sizeof *count)))
        st = kn_error(KN_ERR_OOM, "%s: out of host memory for counts", kn_op_name(n->op));
    bool index_1d = n->op == KN_OP_index_add;
    const kn_tensor *w_shape = index_1d ? src : index;
    if (st == KN_OK) st = kn_index_check_range(index, 0, dim_size(out, dim), kn_op_name(n->op), dim);
    kn_axis_walk w = {0};
    if (st == KN_OK) {
        int64_t s[KN_AX_COUNT][KN_MAX_DIMS] = {{0}};
        copy_strides(s[KN_AX_TARGET], buf);
        copy_strides(s[KN_AX_OTHER], src);
        if (index_1d) s[KN_AX_INDEX][dim] = index->ndim ? index->stride[0] : 0;
        else copy_strides(s[KN_AX_INDEX], index);
        st = kn_axis_walk_make(&w, w_shape->shape, w_shape->ndim, dim, s, index);
    }
    if (st == KN_OK) {
        double alpha = n->op == KN_OP_index_add ? a->alpha : 1.0;
        void *t = kn_tensor_data(buf);
        const void *sv = kn_tensor_data(src);
        if (acc == KN_F32) accumulate_f32(&w, t, sv, op, include_self, (float)alpha, count, numel);
        else if (acc == KN_F64) accumulate_f64(&w, t, sv, op, include_self, alpha, count, numel);
        else accumulate_i64(&w, t, sv, op, include_self, kn_attr_int64(alpha), count, numel);
        kn_axis_walk_free(&w);
        if (buf != out) st = kn_cpu_copy_into(out, buf);
    }
    free(count);
    if (buf != out) kn_tensor_decref(buf);
    return st;
}

const kn_kernel_reg kn_cpu_kernels_index[] = {
    {KN_OP_index_select, select_kernel, KN_DTS_ALL},
    {KN_OP_embedding, select_kernel, KN_DTS_ALL},
    {KN_OP_gather, gather_kernel, KN_DTS_ALL},
    {KN_OP_scatter, scatter_kernel, KN_DTS_ALL},
    {KN_OP_scatter_value, scatter_kernel, KN_DTS_ALL},
    {KN_OP_scatter_add, accumulate_kernel, KN_DTS_ALL},
    {KN_OP_scatter_reduce, accumulate_kernel, KN_DTS_ALL},
    {KN_OP_index_add, accumulate_kernel, KN_DTS_ALL},
    {KN_OP_index_put, kn_cpu_index_put, KN_DTS_ALL},
    {KN_OP_masked_fill, kn_cpu_masked_fill, KN_DTS_ALL},
    {KN_OP_masked_select, kn_cpu_masked_select, KN_DTS_ALL},
    {KN_OP_nonzero, kn_cpu_nonzero, KN_DTS_ALL},
    {KN_OP_embedding_bag, kn_cpu_embedding_bag, KN_DTS_FLOAT},
    {KN_OP_embedding_backward, kn_cpu_embedding_backward, KN_DTS_FLOAT},
    {KN_OP_sort, kn_cpu_sort, KN_DTS_ALL},
    {KN_OP_unique, kn_cpu_unique, KN_DTS_ALL},
    {KN_OP_multinomial, kn_cpu_multinomial, KN_DTS_FLOAT},
    {0},
};
