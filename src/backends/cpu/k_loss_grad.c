/* CPU kernel of cross_entropy_backward (src/ops/defs/loss.def): the gradient of
 * cross_entropy and nll_loss with respect to the scores, one row at a time in three sweeps
 * (max, sum of exponentials, then softmax * a - b written out), so a [256, 50257] logits
 * gradient never builds a softmax or one-hot tensor. */
#include <stdlib.h>

#include "backends/cpu/k_loss.h"
#include "backends/cpu/reduce_plan.h"
#include "core/error.h"
#include "core/thread_pool.h"

typedef struct ce_grad_args {
    int64_t C, ignore_index;
    bool log_probs;           /* nll_loss: the scores are log-probabilities */
    bool probs;               /* targets are class probabilities (tprobs), else indices */
    const int64_t *target;
    const void *tprobs;       /* [P, C] in the scores' dtype */
    const double *weight;     /* [C], or NULL for ones */
    double weight_sum;        /* of weight, or C */
    double eps;               /* label smoothing */
    const double *g;          /* the loss gradient: g[p] (per_row) or g[0] */
    bool per_row;
    double scale;             /* 1, or 1 / the mean's divisor */
    const void *scores;       /* [P, C] */
    void *out;                /* [P, C], the scores' dtype */
    void (*rows)(struct ce_grad_args *a, int64_t b, int64_t e);
    atomic_llong bad_pos;     /* the first target out of range, or -1 */
} ce_grad_args;

/* Row p's gradient: with e = softmax(x), index targets give
 *     s * ((1 - eps) w_t + eps W / C) e_c - s * (eps / C) w_c - s (1 - eps) w_t [c = t]
 * and probability targets t' = (1 - eps) t + eps / C give s * (sum_k w_k t'_k) e_c - s w_c t'_c. */
#define CE_GRAD_ROWS(unused, SUF, DT, ST, CT, LOAD, STORE)                                                     \
    static void ce_grad_rows_##SUF(ce_grad_args *a, int64_t b, int64_t e) {                                    \
        const int64_t C = a->C;                                                                                \
        const double eps = a->eps, *w = a->weight;                                                             \
        for (int64_t p = b; p < e; p++) {                                                                      \
            const ST *restrict x = (const ST *)a->scores + p * C;                                              \
            ST *restrict o = (ST *)a->out + p * C;                                                             \
            const double s = (a->per_row ? a->g[p] : a->g[0]) * a->scale;                                      \
            int64_t t = -1;                                                                                    \
            double soft = 0; /* the coefficient of e_c */                                                      \
            if (!a->probs) {                                                                                   \
                t = a->target[p];                                                                              \
                bool ignored = t == a->ignore_index;                                                           \
                if (!ignored && (t < 0 || t >= C)) kn_note_first_bad(&a->bad_pos, p), ignored = true;          \
                if (ignored) {                                                                                 \
                    for (int64_t c = 0; c < C; c++) o[c] = STORE((CT)0);                                       \
                    continue;                                                                                  \
                }                                                                                              \
                double wt = w ? w[t] : 1.0;                                                                    \
                if (a->log_probs) { /* nll_loss: -s w_t at the target only */                                  \
                    for (int64_t c = 0; c < C; c++) o[c] = STORE((CT)0);                                       \
                    o[t] = STORE((CT)(-s * wt));                                                               \
                    continue;                                                                                  \
                }                                                                                              \
                soft = (1 - eps) * wt + eps * a->weight_sum / (double)C;                                       \
            } else {                                                                                           \
                const ST *restrict tp = (const ST *)a->tprobs + p * C;                                         \
                for (int64_t c = 0; c < C; c++)                                                                \
                    soft += (w ? w[c] : 1.0) * ((double)LOAD(tp[c]) * (1 - eps) + eps / (double)C);            \
            }                                                                                                  \
            CT mx;                                                                                             \
            double sum;                                                                                        \
            KN_ROW_MAX_SUMEXP(CT, LOAD, x, C, mx, sum);                                                        \
            const CT f = (CT)(s * soft / sum);                                                                 \
            if (!a->probs && !w) { /* the common case: one subtraction at the target */                        \
                const CT shift = (CT)(s * eps / (double)C);                                                    \
                for (int64_t c = 0; c < C; c++) o[c] = STORE(kn_exp((CT)(LOAD(x[c]) - mx)) * f - shift);       \
                o[t] = STORE((CT)((double)LOAD(o[t]) - s * (1 - eps)));                                        \
            } else if (!a->probs) {                                                                            \
                for (int64_t c = 0; c < C; c++)                                                                \
                    o[c] = STORE(kn_exp((CT)(LOAD(x[c]) - mx)) * f - (CT)(s * eps / (double)C * w[c]));        \
                o[t] = STORE((CT)((double)LOAD(o[t]) - s * (1 - eps) * w[t]));                                 \
            } else {                                                                                           \
                const ST *restrict tp = (const ST *)a->tprobs + p * C;                                         \
                for (int64_t c = 0; c < C; c++) {                                                              \
                    double tc = (double)LOAD(tp[c]) * (1 - eps) + eps / (double)C;                             \
                    o[c] = STORE(kn_exp((CT)(LOAD(x[c]) - mx)) * f - (CT)(s * (w ? w[c] : 1.0) * tc));         \
                }                                                                                              \
            }                                                                                                  \
        }                                                                                                      \
    }
