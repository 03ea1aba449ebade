/* GPT-2 from and to Hugging Face files: config.json and safetensors weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2/gpt2.h"
#include "lm/config_reader.h"

/* A size key (alt: an older name for it, or NULL): required. */
static int size_key(cfg_reader *r, const char *key, const char *alt) {
    if (alt && !cfg_item(r->root, key) && cfg_item(r->root, alt)) key = alt;
    return (int)cfg_int(r, r->root, key, 1, INT32_MAX, CFG_REQUIRED);
}

kn_status gpt2_config_load(const char *path, gpt2_config *out) {
    cfg_reader r;
    if (!cfg_open(&r, path)) return kn_last_status();
    gpt2_config c = gpt2_config_124m();
    const char *type = cfg_string(&r, r.root, "model_type");
    if (type && strcmp(type, "gpt2") != 0) cfg_fail(&r, "model_type", "is \"%s\"; GPT-2 needs \"gpt2\"", type);
    c.n_layer = size_key(&r, "n_layer", NULL);
    c.n_head = size_key(&r, "n_head", NULL);
    c.n_embd = size_key(&r, "n_embd", NULL);
    c.vocab_size = size_key(&r, "vocab_size", NULL);
    c.n_positions = size_key(&r, "n_positions", "n_ctx");
    c.n_inner = (int)cfg_int(&r, r.root, "n_inner", 1, INT32_MAX, 0); /* null: 4 * n_embd */
    c.layer_norm_epsilon = cfg_positive(&r, r.root, "layer_norm_epsilon", c.layer_norm_epsilon);
    const char *act = cfg_string(&r, r.root, "activation_function");
    if (act && strcmp(act, "gelu_new") != 0 && strcmp(act, "gelu_pytorch_tanh") != 0)
        cfg_fail(&r, "activation_function", "is \"%s\"; kiln runs GPT-2 with gelu_new", act);
    c.tie_word_embeddings = cfg_bool(&r, r.root, "tie_word_embeddings", c.tie_word_embeddings);
    c.dropout = cfg_num(&r, r.root, "resid_pdrop", 0, 1, 0);
    if (c.dropout == 1) cfg_fail(&r, "resid_pdrop", "is 1; it must be below 1");
    cfg_close(&r);
    kn_status st = r.ok ? gpt2_config_check(&c) : kn_last_status();
    if (r.ok && st != KN_OK) { /* the check's message, with the file */
        char why[512];
        snprintf(why, sizeof why, "%s", kn_last_error());
        st = kn_set_error(st, "%s: %s", path, why);
    }
    if (st == KN_OK) *out = c;
    return st;
}

/* Sets root[key] to item (replacing what was there). */
static void set_key(cJSON *root, const char *key, cJSON *item) {
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    cJSON_AddItemToObject(root, key, item);
}

kn_status gpt2_config_save(const gpt2_config *c, const char *base, const char *path) {
    const int end_of_text = 50256;
    cJSON *root = base ? kn_hf_read_json(base, KN_HF_CONFIG_MAX_BYTES) : cJSON_CreateObject();
    if (!root) return base ? kn_last_status() : kn_set_error(KN_ERR_OOM, "%s: out of memory", path);
    cJSON *arch = cJSON_CreateArray();
    cJSON_AddItemToArray(arch, cJSON_CreateString("GPT2LMHeadModel"));
    set_key(root, "architectures", arch);
    set_key(root, "model_type", cJSON_CreateString("gpt2"));
    set_key(root, "activation_function", cJSON_CreateString("gelu_new"));
    set_key(root, "n_layer", cJSON_CreateNumber(c->n_layer));
    set_key(root, "n_head", cJSON_CreateNumber(c->n_head));
    set_key(root, "n_embd", cJSON_CreateNumber(c->n_embd));
    set_key(root, "n_inner", c->n_inner ? cJSON_CreateNumber(c->n_inner) : cJSON_CreateNull());
    set_key(root, "n_positions", cJSON_CreateNumber(c->n_positions));
    cJSON_DeleteItemFromObjectCaseSensitive(root, "n_ctx"); /* an older name of n_positions */
    set_key(root, "vocab_size", cJSON_CreateNumber(c->vocab_size));
    set_key(root, "layer_norm_epsilon", cJSON_CreateNumber(c->layer_norm_epsilon));
    set_key(root, "resid_pdrop", cJSON_CreateNumber(c->dropout));
    set_key(root, "embd_pdrop", cJSON_CreateNumber(c->dropout));
    set_key(root, "attn_pdrop", cJSON_CreateNumber(c->dropout));
    set_key(root, "tie_word_embeddings", cJSON_CreateBool(c->tie_word_embeddings));
    /* The weights are f32; transformers 5 names the key dtype, earlier versions torch_dtype. */
    set_key(root, cJSON_GetObjectItemCaseSensitive(root, "dtype") ? "dtype" : "torch_dtype", cJSON_CreateString("float32"));
    if (!cJSON_GetObjectItemCaseSensitive(root, "initializer_range")) cJSON_AddNumberToObject(root, "initializer_range", 0.02);
    for (int i = 0; i < 2; i++) {
        const char *key = i ? "eos_token_id" : "bos_token_id";
        if (cJSON_GetObjectItemCaseSensitive(root, key)) continue;
        if (c->vocab_size > end_of_text) cJSON_AddNumberToObject(root, key, end_of_text);
        else cJSON_AddNullToObject(root, key);
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    kn_status st = text ? kn_write_file_atomic(path, text, strlen(text))
                        : kn_set_error(KN_ERR_OOM, "%s: out of memory writing the config", path);
    free(text);
    return st;
}

/* The file's name for a parameter: as is, or without the "transformer." prefix. */
static const char *file_name(kn_safetensors *f, const char *name) {
    if (kn_safetensors_find(f, name) >= 0) return name;
    const char *prefix = "transformer.";
    size_t n = strlen(prefix);
    if (strncmp(name, prefix, n) == 0 && kn_safetensors_find(f, name + n) >= 0) return name + n;
    return NULL;
}

kn_status gpt2_load_weights(gpt2 *m, const char *path) {
    kn_safetensors *f = kn_safetensors_open(path);
    if (!f) return kn_last_status();
    kn_status st = KN_OK;
    /* A separate head in the file unties it. */
    if (kn_safetensors_find(f, "lm_head.weight") >= 0) st = gpt2_untie_head(m);
    /* Check every name first, so a bad file changes nothing. */
    for (int i = 0; st == KN_OK && i < m->n_params; i++)
        if (!file_name(f, m->names[i]))
            st = kn_set_error(KN_ERR_IO, "%s: tensor '%s' (or '%s') is missing", path, m->names[i],
                              strncmp(m->names[i], "transformer.", 12) == 0 ? m->names[i] + 12 : m->names[i]);
    kn_no_grad_push();
    for (int i = 0; st == KN_OK && i < m->n_params; i++)
        st = kn_safetensors_read_into(f, file_name(f, m->names[i]), m->params[i], KN_LOAD_CAST);
    kn_no_grad_pop();
    kn_safetensors_close(f);
    return st;
}

kn_status gpt2_save_weights(const gpt2 *m, const char *path) {
    return kn_safetensors_save(path, m->n_params, (const char *const *)m->names, m->params, NULL, NULL, 0);
}
