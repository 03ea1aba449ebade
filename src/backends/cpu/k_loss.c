/* CPU kernels of the losses and dropout (src/ops/defs/loss.def): one fused sweep per row for
 * cross_entropy and nll_loss (max, log-sum-exp and the target's score, never a log-softmax
 * tensor), fused pointwise losses whose sums are blocked so they do not depend on threads,
 * and Philox dropout. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_loss.h"
#include "backends/cpu/reduce_plan.h"
#include "core/error.h"
#include "core/thread_pool.h"

kn_status kn_cpu_loss_contiguous(kn_tensor *t, kn_dtype dtype, const char *op, kn_tensor **scratch, const void **data) {
    *scratch = NULL;
    if (t->dtype == dtype && kn_tensor_is_contiguous(t)) {
        *data = kn_tensor_data(t);
        return KN_OK;
    }
    kn_tensor *s = kn_tensor_alloc(op, dtype, t->shape, t->ndim, t->storage->device);
    if (!s) return kn_last_status();
    kn_status st = kn_cpu_copy_into(s, t);
    if (st != KN_OK) {
        kn_tensor_decref(s);
        return st;
    }
    *scratch = s;
    *data = kn_tensor_data(s);
    return KN_OK;
}

static void store_double(kn_tensor *t, int64_t i, double v) { kn_cpu_store_f64(kn_tensor_data(t), t->dtype, i, v); }

/* ---- cross_entropy, nll_loss ----------------------------------------------------------- */

typedef struct class_loss_args {
    int64_t C, ignore_index;
    bool log_probs;           /* nll_loss: the scores are log-probabilities already */
    bool probs;               /* targets are class probabilities (tprobs), else indices */
    const int64_t *target;
    const void *tprobs;       /* [P, C] in the scores' dtype */
    const double *weight;     /* [C], or NULL for ones */
    double weight_sum;        /* of weight, or C */
    double eps;               /* label smoothing */
    double *loss, *denom;     /* per position: the loss and its share of the mean's divisor */
    const void *scores;       /* [P, C] */
    void (*rows)(struct class_loss_args *a, int64_t b, int64_t e);
    atomic_llong bad_pos;     /* the first target out of range, or -1 */
} class_loss_args;

/* Rows [b, e) of the [P, C] scores. Per row: the max, then sum(exp(x - max)) in double,
 * then the target's score (and, with label smoothing, the weighted sum of all scores). */
#define CLASS_ROWS(unused, SUF, DT, ST, CT, LOAD, STORE)                                               \
    static void class_rows_##SUF(class_loss_args *a, int64_t b, int64_t e) {                           \
        const int64_t C = a->C;                                                                        \
        const double eps = a->eps, *w = a->weight;                                                     \
        for (int64_t p = b; p < e; p++) {                                                              \
            const ST *restrict x = (const ST *)a->scores + p * C;                                      \
            double lse = 0;                                                                            \
            if (!a->log_probs) {                                                                       \
                CT mx;                                                                                 \
                double s;                                                                              \
                KN_ROW_MAX_SUMEXP(CT, LOAD, x, C, mx, s);                                              \
                lse = (double)mx + log(s);                                                             \
            }                                                                                          \
            if (a->probs) {                                                                            \
                const ST *restrict t = (const ST *)a->tprobs + p * C;                                 \
                double acc = 0, spread = eps / (double)C;                                              \
                for (int64_t c = 0; c < C; c++) {                                                      \
                    double tc = (double)LOAD(t[c]) * (1 - eps) + spread;                               \
                    acc += (w ? w[c] : 1.0) * tc * ((double)LOAD(x[c]) - lse);                         \
                }                                                                                      \
                a->loss[p] = -acc, a->denom[p] = 1;                                                    \
                continue;                                                                              \
            }                                                                                          \
            int64_t t = a->target[p];                                                                  \
            a->loss[p] = 0, a->denom[p] = 0;                                                           \
            if (t == a->ignore_index) continue;                                                        \
            if (t < 0 || t >= C) {                                                                     \
                kn_note_first_bad(&a->bad_pos, p);                                                     \
                continue;                                                                              \
            }                                                                                          \
            double wt = w ? w[t] : 1.0;                                                                \
            double loss = (1 - eps) * wt * (lse - (double)LOAD(x[t]));                                 \
            if (eps > 0) { /* PyTorch's smoothing term: (eps / C) * -sum_c w_c log p_c */              \
                double swx = 0;                                                                        \
                for (int64_t c = 0; c < C; c++) swx += (w ? w[c] : 1.0) * (double)LOAD(x[c]);         \
                loss += eps / (double)C * (a->weight_sum * lse - swx);                                 \
            }                                                                                          \
            a->loss[p] = loss, a->denom[p] = wt;                                                       \
        }                                                                                              \
    }
