/* Next-token selection (models/lm/sampler.h) against float64 references worked out here from
 * transformers' rules, and the stop-string matcher (models/lm/stop_strings.h). */
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "lm/sampler.h"
#include "lm/stop_strings.h"

static lm_sampling sampling(double temperature, int top_k, double top_p) {
    return (lm_sampling){.temperature = temperature, .top_k = top_k, .top_p = top_p, .repetition_penalty = 1, .seed = 7};
}

/* ---- the float64 reference ------------------------------------------------------------------ */

typedef struct ref_token {
    int id;
    double logit, prob;
} ref_token;

static int ref_compare(const void *pa, const void *pb) {
    const ref_token *a = pa, *b = pb;
    if (a->logit != b->logit) return a->logit > b->logit ? -1 : 1;
    return a->id - b->id;
}

/* transformers' warpers in float64: logits / T, keep logits >= the k-th largest, then keep
 * the sorted tokens whose better-ranked mass is below top_p; probabilities renormalized.
 * Fills ref (V entries, kept ones first, most likely first); returns the kept count. */
static int reference_filter(const float *logits, int V, double T, int top_k, double top_p, ref_token *ref) {
    for (int i = 0; i < V; i++) ref[i] = (ref_token){.id = i, .logit = (double)(logits[i] / (float)T)};
    qsort(ref, (size_t)V, sizeof *ref, ref_compare);
    int kept = V;
    if (top_k > 0 && top_k < V)
        for (kept = top_k; kept < V && ref[kept].logit >= ref[top_k - 1].logit;) kept++;
    double z = 0;
    for (int i = 0; i < kept; i++) z += exp(ref[i].logit - ref[0].logit);
    for (int i = 0; i < kept; i++) ref[i].prob = exp(ref[i].logit - ref[0].logit) / z;
    if (top_p < 1) {
        double mass = 0;
        int n = 0;
        while (n < kept && (n == 0 || mass < top_p)) mass += ref[n++].prob;
        kept = n;
        for (int i = 0; i < kept; i++) ref[i].prob /= mass;
    }
    return kept;
}

/* The sampler's set equals the reference's, in the same order (when it is cut) or as a set. */
static void check_filter(const float *logits, int V, double T, int top_k, double top_p) {
    lm_sampling s = sampling(T, top_k, top_p);
    lm_sampler *sp = lm_sampler_new(&s, V);
    ref_token *ref = malloc((size_t)V * sizeof *ref);
    double *by_id = calloc((size_t)V, sizeof *by_id);
    const lm_candidate *c;
    size_t n = lm_sampler_filter(sp, logits, &c);
    int want = reference_filter(logits, V, T, top_k, top_p, ref);
    CHECK_MSG((int)n == want, "T %g top_k %d top_p %g: %zu tokens kept, the reference keeps %d", T, top_k, top_p, n, want);
    for (int i = 0; i < want; i++) by_id[ref[i].id] = ref[i].prob;
    bool cut = want < V;
    for (size_t i = 0; i < n && (int)n == want; i++) {
        if (cut) CHECK_MSG(c[i].id == ref[i].id, "rank %zu: id %d, the reference has %d", i, c[i].id, ref[i].id);
        double p = by_id[c[i].id];
        CHECK_MSG(fabs(c[i].prob - p) <= 1e-6 * p + 1e-12, "id %d: probability %.9g, the reference %.9g", c[i].id,
                  c[i].prob, p);
    }
    free(by_id);
    free(ref);
    lm_sampler_free(sp);
}

