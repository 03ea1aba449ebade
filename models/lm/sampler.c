/* Next-token selection on the host (sampler.h). Top-k and top-p never sort the whole
 * vocabulary: a selection moves the best candidates to the front and only those are sorted. */
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

/* ---- ordering and selection --------------------------------------------------------------- */

/* The total order of candidates: higher logit first, then lower id. */
static inline bool ranks_before(const lm_candidate *a, const lm_candidate *b) {
    return a->logit > b->logit || (a->logit == b->logit && a->id < b->id);
}

static int compare_rank(const void *pa, const void *pb) {
    const lm_candidate *a = pa, *b = pb;
    return ranks_before(a, b) ? -1 : ranks_before(b, a) ? 1 : 0;
}

static inline void swap(lm_candidate *a, lm_candidate *b) {
    lm_candidate t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges c[0..n) so that its first m entries are the m best (in no order): quickselect
 * with a median-of-three pivot, expected O(n). */
static void select_best(lm_candidate *c, size_t n, size_t m) {
    size_t lo = 0, hi = n; /* the boundary m lies in [lo, hi) */
    while (m > lo && m < hi && hi - lo > 1) {
        size_t mid = lo + (hi - lo) / 2, last = hi - 1;
        if (ranks_before(&c[mid], &c[lo])) swap(&c[mid], &c[lo]);
        if (ranks_before(&c[last], &c[lo])) swap(&c[last], &c[lo]);
        if (ranks_before(&c[last], &c[mid])) swap(&c[last], &c[mid]);
        swap(&c[mid], &c[last]); /* the median is the pivot, parked at the end */
        lm_candidate pivot = c[last];
        size_t store = lo;
        for (size_t i = lo; i < last; i++)
            if (ranks_before(&c[i], &pivot)) swap(&c[i], &c[store++]);
        swap(&c[store], &c[last]);
        /* c[lo..store) rank before the pivot at c[store]; the rest after it. */
        if (store == m || store + 1 == m) return;
        if (store > m) hi = store;
        else lo = store + 1;
    }
}

/* Sorts the best m of c[from..n) into c[from..from+m) (c[0..from) is already in place). */
static void take_best_sorted(lm_candidate *c, size_t from, size_t n, size_t m) {
    select_best(c + from, n - from, m);
    qsort(c + from, m, sizeof *c, compare_rank);
}

/* ---- filtering ----------------------------------------------------------------------------- */

/* Probabilities of c[0..n) under the normalizer of the whole set c[0..total). */
static void softmax_into(lm_candidate *c, size_t n, size_t total) {
    float max = -INFINITY;
    for (size_t i = 0; i < total; i++) max = c[i].logit > max ? c[i].logit : max;
    double z = 0;
    for (size_t i = 0; i < total; i++) z += exp((double)c[i].logit - max);
    for (size_t i = 0; i < n; i++) c[i].prob = exp((double)c[i].logit - max) / z;
}

/* How many of the sorted candidates top-p keeps: those whose better-ranked mass is below
 * top_p (transformers removes a token once the mass before it reaches top_p), at least one. */
static size_t top_p_count(const lm_candidate *c, size_t n, double top_p) {
    double mass = 0;
    size_t keep = 0;
    while (keep < n && (keep == 0 || mass < top_p)) mass += c[keep++].prob;
    return keep;
}

static void renormalize(lm_candidate *c, size_t n) {
    double z = 0;
    for (size_t i = 0; i < n; i++) z += c[i].prob;
    for (size_t i = 0; i < n; i++) c[i].prob /= z;
}

/* Top-k: the k best and every candidate tied with the k-th (transformers keeps logits >= the
 * k-th largest), sorted. */
static size_t keep_top_k(lm_candidate *c, size_t n, size_t k) {
    take_best_sorted(c, 0, n, k);
    float kth = c[k - 1].logit;
    size_t kept = k;
    for (size_t i = k; i < n; i++)
        if (c[i].logit >= kth) swap(&c[i], &c[kept++]);
    if (kept > k) qsort(c, kept, sizeof *c, compare_rank);
    return kept;
}

/* Top-p over the whole vocabulary: sorts a growing prefix of the best until it holds top_p
 * of the mass (a peaked distribution needs a few dozen tokens, not V). */
static size_t keep_top_p_of_all(lm_candidate *c, size_t n, double top_p) {
    size_t sorted = 0, want = 64;
    double mass = 0;
    for (;;) {
        if (want > n) want = n;
        take_best_sorted(c, sorted, n, want - sorted);
        softmax_into(c, want, n);
        for (size_t i = sorted; i < want; i++) mass += c[i].prob;
        sorted = want;
        if (mass >= top_p || sorted == n) return top_p_count(c, sorted, top_p);
        want *= 4;
    }
}

size_t lm_sampler_filter(lm_sampler *s, const float *logits, const lm_candidate **out) {
    size_t n = (size_t)s->V;
    lm_candidate *c = s->cand;
    float t = s->cfg.temperature > 0 ? (float)s->cfg.temperature : 1.0f;
    bool finite = false;
    for (size_t i = 0; i < n; i++) {
        float l = logits[i] / t; /* in float, as torch divides */
        c[i] = (lm_candidate){.id = (int32_t)i, .logit = isnan(l) ? -INFINITY : l};
        finite |= isfinite(l);
    }
    if (!finite) return kn_set_error(KN_ERR_NUMERIC, "sampling: no logit is finite"), 0;
    size_t k = s->cfg.top_k > 0 && (size_t)s->cfg.top_k < n ? (size_t)s->cfg.top_k : 0;
    bool top_p = s->cfg.top_p < 1;
    size_t kept = n;
    if (k) {
        kept = keep_top_k(c, n, k);
        softmax_into(c, kept, kept);
        if (top_p) kept = top_p_count(c, kept, s->cfg.top_p);
    } else if (top_p) {
        kept = keep_top_p_of_all(c, n, s->cfg.top_p);
    } else {
        softmax_into(c, n, n);
    }
    if (kept < n) renormalize(c, kept);
    *out = c;
    return kept;
}

/* ---- choosing ------------------------------------------------------------------------------ */

static uint64_t mix64(uint64_t z) { /* SplitMix64's finalizer */
    z += 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double lm_sampler_uniform(uint64_t seed, uint64_t row, uint64_t step) {
    uint64_t h = mix64(mix64(mix64(seed) ^ row) ^ step);
    return (double)(h >> 11) * 0x1.0p-53;
}

static int32_t argmax(const float *logits, int64_t V) {
    int64_t best = -1;
    for (int64_t i = 0; i < V; i++)
        if (!isnan(logits[i]) && (best < 0 || logits[i] > logits[best])) best = i;
    if (best < 0 || logits[best] == -INFINITY) return kn_set_error(KN_ERR_NUMERIC, "sampling: no logit is finite"), -1;
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
