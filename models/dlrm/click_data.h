/* Synthetic click logs with a planted signal, for training and testing DLRM, and the metrics
 * used to score a click model (exact AUC and log loss).
 *
 * Each sample has n_dense standard-normal dense features and, per sparse feature k, a bag of
 * bag_len[k] category ids drawn from a power law over table_sizes[k] rows (a few popular ids,
 * a long tail, as in real logs). Its click logit is a hidden model drawn from the seed:
 *
 *     z = bias + sum_i a_i x_i + c x_0 x_1 + sum_k beta_k(bag_k) + sum_(k,l) <u_k(bag_k), u_l(bag_l)>
 *
 * (beta and the latent vectors u averaged over a bag; (k, l) runs over the neighbouring pairs
 * of sparse features), and the label is a Bernoulli draw with probability sigmoid(z). The
 * same seed gives the same logs on every machine (splitmix64 and Box-Muller, no libm
 * randomness). */
#ifndef KILN_MODELS_DLRM_CLICK_DATA_H
#define KILN_MODELS_DLRM_CLICK_DATA_H

#include <kiln/kiln.h>

#include "dlrm/dlrm.h"

#define CLICK_MAX_DENSE 64

typedef struct click_config {
    int64_t n_samples;
    int n_dense;
    int n_tables;
    int64_t table_sizes[DLRM_MAX_TABLES];
    int bag_len[DLRM_MAX_TABLES];
    uint64_t seed;
} click_config;

typedef struct click_data {
    click_config cfg;
    float *dense;                      /* [n, n_dense] */
    int64_t *sparse[DLRM_MAX_TABLES];  /* per table [n, bag_len[k]] */
    float *label;                      /* [n], 0 or 1 */
    double *logit;                     /* [n], the hidden model's logit: the Bayes-optimal score */
} click_data;

/* The logs of cfg; NULL with an error on a bad config or out-of-memory. */
click_data *click_data_generate(const click_config *cfg);
void click_data_free(click_data *d);

/* Area under the ROC curve of scores against 0/1 labels, exactly: the Mann-Whitney statistic
 * with tied scores counted as half (average ranks). NaN when a class is missing. */
double click_auc(const double *score, const float *label, int64_t n);
/* The AUC a scorer reaches in expectation over labels drawn with probabilities sigmoid(logit):
 * with score = logit this is the Bayes-optimal AUC on these samples. NaN when n < 2. */
double click_expected_auc(const double *score, const double *logit, int64_t n);
/* Mean binary cross-entropy of logits against labels (computed stably from the logits). */
double click_log_loss(const double *logit, const float *label, int64_t n);
/* Its expectation over labels drawn from sigmoid(logit): the mean binary entropy. */
double click_expected_log_loss(const double *logit, int64_t n);

#endif
