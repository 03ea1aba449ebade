/* Next-token selection on the host (sampler.h). Top-k and top-p never sort the whole
 * vocabulary: one scan keeps the best few in a heap and only those are sorted. */
#include "lm/sampler.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lm_sampler {
    lm_sampling cfg;
    int64_t V;
    uint8_t *seen;       /* V flags, all clear between calls: ids already penalized */
    lm_candidate *cand;  /* V candidates */
};

lm_sampler *lm_sampler_new(const lm_sampling *s, int64_t vocab) {
    const char *bad = vocab < 1 || vocab > INT32_MAX ? "the vocabulary size must lie in [1, 2^31)"
                      : !(s->temperature >= 0) ? "temperature must not be negative"
                      : s->top_k < 0 ? "top_k must not be negative"
                      : !(s->top_p > 0 && s->top_p <= 1) ? "top_p must lie in (0, 1]"
                      : !(s->repetition_penalty > 0) ? "repetition_penalty must be positive"
                      : NULL;
    if (bad) return kn_set_error(KN_ERR_ARG, "sampling: %s", bad), NULL;
    lm_sampler *m = calloc(1, sizeof *m);
    if (m) {
        m->cfg = *s;
        m->V = vocab;
        m->seen = calloc((size_t)vocab, 1);
        m->cand = malloc((size_t)vocab * sizeof *m->cand);
    }
    if (!m || !m->seen || !m->cand) {
        lm_sampler_free(m);
        return kn_set_error(KN_ERR_OOM, "sampling: out of host memory for a vocabulary of %lld", (long long)vocab), NULL;
    }
    return m;
}

void lm_sampler_free(lm_sampler *s) {
    if (!s) return;
    free(s->seen);
    free(s->cand);
    free(s);
}

void lm_sampler_penalize(lm_sampler *s, float *logits, const int32_t *ids, size_t n_ids) {
    float p = (float)s->cfg.repetition_penalty;
    if (p == 1.0f) return;
    for (size_t i = 0; i < n_ids; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= s->V || s->seen[id]) continue;
        s->seen[id] = 1;
        logits[id] = logits[id] < 0 ? logits[id] * p : logits[id] / p;
    }
    for (size_t i = 0; i < n_ids; i++)
        if (ids[i] >= 0 && ids[i] < s->V) s->seen[ids[i]] = 0;
}

/* ---- ranking ------------------------------------------------------------------------------- */

/* The total order of candidates: higher logit first, then lower id. */
static int compare_rank(const void *pa, const void *pb) {
    const lm_candidate *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return (a->id > b->id) - (a->id < b->id);
}

/* The processed logit of id i: divided by the temperature in float (as torch divides); NaN
 * ranks last. */
static inline float processed(const float *logits, size_t i, float t) {
    float l = logits[i] / t;
    return isnan(l) ? -INFINITY : l;
}

/* The m best of the n processed logits (m <= n) into c[0..m), sorted. A scan in id order with
 * a min-heap of the m best so far: a later id with an equal logit ranks after every kept one,
 * so a strict comparison with the heap's worst is the whole test, and most ids cost one. */
static void best_sorted(const float *logits, size_t n, float t, lm_candidate *c, size_t m) {
    for (size_t i = 0; i < n; i++) {
        float l = processed(logits, i, t);
        size_t k;
        if (i < m) { /* sift up: the heap's worst (lowest logit, then highest id) at the root */
            for (k = i; k > 0 && compare_rank(&(lm_candidate){.id = (int32_t)i, .logit = l}, &c[(k - 1) / 2]) > 0; k = (k - 1) / 2)
                c[k] = c[(k - 1) / 2];
        } else if (l > c[0].logit) { /* replaces the root; sift down */
            for (k = 0;;) {
                size_t child = 2 * k + 1;
                if (child >= m) break;
                if (child + 1 < m && compare_rank(&c[child + 1], &c[child]) > 0) child++;
                if (compare_rank(&c[child], &(lm_candidate){.id = (int32_t)i, .logit = l}) <= 0) break;
                c[k] = c[child];
                k = child;
            }
        } else {
            continue;
        }
        c[k] = (lm_candidate){.id = (int32_t)i, .logit = l};
    }
    qsort(c, m, sizeof *c, compare_rank);
}

/* ---- filtering ----------------------------------------------------------------------------- */

/* The largest processed logit and the softmax normalizer sum(exp(l - max)) over all n. */
static double normalizer(const float *logits, size_t n, float t, float *max_out) {
    float max = -INFINITY;
    for (size_t i = 0; i < n; i++) {
        float l = processed(logits, i, t);
        max = l > max ? l : max;
    }
    double z = 0;
    for (size_t i = 0; i < n; i++) z += expf(processed(logits, i, t) - max);
    *max_out = max;
    return z;
}

static void set_probs(lm_candidate *c, size_t n, float max, double z) {
    for (size_t i = 0; i < n; i++) c[i].prob = expf(c[i].logit - max) / z;
}

