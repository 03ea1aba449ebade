/* config.json of GPT-2, Llama, Qwen2 and Qwen3, read with the defaults transformers applies,
 * and the RoPE inverse frequencies of each rope_scaling type. */
#include <math.h>
#include <string.h>

#include "gpt2/gpt2.h"
#include "lm/json_file.h"
#include "lm/lm.h"

const char *lm_family_name(lm_family f) {
    static const char *const names[] = {"gpt2", "llama", "qwen2", "qwen3"};
    return (unsigned)f < sizeof names / sizeof *names ? names[f] : "?";
}

typedef struct reader {
    const char *path;
    const cJSON *root;
    bool ok;
} reader;

static const cJSON *item(const cJSON *obj, const char *key) { return cJSON_GetObjectItemCaseSensitive(obj, key); }

static bool fail(reader *r, const char *key, const char *problem) {
    if (r->ok) kn_set_error(KN_ERR_IO, "%s: \"%s\" %s", r->path, key, problem);
    r->ok = false;
    return false;
}

/* A positive integer; def when absent and def > 0, else the key is required. */
static int int_key(reader *r, const cJSON *obj, const char *key, int def) {
    const cJSON *v = item(obj, key);
    if ((!v || cJSON_IsNull(v)) && def > 0) return def;
    if (!v) return fail(r, key, "is missing"), 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 1e9)
        return fail(r, key, "must be a positive integer"), 0;
    return (int)v->valuedouble;
}

static double num_key(reader *r, const cJSON *obj, const char *key, double def) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsNumber(v)) return fail(r, key, "must be a number"), def;
    return v->valuedouble;
}

static bool bool_key(reader *r, const cJSON *obj, const char *key, bool def) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) return def;
    if (!cJSON_IsBool(v)) return fail(r, key, "must be true or false"), def;
    return cJSON_IsTrue(v);
}

static const char *string_key(reader *r, const cJSON *obj, const char *key) {
    const cJSON *v = item(obj, key);
    if (!v || cJSON_IsNull(v)) return NULL;
    if (!cJSON_IsString(v)) return fail(r, key, "must be a string"), NULL;
    return v->valuestring;
}

/* bos_token_id, eos_token_id (a number or a list), torch_dtype / dtype: every family. */
static void read_common(reader *r, lm_config *c) {
    const cJSON *bos = item(r->root, "bos_token_id"), *eos = item(r->root, "eos_token_id");
    c->bos_token_id = cJSON_IsNumber(bos) ? (int)bos->valuedouble : -1;
    c->n_eos = 0;
    if (cJSON_IsNumber(eos)) {
        c->eos_token_ids[c->n_eos++] = (int)eos->valuedouble;
    } else if (cJSON_IsArray(eos)) {
        const cJSON *e;
        cJSON_ArrayForEach(e, eos) {
            if (!cJSON_IsNumber(e)) return (void)fail(r, "eos_token_id", "must hold numbers");
            if (c->n_eos == LM_MAX_EOS) return (void)fail(r, "eos_token_id", "lists more ids than kiln keeps (8)");
            c->eos_token_ids[c->n_eos++] = (int)e->valuedouble;
        }
    } else if (eos && !cJSON_IsNull(eos)) {
        fail(r, "eos_token_id", "must be a number or a list of numbers");
    }
    const char *dtype = string_key(r, r->root, "torch_dtype");
    if (!dtype) dtype = string_key(r, r->root, "dtype");
    c->torch_dtype = KN_F32;
    if (dtype && strcmp(dtype, "float32") == 0) c->torch_dtype = KN_F32;
    else if (dtype && strcmp(dtype, "float16") == 0) c->torch_dtype = KN_F16;
    else if (dtype && strcmp(dtype, "bfloat16") == 0) c->torch_dtype = KN_BF16;
    else if (dtype) fail(r, "torch_dtype", "is not float32, float16 or bfloat16");
}

