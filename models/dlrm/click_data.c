/* The synthetic click-log generator (click_data.h). */
#include "dlrm/click_data.h"

#include <math.h>
#include <stdlib.h>

#define LATENT 3 /* width of the hidden per-category vectors of the pairwise terms */

typedef struct rng {
    uint64_t state;
} rng;

static uint64_t next_u64(rng *r) {
    uint64_t x = r->state;
    r->state += 0x9e3779b97f4a7c15ull; /* SplitMix64: a counter, mixed */
    return kn_mix64(x);
}

static double uniform01(rng *r) { return (double)(next_u64(r) >> 11) * 0x1.0p-53; } /* [0, 1) */

static double gaussian(rng *r) {
    double u = 1.0 - uniform01(r), v = uniform01(r); /* u in (0, 1] */
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* The hidden model: per-table category biases and latent vectors, dense weights. */
typedef struct hidden_model {
    double bias, a[CLICK_MAX_DENSE], cross;
    double *beta[DLRM_MAX_TABLES];          /* [rows] */
    double *u[DLRM_MAX_TABLES];             /* [rows, LATENT] */
} hidden_model;

static void hidden_free(hidden_model *h, int n_tables) {
    for (int k = 0; k < n_tables; k++) {
        free(h->beta[k]);
        free(h->u[k]);
    }
}

static bool hidden_draw(hidden_model *h, const click_config *c, rng *r) {
    h->bias = -1.3;
    for (int i = 0; i < c->n_dense; i++) h->a[i] = i < 4 ? 0.6 * gaussian(r) : 0; /* the rest is noise */
    h->cross = c->n_dense >= 2 ? 0.5 : 0;
    for (int k = 0; k < c->n_tables; k++) {
        int64_t rows = c->table_sizes[k];
        h->beta[k] = malloc(sizeof(double) * (size_t)rows);
        h->u[k] = malloc(sizeof(double) * (size_t)rows * LATENT);
        if (!h->beta[k] || !h->u[k]) return false;
        for (int64_t j = 0; j < rows; j++) {
            h->beta[k][j] = 0.5 * gaussian(r);
            for (int d = 0; d < LATENT; d++) h->u[k][j * LATENT + d] = 0.8 * gaussian(r);
        }
    }
    return true;
}

/* Power law over [0, rows): id = floor(rows * v^2), so low ids are the popular ones. */
static int64_t draw_category(rng *r, int64_t rows) {
    double v = uniform01(r);
    int64_t id = (int64_t)((double)rows * v * v);
    return id < rows ? id : rows - 1;
}

static double sample_logit(const hidden_model *h, const click_config *c, const float *x, int64_t *const *bags) {
    double z = h->bias + h->cross * (c->n_dense >= 2 ? (double)x[0] * x[1] : 0);
    for (int i = 0; i < c->n_dense; i++) z += h->a[i] * x[i];
    double u[DLRM_MAX_TABLES][LATENT] = {{0}};
    for (int k = 0; k < c->n_tables; k++) {
        for (int b = 0; b < c->bag_len[k]; b++) {
            int64_t id = bags[k][b];
            z += h->beta[k][id] / c->bag_len[k];
            for (int d = 0; d < LATENT; d++) u[k][d] += h->u[k][id * LATENT + d] / c->bag_len[k];
        }
    }
    for (int k = 0; k + 1 < c->n_tables; k++)
        for (int d = 0; d < LATENT; d++) z += u[k][d] * u[k + 1][d];
    return z;
}

static kn_status check_config(const click_config *c) {
    if (c->n_samples < 1) return kn_set_error(KN_ERR_ARG, "click logs: %lld samples", (long long)c->n_samples);
    if (c->n_dense < 0 || c->n_dense > CLICK_MAX_DENSE)
        return kn_set_error(KN_ERR_ARG, "click logs: %d dense features (0 to %d)", c->n_dense, CLICK_MAX_DENSE);
    if (c->n_tables < 0 || c->n_tables > DLRM_MAX_TABLES)
        return kn_set_error(KN_ERR_ARG, "click logs: %d sparse features (0 to %d)", c->n_tables, DLRM_MAX_TABLES);
    for (int k = 0; k < c->n_tables; k++)
        if (c->table_sizes[k] < 1 || c->bag_len[k] < 1)
            return kn_set_error(KN_ERR_ARG, "click logs: sparse feature %d has %lld rows and bags of %d", k,
                                (long long)c->table_sizes[k], c->bag_len[k]);
    return KN_OK;
}

click_data *click_data_generate(const click_config *cfg) {
    if (check_config(cfg) != KN_OK) return NULL;
    int64_t n = cfg->n_samples;
    click_data *d = calloc(1, sizeof *d);
    hidden_model h = {0};
    rng model_rng = {cfg->seed ^ 0x5eed0f0c11c4ull}, data_rng = {cfg->seed};
    bool ok = d != NULL;
    if (ok) {
        d->cfg = *cfg;
        d->dense = malloc(sizeof(float) * (size_t)(n * (cfg->n_dense ? cfg->n_dense : 1)));
        d->label = malloc(sizeof(float) * (size_t)n);
        d->logit = malloc(sizeof(double) * (size_t)n);
        ok = d->dense && d->label && d->logit;
        for (int k = 0; ok && k < cfg->n_tables; k++) ok = (d->sparse[k] = malloc(sizeof(int64_t) * (size_t)(n * cfg->bag_len[k]))) != NULL;
    }
    ok = ok && hidden_draw(&h, cfg, &model_rng);
    for (int64_t s = 0; ok && s < n; s++) {
        float *x = d->dense + s * cfg->n_dense;
        int64_t *bags[DLRM_MAX_TABLES];
        for (int i = 0; i < cfg->n_dense; i++) x[i] = (float)gaussian(&data_rng);
        for (int k = 0; k < cfg->n_tables; k++) {
            bags[k] = d->sparse[k] + s * cfg->bag_len[k];
            for (int b = 0; b < cfg->bag_len[k]; b++) bags[k][b] = draw_category(&data_rng, cfg->table_sizes[k]);
        }
        d->logit[s] = sample_logit(&h, cfg, x, bags);
        d->label[s] = uniform01(&data_rng) < 1.0 / (1.0 + exp(-d->logit[s])) ? 1.0f : 0.0f;
    }
    hidden_free(&h, cfg->n_tables);
    if (!ok) {
        click_data_free(d);
        kn_set_error(KN_ERR_OOM, "click logs: out of host memory for %lld samples", (long long)n);
        return NULL;
    }
    return d;
}

void click_data_free(click_data *d) {
    if (!d) return;
    free(d->dense);
    free(d->label);
    free(d->logit);
    for (int k = 0; k < d->cfg.n_tables; k++) free(d->sparse[k]);
    free(d);
}
