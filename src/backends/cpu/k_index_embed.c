/* CPU kernels of embedding_bag (bags in parallel, each a contiguous row reduction),
 * embedding_backward (each chunk owns a range of weight rows) and multinomial (Philox draws: draw s of row r uses counter offset + r * num_samples + s). */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_index_common.h"
#include "core/philox.h"
#include "kiln/op_enums.h"

/* Bag b covers indices [start(b), end(b)). */
typedef struct bags {
    const void *offsets;
    bool offsets_i64;
    int64_t count, n_offsets, n_indices, length; /* length: bag size of 2-d indices (no offsets) */
} bags;

static inline void bag_range(const bags *g, int64_t b, int64_t *start, int64_t *end) {
    if (!g->offsets) {
        *start = b * g->length;
        *end = *start + g->length;
        return;
    }
    *start = kn_index_load(g->offsets, g->offsets_i64, b);
    *end = b + 1 < g->n_offsets ? kn_index_load(g->offsets, g->offsets_i64, b + 1) : g->n_indices;
}

typedef struct bag_ctx {
    const void *weight, *indices, *psw; /* psw: per-sample weights, or NULL */
    void *out;
    const bags *g;
    int64_t D;
    int mode;
    bool idx64;
    atomic_bool failed; /* a chunk could not get its accumulator */
} bag_ctx;

#define BAG_DTYPE(unused, SUF, DT, ST, CT, LOAD, STORE)                                                   \
    static void bag_chunk_##SUF(void *ctx, int64_t begin, int64_t end_, int chunk) {                       \
        bag_ctx *c = ctx;                                                                                  \
        const ST *restrict weight = c->weight, *restrict psw = c->psw;                                     \
        ST *restrict out = c->out;                                                                         \
        int64_t D = c->D;                                                                                  \
        (void)chunk;                                                                                       \
        CT *restrict acc = malloc(sizeof *acc * (size_t)(D ? D : 1));                                      \
        if (!acc) {                                                                                        \
            atomic_store(&c->failed, true);                                                                \
            return;                                                                                        \
        }                                                                                                  \
        for (int64_t b = begin; b < end_; b++) {                                                           \
            int64_t start, end;                                                                            \
            bag_range(c->g, b, &start, &end);                                                              \
            for (int64_t d = 0; d < D; d++) acc[d] = 0;                                                    \
            for (int64_t e = start; e < end; e++) {                                                        \
                const ST *restrict row = weight + kn_index_load(c->indices, c->idx64, e) * D;              \
                if (c->mode == KN_BAG_MAX) {                                                               \
                    if (e == start)                                                                        \
                        for (int64_t d = 0; d < D; d++) acc[d] = LOAD(row[d]);                             \
                    else                                                                                   \
                        for (int64_t d = 0; d < D; d++) {                                                  \
                            CT v = LOAD(row[d]); /* only greater wins: a NaN counts as a first row */       \
                            acc[d] = v > acc[d] ? v : acc[d];                                              \
                        }                                                                                  \
                } else if (psw) {                                                                          \
                    CT w = LOAD(psw[e]);                                                                   \
                    for (int64_t d = 0; d < D; d++) acc[d] += w * LOAD(row[d]);                            \
                } else {                                                                                   \
                    for (int64_t d = 0; d < D; d++) acc[d] += LOAD(row[d]);                                \
                }                                                                                          \
            }                                                                                              \
            CT scale = c->mode == KN_BAG_MEAN && end > start ? (CT)1 / (CT)(end - start) : (CT)1;          \
            ST *restrict o = out + b * D;                                                                  \
            for (int64_t d = 0; d < D; d++) o[d] = STORE(acc[d] * scale);                                  \
        }                                                                                                  \
        free(acc);                                                                                         \
    }
KN_DTYPES_FLOAT(BAG_DTYPE, ~)