/* rope_scaling (before transformers 5) or rope_parameters (since), and rope_theta inside or beside it. */
static void read_rope(reader *r, lm_config *c) {
    const cJSON *rp = item(r->root, "rope_parameters");
    const char *key = "rope_parameters";
    if (!rp || cJSON_IsNull(rp)) rp = item(r->root, "rope_scaling"), key = "rope_scaling";
    lm_rope_scaling *s = &c->rope_scaling;
    *s = (lm_rope_scaling){.type = LM_ROPE_DEFAULT, .factor = 1, .truncate = true,
                           .original_max_position_embeddings = c->max_position_embeddings};
    c->rope_theta = num_key(r, r->root, "rope_theta", 10000.0);
    if (!rp || cJSON_IsNull(rp)) return;
    if (!cJSON_IsObject(rp)) return (void)fail(r, key, "must be an object");
    c->rope_theta = num_key(r, rp, "rope_theta", c->rope_theta);
    const char *type = string_key(r, rp, "rope_type");
    if (!type) type = string_key(r, rp, "type");
    static const char *const types[] = {"default", "linear", "dynamic", "llama3", "yarn"};
    int t = -1;
    for (int i = 0; type && i < 5; i++)
        if (strcmp(type, types[i]) == 0) t = i;
    if (t < 0) return (void)fail(r, key, "has a rope_type kiln does not know (default, linear, dynamic, llama3, yarn)");
    s->type = (lm_rope_type)t;
    s->factor = num_key(r, rp, "factor", s->type == LM_ROPE_DEFAULT ? 1.0 : 0.0);
    s->original_max_position_embeddings = int_key(r, rp, "original_max_position_embeddings", c->max_position_embeddings);
    if (s->type == LM_ROPE_YARN && s->factor == 0)
        s->factor = (double)c->max_position_embeddings / s->original_max_position_embeddings;
    s->low_freq_factor = num_key(r, rp, "low_freq_factor", 0);
    s->high_freq_factor = num_key(r, rp, "high_freq_factor", 0);
    s->beta_fast = num_key(r, rp, "beta_fast", 0);
    s->beta_slow = num_key(r, rp, "beta_slow", 0);
    if (s->beta_fast == 0) s->beta_fast = 32;   /* transformers: `or 32`, so 0 and null too */
    if (s->beta_slow == 0) s->beta_slow = 1;
    s->attention_factor = num_key(r, rp, "attention_factor", 0);
    s->mscale = num_key(r, rp, "mscale", 0);
    s->mscale_all_dim = num_key(r, rp, "mscale_all_dim", 0);
    s->truncate = bool_key(r, rp, "truncate", true);
    if (!r->ok) return;
    if (s->type != LM_ROPE_DEFAULT && !(s->factor > 0)) fail(r, key, "needs a positive factor");
    else if (s->type == LM_ROPE_LLAMA3 && !(s->high_freq_factor > s->low_freq_factor && s->low_freq_factor > 0))
        fail(r, key, "(llama3) needs high_freq_factor > low_freq_factor > 0");
}

static void read_llama(reader *r, lm_config *c, const char *model_type) {
    const cJSON *root = r->root;
    c->family = strcmp(model_type, "qwen2") == 0 ? LM_QWEN2 : strcmp(model_type, "qwen3") == 0 ? LM_QWEN3 : LM_LLAMA;
    c->vocab_size = int_key(r, root, "vocab_size", 0);
    c->hidden_size = int_key(r, root, "hidden_size", 0);
    c->intermediate_size = int_key(r, root, "intermediate_size", 0);
    c->n_layers = int_key(r, root, "num_hidden_layers", 0);
    c->n_heads = int_key(r, root, "num_attention_heads", 0);
    if (!r->ok) return;
    c->n_kv_heads = int_key(r, root, "num_key_value_heads", c->n_heads);
    /* Qwen3's head_dim defaults to 128 in transformers; the others derive it */
    c->head_dim = int_key(r, root, "head_dim", c->family == LM_QWEN3 ? 128 : c->hidden_size / c->n_heads);
    c->max_position_embeddings =
        int_key(r, root, "max_position_embeddings", c->family == LM_LLAMA ? 2048 : 32768);
    c->norm_eps = num_key(r, root, "rms_norm_eps", 1e-6);
    c->dropout = num_key(r, root, "attention_dropout", 0);
    c->tie_word_embeddings = bool_key(r, root, "tie_word_embeddings", false);
    c->attention_bias = c->family == LM_QWEN2 || bool_key(r, root, "attention_bias", false);
    c->qk_norm = c->family == LM_QWEN3;
    const char *act = string_key(r, root, "hidden_act");
    if (act && strcmp(act, "silu") != 0) fail(r, "hidden_act", "is not silu, the only activation kiln runs for this family");
    if (bool_key(r, root, "mlp_bias", false)) fail(r, "mlp_bias", "is true; kiln runs these families without MLP biases");
    if (bool_key(r, root, "use_sliding_window", false))
        fail(r, "use_sliding_window", "is true; kiln has no sliding-window attention");
    read_rope(r, c);
    if (r->ok && c->n_heads % c->n_kv_heads)
        fail(r, "num_key_value_heads", "must divide num_attention_heads");
    else if (r->ok && c->head_dim % 2)
        fail(r, "head_dim", "must be even (rotary embeddings rotate pairs)");
    else if (r->ok && !(c->norm_eps > 0))
        fail(r, "rms_norm_eps", "must be positive");
    else if (r->ok && !(c->dropout >= 0 && c->dropout < 1))
        fail(r, "attention_dropout", "must be in [0, 1)");
}

