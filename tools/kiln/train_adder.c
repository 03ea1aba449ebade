/* `kiln train adder`: minGPT's adder. A GPT reads the digits of two 2-digit numbers a and b
 * and writes the three digits of a + b, least significant first; the loss counts only those
 * three. All 10,000 problems are shuffled by the seed; the first --eval-count are held out
 * and the rest are training data. Accuracy is the exact match of greedy answers. */
#include <stdio.h>
#include <stdlib.h>

#include "gpt2/gpt2.h"
#include "train_loop.h"
#include "train_tasks.h"

#define DIGITS 2
#define PROBLEMS 10000
#define SEQ (3 * DIGITS + 1)   /* a, b, then DIGITS+1 digits of the sum */
#define PROMPT (2 * DIGITS)

typedef struct adder_task {
    gpt2 *model;
    int problems[PROBLEMS];    /* a * 100 + b, in the seeded order */
    int n_eval;
    int64_t batch, eval_every;
    uint64_t seed;
    bool quiet;
    double accuracy;
} adder_task;

static void encode(int problem, int64_t *seq) {
    int a = problem / 100, b = problem % 100, c = a + b;
    seq[0] = a / 10, seq[1] = a % 10, seq[2] = b / 10, seq[3] = b % 10;
    for (int i = 0; i <= DIGITS; i++, c /= 10) seq[PROMPT + i] = c % 10;
}

/* Micro-batch g: rows drawn from the training problems by a hash of (seed, g, row). */
static kn_tensor *micro_loss(void *ctx, int64_t g) {
    adder_task *t = ctx;
    int64_t B = t->batch, n_train = PROBLEMS - t->n_eval;
    int64_t *x = malloc(sizeof *x * (size_t)(B * (SEQ - 1))), *y = malloc(sizeof *y * (size_t)(B * (SEQ - 1)));
    kn_tensor *loss = NULL;
    if (x && y) {
        for (int64_t r = 0; r < B; r++) {
            uint64_t h = kn_mix64(t->seed ^ kn_mix64((uint64_t)g * 1000003u + (uint64_t)r));
            int64_t seq[SEQ];
            encode(t->problems[t->n_eval + (int64_t)(h % (uint64_t)n_train)], seq);
            for (int i = 0; i < SEQ - 1; i++) {
                x[r * (SEQ - 1) + i] = seq[i];
                y[r * (SEQ - 1) + i] = i + 1 < PROMPT ? -1 : seq[i + 1]; /* only the sum's digits count */
            }
        }
        kn_tensor *xt = kn_from_host(x, KN_I64, KN_SHAPE(B, SEQ - 1), kn_default_device());
        kn_tensor *yt = kn_from_host(y, KN_I64, KN_SHAPE(B, SEQ - 1), kn_default_device());
        loss = gpt2_loss(t->model, xt, yt);
    } else {
        kn_set_error(KN_ERR_OOM, "adder: out of host memory");
    }
    free(x);
    free(y);
    return loss;
}

/* Greedy answers to problems[0..n): fills answer[i] with the predicted sum. */
static kn_status solve(adder_task *t, const int *problems, int n, int *answer) {
    int64_t *seq = malloc(sizeof *seq * (size_t)n * SEQ), *next = malloc(sizeof *next * (size_t)n);
    if (!seq || !next) {
        free(seq);
        free(next);
        return kn_set_error(KN_ERR_OOM, "adder: out of host memory");
    }
    for (int i = 0; i < n; i++) encode(problems[i], seq + (int64_t)i * SEQ);
    kn_status st = KN_OK;
    bool was_training = kn_module_is_training(t->model);
    kn_module_train(t->model, false);
    kn_no_grad_push();
    for (int len = PROMPT; st == KN_OK && len < SEQ; len++) {
        kn_scope_push();
        int64_t *ctx = malloc(sizeof *ctx * (size_t)n * (size_t)len);
        for (int i = 0; ctx && i < n; i++)
            for (int j = 0; j < len; j++) ctx[i * len + j] = seq[(int64_t)i * SEQ + j];
        kn_tensor *x = ctx ? kn_from_host(ctx, KN_I64, KN_SHAPE(n, len), kn_default_device()) : NULL;
        free(ctx);
        kn_tensor *logits = gpt2_forward(t->model, x);
        kn_tensor *pick = kn_argmax(kn_select(logits, 1, len - 1), -1, false);
        st = pick ? kn_to_host(pick, next, sizeof *next * (size_t)n) : kn_last_status();
        for (int i = 0; st == KN_OK && i < n; i++) seq[(int64_t)i * SEQ + len] = next[i];
        kn_scope_pop();
    }
    kn_no_grad_pop();
    kn_module_train(t->model, was_training);
    for (int i = 0; st == KN_OK && i < n; i++) {
        answer[i] = 0;
        for (int d = DIGITS; d >= 0; d--) answer[i] = answer[i] * 10 + (int)seq[(int64_t)i * SEQ + PROMPT + d];
    }
    free(seq);
    free(next);
    return st;
}