kn_status kn_cpu_embedding_bag(kn_node *n) {
    kn_tensor *weight = n->in[0], *indices = n->in[1], *out = n->out[0];
    const kn_attrs_embedding_bag *a = KN_ATTRS(n, embedding_bag);
    int mode = (int)a->mode;
    kn_tensor *offsets = KN_INPUT(n, embedding_bag, offsets);
    kn_tensor *psw = KN_INPUT(n, embedding_bag, per_sample_weights);
    bags g = {.count = out->shape[0], .n_indices = kn_numel(indices), .length = a->length};
    if (offsets) {
        g.offsets = kn_tensor_data(offsets);
        g.offsets_i64 = offsets->dtype == KN_I64;
        g.n_offsets = kn_numel(offsets);
        for (int64_t b = 0; b < g.count; b++) {
            int64_t start, end;
            bag_range(&g, b, &start, &end);
            if (start < 0 || start > end || end > g.n_indices)
                return kn_error(KN_ERR_INDEX,
                                "embedding_bag: bag %lld runs from offset %lld to %lld, outside the %lld indices or backwards",
                                (long long)b, (long long)start, (long long)end, (long long)g.n_indices);
        }
    }
    int64_t V = weight->shape[0], D = weight->shape[1];
    kn_status st = kn_index_check_range(indices, 0, V, "embedding_bag", 0);
    if (st != KN_OK) return st;
    const void *w = kn_tensor_data(weight), *idx = kn_tensor_data(indices);
    const void *pw = psw ? kn_tensor_data(psw) : NULL;
    if (g.count == 0 || D == 0) return KN_OK;
    bag_ctx c = {.weight = w, .indices = idx, .psw = pw, .out = kn_tensor_data(out), .g = &g, .D = D, .mode = mode,
                 .idx64 = indices->dtype == KN_I64};
    kn_chunk_fn fn = NULL;
    switch (weight->dtype) {
#define BAG_CASE(unused, SUF, DT, ST, CT, LOAD, STORE) \
    case DT: fn = bag_chunk_##SUF; break;
        KN_DTYPES_FLOAT(BAG_CASE, ~)
#undef BAG_CASE
    default: return kn_error(KN_ERR_INTERNAL, "embedding_bag: weight dtype %s", kn_dtype_name(weight->dtype));
    }
    kn_parallel_for(g.count, (g.n_indices + g.count) * D / g.count, fn, &c);
    return !atomic_load(&c.failed) ? KN_OK : kn_error(KN_ERR_OOM, "embedding_bag: out of host memory for a row of %lld", (long long)D);
}

/* ---- embedding_backward ------------------------------------------------------------------------
 * One pass: each chunk zeroes its own range of output rows and adds into them the grad rows
 * whose index falls there, in index order (deterministic, no atomics, no dense one-hot). */

typedef struct embed_back_ctx {
    const void *g, *idx;
    void *out;
    int64_t N, D;
    bool idx64;
} embed_back_ctx;

#define EMBED_BACK_DTYPE(unused, SUF, DT, ST, CT, LOAD, STORE)                                         \
    static void embed_back_##SUF(void *ctx, int64_t lo, int64_t hi, int chunk) {                       \
        const embed_back_ctx *c = ctx;                                                                 \
        const ST *restrict g = c->g;                                                                   \
        CT *restrict out = c->out;                                                                     \
        int64_t D = c->D;                                                                              \
        (void)chunk;                                                                                   \
        memset(out + lo * D, 0, sizeof *out * (size_t)((hi - lo) * D));                                \
        for (int64_t i = 0; i < c->N; i++) {                                                           \
            int64_t r = kn_index_load(c->idx, c->idx64, i);                                            \
            if (r < lo || r >= hi) continue;                                                           \
            CT *restrict o = out + r * D;                                                              \
            const ST *restrict s = g + i * D;                                                          \
            for (int64_t d = 0; d < D; d++) o[d] += LOAD(s[d]);                                        \
        }                                                                                              \
    }
KN_DTYPES_FLOAT(EMBED_BACK_DTYPE, ~)

kn_status kn_cpu_embedding_backward(kn_node *n) {
    kn_tensor *grad = n->in[0], *indices = n->in[1], *out = n->out[0];
    int64_t V = KN_ATTRS(n, embedding_backward)->num_weights, D = out->shape[1], N = kn_numel(indices);
    kn_status st = kn_index_check_range(indices, 0, V, "embedding_backward", 0);
    if (st != KN_OK || V * D == 0) return st;
    const void *g = kn_tensor_data(grad), *idx = kn_tensor_data(indices);
    embed_back_ctx c = {.g = g, .idx = idx, .out = kn_tensor_data(out), .N = N, .D = D, .idx64 = indices->dtype == KN_I64};
    kn_chunk_fn fn = NULL;
    switch (grad->dtype) {
#define EMBED_BACK_CASE(unused, SUF, DT, ST, CT, LOAD, STORE) \
    case DT: fn = embed_back_##SUF; break;
        KN_DTYPES_FLOAT(EMBED_BACK_CASE, ~)
#undef EMBED_BACK_CASE
    default: return kn_error(KN_ERR_INTERNAL, "embedding_backward: grad dtype %s", kn_dtype_name(grad->dtype));
    }
    /* every chunk reads all N indices, besides its rows' share of the N * D adds */
    kn_parallel_for(V, D + (N * D + N) / V, fn, &c);
    return KN_OK;
}