KN_DTYPES_FLOAT(CE_GRAD_ROWS, ~)

/* Rows [begin, end) (ctx: the ce_grad_args). */
static void ce_grad_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    ce_grad_args *a = ctx;
    a->rows(a, begin, end);
}

kn_status kn_cpu_cross_entropy_backward_kernel(kn_node *n) {
    const char *op = "cross_entropy_backward";
    kn_tensor *x = n->in[0], *out = n->out[0];
    const kn_attrs_cross_entropy_backward *at = KN_ATTRS(n, cross_entropy_backward);
    bool probs = at->probs;
    kn_tensor *weight = KN_INPUT(n, cross_entropy_backward, weight);
    kn_reduction reduction = (kn_reduction)at->reduction;
    void (*rows)(ce_grad_args *, int64_t, int64_t);
    switch (x->dtype) {
#define CE_GRAD_CASE(unused, SUF, DT, ...)                                                                     \
    case DT: rows = ce_grad_rows_##SUF; break;
        KN_DTYPES_FLOAT(CE_GRAD_CASE, ~)
#undef CE_GRAD_CASE
    default: return kn_error(KN_ERR_INTERNAL, "%s: no loop for %s", op, kn_dtype_name(x->dtype));
    }
    int64_t C = x->shape[x->ndim - 1], P = 1;
    for (int d = 0; d < x->ndim - 1; d++) P *= x->shape[d];
    if (P * C == 0) return KN_OK;
    ce_grad_args a = {.C = C, .ignore_index = at->ignore_index, .log_probs = at->nll, .probs = probs,
                      .eps = at->label_smoothing, .per_row = reduction == KN_REDUCTION_NONE, .scale = 1, .rows = rows, .bad_pos = -1};
    kn_tensor *scratch[4] = {0};
    const void *data[4] = {0};
    kn_status st = a.log_probs ? KN_OK : kn_cpu_loss_contiguous(x, x->dtype, op, &scratch[0], &data[0]);
    if (st == KN_OK) st = kn_cpu_loss_contiguous(n->in[1], probs ? x->dtype : KN_I64, op, &scratch[1], &data[1]);
    if (st == KN_OK) st = kn_cpu_loss_contiguous(n->in[2], KN_F64, op, &scratch[2], &data[2]);
    if (st == KN_OK && weight) st = kn_cpu_loss_contiguous(weight, KN_F64, op, &scratch[3], &data[3]);
    if (st == KN_OK) {
        a.scores = data[0], a.out = kn_tensor_data(out);
        a.target = data[1], a.tprobs = data[1], a.g = data[2], a.weight = data[3];
        a.weight_sum = (double)C;
        if (a.weight) {
            a.weight_sum = 0;
            for (int64_t c = 0; c < C; c++) a.weight_sum += a.weight[c];
        }
        if (reduction == KN_REDUCTION_MEAN) { /* the forward's divisor: rows, or their target weights */
            double denom = probs ? (double)P : 0;
            for (int64_t p = 0; !probs && p < P; p++) {
                int64_t t = a.target[p];
                if (t != a.ignore_index && t >= 0 && t < C) denom += a.weight ? a.weight[t] : 1.0;
            }
            a.scale = 1 / denom;
        }
        kn_parallel_for(P, 3 * C, ce_grad_chunk, &a);
        long long bad = atomic_load(&a.bad_pos);
        if (bad >= 0)
            st = kn_error(KN_ERR_INDEX, "%s: target %lld at position %lld is out of range for %lld classes", op,
                          (long long)a.target[bad], bad, (long long)C);
    }
    for (int i = 0; i < 4; i++) kn_tensor_decref(scratch[i]);
    return st;
}