KN_DTYPES_FLOAT(CLASS_ROWS, ~)

/* Rows [begin, end) of the scores (ctx: the class_loss_args). */
static void class_loss_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    class_loss_args *a = ctx;
    a->rows(a, begin, end);
}

static kn_status class_loss_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    const char *op = kn_op_name(n->op);
    const kn_attrs_cross_entropy *at = KN_ATTRS(n, cross_entropy); /* nll_loss's too (op_table.c) */
    bool probs = at->probs;
    kn_tensor *weight = KN_INPUT(n, cross_entropy, weight);
    kn_reduction reduction = (kn_reduction)at->reduction;
    void (*rows)(class_loss_args *, int64_t, int64_t);
    switch (x->dtype) {
#define CLASS_ROWS_CASE(unused, SUF, DT, ...) \
    case DT: rows = class_rows_##SUF; break;
        KN_DTYPES_FLOAT(CLASS_ROWS_CASE, ~)
#undef CLASS_ROWS_CASE
    default: return kn_error(KN_ERR_INTERNAL, "%s: no loop for %s", op, kn_dtype_name(x->dtype));
    }
    int64_t C = x->shape[x->ndim - 1], P = 1;
    for (int d = 0; d < x->ndim - 1; d++) P *= x->shape[d];
    class_loss_args a = {.C = C, .ignore_index = at->ignore_index, .log_probs = n->op == KN_OP_nll_loss,
                         .probs = probs, .eps = at->label_smoothing, .rows = rows, .bad_pos = -1};
    kn_tensor *sx = NULL, *st_ = NULL, *sw = NULL;
    const void *xdata = NULL, *tdata = NULL, *wdata = NULL;
    double *per = malloc(sizeof(double) * (size_t)(2 * P + 1));
    kn_status st = per ? KN_OK : kn_error(KN_ERR_OOM, "%s: out of memory for %lld row losses", op, (long long)P);
    if (st == KN_OK) st = kn_cpu_loss_contiguous(x, x->dtype, op, &sx, &xdata);
    if (st == KN_OK) st = kn_cpu_loss_contiguous(n->in[1], probs ? x->dtype : KN_I64, op, &st_, &tdata);
    if (st == KN_OK && weight) st = kn_cpu_loss_contiguous(weight, KN_F64, op, &sw, &wdata);
    if (st == KN_OK) {
        a.loss = per, a.denom = per + P;
        a.scores = xdata, a.target = tdata, a.tprobs = tdata, a.weight = wdata;
        a.weight_sum = (double)C;
        if (a.weight) {
            a.weight_sum = 0;
            for (int64_t c = 0; c < C; c++) a.weight_sum += a.weight[c];
        }
        kn_parallel_for(P, C, class_loss_chunk, &a);
        long long bad = atomic_load(&a.bad_pos);
        if (bad >= 0)
            st = kn_error(KN_ERR_INDEX, "%s: target %lld at position %lld is out of range for %lld classes", op,
                          (long long)a.target[bad], bad, (long long)C);
    }
    if (st == KN_OK) {
        if (reduction == KN_REDUCTION_NONE) {
            for (int64_t p = 0; p < P; p++) store_double(out, p, a.loss[p]);
        } else {
            double total = 0, denom = 0;
            for (int64_t p = 0; p < P; p++) total += a.loss[p], denom += a.denom[p];
            store_double(out, 0, reduction == KN_REDUCTION_SUM ? total : total / denom);
        }
    }
    free(per);
    kn_tensor_decref(sx);
    kn_tensor_decref(st_);
    kn_tensor_decref(sw);
    return st;
}

