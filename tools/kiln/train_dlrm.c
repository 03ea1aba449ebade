/* `kiln train dlrm`: DLRM on synthetic click logs with a planted signal (models/dlrm). The
 * seed draws the logs; the first --eval-count samples are held out, the rest are read in a
 * seeded order, one micro-batch per slice. Reports the held-out AUC and log loss next to the
 * generator's own (Bayes-optimal) ones. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dlrm/click_data.h"
#include "dlrm/dlrm.h"
#include "train_init.h"
#include "train_loop.h"
#include "train_tasks.h"

#define SAMPLES 1000000
#define EVAL_CHUNK 4096

typedef struct dlrm_task {
    dlrm *model;
    click_data *data;
    int64_t *order; /* training rows, shuffled by the seed */
    int64_t n_eval, n_train, batch, eval_every;
    bool quiet;
} dlrm_task;

/* The model's inputs for rows[0..n) of the logs, and their labels. */
static kn_status make_batch(const dlrm_task *t, const int64_t *rows, int64_t n, kn_tensor **dense, kn_tensor **indices,
                            kn_tensor **labels) {
    const click_config *c = &t->data->cfg;
    float *x = malloc(sizeof *x * (size_t)(n * c->n_dense)), *y = malloc(sizeof *y * (size_t)n);
    int max_len = 1;
    for (int k = 0; k < c->n_tables; k++) max_len = c->bag_len[k] > max_len ? c->bag_len[k] : max_len;
    int64_t *ids = malloc(sizeof *ids * (size_t)(n * max_len));
    kn_status st = x && y && ids ? KN_OK : kn_set_error(KN_ERR_OOM, "dlrm: out of host memory");
    kn_device dev = kn_default_device();
    for (int64_t i = 0; st == KN_OK && i < n; i++) {
        for (int j = 0; j < c->n_dense; j++) x[i * c->n_dense + j] = t->data->dense[rows[i] * c->n_dense + j];
        y[i] = t->data->label[rows[i]];
    }
    for (int k = 0; st == KN_OK && k < c->n_tables; k++) {
        int L = c->bag_len[k];
        for (int64_t i = 0; i < n; i++)
            for (int b = 0; b < L; b++) ids[i * L + b] = t->data->sparse[k][rows[i] * L + b];
        indices[k] = kn_from_host(ids, KN_I64, KN_SHAPE(n, L), dev);
    }
    if (st == KN_OK) {
        *dense = kn_from_host(x, KN_F32, KN_SHAPE(n, c->n_dense), dev);
        *labels = kn_from_host(y, KN_F32, KN_SHAPE(n), dev);
        st = *dense && *labels ? KN_OK : kn_last_status();
    }
    free(x);
    free(y);
    free(ids);
    return st;
}

static kn_tensor *micro_loss(void *ctx, int64_t g) {
    dlrm_task *t = ctx;
    int64_t rows[4096], n = t->batch;
    for (int64_t r = 0; r < n; r++) rows[r] = t->order[(g * n + r) % t->n_train];
    kn_tensor *dense = NULL, *labels = NULL, *indices[DLRM_MAX_TABLES] = {0};
    if (make_batch(t, rows, n, &dense, indices, &labels) != KN_OK) return NULL;
    return dlrm_loss(dlrm_forward(t->model, dense, indices, NULL), labels);
}

/* Held-out AUC and log loss of the model (rows 0..n_eval of the logs). */
static kn_status evaluate(dlrm_task *t, double *auc, double *log_loss) {
    double *logits = malloc(sizeof *logits * (size_t)t->n_eval);
    int64_t *rows = malloc(sizeof *rows * EVAL_CHUNK);
    kn_status st = logits && rows ? KN_OK : kn_set_error(KN_ERR_OOM, "dlrm: out of host memory");
    kn_module_train(t->model, false);
    kn_no_grad_push();
    for (int64_t start = 0; st == KN_OK && start < t->n_eval; start += EVAL_CHUNK) {
        int64_t n = t->n_eval - start < EVAL_CHUNK ? t->n_eval - start : EVAL_CHUNK;
        for (int64_t i = 0; i < n; i++) rows[i] = start + i;
        kn_scope_push();
        kn_tensor *dense = NULL, *labels = NULL, *indices[DLRM_MAX_TABLES] = {0};
        st = make_batch(t, rows, n, &dense, indices, &labels);
        kn_tensor *z = st == KN_OK ? kn_cast(dlrm_forward(t->model, dense, indices, NULL), KN_F64) : NULL;
        if (st == KN_OK) st = z ? kn_to_host(z, logits + start, sizeof *logits * (size_t)n) : kn_last_status();
        kn_scope_pop();
    }
    kn_no_grad_pop();
    kn_module_train(t->model, true);
    if (st == KN_OK) {
        *auc = click_auc(logits, t->data->label, t->n_eval);
        *log_loss = click_log_loss(logits, t->data->label, t->n_eval);
    }
    free(logits);
    free(rows);
    return st;
}

