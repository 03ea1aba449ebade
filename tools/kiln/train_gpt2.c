/* `kiln train gpt2`: GPT-2 on a token file, batches read by the deterministic rule of
 * kiln/data.h (micro-batch g row b starts at ((g*B + b)*T) mod (N - T - 1)). With --save, the
 * save directory also holds the newest weights as a model directory for `kiln generate` and
 * --init: model.safetensors, config.json written from the model's shape, and the tokenizer
 * files found beside --init or --config. */
#include <libgen.h>
#include <math.h>
#include <stdio.h>

#include "gpt2/gpt2.h"
#include "train_data.h"
#include "train_export.h"
#include "train_loop.h"
#include "train_save_dir.h"
#include "train_tasks.h"

typedef struct gpt2_task {
    const train_options *o;
    gpt2 *model;
    kn_token_loader *loader;
    const char *config_path;             /* --config, or NULL */
    char tokenizer_dir[TRAIN_PATH_SIZE]; /* empty when there is none */
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

/* The directory of the first of --init and --config that has a tokenizer.json beside it. */
static void find_tokenizer(const train_options *o, char *out) {
    const char *sources[] = {o->init_path, o->config_path};
    out[0] = '\0';
    for (int i = 0; i < 2 && !out[0]; i++) {
        if (!sources[i]) continue;
        char copy[TRAIN_PATH_SIZE];
        snprintf(copy, sizeof copy, "%s", sources[i]);
        snprintf(out, TRAIN_PATH_SIZE, "%s", dirname(copy));
        if (!train_has_tokenizer(out)) out[0] = '\0';
    }
}

static kn_status export_model(void *ctx, const char *dir) {
    gpt2_task *t = ctx;
    char config[TRAIN_PATH_SIZE], weights[TRAIN_PATH_SIZE];
    if (!train_path(config, dir, "config.json") || !train_path(weights, dir, "model.safetensors"))
        return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
    kn_status st = gpt2_config_save(&t->model->cfg, t->config_path, config);
    if (st == KN_OK && t->tokenizer_dir[0]) st = train_copy_model_files(t->tokenizer_dir, dir);
    return st == KN_OK ? gpt2_save_weights(t->model, weights) : st;
}

/* How to use the model directory the run left. */
static void describe_export(const gpt2_task *t, const char *dir) {
    if (t->tokenizer_dir[0]) {
        fprintf(stderr, "%s is a model directory (tokenizer from %s): kiln generate %s --prompt TEXT\n", dir,
                t->tokenizer_dir, dir);
        return;
    }
    fprintf(stderr,
            "%s is a model directory without a tokenizer (none beside --init or --config): kiln generate %s "
            "--prompt-ids 1,2,3 --print-ids works on token ids; for text, copy into it the tokenizer.json that "
            "made the --data file\n", dir, dir);
}

int train_gpt2_run(const train_options *o) {
    gpt2_config cfg;
    gpt2_task t = {.o = o, .config_path = o->config_path};
    if (!train_gpt2_config(o, &cfg) || !train_tokens_open(o, "gpt2", cfg.vocab_size, cfg.n_positions, &t.loader))
        return 2;
    find_tokenizer(o, t.tokenizer_dir);
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
                         .params = t.model->params, .micro_loss = micro_loss, .tokens_per_micro = o->batch * o->seq,
                         .export_model = export_model};
        double loss;
        rc = train_run(o, &job, &loss);
        if (rc == 0 && !o->quiet && !o->trace && !isnan(loss)) fprintf(stderr, "final loss %.4f\n", loss);
        if (rc == 0 && !o->quiet && !o->trace && o->save_dir) describe_export(&t, o->save_dir);
    }
    gpt2_free(t.model);
    kn_token_loader_close(t.loader);
    return rc;
}