static float *random_logits(int V, double lo, double hi) {
    double *v = malloc((size_t)V * sizeof *v);
    float *l = malloc((size_t)V * sizeof *l);
    rand_fill(v, V, lo, hi);
    for (int i = 0; i < V; i++) l[i] = (float)v[i];
    free(v);
    return l;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static void test_greedy_takes_the_first_of_equal_maxima(void) {
    lm_sampling s = sampling(0, 50, 0.5);
    lm_sampler *sp = lm_sampler_new(&s, 5);
    float logits[5] = {1, 3, -2, 3, 2.5f};
    CHECK(lm_sampler_next(sp, logits, NULL, 0, 0, 0) == 1);
    float all_inf[5] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    CHECK_ERROR(lm_sampler_next(sp, all_inf, NULL, 0, 0, 0) >= 0, KN_ERR_NUMERIC, "-inf");
    lm_sampler_free(sp);
}

static void test_repetition_penalty_divides_positive_and_multiplies_negative_logits_once(void) {
    lm_sampling s = sampling(0, 0, 1);
    s.repetition_penalty = 2;
    lm_sampler *sp = lm_sampler_new(&s, 5);
    float logits[5] = {2, -2, 0.5f, 1, 0};
    int32_t ids[] = {0, 1, 1, 4, 0};
    lm_sampler_penalize(sp, logits, ids, 5);
    const float want[5] = {1, -4, 0.5f, 1, 0};
    for (int i = 0; i < 5; i++) CHECK_MSG(logits[i] == want[i], "logit %d: %g, want %g", i, logits[i], want[i]);
    /* Greedy sees the penalty: id 0 falls from 2 to 1, below id 3's 1.5. */
    float l2[5] = {2, -2, 0.5f, 1.5f, 0};
    CHECK(lm_sampler_next(sp, l2, ids, 5, 0, 0) == 3);
    /* The flags of penalized ids are cleared: the next call penalizes again. */
    float l3[5] = {2, -2, 0.5f, 1, 0};
    lm_sampler_penalize(sp, l3, ids, 1);
    CHECK(l3[0] == 1 && l3[1] == -2);
    lm_sampler_free(sp);
}

static void test_top_k_and_top_p_keep_the_hand_worked_sets(void) {
    /* Probabilities 0.5, 0.3, 0.15, 0.05 (as logits): top_p 0.75 keeps 2 tokens (0.5 < 0.75,
     * then 0.8 reaches it), 0.85 keeps 3, 0.4 keeps 1; top_k 2 keeps 2. */
    float logits[4] = {(float)log(0.15), (float)log(0.5), (float)log(0.05), (float)log(0.3)};
    const struct {
        int top_k;
        double top_p;
        int n;
        int ids[4];
        double probs[4];
    } cases[] = {
        {0, 0.75, 2, {1, 3}, {0.5 / 0.8, 0.3 / 0.8}},
        {0, 0.85, 3, {1, 3, 0}, {0.5 / 0.95, 0.3 / 0.95, 0.15 / 0.95}},
        {0, 0.4, 1, {1}, {1}},
        {2, 1.0, 2, {1, 3}, {0.5 / 0.8, 0.3 / 0.8}},
        {3, 0.6, 2, {1, 3}, {0.5 / 0.8, 0.3 / 0.8}},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        lm_sampling s = sampling(1, cases[k].top_k, cases[k].top_p);
        lm_sampler *sp = lm_sampler_new(&s, 4);
        const lm_candidate *c;
        size_t n = lm_sampler_filter(sp, logits, &c);
        CHECK_MSG((int)n == cases[k].n, "case %zu: %zu kept, want %d", k, n, cases[k].n);
        for (int i = 0; i < cases[k].n && (int)n == cases[k].n; i++)
            CHECK_MSG(c[i].id == cases[k].ids[i] && fabs(c[i].prob - cases[k].probs[i]) < 1e-6,
                      "case %zu rank %d: id %d p %g, want id %d p %g", k, i, c[i].id, c[i].prob, cases[k].ids[i],
                      cases[k].probs[i]);
        lm_sampler_free(sp);
    }
}

static void test_top_k_keeps_every_token_tied_with_the_kth(void) {
    float logits[6] = {1, 4, 2, 2, 0, 2};
    lm_sampling s = sampling(1, 2, 1);
    lm_sampler *sp = lm_sampler_new(&s, 6);
    const lm_candidate *c;
    size_t n = lm_sampler_filter(sp, logits, &c);
    CHECK(n == 4);
    int want[4] = {1, 2, 3, 5};
    for (size_t i = 0; i < n && n == 4; i++) CHECK_MSG(c[i].id == want[i], "rank %zu: id %d, want %d", i, c[i].id, want[i]);
    lm_sampler_free(sp);
    check_filter(logits, 6, 1, 2, 1);
}

static void test_filters_match_the_float64_reference_on_random_logits(void) {
    const int sizes[] = {7, 100, 3000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        int V = sizes[i];
        float *l = random_logits(V, -6, 6);
        check_filter(l, V, 1, 0, 1);      /* plain softmax */
        check_filter(l, V, 0.6, 0, 1);    /* temperature */
        check_filter(l, V, 1.7, 5, 1);    /* top-k */
        check_filter(l, V, 0.8, 0, 0.9);  /* top-p over everything */
        check_filter(l, V, 1.2, 40, 0.7); /* both */
        check_filter(l, V, 1, V + 3, 0.999);
        free(l);
    }
}

static void test_top_p_over_a_large_vocabulary_matches_the_reference(void) {
    int V = 150000;
    float *l = random_logits(V, -3, 3);
    l[17] = 12; /* a peak: the set is small, found without sorting everything */
    l[90000] = 11;
    check_filter(l, V, 1, 0, 0.9);
    check_filter(l, V, 3, 0, 0.5); /* flat: most of the vocabulary */
    check_filter(l, V, 1, 50, 0.95);
    free(l);
}

static void test_seeded_draws_follow_the_softmax_probabilities(void) {
    enum { V = 8, DRAWS = 40000 };
    float logits[V] = {0.3f, 1.2f, -0.5f, 2.0f, 0.0f, -1.5f, 1.0f, 0.7f};
    double T = 0.8, p[V], z = 0;
    for (int i = 0; i < V; i++) z += p[i] = exp((double)(logits[i] / (float)T));
    for (int i = 0; i < V; i++) p[i] /= z;
    lm_sampling s = sampling(T, 0, 1);
    lm_sampler *sp = lm_sampler_new(&s, V);
    int counts[V] = {0};
    for (int d = 0; d < DRAWS; d++) {
        float row[V];
        memcpy(row, logits, sizeof row);
        int32_t id = lm_sampler_next(sp, row, NULL, 0, d % 3, d / 3);
        CHECK(id >= 0 && id < V);
        if (id >= 0 && id < V) counts[id]++;
    }
    /* Pearson's chi-square with 7 degrees of freedom: P(X > 40) is about 1e-6. */
    double chi2 = 0;
    for (int i = 0; i < V; i++) chi2 += pow(counts[i] - DRAWS * p[i], 2) / (DRAWS * p[i]);
    CHECK_MSG(chi2 < 40, "chi-square %.2f over %d draws: the draws do not follow the probabilities", chi2, DRAWS);
    lm_sampler_free(sp);

    /* With top-k 3 only the three best are drawn, in their renormalized proportions. */
    s = sampling(T, 3, 1);
    sp = lm_sampler_new(&s, V);
    memset(counts, 0, sizeof counts);
    for (int d = 0; d < DRAWS; d++) {
        float row[V];
        memcpy(row, logits, sizeof row);
        counts[lm_sampler_next(sp, row, NULL, 0, 0, d)]++;
    }
    double top3 = p[3] + p[1] + p[6];
    CHECK(counts[0] + counts[2] + counts[4] + counts[5] + counts[7] == 0);
    chi2 = 0;
    const int best[3] = {3, 1, 6};
    for (int i = 0; i < 3; i++) {
        double expected = DRAWS * p[best[i]] / top3;
        chi2 += pow(counts[best[i]] - expected, 2) / expected;
    }
    CHECK_MSG(chi2 < 30, "top-k draws: chi-square %.2f", chi2);
    lm_sampler_free(sp);
}

static void test_the_same_seed_gives_the_same_ids(void) {
    int V = 500;
    float *l = random_logits(V, -2, 2);
    int32_t a[64], b[64], other[64];
    for (int pass = 0; pass < 3; pass++) {
        lm_sampling s = sampling(1, 0, 0.95);
        s.seed = pass == 2 ? 8 : 7;
        lm_sampler *sp = lm_sampler_new(&s, V);
        float *row = malloc((size_t)V * sizeof *row);
        for (int step = 0; step < 64; step++) {
            memcpy(row, l, (size_t)V * sizeof *row);
            (pass == 0 ? a : pass == 1 ? b : other)[step] = lm_sampler_next(sp, row, NULL, 0, 1, step);
        }
        free(row);
        lm_sampler_free(sp);
    }
    CHECK(memcmp(a, b, sizeof a) == 0);
    CHECK(memcmp(a, other, sizeof a) != 0);
    for (int i = 0; i < 1000; i++) {
        double u = lm_sampler_uniform(3, (uint64_t)i % 4, (uint64_t)i);
        CHECK(u >= 0 && u < 1);
    }
    CHECK(lm_sampler_uniform(3, 0, 5) == lm_sampler_uniform(3, 0, 5));
    CHECK(lm_sampler_uniform(3, 0, 5) != lm_sampler_uniform(3, 1, 5));
    free(l);
}

static void test_bad_settings_are_refused(void) {
    lm_sampling bad[] = {sampling(-1, 0, 1), sampling(1, -1, 1), sampling(1, 0, 0), sampling(1, 0, 1.5)};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) CHECK_ERROR(lm_sampler_new(&bad[i], 10) != NULL, KN_ERR_ARG, "sampling");
    lm_sampling s = sampling(1, 0, 1);
    s.repetition_penalty = 0;
    CHECK_ERROR(lm_sampler_new(&s, 10) != NULL, KN_ERR_ARG, "repetition_penalty");
    s.repetition_penalty = 1;
    CHECK_ERROR(lm_sampler_new(&s, 0) != NULL, KN_ERR_ARG, "vocabulary");
}

