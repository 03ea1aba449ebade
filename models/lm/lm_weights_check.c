/* lm_check_weights: config.json against the weights' headers, before a model is built from
 * the config. The tensors that fix every size the config gives (vocabulary, width, heads,
 * head_dim, MLP width, layer count) must be in the files with the shapes the config makes, so
 * that no size is trusted (to allocate layers, rotary tables...) before the weights agree. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "lm/lm.h"

typedef struct expected {
    char name[96];
    int64_t rows, cols;  /* cols 0: a vector */
    char keys[160];      /* the config keys and values that make this shape */
} expected;

/* The llama family's (Llama, Mistral, Qwen) tensors, or GPT-2's (file names with or without
 * "transformer."); returns how many. */
static int expectations(const lm_config *c, expected *e) {
    int64_t V = c->vocab_size, C = c->hidden_size, H = c->n_heads, Hkv = c->n_kv_heads, D = c->head_dim,
            I = c->intermediate_size, L = c->n_layers;
    if (c->family == LM_GPT2) {
        e[0] = (expected){"wte.weight", V, C, ""};
        snprintf(e[0].keys, sizeof e[0].keys, "vocab_size %" PRId64 " and n_embd %" PRId64, V, C);
        e[1] = (expected){"wpe.weight", c->max_position_embeddings, C, ""};
        snprintf(e[1].keys, sizeof e[1].keys, "n_positions %d and n_embd %" PRId64, c->max_position_embeddings, C);
        e[2] = (expected){"h.0.mlp.c_fc.weight", C, I, ""};
        snprintf(e[2].keys, sizeof e[2].keys, "n_embd %" PRId64 " and n_inner %" PRId64, C, I);
        e[3] = (expected){"", C, 0, ""};
        snprintf(e[3].name, sizeof e[3].name, "h.%" PRId64 ".ln_1.weight", L - 1);
        snprintf(e[3].keys, sizeof e[3].keys, "n_layer %" PRId64, L);
        return 4;
    }
    e[0] = (expected){"model.embed_tokens.weight", V, C, ""};
    snprintf(e[0].keys, sizeof e[0].keys, "vocab_size %" PRId64 " and hidden_size %" PRId64, V, C);
    e[1] = (expected){"model.layers.0.self_attn.q_proj.weight", H * D, C, ""};
    snprintf(e[1].keys, sizeof e[1].keys, "num_attention_heads %" PRId64 " and head_dim %" PRId64, H, D);
    e[2] = (expected){"model.layers.0.self_attn.k_proj.weight", Hkv * D, C, ""};
    snprintf(e[2].keys, sizeof e[2].keys, "num_key_value_heads %" PRId64 " and head_dim %" PRId64, Hkv, D);
    e[3] = (expected){"model.layers.0.mlp.gate_proj.weight", I, C, ""};
    snprintf(e[3].keys, sizeof e[3].keys, "intermediate_size %" PRId64, I);
    e[4] = (expected){"", C, 0, ""};
    snprintf(e[4].name, sizeof e[4].name, "model.layers.%" PRId64 ".input_layernorm.weight", L - 1);
    snprintf(e[4].keys, sizeof e[4].keys, "num_hidden_layers %" PRId64, L);
    return 5;
}

static int find(const lm_config *c, const kn_hf_weights *w, const char *name) {
    char prefixed[128];
    int i = kn_hf_weights_find(w, name);
    if (i < 0 && c->family == LM_GPT2) {
        snprintf(prefixed, sizeof prefixed, "transformer.%.100s", name);
        i = kn_hf_weights_find(w, prefixed);
    }
    return i;
}

static const char *shape_text(kn_shape s, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "[");
    for (int d = 0; d < s.n && len < n; d++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, d ? ", " : "", s.v[d]);
    if (len < n) snprintf(buf + len, n - len, "]");
    return buf;
}

kn_status lm_check_weights(const lm_config *c, const char *config_path, const kn_hf_weights *w) {
    expected e[5];
    int n = expectations(c, e);
    for (int k = 0; k < n; k++) {
        int i = find(c, w, e[k].name);
        if (i < 0)
            return kn_set_error(KN_ERR_SHAPE, "%s: no tensor '%s', which %s's %s needs", kn_hf_weights_file(w, 0),
                                e[k].name, config_path, e[k].keys);
        kn_shape s = kn_hf_weights_shape(w, i);
        bool fits = e[k].cols ? s.n == 2 && s.v[0] == e[k].rows && s.v[1] == e[k].cols : s.n == 1 && s.v[0] == e[k].rows;
        if (fits) continue;
        char have[96], want[96];
        shape_text(e[k].cols ? KN_SHAPE(e[k].rows, e[k].cols) : KN_SHAPE(e[k].rows), want, sizeof want);
        shape_text(s, have, sizeof have);
        return kn_set_error(KN_ERR_SHAPE, "%s: %s make '%s' %s, but %s holds it as %s", config_path, e[k].keys,
                            kn_hf_weights_name(w, i), want, kn_hf_weights_file(w, i), have);
    }
    return KN_OK;
}