/* ---- pointwise losses ------------------------------------------------------------------- */

#define LOSS_HELPERS(T, S)                                                                     \
    static inline T smooth_l1_##S(T d, T beta) {                                               \
        d = kn_abs(d);                                                                         \
        return d < beta ? (T)0.5 * d * d / beta : d - (T)0.5 * beta;                           \
    }                                                                                          \
    /* PyTorch's: both logs clamped at -100, so p = 0 or 1 give finite losses. */              \
    static inline T bce_##S(T p, T y, T w, int *bad) {                                         \
        if (!(p >= 0 && p <= 1)) *bad = 1;                                                     \
        T lp = kn_log(p), lq = kn_log1p(-p);                                                   \
        lp = lp < (T)-100 ? (T)-100 : lp;                                                      \
        lq = lq < (T)-100 ? (T)-100 : lq;                                                      \
        return -w * (y * lp + (1 - y) * lq);                                                   \
    }                                                                                          \
    /* (1 - y) x - (1 + (pw - 1) y) log_sigmoid(x), with log_sigmoid(x) = min(x, 0) -         \
     * log1p(exp(-|x|)), which never overflows. */                                              \
    static inline T bce_logits_##S(T x, T y, T w, T pw) {                                      \
        T log_sig = (x < 0 ? x : 0) - kn_log1p(kn_exp(-kn_abs(x)));                            \
        return w * ((1 - y) * x - (1 + (pw - 1) * y) * log_sig);                              \
    }
LOSS_HELPERS(float, f)
LOSS_HELPERS(double, d)
#define SELECT(name, v) _Generic((v), float: name##_f, double: name##_d)

/* X(op, loss of one element from x, y, w (weight), pw (pos_weight), beta; may set bad). */
#define POINTWISE_LOSSES(X)                                      \
    X(mse_loss, (x - y) * (x - y))                               \
    X(l1_loss, kn_abs(x - y))                                    \
    X(smooth_l1_loss, SELECT(smooth_l1, x)(x - y, beta))         \
    X(bce_loss, SELECT(bce, x)(x, y, w, &bad))                   \
    X(bce_with_logits, SELECT(bce_logits, x)(x, y, w, pw))

/* One block: writes the losses (when out is not NULL) and returns their sum in double. */
typedef double (*pointwise_fn)(const void *const *in, void *out, int64_t count, double beta, int *bad);

#define POINTWISE_BLOCK(NAME, EXPR, SUF, DT, ST, CT, LOAD, STORE)                                         \
    static double NAME##_##SUF(const void *const *in, void *outp, int64_t count, double beta_, int *bad_out) { \
        typedef CT kn_ct;                                                                                 \
        const ST *restrict xs = in[0], *restrict ys = in[1], *restrict ws = in[2], *restrict ps = in[3];  \
        ST *restrict out = outp;                                                                          \
        const CT beta = (CT)beta_;                                                                        \
        double acc = 0;                                                                                   \
        int bad = 0;                                                                                      \
        for (int64_t i = 0; i < count; i++) {                                                             \
            CT x = LOAD(xs[i]), y = LOAD(ys[i]);                                                          \
            CT w = ws ? LOAD(ws[i]) : KC(1), pw = ps ? LOAD(ps[i]) : KC(1);                              \
            (void)w, (void)pw, (void)beta;                                                                \
            CT r = EXPR;                                                                                  \
            if (out) out[i] = STORE(r);                                                                   \
            acc += (double)r;                                                                             \
        }                                                                                                 \
        *bad_out |= bad;                                                                                  \
        return acc;                                                                                       \
    }
