/* config.json of GPT-2, Llama, Mistral, Qwen2 and Qwen3, read with the defaults transformers
 * applies, and the RoPE inverse frequencies of each rope_scaling type. */
#include <float.h>
#include <math.h>
#include <string.h>

#include "gpt2/gpt2.h"
#include "lm/config_reader.h"
#include "lm/lm.h"

static const char *const FAMILY_NAMES[] = {"gpt2", "llama", "qwen2", "qwen3", "mistral"};
#define N_FAMILIES (int)(sizeof FAMILY_NAMES / sizeof *FAMILY_NAMES)

const char *lm_family_name(lm_family f) { return (unsigned)f < (unsigned)N_FAMILIES ? FAMILY_NAMES[f] : "?"; }

/* A size (layers, widths, heads): a positive int; def when absent, or CFG_REQUIRED. */
static int size_key(cfg_reader *r, const char *key, int64_t def) {
    return (int)cfg_int(r, r->root, key, 1, INT32_MAX, def);
}

/* bos_token_id, eos_token_id (an id or a list of them), torch_dtype / dtype: every family. */
static void read_common(cfg_reader *r, lm_config *c) {
    c->bos_token_id = (int)cfg_int(r, r->root, "bos_token_id", 0, INT32_MAX, -1);
    c->n_eos = 0;
    const cJSON *eos = cfg_item(r->root, "eos_token_id");
    int n = cJSON_IsArray(eos) ? cJSON_GetArraySize(eos) : eos ? 1 : 0;
    if (n > LM_MAX_EOS) cfg_fail(r, "eos_token_id", "lists %d ids; kiln keeps up to %d", n, LM_MAX_EOS);
    for (int i = 0; i < n && r->ok; i++) {
        int64_t id;
        if (cfg_int_value(r, cJSON_IsArray(eos) ? cJSON_GetArrayItem(eos, i) : eos, "eos_token_id", 0, INT32_MAX, &id))
            c->eos_token_ids[c->n_eos++] = (int)id;
    }
    const char *dtype = cfg_string(r, r->root, "torch_dtype");
    if (!dtype) dtype = cfg_string(r, r->root, "dtype");
    c->torch_dtype = KN_F32;
    if (dtype && strcmp(dtype, "float32") == 0) c->torch_dtype = KN_F32;
    else if (dtype && strcmp(dtype, "float16") == 0) c->torch_dtype = KN_F16;
    else if (dtype && strcmp(dtype, "bfloat16") == 0) c->torch_dtype = KN_BF16;
    else if (dtype) cfg_fail(r, "torch_dtype", "is \"%s\", not float32, float16 or bfloat16", dtype);
}

/* rope_scaling (before transformers 5) or rope_parameters (since), and rope_theta inside or beside it. */
static void read_rope(cfg_reader *r, lm_config *c) {
    const char *key = "rope_parameters";
    const cJSON *rp = cfg_item(r->root, key);
    if (!rp) key = "rope_scaling", rp = cfg_item(r->root, key);
    lm_rope_scaling *s = &c->rope_scaling;
    *s = (lm_rope_scaling){.type = LM_ROPE_DEFAULT, .factor = 1, .truncate = true,
                           .original_max_position_embeddings = c->max_position_embeddings};
    c->rope_theta = cfg_positive(r, r->root, "rope_theta", 10000.0);
    if (!rp) return;
    if (!cJSON_IsObject(rp)) return (void)cfg_fail(r, key, "must be an object");
    r->within = key;
    c->rope_theta = cfg_positive(r, rp, "rope_theta", c->rope_theta);
    const char *type = cfg_string(r, rp, "rope_type");
    if (!type) type = cfg_string(r, rp, "type");
    static const char *const types[] = {"default", "linear", "dynamic", "llama3", "yarn"};
    int t = -1;
    for (int i = 0; type && i < 5; i++)
        if (strcmp(type, types[i]) == 0) t = i;
    if (!type) cfg_fail(r, "rope_type", "is missing");
    else if (t < 0) cfg_fail(r, "rope_type", "is \"%s\", a rope_type kiln does not know (default, linear, dynamic, llama3, yarn)", type);
    s->type = t < 0 ? LM_ROPE_DEFAULT : (lm_rope_type)t;
    s->factor = cfg_positive(r, rp, "factor", s->type == LM_ROPE_DEFAULT ? 1.0 : 0.0);
    s->original_max_position_embeddings =
        (int)cfg_int(r, rp, "original_max_position_embeddings", 1, INT32_MAX, c->max_position_embeddings);
    if (s->type == LM_ROPE_YARN && s->factor == 0)
        s->factor = (double)c->max_position_embeddings / s->original_max_position_embeddings;
    s->low_freq_factor = cfg_num(r, rp, "low_freq_factor", 0, DBL_MAX, 0);
    s->high_freq_factor = cfg_num(r, rp, "high_freq_factor", 0, DBL_MAX, 0);
    s->beta_fast = cfg_num(r, rp, "beta_fast", 0, DBL_MAX, 0);
    s->beta_slow = cfg_num(r, rp, "beta_slow", 0, DBL_MAX, 0);
    if (s->beta_fast == 0) s->beta_fast = 32;   /* transformers: `or 32`, so 0 and null too */
    if (s->beta_slow == 0) s->beta_slow = 1;
    s->attention_factor = cfg_num(r, rp, "attention_factor", 0, DBL_MAX, 0);
    s->mscale = cfg_num(r, rp, "mscale", -DBL_MAX, DBL_MAX, 0);
    s->mscale_all_dim = cfg_num(r, rp, "mscale_all_dim", -DBL_MAX, DBL_MAX, 0);
    s->truncate = cfg_bool(r, rp, "truncate", true);
    if (s->type != LM_ROPE_DEFAULT && !(s->factor > 0)) cfg_fail(r, "factor", "is missing; %s needs it", type);
    else if (s->type == LM_ROPE_LLAMA3 && !(s->high_freq_factor > s->low_freq_factor && s->low_freq_factor > 0))
        cfg_fail(r, "high_freq_factor", "must be above low_freq_factor, and both above 0 (llama3)");
    r->within = NULL;
}