/* ---- stop strings --------------------------------------------------------------------------- */

/* Pushes the pieces; returns the concatenated output (static) and whether it stopped. */
static const char *stream(lm_stop_matcher *m, const char *const *pieces, int n, bool *stopped) {
    static char all[256];
    all[0] = '\0';
    *stopped = false;
    for (int i = 0; i < n; i++) {
        const char *out;
        size_t len;
        *stopped = lm_stop_push(m, pieces[i], strlen(pieces[i]), &out, &len);
        strncat(all, out, len);
    }
    size_t len;
    const char *rest = lm_stop_flush(m, &len);
    strncat(all, rest, len);
    return all;
}

static void test_stop_strings_spanning_pieces_end_the_text(void) {
    const char *stops[] = {"lo w", "###"};
    lm_stop_matcher *m = lm_stop_matcher_new(stops, 2);
    const char *pieces[] = {"Hel", "lo", " wo", "rld"};
    bool stopped;
    CHECK(strcmp(stream(m, pieces, 4, &stopped), "Hel") == 0);
    CHECK(stopped && lm_stop_seen(m));
    lm_stop_matcher_free(m);

    /* The earliest of two stop strings wins, and overlapping partial matches are tracked. */
    const char *two[] = {"aab", "xa"};
    m = lm_stop_matcher_new(two, 2);
    const char *p2[] = {"z", "aa", "ab", "xa"};
    CHECK(strcmp(stream(m, p2, 4, &stopped), "za") == 0);
    CHECK(stopped);
    lm_stop_matcher_free(m);

    /* Without a stop string the text passes through whole. */
    m = lm_stop_matcher_new(NULL, 0);
    const char *p3[] = {"a", "b", "c"};
    CHECK(strcmp(stream(m, p3, 3, &stopped), "abc") == 0 && !stopped);
    lm_stop_matcher_free(m);
    CHECK_ERROR(lm_stop_matcher_new((const char *[]){""}, 1) != NULL, KN_ERR_ARG, "empty");
}