#define POINTWISE_DTYPES(NAME, EXPR) KN_DTYPES_FLOAT(POINTWISE_BLOCK, NAME, EXPR)
POINTWISE_LOSSES(POINTWISE_DTYPES)

/* Indexed by op and by dtype (KN_F32, KN_F64, KN_F16, KN_BF16 are 0..3). */
#define POINTWISE_ROW(NAME, EXPR) [KN_OP_##NAME] = {NAME##_f32, NAME##_f64, NAME##_f16, NAME##_bf16},
static const pointwise_fn pointwise_fns[KN_OP_COUNT][4] = {POINTWISE_LOSSES(POINTWISE_ROW)};

enum { POINTWISE_BLOCK_ELEMS = 16384 };

typedef struct pointwise_ctx {
    pointwise_fn fn;
    const void *in[4]; /* by slot: x, y, weight, pos_weight */
    char *out;         /* the losses, or NULL when reduced */
    int64_t count;
    size_t esize;
    double beta;
    double *partial;   /* per block */
    atomic_int bad;
} pointwise_ctx;

/* Blocks [begin, end) of POINTWISE_BLOCK_ELEMS elements. */
static void pointwise_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    pointwise_ctx *c = ctx;
    int bad = 0;
    for (int64_t b = begin; b < end; b++) {
        int64_t first = b * POINTWISE_BLOCK_ELEMS;
        int64_t len = c->count - first < POINTWISE_BLOCK_ELEMS ? c->count - first : POINTWISE_BLOCK_ELEMS;
        const void *in[4];
        for (int i = 0; i < 4; i++) in[i] = c->in[i] ? (const char *)c->in[i] + (size_t)first * c->esize : NULL;
        c->partial[b] = c->fn(in, c->out ? c->out + (size_t)first * c->esize : NULL, len, c->beta, &bad);
    }
    if (bad) atomic_store(&c->bad, 1);
}

static kn_status pointwise_kernel(kn_node *n) {
    kn_tensor *out = n->out[0];
    kn_dtype dt = n->in[0]->dtype;
    const char *op = kn_op_name(n->op);
    pointwise_fn fn = pointwise_fns[n->op][dt];
    kn_reduction reduction = (kn_reduction)KN_ATTRS(n, mse_loss)->reduction; /* every pointwise loss's */
    const void *data[4] = {0}; /* by slot: x, y, weight, pos_weight */
    kn_tensor *scratch[4] = {0};
    kn_status st = KN_OK;
    for (int i = 0; i < kn_op_input_slots(n->op) && st == KN_OK; i++) {
        kn_tensor *t = kn_input_at(n->in, &n->attrs, i);
        if (t) st = kn_cpu_loss_contiguous(t, dt, op, &scratch[i], &data[i]);
    }
    int64_t count = kn_numel(n->in[0]);
    int64_t blocks = (count + POINTWISE_BLOCK_ELEMS - 1) / POINTWISE_BLOCK_ELEMS;
    double *partial = st == KN_OK ? malloc(sizeof(double) * (size_t)(blocks + 1)) : NULL;
    if (st == KN_OK && !partial) st = kn_error(KN_ERR_OOM, "%s: out of memory", op);
    if (st == KN_OK) {
        double beta = n->op == KN_OP_smooth_l1_loss ? KN_ATTRS(n, smooth_l1_loss)->beta : 0;
        pointwise_ctx c = {.fn = fn, .count = count, .esize = kn_dtype_size(dt), .beta = beta, .partial = partial,
                           .out = reduction == KN_REDUCTION_NONE ? kn_tensor_data(out) : NULL, .bad = 0};
        memcpy(c.in, data, sizeof data);
        kn_parallel_for(blocks, POINTWISE_BLOCK_ELEMS * 4, pointwise_chunk, &c);
        if (atomic_load(&c.bad)) st = kn_error(KN_ERR_ARG, "%s: every input probability must lie in [0, 1]", op);
        if (st == KN_OK && reduction != KN_REDUCTION_NONE) {
            double total = 0;
            for (int64_t b = 0; b < blocks; b++) total += partial[b];
            store_double(out, 0, reduction == KN_REDUCTION_SUM ? total : total / (double)count);
        }
    }
    free(partial);
    for (int i = 0; i < 4; i++) kn_tensor_decref(scratch[i]);
    return st;
}