static void report(const dlrm_task *t, double auc, double log_loss) {
    const click_data *d = t->data;
    double clicks = 0;
    for (int64_t i = 0; i < t->n_eval; i++) clicks += d->label[i];
    double rate = clicks / (double)t->n_eval;
    double base = -(rate * log(rate) + (1 - rate) * log(1 - rate));
    printf("held-out AUC %.4f  log loss %.4f  (%lld samples, %.1f%% clicks)\n", auc, log_loss, (long long)t->n_eval,
           100 * rate);
    printf("generator (Bayes-optimal): AUC %.4f  log loss %.4f; constant click rate: AUC 0.5000  log loss %.4f\n",
           click_expected_auc(d->logit, d->logit, t->n_eval), click_expected_log_loss(d->logit, t->n_eval), base);
}

static kn_status after_step(void *ctx, int64_t steps_done, bool last) {
    dlrm_task *t = ctx;
    if (!last && (!t->eval_every || steps_done % t->eval_every)) return KN_OK;
    double auc = NAN, log_loss = NAN;
    kn_status st = evaluate(t, &auc, &log_loss);
    if (st != KN_OK) return st;
    if (last) report(t, auc, log_loss);
    else if (!t->quiet)
        fprintf(stderr, "  held-out after %lld steps: AUC %.4f  log loss %.4f\n", (long long)steps_done, auc, log_loss);
    return KN_OK;
}

void train_dlrm_defaults(train_options *o) {
    o->batch = 512;
    o->steps = 3000;
    o->lr = 3e-3;
    o->min_lr = 1e-4;
    o->warmup = 100;
    o->weight_decay = 0;
    o->grad_clip = 0;
    o->beta2 = 0.999;
    o->eval_count = 20000;
    o->eval_every = 1000;
}

/* The logs: 8 dense features, four sparse ones (two one-hot, two multi-hot). */
static click_config logs_config(uint64_t seed) {
    return (click_config){.n_samples = SAMPLES, .n_dense = 8, .n_tables = 4, .table_sizes = {1000, 1000, 200, 50},
                          .bag_len = {1, 1, 2, 3}, .seed = seed};
}

int train_dlrm_run(const train_options *o) {
    if (o->eval_count < 1 || o->eval_count >= SAMPLES || o->batch > 4096) {
        fprintf(stderr, "kiln train dlrm: --eval-count must be in [1, %d) and --batch at most 4096\n", SAMPLES);
        return 2;
    }
    click_config logs = logs_config(o->seed);
    dlrm_config cfg = {.n_tables = logs.n_tables, .emb_dim = 16, .n_bot = 3, .bot = {logs.n_dense, 64, 16},
                       .n_top = 3, .top = {64, 32, 1}};
    for (int k = 0; k < logs.n_tables; k++) cfg.table_sizes[k] = logs.table_sizes[k];
    dlrm_task t = {.n_eval = o->eval_count, .n_train = SAMPLES - o->eval_count, .batch = o->batch,
                   .eval_every = o->eval_every, .quiet = o->quiet};
    kn_named_tensors params = {0};
    int rc = 1;
    t.data = click_data_generate(&logs);
    t.order = malloc(sizeof *t.order * (size_t)t.n_train);
    t.model = t.data && t.order ? dlrm_new(&cfg) : NULL;
    if (!t.model || (o->init_path && train_init_module(t.model, o->init_path, "dlrm") != KN_OK) ||
        kn_module_named(t.model, KN_PARAMS, &params) != KN_OK) {
        fprintf(stderr, "kiln train dlrm: %s\n", kn_last_status() ? kn_last_error() : "out of host memory");
        goto done;
    }
    uint64_t h = o->seed * 0x9e3779b97f4a7c15ull + 1;
    for (int64_t i = 0; i < t.n_train; i++) t.order[i] = o->eval_count + i;
    for (int64_t i = t.n_train - 1; i > 0; i--) { /* Fisher-Yates with an xorshift stream */
        h ^= h << 13, h ^= h >> 7, h ^= h << 17;
        int64_t j = (int64_t)(h % (uint64_t)(i + 1)), tmp = t.order[i];
        t.order[i] = t.order[j];
        t.order[j] = tmp;
    }
    if (!o->quiet)
        fprintf(stderr, "dlrm: %lld parameters; %d synthetic click logs (%lld held out), 8 dense and 4 sparse features\n",
                (long long)kn_module_num_params(t.model), SAMPLES, (long long)t.n_eval);
    train_job job = {.task = "dlrm", .ctx = &t, .n_params = params.count, .names = params.names,
                     .params = params.tensors, .micro_loss = micro_loss, .tokens_per_micro = o->batch,
                     .after_step = after_step};
    rc = train_run(o, &job, NULL);
done:
    kn_named_tensors_free(&params);
    kn_module_free(t.model);
    click_data_free(t.data);
    free(t.order);
    return rc;
}