/* ---- multinomial ---------------------------------------------------------------------------- */

static kn_status check_row(const double *p, int64_t r, int64_t C, int64_t samples, bool replacement) {
    double total = 0;
    int64_t positive = 0;
    for (int64_t c = 0; c < C; c++) {
        if (!(p[c] >= 0) || isinf(p[c]))
            return kn_error(KN_ERR_ARG, "multinomial: probability %g (row %lld, category %lld) is negative or not finite",
                            p[c], (long long)r, (long long)c);
        total += p[c];
        positive += p[c] > 0;
    }
    if (!(total > 0) && samples > 0)
        return kn_error(KN_ERR_ARG, "multinomial: the probabilities of row %lld sum to 0", (long long)r);
    if (!replacement && positive < samples)
        return kn_error(KN_ERR_ARG,
                        "multinomial: row %lld has %lld nonzero categories, fewer than the %lld samples drawn without replacement",
                        (long long)r, (long long)positive, (long long)samples);
    return KN_OK;
}

/* The category where the running sum of w first exceeds target (the last positive one if
 * rounding carries target to the total). */
static int64_t pick(const double *w, int64_t C, double target) {
    double run = 0;
    int64_t last = 0;
    for (int64_t c = 0; c < C; c++) {
        if (w[c] <= 0) continue;
        run += w[c];
        last = c;
        if (target < run) return c;
    }
    return last;
}

typedef struct multinomial_ctx {
    const double *p;
    int64_t *o;
    int64_t C, S;
    uint64_t seed, off;
    bool replacement;
    atomic_bool failed; /* a chunk could not get its scratch */
} multinomial_ctx;

/* Rows [begin, end): draw s of row r uses counter offset + r * S + s. */
static void multinomial_chunk(void *ctx, int64_t begin, int64_t end, int chunk) {
    multinomial_ctx *m = ctx;
    int64_t C = m->C, S = m->S;
    int64_t *o = m->o;
    (void)chunk;
    /* With replacement: the running sums, searched by bisection. Without: weights that drop
     * each drawn category. */
    double *buf = malloc(sizeof *buf * (size_t)(C ? C : 1));
    if (!buf) {
        atomic_store(&m->failed, true);
        return;
    }
    for (int64_t r = begin; r < end; r++) {
        const double *row = m->p + r * C;
        uint64_t base = m->off + (uint64_t)(r * S);
        if (m->replacement) {
            double run = 0;
            for (int64_t c = 0; c < C; c++) buf[c] = run += row[c];
            for (int64_t s = 0; s < S; s++) {
                double target = kn_philox_uniform(kn_philox(m->seed, base + (uint64_t)s)) * run;
                int64_t lo = 0, hi = C - 1;
                while (lo < hi) { /* first c with buf[c] > target */
                    int64_t mid = lo + (hi - lo) / 2;
                    if (buf[mid] > target) hi = mid;
                    else lo = mid + 1;
                }
                while (lo > 0 && row[lo] <= 0) lo--; /* rounding at the top end */
                o[r * S + s] = lo;
            }
        } else {
            double total = 0;
            for (int64_t c = 0; c < C; c++) total += buf[c] = row[c];
            for (int64_t s = 0; s < S; s++) {
                double u = kn_philox_uniform(kn_philox(m->seed, base + (uint64_t)s));
                int64_t c = pick(buf, C, u * total);
                o[r * S + s] = c;
                buf[c] = 0;
                total = 0; /* summed afresh so that rounding does not build up */
                for (int64_t k = 0; k < C; k++) total += buf[k];
            }
        }
    }
    free(buf);
}

kn_status kn_cpu_multinomial(kn_node *n) {
    kn_tensor *probs = n->in[0], *out = n->out[0];
    const double *p = kn_tensor_data(probs);
    int64_t N = probs->shape[0], C = probs->shape[1], S = KN_ATTRS(n, multinomial)->num_samples;
    bool replacement = KN_ATTRS(n, multinomial)->replacement;
    for (int64_t r = 0; r < N; r++) {
        kn_status st = check_row(p + r * C, r, C, S, replacement);
        if (st != KN_OK) return st;
    }
    multinomial_ctx c = {.p = p, .o = kn_tensor_data(out), .C = C, .S = S, .seed = n->rng_seed, .off = n->rng_offset,
                         .replacement = replacement};
    kn_parallel_for(N, S * (replacement ? 16 : C), multinomial_chunk, &c);
    return !atomic_load(&c.failed) ? KN_OK
                                   : kn_error(KN_ERR_OOM, "multinomial: out of host memory for a row of %lld", (long long)C);
}
