/* Scoring a click model: exact AUC (ties as halves) and log loss, observed and expected
 * under the generator (click_data.h). */
#include <math.h>
#include <stdlib.h>

#include "dlrm/click_data.h"

typedef struct scored {
    double score, pos; /* pos: the label, or the probability of a click */
} scored;

static int by_score(const void *a, const void *b) {
    double x = ((const scored *)a)->score, y = ((const scored *)b)->score;
    return (x > y) - (x < y);
}

/* Pairs (positive i, negative j) weighted by pos_i * (1 - pos_j), i != j, with
 * score_i > score_j counted 1 and ties 1/2, over all such weight. Labels make this the AUC;
 * probabilities its expectation. */
static double weighted_auc(scored *s, int64_t n) {
    qsort(s, (size_t)n, sizeof *s, by_score);
    double neg_below = 0, hits = 0, pos_total = 0, neg_total = 0, self = 0;
    for (int64_t i = 0; i < n;) {
        int64_t end = i;
        double group_pos = 0, group_neg = 0, group_self = 0;
        while (end < n && s[end].score == s[i].score) {
            group_pos += s[end].pos;
            group_neg += 1 - s[end].pos;
            group_self += s[end].pos * (1 - s[end].pos);
            end++;
        }
        /* Within a tie group every ordered pair (i, j), i != j, counts a half. */
        hits += group_pos * neg_below + 0.5 * (group_pos * group_neg - group_self);
        neg_below += group_neg;
        pos_total += group_pos;
        neg_total += group_neg;
        self += group_self;
        i = end;
    }
    double pairs = pos_total * neg_total - self;
    return pairs > 0 ? hits / pairs : NAN;
}

static double auc_of(const double *score, int64_t n, double (*pos)(const void *, int64_t), const void *src) {
    scored *s = n > 0 ? malloc(sizeof *s * (size_t)n) : NULL;
    if (!s) return NAN;
    for (int64_t i = 0; i < n; i++) s[i] = (scored){score[i], pos(src, i)};
    double auc = weighted_auc(s, n);
    free(s);
    return auc;
}

static double label_at(const void *labels, int64_t i) { return ((const float *)labels)[i]; }
static double prob_at(const void *logits, int64_t i) { return 1.0 / (1.0 + exp(-((const double *)logits)[i])); }

double click_auc(const double *score, const float *label, int64_t n) { return auc_of(score, n, label_at, label); }

double click_expected_auc(const double *score, const double *logit, int64_t n) {
    return n < 2 ? NAN : auc_of(score, n, prob_at, logit);
}

/* -log sigmoid(z) = log(1 + e^-z), without overflow. */
static double softplus_neg(double z) { return (z > 0 ? 0 : -z) + log1p(exp(-fabs(z))); }

double click_log_loss(const double *logit, const float *label, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) sum += label[i] ? softplus_neg(logit[i]) : softplus_neg(-logit[i]);
    return n ? sum / (double)n : NAN;
}

double click_expected_log_loss(const double *logit, int64_t n) {
    double sum = 0;
    for (int64_t i = 0; i < n; i++) {
        double p = 1.0 / (1.0 + exp(-logit[i]));
        sum += p * softplus_neg(logit[i]) + (1 - p) * softplus_neg(-logit[i]);
    }
    return n ? sum / (double)n : NAN;
}
