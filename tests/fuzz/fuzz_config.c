/* Fuzz target: the JSON files of a model directory. The input is the file, read as config.json
 * (lm_config_load for every family, gpt2_config_load), as generation_config.json
 * (lm_generation_config_load) and as model.safetensors.index.json (kn_hf_weights_open, beside
 * two small shards holding tensors "a" and "b"). A file that loads is one JSON value; a config
 * that loads describes a model that can be built: sizes positive, heads that divide, token ids
 * that are ids, and for the rotary families frequencies that are numbers. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "gpt2/gpt2.h"
#include "lm/generate.h"
#include "lm/lm.h"

/* The largest head_dim whose RoPE frequencies the target computes (a fuzz run stays small). */
#define MAX_CHECKED_HEAD_DIM 4096

static void check_lm_config(const char *path, bool json) {
    lm_config c;
    kn_clear_error();
    if (fuzz_failed(lm_config_load(path, &c) != KN_OK, "lm_config_load")) return;
    fuzz_require(json, "lm_config_load accepts a file that is not one JSON value");
    fuzz_require(c.vocab_size > 0 && c.hidden_size > 0 && c.n_layers > 0 && c.n_heads > 0 && c.n_kv_heads > 0 &&
                     c.head_dim > 0 && c.intermediate_size > 0 && c.max_position_embeddings > 0,
                 "lm_config_load accepts a size that is not positive");
    fuzz_require(c.n_heads % c.n_kv_heads == 0, "lm_config_load accepts %d kv heads for %d heads", c.n_kv_heads,
                 c.n_heads);
    fuzz_require(c.norm_eps > 0 && c.dropout >= 0 && c.dropout < 1, "lm_config_load accepts eps %g, dropout %g",
                 c.norm_eps, c.dropout);
    fuzz_require(c.n_eos >= 0 && c.n_eos <= LM_MAX_EOS, "lm_config_load gives %d eos ids", c.n_eos);
    fuzz_require(c.bos_token_id >= -1, "lm_config_load gives bos id %d", c.bos_token_id);
    for (int i = 0; i < c.n_eos; i++)
        fuzz_require(c.eos_token_ids[i] >= 0, "lm_config_load gives eos id %d", c.eos_token_ids[i]);
    if (c.family == LM_GPT2) return;
    fuzz_require(c.head_dim % 2 == 0, "lm_config_load accepts an odd head_dim %d", c.head_dim);
    fuzz_require(c.rope_theta > 0 && isfinite(c.rope_theta), "lm_config_load accepts rope_theta %g", c.rope_theta);
    if (c.head_dim > MAX_CHECKED_HEAD_DIM) return;
    float *inv_freq = malloc(sizeof *inv_freq * (size_t)(c.head_dim / 2));
    fuzz_require(inv_freq != NULL, "out of memory");
    const int64_t seq_lens[] = {1, (int64_t)c.max_position_embeddings * 2};
    for (int k = 0; k < 2; k++) {
        double attention_factor = 0;
        kn_clear_error();
        if (fuzz_failed(lm_rope_frequencies(&c, seq_lens[k], inv_freq, &attention_factor) != KN_OK,
                        "lm_rope_frequencies"))
            continue;
        fuzz_require(isfinite(attention_factor) && attention_factor > 0,
                     "a config that loads gives the RoPE attention factor %g", attention_factor);
        for (int i = 0; i < c.head_dim / 2; i++)
            fuzz_require(isfinite(inv_freq[i]), "a config that loads gives RoPE frequency %d = %g (seq_len %lld)", i,
                         inv_freq[i], (long long)seq_lens[k]);
    }
    free(inv_freq);
}

static void check_gpt2_config(const char *path, bool json) {
    gpt2_config g;
    kn_clear_error();
    if (fuzz_failed(gpt2_config_load(path, &g) != KN_OK, "gpt2_config_load")) return;
    fuzz_require(json, "gpt2_config_load accepts a file that is not one JSON value");
    fuzz_require(gpt2_config_check(&g) == KN_OK, "gpt2_config_load gives a config gpt2_config_check refuses: %s",
                 kn_last_error());
}

static void check_generation_config(const char *dir, bool json) {
    lm_generate_options o = lm_generate_defaults();
    kn_clear_error();
    if (fuzz_failed(lm_generation_config_load(dir, &o) != KN_OK, "lm_generation_config_load")) return;
    fuzz_require(json, "lm_generation_config_load accepts a file that is not one JSON value");
    const lm_sampling *s = &o.sampling;
    fuzz_require(s->temperature >= 0 && s->top_k >= 0 && s->top_p >= 0 && s->top_p <= 1 &&
                     s->repetition_penalty > 0 && o.max_new_tokens >= 0,
                 "generation_config.json gives temperature %g, top_k %d, top_p %g, repetition_penalty %g, "
                 "max_new_tokens %d",
                 s->temperature, s->top_k, s->top_p, s->repetition_penalty, o.max_new_tokens);
    fuzz_require(o.n_eos >= -1 && o.n_eos <= LM_MAX_EOS, "generation_config.json gives %d eos ids", o.n_eos);
    for (int i = 0; i < o.n_eos; i++) fuzz_require(o.eos_ids[i] >= 0, "generation_config.json gives eos id %d", o.eos_ids[i]);
}

/* A safetensors file of one F32 tensor [2] named `name` (8-byte header length, padded JSON). */
static void write_shard(const char *file, const char *name) {
    char bytes[8 + 64 + 8] = {0}, *header = bytes + 8;
    int n = snprintf(header, 65, "{\"%s\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", name);
    memset(header + n, ' ', (size_t)(64 - n));
    bytes[0] = 64;
    fuzz_write(file, bytes, sizeof bytes);
}

/* The index's weight_map as Python's json reads it: its distinct names, each in a shard that
 * holds it ("a" in the first, "b" in the second, nothing else anywhere). */
static bool weight_map_is(const cJSON *map, const kn_hf_weights *w) {
    int names = 0;
    for (const cJSON *m = cJSON_IsObject(map) ? map->child : NULL; m; m = m->next) {
        if (fuzz_json_member(map, m->string) != m) continue; /* a repeated name counts once, last */
        if ((strcmp(m->string, "a") != 0 && strcmp(m->string, "b") != 0) || kn_hf_weights_find(w, m->string) < 0)
            return false;
        names++;
    }
    return kn_hf_weights_count(w) == names;
}

static void check_index(const char *path, const uint8_t *data, size_t size, bool json) {
    static bool shards;
    if (!shards) {
        write_shard("model-00001-of-00002.safetensors", "a");
        write_shard("model-00002-of-00002.safetensors", "b");
        shards = true;
    }
    kn_clear_error();
    kn_hf_weights *w = kn_hf_weights_open(path);
    if (fuzz_failed(!w, "kn_hf_weights_open")) return;
    fuzz_require(json, "kn_hf_weights_open accepts an index that is not one JSON value");
    cJSON *root = cJSON_ParseWithLength((const char *)data, size);
    fuzz_require(weight_map_is(fuzz_json_member(root, "weight_map"), w),
                 "an index that opens does not give exactly the tensors its weight_map names");
    cJSON_Delete(root);
    kn_hf_weights_close(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    bool json = fuzz_is_json(data, size);
    const char *config = fuzz_write("config.json", data, size);
    check_lm_config(config, json);
    check_gpt2_config(config, json);
    fuzz_write("generation_config.json", data, size);
    check_generation_config(fuzz_dir(), json);
    check_index(fuzz_write("model.safetensors.index.json", data, size), data, size, json);
    return 0;
}