/* ---- dropout ------------------------------------------------------------------------------ */

typedef struct dropout_ctx {
    const void *x;
    void *out;
    int64_t count;
    uint64_t seed, offset, threshold;
    double scale;
} dropout_ctx;

/* Groups [begin, end) of four elements, one Philox draw each. */
#define DROPOUT(unused, SUF, DT, ST, CT, LOAD, STORE)                                                    \
    static void dropout_chunk_##SUF(void *ctx, int64_t begin, int64_t end, int chunk) {                  \
        const dropout_ctx *c = ctx;                                                                      \
        const ST *restrict x = c->x;                                                                     \
        ST *restrict o = c->out;                                                                         \
        const CT scale = (CT)c->scale;                                                                   \
        for (int64_t g = begin; g < end; g++) {                                                          \
            kn_philox4 r = kn_philox(c->seed, c->offset + (uint64_t)g);                                  \
            int64_t last = 4 * g + 4 < c->count ? 4 * g + 4 : c->count;                                  \
            for (int64_t i = 4 * g; i < last; i++)                                                       \
                o[i] = r.v[i - 4 * g] >= c->threshold ? STORE(LOAD(x[i]) * scale) : STORE((CT)0);        \
        }                                                                                                \
    }
KN_DTYPES_FLOAT(DROPOUT, ~)

static kn_status dropout_kernel(kn_node *n) {
    kn_tensor *x = n->in[0], *out = n->out[0];
    double p = KN_ATTRS(n, dropout)->p;
    kn_tensor *scratch;
    const void *data = NULL;
    kn_status st = kn_cpu_loss_contiguous(x, x->dtype, "dropout", &scratch, &data);
    if (st != KN_OK) return st;
    dropout_ctx c = {.x = data, .out = kn_tensor_data(out), .count = kn_numel(x), .seed = n->rng_seed,
                     .offset = n->rng_offset, .threshold = kn_dropout_threshold(p), .scale = p < 1 ? 1.0 / (1.0 - p) : 0.0};
    switch (x->dtype) {
#define DROPOUT_CASE(unused, SUF, DT, ...) \
    case DT: kn_parallel_for((c.count + 3) / 4, 32, dropout_chunk_##SUF, &c); break;
        KN_DTYPES_FLOAT(DROPOUT_CASE, ~)
#undef DROPOUT_CASE
    default: st = kn_error(KN_ERR_INTERNAL, "dropout: no loop for %s", kn_dtype_name(x->dtype));
    }
    kn_tensor_decref(scratch);
    return st;
}

const kn_kernel_reg kn_cpu_kernels_loss[] = {
    {KN_OP_cross_entropy, class_loss_kernel, KN_DTS_FLOAT},
    {KN_OP_nll_loss, class_loss_kernel, KN_DTS_FLOAT},
#define POINTWISE_REG(NAME, EXPR) {KN_OP_##NAME, pointwise_kernel, KN_DTS_FLOAT},
    POINTWISE_LOSSES(POINTWISE_REG)
#undef POINTWISE_REG
    {KN_OP_dropout, dropout_kernel, KN_DTS_FLOAT},
    {KN_OP_scaled_dot_product_attention, kn_cpu_attention_kernel, KN_DTS_FLOAT},
    {KN_OP_cross_entropy_backward, kn_cpu_cross_entropy_backward_kernel, KN_DTS_FLOAT},
    {KN_OP_scaled_dot_product_attention_backward, kn_cpu_attention_backward_kernel, KN_DTS_FLOAT},
    {0},
};