static kn_status evaluate(adder_task *t, bool examples) {
    int *answer = malloc(sizeof *answer * (size_t)t->n_eval);
    if (!answer) return kn_set_error(KN_ERR_OOM, "adder: out of host memory");
    kn_status st = solve(t, t->problems, t->n_eval, answer);
    int right = 0;
    for (int i = 0; st == KN_OK && i < t->n_eval; i++) right += answer[i] == t->problems[i] / 100 + t->problems[i] % 100;
    t->accuracy = t->n_eval ? (double)right / t->n_eval : 0;
    if (st == KN_OK && examples) {
        printf("accuracy %.4f (%d of %d held-out problems)\n", t->accuracy, right, t->n_eval);
        for (int i = 0; i < 6 && i < t->n_eval; i++) {
            int a = t->problems[i] / 100, b = t->problems[i] % 100;
            printf("  %2d + %2d = %3d  %s\n", a, b, answer[i], answer[i] == a + b ? "ok" : "wrong");
        }
    }
    free(answer);
    return st;
}

static kn_status after_step(void *ctx, int64_t steps_done, bool last) {
    adder_task *t = ctx;
    if (last) return evaluate(t, true);
    if (!t->eval_every || steps_done % t->eval_every) return KN_OK;
    kn_status st = evaluate(t, false);
    if (st == KN_OK && !t->quiet) fprintf(stderr, "\n  held-out accuracy after %lld steps: %.4f\n", (long long)steps_done, t->accuracy);
    return st;
}

void train_adder_defaults(train_options *o) {
    o->n_layer = 2;
    o->n_head = 4;
    o->n_embd = 64;
    o->batch = 128;
    o->steps = 1000;
    o->lr = 3e-3;
    o->min_lr = 1e-4;
    o->warmup = 100;
    o->weight_decay = 0.1;
    o->grad_clip = 1.0;
    o->eval_count = 500;
}

int train_adder_run(const train_options *o) {
    if (o->eval_count < 1 || o->eval_count >= PROBLEMS) {
        fprintf(stderr, "kiln train adder: --eval-count must be in [1, %d)\n", PROBLEMS);
        return 2;
    }
    adder_task *t = calloc(1, sizeof *t);
    if (!t) return 1;
    t->n_eval = (int)o->eval_count;
    t->batch = o->batch;
    t->eval_every = o->eval_every;
    t->seed = o->seed;
    t->quiet = o->quiet;
    for (int i = 0; i < PROBLEMS; i++) t->problems[i] = i;
    for (int i = PROBLEMS - 1; i > 0; i--) { /* Fisher-Yates, seeded */
        int j = (int)(kn_mix64(o->seed * 31 + (uint64_t)i) % (uint64_t)(i + 1)), tmp = t->problems[i];
        t->problems[i] = t->problems[j];
        t->problems[j] = tmp;
    }
    gpt2_config cfg = {.n_layer = o->n_layer, .n_head = o->n_head, .n_embd = o->n_embd, .vocab_size = 10,
                       .n_positions = SEQ - 1, .layer_norm_epsilon = 1e-5, .dropout = o->dropout,
                       .tie_word_embeddings = true};
    t->model = gpt2_new(&cfg);
    int rc = 1;
    if (!t->model || (o->init_path && gpt2_load_weights(t->model, o->init_path) != KN_OK)) {
        fprintf(stderr, "kiln train adder: %s\n", kn_last_error());
    } else {
        if (!o->quiet)
            fprintf(stderr, "adder: a %d-layer GPT (%.0fk parameters) learns a + b for 2-digit a, b; %d problems held out\n",
                    cfg.n_layer, gpt2_num_params(t->model) / 1e3, t->n_eval);
        train_job job = {.task = "adder", .ctx = t, .n_params = t->model->n_params, .names = t->model->names,
                         .params = t->model->params, .micro_loss = micro_loss, .tokens_per_micro = o->batch * 3,
                         .after_step = after_step};
        rc = train_run(o, &job, NULL);
    }
    gpt2_free(t->model);
    free(t);
    return rc;
}