static void from_gpt2(const gpt2_config *g, lm_config *c) {
    c->family = LM_GPT2;
    c->vocab_size = g->vocab_size;
    c->hidden_size = g->n_embd;
    c->n_layers = g->n_layer;
    c->n_heads = c->n_kv_heads = g->n_head;
    c->head_dim = g->n_embd / g->n_head;
    c->intermediate_size = g->n_inner ? g->n_inner : 4 * g->n_embd;
    c->max_position_embeddings = g->n_positions;
    c->norm_eps = g->layer_norm_epsilon;
    c->dropout = g->dropout;
    c->tie_word_embeddings = g->tie_word_embeddings;
    c->attention_bias = true;
}

kn_status lm_config_load(const char *path, lm_config *out) {
    cJSON *root = json_file_read(path);
    if (!root) return kn_last_status();
    reader r = {.path = path, .root = root, .ok = true};
    lm_config c = {0};
    const char *type = string_key(&r, root, "model_type");
    if (r.ok && !type) fail(&r, "model_type", "is missing");
    if (!r.ok) {
    } else if (strcmp(type, "gpt2") == 0) {
        gpt2_config g;
        if (gpt2_config_load(path, &g) == KN_OK) from_gpt2(&g, &c);
        else r.ok = false;
    } else if (strcmp(type, "llama") == 0 || strcmp(type, "qwen2") == 0 || strcmp(type, "qwen3") == 0) {
        read_llama(&r, &c, type);
    } else {
        kn_set_error(KN_ERR_IO, "%s: model_type \"%s\" is not one kiln runs (gpt2, llama, qwen2, qwen3)", path, type);
        r.ok = false;
    }
    if (r.ok) read_common(&r, &c);
    cJSON_Delete(root);
    if (!r.ok) return kn_last_status();
    *out = c;
    return KN_OK;
}

/* ---- rotary frequencies -------------------------------------------------------------------- */

static double yarn_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * log(scale) + 1.0; }

static double yarn_correction_dim(double rotations, int dim, double base, int max_pos) {
    return dim * log(max_pos / (rotations * 2 * M_PI)) / (2 * log(base));
}

kn_status lm_rope_frequencies(const lm_config *c, int64_t seq_len, float *inv_freq, double *attention_factor) {
    const lm_rope_scaling *s = &c->rope_scaling;
    int dim = c->head_dim, half = dim / 2;
    double base = c->rope_theta;
    *attention_factor = 1.0;
    if (s->type == LM_ROPE_DYNAMIC && seq_len > c->max_position_embeddings)
        base *= pow(s->factor * (double)seq_len / c->max_position_embeddings - (s->factor - 1), (double)dim / (dim - 2));
    /* transformers computes base ** (2i / dim) in f32: the float rounding of each step is kept */
    for (int i = 0; i < half; i++) inv_freq[i] = (float)(1.0 / (float)pow(base, (double)(float)(2.0 * i / dim)));
    if (s->type == LM_ROPE_LINEAR) {
        for (int i = 0; i < half; i++) inv_freq[i] = (float)(inv_freq[i] / s->factor);
    } else if (s->type == LM_ROPE_LLAMA3) {
        double old = s->original_max_position_embeddings;
        double low_wavelen = old / s->low_freq_factor, high_wavelen = old / s->high_freq_factor;
        for (int i = 0; i < half; i++) {
            double f = inv_freq[i], wavelen = 2 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= s->factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (old / wavelen - s->low_freq_factor) / (s->high_freq_factor - s->low_freq_factor);
                f = (1 - smooth) * f / s->factor + smooth * f;
            }
            inv_freq[i] = (float)f;
        }
    } else if (s->type == LM_ROPE_YARN) {
        double factor = s->factor;
        *attention_factor = s->attention_factor > 0 ? s->attention_factor
                            : s->mscale != 0 && s->mscale_all_dim != 0
                                ? yarn_mscale(factor, s->mscale) / yarn_mscale(factor, s->mscale_all_dim)
                                : yarn_mscale(factor, 1);
        int orig = s->original_max_position_embeddings;
        double low = yarn_correction_dim(s->beta_fast, dim, base, orig);
        double high = yarn_correction_dim(s->beta_slow, dim, base, orig);
        if (s->truncate) low = floor(low), high = ceil(high);
        low = fmax(low, 0), high = fmin(high, dim - 1);
        if (low == high) high += 0.001;
        for (int i = 0; i < half; i++) {
            double extrapolation = inv_freq[i], interpolation = (float)(1.0 / (factor * (1.0 / extrapolation)));
            double ramp = fmin(fmax((i - low) / (high - low), 0), 1);
            double keep = 1 - ramp;   /* the share of the extrapolated (unscaled) frequency */
            inv_freq[i] = (float)(interpolation * (1 - keep) + extrapolation * keep);
        }
    }
    return KN_OK;
}
