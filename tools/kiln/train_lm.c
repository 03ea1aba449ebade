/* `kiln train llama|qwen2|qwen3|lm`: full fine-tuning of a Hugging Face causal LM
 * (models/lm) on a token file, through the loop `kiln train gpt2` uses. With --save, the
 * save directory also holds the newest weights as a model directory that `kiln generate`
 * and `--init` load: config.json and the tokenizer files copied from the source,
 * model.safetensors in the transformers naming. */
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "lm/lm.h"
#include "train_data.h"
#include "train_loop.h"
#include "train_tasks.h"

#define PATH_SIZE 4096

typedef struct lm_task {
    const train_options *o;
    const char *name;
    char source_dir[PATH_SIZE];  /* where config.json and the tokenizer files come from */
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

static kn_status copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return kn_set_error(KN_ERR_IO, "%s: cannot open (%s)", from, strerror(errno));
    kn_atomic_file *out = kn_atomic_file_open(to);
    kn_status st = out ? KN_OK : kn_last_status();
    char buf[1 << 16];
    size_t n;
    while (st == KN_OK && (n = fread(buf, 1, sizeof buf, in)) > 0)
        if (fwrite(buf, 1, n, kn_atomic_file_stream(out)) != n) st = kn_set_error(KN_ERR_IO, "%s: write failed", to);
    if (st == KN_OK && ferror(in)) st = kn_set_error(KN_ERR_IO, "%s: read failed", from);
    fclose(in);
    if (st == KN_OK) return kn_atomic_file_commit(out);
    kn_atomic_file_abort(out);
    return st;
}

/* config.json, the tokenizer's files and generation_config.json, where the source has them. */
static kn_status copy_model_files(const lm_task *t, const char *dir) {
    static const char *const files[] = {"config.json",  "generation_config.json", "tokenizer.json",
                                        "tokenizer_config.json", "special_tokens_map.json"};
    char from[PATH_SIZE], to[PATH_SIZE];
    for (size_t i = 0; i < sizeof files / sizeof *files; i++) {
        if ((size_t)snprintf(from, sizeof from, "%s/%s", t->source_dir, files[i]) >= sizeof from ||
            (size_t)snprintf(to, sizeof to, "%s/%s", dir, files[i]) >= sizeof to)
            return kn_set_error(KN_ERR_IO, "%s: the path is too long", dir);
        bool config = i == 0, from_config_flag = config && !t->o->init_path;
        struct stat sb;
        if (!config && stat(from, &sb) != 0) continue; /* only config.json is required */
        kn_status st = copy_file(from_config_flag ? t->o->config_path : from, to);
        if (st != KN_OK) return st;
    }
    return KN_OK;
}

/* After each step that wrote a checkpoint (the loop's rule), the weights as a model directory. */
static kn_status after_step(void *ctx, int64_t done, bool last) {
    lm_task *t = ctx;
    const train_options *o = t->o;
    if (!o->save_dir || !((o->save_every && done % o->save_every == 0) || last)) return KN_OK;
    char path[PATH_SIZE];
    if ((size_t)snprintf(path, sizeof path, "%s/model.safetensors", o->save_dir) >= sizeof path)
        return kn_set_error(KN_ERR_IO, "%s: the path is too long", o->save_dir);
    kn_status st = copy_model_files(t, o->save_dir);
    return st == KN_OK ? lm_save_weights(t->model, path) : st;
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
        lm_load_options lo = {.device = kn_default_device(), .dtype = KN_F32};
        t->model = lm_load(o->init_path, &lo);
        snprintf(t->source_dir, sizeof t->source_dir, "%s", o->init_path);
    } else {
        lm_config cfg;
        if (lm_config_load(o->config_path, &cfg) == KN_OK) t->model = lm_new(&cfg, KN_F32);
        char copy[PATH_SIZE];
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
                     .after_step = after_step};
    double loss;
    rc = train_run(o, &job, &loss);
    if (rc == 0 && !o->quiet && !o->trace) fprintf(stderr, "final loss %.4f\n", loss);
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
int train_qwen2_run(const train_options *o) { return run_task(o, "qwen2"); }
int train_qwen3_run(const train_options *o) { return run_task(o, "qwen3"); }
int train_lm_run(const train_options *o) { return run_task(o, "lm"); }