/* Llama, Mistral, Qwen2, Qwen3: one reader with each family's defaults (transformers' configs). */
static void read_llama(cfg_reader *r, lm_config *c, lm_family family) {
    const cJSON *root = r->root;
    c->family = family;
    c->vocab_size = size_key(r, "vocab_size", CFG_REQUIRED);
    c->hidden_size = size_key(r, "hidden_size", CFG_REQUIRED);
    c->intermediate_size = size_key(r, "intermediate_size", CFG_REQUIRED);
    c->n_layers = size_key(r, "num_hidden_layers", CFG_REQUIRED);
    c->n_heads = size_key(r, "num_attention_heads", CFG_REQUIRED);
    if (!r->ok) return;
    c->n_kv_heads = size_key(r, "num_key_value_heads", family == LM_MISTRAL ? 8 : c->n_heads);
    /* Qwen3's head_dim defaults to 128 in transformers; the others derive it */
    c->head_dim = size_key(r, "head_dim", family == LM_QWEN3 ? 128 : c->hidden_size / c->n_heads);
    static const int max_positions[] = {[LM_LLAMA] = 2048, [LM_QWEN2] = 32768, [LM_QWEN3] = 32768,
                                        [LM_MISTRAL] = 131072};
    c->max_position_embeddings = size_key(r, "max_position_embeddings", max_positions[family]);
    c->norm_eps = cfg_positive(r, root, "rms_norm_eps", 1e-6);
    c->dropout = cfg_num(r, root, "attention_dropout", 0, 1, 0);
    if (c->dropout == 1) cfg_fail(r, "attention_dropout", "is 1; it must be below 1");
    c->tie_word_embeddings = cfg_bool(r, root, "tie_word_embeddings", false);
    c->qk_norm = family == LM_QWEN3;
    const char *act = cfg_string(r, root, "hidden_act");
    if (act && strcmp(act, "silu") != 0) cfg_fail(r, "hidden_act", "is \"%s\"; kiln runs this family with silu only", act);
    if (family == LM_MISTRAL) {
        /* absent: transformers' default window; null: none */
        const cJSON *window = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
        c->sliding_window = !window ? 4096 : cJSON_IsNull(window) ? 0 : (int)cfg_int(r, root, "sliding_window", 1, INT32_MAX, 0);
    } else {
        c->attention_bias = family == LM_QWEN2 || cfg_bool(r, root, "attention_bias", false);
        if (cfg_bool(r, root, "mlp_bias", false)) cfg_fail(r, "mlp_bias", "is true; kiln runs this family without MLP biases");
        if (cfg_bool(r, root, "use_sliding_window", false))
            cfg_fail(r, "use_sliding_window", "is true; kiln has sliding-window attention for Mistral only");
    }
    read_rope(r, c);
    if (r->ok && c->n_heads % c->n_kv_heads) cfg_fail(r, "num_key_value_heads", "must divide num_attention_heads");
    else if (r->ok && c->head_dim < 1) cfg_fail(r, "head_dim", "is missing, and hidden_size / num_attention_heads is 0");
    else if (r->ok && c->head_dim % 2) cfg_fail(r, "head_dim", "must be even (rotary embeddings rotate pairs)");
}

static void from_gpt2(const gpt2_config *g, lm_config *c) {
    c->family = LM_GPT2;
    c->vocab_size = g->vocab_size;
    c->hidden_size = g->n_embd;
    c->n_layers = g->n_layer;
    c->n_heads = c->n_kv_heads = g->n_head;
    c->head_dim = g->n_embd / g->n_head;
    c->intermediate_size = g->n_inner ? g->n_inner : 4 * g->n_embd; /* gpt2_config_check: it fits */
    c->max_position_embeddings = g->n_positions;
    c->norm_eps = g->layer_norm_epsilon;
    c->dropout = g->dropout;
    c->tie_word_embeddings = g->tie_word_embeddings;
    c->attention_bias = true;
}

kn_status lm_config_load(const char *path, lm_config *out) {
    cfg_reader r;
    if (!cfg_open(&r, path)) return kn_last_status();
    lm_config c = {0};
    const char *type = cfg_string(&r, r.root, "model_type");
    int family = -1;
    for (int f = 0; type && f < N_FAMILIES; f++)
        if (strcmp(type, FAMILY_NAMES[f]) == 0) family = f;
    if (r.ok && !type) {
        cfg_fail(&r, "model_type", "is missing");
    } else if (r.ok && family < 0) {
        kn_set_error(KN_ERR_IO, "%s: model_type \"%s\" is not one kiln runs (it runs gpt2, llama, mistral, qwen2, qwen3)",
                     path, type);
        r.ok = false;
    } else if (family == LM_GPT2) {
        gpt2_config g;
        if (gpt2_config_load(path, &g) == KN_OK) from_gpt2(&g, &c);
        else r.ok = false;
    } else if (r.ok) {
        read_llama(&r, &c, (lm_family)family);
    }
    if (r.ok) read_common(&r, &c);
    cfg_close(&r);
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
