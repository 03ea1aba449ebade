/* GPT-2 from and to Hugging Face files: config.json and safetensors weights. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2/gpt2.h"
#include "lm/json_file.h"

/* An integer key (alt: an older name for it, or NULL); def when absent and def >= 0. */
static bool int_key(const char *path, const cJSON *root, const char *key, const char *alt, int def, int *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!v && alt) v = cJSON_GetObjectItemCaseSensitive(root, alt);
    if (!v && def >= 0) {
        *out = def;
        return true;
    }
    if (!cJSON_IsNumber(v) || v->valuedouble != (double)(int)v->valuedouble || v->valuedouble < 1) {
        kn_set_error(KN_ERR_IO, "%s: \"%s\" is %s; it must be a positive integer", path, key,
                     v ? "not a positive integer" : "missing");
        return false;
    }
    *out = (int)v->valuedouble;
    return true;
}

kn_status gpt2_config_load(const char *path, gpt2_config *out) {
    cJSON *root = json_file_read(path);
    if (!root) return kn_last_status();
    gpt2_config c = gpt2_config_124m();
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const cJSON *eps = cJSON_GetObjectItemCaseSensitive(root, "layer_norm_epsilon");
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "activation_function");
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    const cJSON *drop = cJSON_GetObjectItemCaseSensitive(root, "resid_pdrop");
    const cJSON *inner = cJSON_GetObjectItemCaseSensitive(root, "n_inner");
    kn_status st = KN_OK;
    if (type && (!cJSON_IsString(type) || strcmp(type->valuestring, "gpt2") != 0))
        st = kn_set_error(KN_ERR_IO, "%s: model_type is %s; GPT-2 needs \"gpt2\"", path,
                          cJSON_IsString(type) ? type->valuestring : "not a string");
    else if (!int_key(path, root, "n_layer", NULL, -1, &c.n_layer) || !int_key(path, root, "n_head", NULL, -1, &c.n_head) ||
             !int_key(path, root, "n_embd", NULL, -1, &c.n_embd) ||
             !int_key(path, root, "vocab_size", NULL, -1, &c.vocab_size) ||
             !int_key(path, root, "n_positions", "n_ctx", -1, &c.n_positions) ||
             (inner && !cJSON_IsNull(inner) && !int_key(path, root, "n_inner", NULL, -1, &c.n_inner)))
        st = kn_last_status();
    else if (eps && !cJSON_IsNumber(eps))
        st = kn_set_error(KN_ERR_IO, "%s: layer_norm_epsilon is not a number", path);
    else if (act && (!cJSON_IsString(act) || (strcmp(act->valuestring, "gelu_new") != 0 &&
                                               strcmp(act->valuestring, "gelu_pytorch_tanh") != 0)))
        st = kn_set_error(KN_ERR_IO, "%s: activation_function %s is not supported (gelu_new)", path,
                          cJSON_IsString(act) ? act->valuestring : "(not a string)");
    if (st == KN_OK) {
        if (eps) c.layer_norm_epsilon = eps->valuedouble;
        if (cJSON_IsBool(tie)) c.tie_word_embeddings = cJSON_IsTrue(tie);
        c.dropout = cJSON_IsNumber(drop) ? drop->valuedouble : 0;
        st = gpt2_config_check(&c);
    }
    cJSON_Delete(root);
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
    cJSON *root = base ? json_file_read(base) : cJSON_CreateObject();
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