/* How many of the sorted candidates top-p keeps: those whose better-ranked mass is below
 * top_p (transformers removes a token once the mass before it reaches top_p), at least one. */
static size_t top_p_count(const lm_candidate *c, size_t n, double top_p) {
    double mass = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || mass < top_p)) mass += c[keep++].prob;
    return keep;
}

/* Top-k: the k best and every logit tied with the k-th (transformers keeps logits >= the k-th
 * largest), sorted, with their probabilities among themselves. */
static size_t keep_top_k(const float *logits, size_t n, float t, size_t k, lm_candidate *c) {
    best_sorted(logits, n, t, c, k);
    float kth = c[k - 1].logit;
    size_t kept = k;
    for (size_t i = 0; i < n; i++) { /* ties with the k-th that the heap turned away */
        float l = processed(logits, i, t);
        if (l == kth && (int32_t)i > c[k - 1].id) c[kept++] = (lm_candidate){.id = (int32_t)i, .logit = l};
    }
    double z = 0;
    for (size_t i = 0; i < kept; i++) z += expf(c[i].logit - c[0].logit);
    set_probs(c, kept, c[0].logit, z);
    return kept;
}

/* Top-p over the whole vocabulary: the best 64, 256, 1024... until they hold top_p of the
 * mass (a peaked distribution needs a few dozen tokens, not a sort of V). */
static size_t keep_top_p_of_all(const float *logits, size_t n, float t, double top_p, lm_candidate *c) {
    float max;
    double z = normalizer(logits, n, t, &max);
    for (size_t m = 64;; m *= 4) {
        if (m > n) m = n;
        best_sorted(logits, n, t, c, m);
        set_probs(c, m, max, z);
        double mass = 0;
        for (size_t i = 0; i < m; i++) mass += c[i].prob;
        if (mass >= top_p || m == n) return top_p_count(c, m, top_p);
    }
}

static void renormalize(lm_candidate *c, size_t n) {
    double z = 0;
    for (size_t i = 0; i < n; i++) z += c[i].prob;
    for (size_t i = 0; i < n; i++) c[i].prob /= z;
}

size_t lm_sampler_filter(lm_sampler *s, const float *logits, const lm_candidate **out) {
    size_t n = (size_t)s->V;
    lm_candidate *c = s->cand;
    float t = s->cfg.temperature > 0 ? (float)s->cfg.temperature : 1.0f, max;
    size_t k = s->cfg.top_k > 0 && (size_t)s->cfg.top_k < n ? (size_t)s->cfg.top_k : 0, kept = n;
    bool top_p = s->cfg.top_p < 1;
    if (k) {
        kept = keep_top_k(logits, n, t, k, c);
        if (c[0].logit == -INFINITY) kept = 0;
        else if (top_p) kept = top_p_count(c, kept, s->cfg.top_p);
    } else if (top_p) {
        kept = keep_top_p_of_all(logits, n, t, s->cfg.top_p, c);
        if (c[0].logit == -INFINITY) kept = 0;
    } else { /* every id, in id order */
        double z = normalizer(logits, n, t, &max);
        for (size_t i = 0; i < n && max > -INFINITY; i++) c[i] = (lm_candidate){.id = (int32_t)i, .logit = processed(logits, i, t)};
        if (max == -INFINITY) kept = 0;
        else set_probs(c, n, max, z);
    }
    if (!kept) return kn_set_error(KN_ERR_NUMERIC, "sampling: every logit is -inf or NaN"), 0;
    if (kept < n) renormalize(c, kept);
    *out = c;
    return kept;
}

/* ---- choosing ------------------------------------------------------------------------------ */

double lm_sampler_uniform(uint64_t seed, uint64_t row, uint64_t step) {
    uint64_t h = kn_mix64(kn_mix64(kn_mix64(seed) ^ row) ^ step);
    return (double)(h >> 11) * 0x1.0p-53;
}

static int32_t argmax(const float *logits, int64_t V) {
    int64_t best = -1;
    for (int64_t i = 0; i < V; i++)
        if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    if (best < 0 || logits[best] == -INFINITY) return kn_set_error(KN_ERR_NUMERIC, "sampling: every logit is -inf or NaN"), -1;
    return (int32_t)best;
}

int32_t lm_sampler_next(lm_sampler *s, float *logits, const int32_t *ids, size_t n_ids, int row, int64_t step) {
    lm_sampler_penalize(s, logits, ids, n_ids);
    if (s->cfg.temperature == 0) return argmax(logits, s->V);
    const lm_candidate *c;
    size_t n = lm_sampler_filter(s, logits, &c);
    if (!n) return -1;
    double u = lm_sampler_uniform(s->cfg.seed, (uint64_t)row, (uint64_t)step), mass = 0;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (c[i].prob <= 0) continue;
        last = i;
        mass += c[i].prob;
        if (u < mass) return c[i].id;
    }
    return c[last].id; /* rounding left u above the total */
}
