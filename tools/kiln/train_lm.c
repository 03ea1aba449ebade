/* `kiln train llama|mistral|qwen2|qwen3|lm`: full fine-tuning of a Hugging Face causal LM
 * (models/lm) on a token file, through the loop `kiln train gpt2` uses. With --save, the
 * save directory also holds the newest weights as a model directory that `kiln generate`
 * and `--init` load: config.json and the tokenizer files copied from the source,
 * model.safetensors in the transformers naming. */
#include <libgen.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lm/lm.h"
#include "mapped_files.h"
#include "train_data.h"
#include "train_export.h"
#include "train_loop.h"
#include "train_save_dir.h"
#include "train_tasks.h"

typedef struct lm_task {
    const train_options *o;
    const char *name;
    char source_dir[TRAIN_PATH_SIZE];  /* where config.json and the tokenizer files come from */
    lm *model;
    kn_token_loader *loader;
    kn_named_tensors params;
} lm_task;

static kn_tensor *micro_loss(void *ctx, int64_t g) {
    lm_task *t = ctx;
    kn_tensor *x, *y;
    if (train_tokens_batch(t->loader, t->o, g, &x, &y) != KN_OK) return NULL;
    return lm_loss(t->model, x, y);
}

/* ---- the model directory written beside the checkpoints ------------------------------------ */

/* The weights with config.json (from --init's directory, else --config) and the source's
 * tokenizer and generation_config.json. */
static kn_status export_model(void *ctx, const char *dir) {
    lm_task *t = ctx;
    char config[TRAIN_PATH_SIZE], to[TRAIN_PATH_SIZE], weights[TRAIN_PATH_SIZE];
    if (!train_path(config, t->source_dir, "config.json") || !train_path(to, dir, "config.json") ||
        !train_path(weights, dir, "model.safetensors"))
        return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
    kn_status st = train_copy_file(t->o->init_path ? config : t->o->config_path, to);
    if (st == KN_OK) st = train_copy_model_files(t->source_dir, dir);
    return st == KN_OK ? lm_save_weights(t->model, weights) : st;
}

/* ---- setup ---------------------------------------------------------------------------------- */

/* The model from --init (a model directory) or --config (seeded random weights), in f32. */
static bool load_model(lm_task *t) {
    const train_options *o = t->o;
    if (!o->init_path && !o->config_path) {
        fprintf(stderr, "kiln train %s: --init MODEL_DIR (or --config config.json, for random weights) is required\n",
                t->name);
        return false;
    }
    if (o->init_path && o->config_path) {
        fprintf(stderr, "kiln train %s: --init and --config both name the model; give one\n", t->name);
        return false;
    }
    if (o->init_path) {
        char weights[TRAIN_PATH_SIZE + 32];
        snprintf(weights, sizeof weights, "the weights in %s", o->init_path);
        kiln_explain_sigbus("kiln train", weights); /* f32 weights train in place over the mapping */
        lm_load_options lo = {.device = kn_default_device(), .dtype = KN_F32};
        t->model = lm_load(o->init_path, &lo);
        snprintf(t->source_dir, sizeof t->source_dir, "%s", o->init_path);
    } else {
        lm_config cfg;
        if (lm_config_load(o->config_path, &cfg) == KN_OK) t->model = lm_new(&cfg, KN_F32);
        char copy[TRAIN_PATH_SIZE];
        snprintf(copy, sizeof copy, "%s", o->config_path);
        snprintf(t->source_dir, sizeof t->source_dir, "%s", dirname(copy));
    }
    if (!t->model) fprintf(stderr, "kiln train %s: %s\n", t->name, kn_last_error());
    return t->model != NULL;
}

static bool family_matches(const lm_task *t, const lm_config *c) {
    if (strcmp(t->name, "lm") == 0 || strcmp(t->name, lm_family_name(c->family)) == 0) return true;
    fprintf(stderr, "kiln train %s: %s is a %s model, not %s (kiln train lm takes any family)\n", t->name,
            t->o->init_path ? t->o->init_path : t->o->config_path, lm_family_name(c->family), t->name);
    return false;
}

static int run_task(const train_options *o, const char *name) {
    lm_task t = {.o = o, .name = name};
    int rc = 2;
    if (!load_model(&t)) goto done;
    const lm_config *c = lm_config_of(t.model);
    if (!family_matches(&t, c) || !train_tokens_open(o, name, c->vocab_size, c->max_position_embeddings, &t.loader))
        goto done;
    rc = 1;
    if (kn_module_named(lm_module(t.model), KN_PARAMS, &t.params) != KN_OK) {
        fprintf(stderr, "kiln train %s: %s\n", name, kn_last_error());
        goto done;
    }
    if (!o->quiet) {
        fprintf(stderr, "%s: %d layers, %d heads (%d kv), %d wide, vocab %d: %.2fM parameters", lm_family_name(c->family),
                c->n_layers, c->n_heads, c->n_kv_heads, c->hidden_size, c->vocab_size,
                kn_module_num_params(lm_module(t.model)) / 1e6);
        if (t.loader) fprintf(stderr, "; %lld tokens in %s", (long long)kn_token_loader_num_tokens(t.loader), o->data_path);
        fputc('\n', stderr);
    }
    train_job job = {.task = name, .ctx = &t, .n_params = t.params.count, .names = t.params.names,
                     .params = t.params.tensors, .micro_loss = micro_loss, .tokens_per_micro = o->batch * o->seq,
                     .export_model = export_model};
    double loss;
    rc = train_run(o, &job, &loss);
    if (rc == 0 && !o->quiet && !o->trace && !isnan(loss)) fprintf(stderr, "final loss %.4f\n", loss);
done:
    kn_named_tensors_free(&t.params);
    kn_token_loader_close(t.loader);
    lm_free(t.model);
    return rc;
}

void train_lm_defaults(train_options *o) {
    o->lr = 3e-5; /* fine-tuning: a pretrained model moves little */
    o->warmup = 0;
}

int train_llama_run(const train_options *o) { return run_task(o, "llama"); }
int train_mistral_run(const train_options *o) { return run_task(o, "mistral"); }
int train_qwen2_run(const train_options *o) { return run_task(o, "qwen2"); }
int train_qwen3_run(const train_options *o) { return run_task(o, "qwen3"); }
int train_lm_run(const train_options *o) { return run_task(o, "lm"); }
