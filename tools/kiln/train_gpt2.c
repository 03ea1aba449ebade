/* `kiln train gpt2`: GPT-2 on a token file, batches read by the deterministic rule of
 * kiln/data.h (micro-batch g row b starts at ((g*B + b)*T) mod (N - T - 1)). */
#include <math.h>
#include <stdio.h>

#include "gpt2/gpt2.h"
#include "train_data.h"
#include "train_loop.h"
#include "train_tasks.h"

typedef struct gpt2_task {
    const train_options *o;
    gpt2 *model;
    kn_token_loader *loader;
} gpt2_task;

void train_gpt2_defaults(train_options *o) { o->dropout = NAN; /* --config's */ }

bool train_gpt2_config(const train_options *o, gpt2_config *c) {
    *c = gpt2_config_124m();
    if (o->config_path && gpt2_config_load(o->config_path, c) != KN_OK) {
        fprintf(stderr, "kiln train gpt2: %s\n", kn_last_error());
        return false;
    }
    if (o->n_layer) c->n_layer = o->n_layer;
    if (o->n_head) c->n_head = o->n_head;
    if (o->n_embd) c->n_embd = o->n_embd;
    if (o->vocab) c->vocab_size = o->vocab;
    if (o->block) c->n_positions = o->block;
    if (!isnan(o->dropout)) c->dropout = o->dropout;
    if (gpt2_config_check(c) != KN_OK) {
        fprintf(stderr, "kiln train gpt2: %s\n", kn_last_error());
        return false;
    }
    return true;
}

static kn_tensor *micro_loss(void *ctx, int64_t g) {
    gpt2_task *t = ctx;
    kn_tensor *x, *y;
    if (train_tokens_batch(t->loader, t->o, g, &x, &y) != KN_OK) return NULL;
    return gpt2_loss(t->model, x, y);
}

int train_gpt2_run(const train_options *o) {
    gpt2_config cfg;
    gpt2_task t = {.o = o};
    if (!train_gpt2_config(o, &cfg) || !train_tokens_open(o, "gpt2", cfg.vocab_size, cfg.n_positions, &t.loader))
        return 2;
    t.model = gpt2_new(&cfg);
    int rc = 1;
    if (!t.model || (o->init_path && gpt2_load_weights(t.model, o->init_path) != KN_OK)) {
        fprintf(stderr, "kiln train gpt2: %s\n", kn_last_error());
    } else {
        if (!o->quiet) {
            fprintf(stderr, "gpt2: %d layers, %d heads, %d wide, vocab %d: %.2fM parameters", cfg.n_layer, cfg.n_head,
                    cfg.n_embd, cfg.vocab_size, gpt2_num_params(t.model) / 1e6);
            if (t.loader) fprintf(stderr, "; %lld tokens in %s", (long long)kn_token_loader_num_tokens(t.loader), o->data_path);
            fputc('\n', stderr);
        }
        train_job job = {.task = "gpt2", .ctx = &t, .n_params = t.model->n_params, .names = t.model->names,
                         .params = t.model->params, .micro_loss = micro_loss, .tokens_per_micro = o->batch * o->seq};
        double loss;
        rc = train_run(o, &job, &loss);
        if (rc == 0 && !o->quiet && !o->trace) fprintf(stderr, "final loss %.4f\n", loss);
    }
    gpt2_free(t.model);
    kn_token_loader_close(t.loader);
    return rc;
}