static void test_streaming_holds_back_only_a_possible_stop_start(void) {
    const char *stops[] = {"END"};
    lm_stop_matcher *m = lm_stop_matcher_new(stops, 1);
    const char *out;
    size_t len;
    CHECK(!lm_stop_push(m, "abcE", 4, &out, &len));
    CHECK(len == 3 && memcmp(out, "abc", 3) == 0);           /* "E" may begin END */
    CHECK(!lm_stop_push(m, "Nx", 2, &out, &len));
    CHECK(len == 3 && memcmp(out, "ENx", 3) == 0);           /* it did not */
    CHECK(!lm_stop_push(m, "yEN", 3, &out, &len));
    CHECK(len == 1 && memcmp(out, "y", 1) == 0);
    CHECK(lm_stop_push(m, "D and more", 10, &out, &len));
    CHECK(len == 0);
    CHECK(lm_stop_push(m, "ignored", 7, &out, &len) && len == 0);
    lm_stop_flush(m, &len);
    CHECK(len == 0);
    lm_stop_matcher_free(m);

    /* Held text that never completes a stop string comes out at the end. */
    const char *xyz[] = {"xyz"};
    m = lm_stop_matcher_new(xyz, 1);
    CHECK(!lm_stop_push(m, "ax", 2, &out, &len) && len == 1);
    out = lm_stop_flush(m, &len);
    CHECK(len == 1 && out[0] == 'x');
    lm_stop_matcher_free(m);
}

int main(void) {
    RUN(test_greedy_takes_the_first_of_equal_maxima);
    RUN(test_repetition_penalty_divides_positive_and_multiplies_negative_logits_once);
    RUN(test_top_k_and_top_p_keep_the_hand_worked_sets);
    RUN(test_top_k_keeps_every_token_tied_with_the_kth);
    RUN(test_filters_match_the_float64_reference_on_random_logits);
    RUN(test_top_p_over_a_large_vocabulary_matches_the_reference);
    RUN(test_seeded_draws_follow_the_softmax_probabilities);
    RUN(test_the_same_seed_gives_the_same_ids);
    RUN(test_bad_settings_are_refused);
    RUN(test_stop_strings_spanning_pieces_end_the_text);
    RUN(test_streaming_holds_back_only_a_possible_stop_start);
    return test_summary();
}
