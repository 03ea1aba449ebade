/* Causal language models loaded from Hugging Face directories (config.json + safetensors):
 * GPT-2, Llama 2 and 3, Mistral, Qwen2 and Qwen3, each a kn_module tree whose state_dict names are the
 * transformers names, written against kiln's public API only.
 *
 * One interface for every family, so that generation, fine-tuning, tests and benchmarks do
 * not care which one they hold. */
#ifndef KILN_MODELS_LM_H
#define KILN_MODELS_LM_H

#include <kiln/kiln.h>

typedef enum lm_family { LM_GPT2, LM_LLAMA, LM_QWEN2, LM_QWEN3, LM_MISTRAL } lm_family;

typedef enum lm_rope_type { LM_ROPE_DEFAULT, LM_ROPE_LINEAR, LM_ROPE_DYNAMIC, LM_ROPE_LLAMA3, LM_ROPE_YARN } lm_rope_type;

typedef struct lm_rope_scaling {
    lm_rope_type type;
    double factor;
    double low_freq_factor, high_freq_factor;  /* llama3 */
    double beta_fast, beta_slow;               /* yarn */
    double attention_factor;                   /* yarn: 0 = from factor (and mscale, mscale_all_dim) */
    double mscale, mscale_all_dim;             /* yarn; 0 when absent */
    bool truncate;                             /* yarn: round the correction range (default true) */
    int original_max_position_embeddings;
} lm_rope_scaling;

#define LM_MAX_EOS 8

typedef struct lm_config {
    lm_family family;
    int vocab_size, hidden_size, n_layers, n_heads, n_kv_heads, head_dim, intermediate_size;
    int max_position_embeddings;  /* GPT-2: n_positions */
    double norm_eps;              /* rms_norm_eps / layer_norm_epsilon */
    double rope_theta;
    lm_rope_scaling rope_scaling;
    double dropout;               /* training only: GPT-2's *_pdrop, Llama/Qwen's attention_dropout */
    bool tie_word_embeddings;
    bool attention_bias;          /* q/k/v biases: Qwen2 true, Llama's attention_bias */
    bool qk_norm;                 /* Qwen3: RMSNorm on q and k per head */
    int sliding_window;           /* Mistral: a query sees the last sliding_window keys (itself included); 0: all */
    int bos_token_id;             /* -1 when absent */
    int eos_token_ids[LM_MAX_EOS];
    int n_eos;
    kn_dtype torch_dtype;         /* the config's torch_dtype (KN_F32 when absent) */
} lm_config;

/* Reads config.json (model_type gpt2, llama, mistral, qwen2 or qwen3); an unknown model_type,
 * or a key that is missing, of the wrong type, out of range or inconsistent, is an error
 * naming the file and the key. */
kn_status lm_config_load(const char *path, lm_config *out);
const char *lm_family_name(lm_family f);
/* RoPE's inverse frequencies (head_dim / 2 of them) and the factor cos and sin are scaled by,
 * as transformers computes them for the config's rope type; seq_len (the largest position
 * + 1) matters to the dynamic type only. */
kn_status lm_rope_frequencies(const lm_config *c, int64_t seq_len, float *inv_freq, double *attention_factor);

typedef struct lm lm;

typedef struct lm_load_options {
    kn_device device;   /* where the weights go (KN_CPU, KN_META...) */
    kn_dtype dtype;     /* KN_DTYPE_COUNT: as stored in the files */
} lm_load_options;

/* Checks config c (read from config_path, for messages) against the weights' headers: the
 * tensors that fix each size the config gives must be there with the shapes it makes. An error
 * names the config file, its keys and the tensor. lm_load runs it before it builds anything. */
kn_status lm_check_weights(const lm_config *c, const char *config_path, const kn_hf_weights *w);
/* dir holds config.json and the safetensors weights (see kiln/hf.h); o NULL: the CPU, as stored. */
lm *lm_load(const char *dir, const lm_load_options *o);
/* A model with seeded random weights (the current Philox seed) on the default device (GPT-2:
 * f32 only; a file of another dtype loads as stored). */
lm *lm_new(const lm_config *c, kn_dtype dtype);
void lm_free(lm *m);
const lm_config *lm_config_of(const lm *m);
/* The module tree (state_dict names as in transformers); parameters require grad. Models
 * start in eval mode (no dropout): kn_module_train(lm_module(m), true) to fine-tune. */
void *lm_module(lm *m);
kn_dtype lm_dtype(const lm *m);

/* Keys and values of past positions, for generation. Rows of a batch may start with left
 * padding (prompts of different lengths): pad[b] positions that no query attends to, after
 * which row b's positions start at 0. */
typedef struct lm_cache lm_cache;
lm_cache *lm_cache_new(lm *m, int64_t batch, int64_t max_len);
void lm_cache_free(lm_cache *c);
/* pad: batch values, or NULL for none; only on an empty cache. */
kn_status lm_cache_set_padding(lm_cache *c, const int64_t *pad);
int64_t lm_cache_len(const lm_cache *c);
int64_t lm_cache_capacity(const lm_cache *c);
void lm_cache_reset(lm_cache *c);

/* Logits [B, T, V] (f32) for ids [B, T] (i64). With a cache the positions continue after what
 * it holds and it grows by T; without one (training) the positions are 0 .. T-1. */
kn_tensor *lm_forward(lm *m, kn_tensor *ids, lm_cache *cache);
/* The same, for the last position only: [B, V] (the head runs on one row per sequence). */
kn_tensor *lm_forward_last(lm *m, kn_tensor *ids, lm_cache *cache);
/* Mean cross-entropy of the next-token logits against targets [B, T] (ignore_index -1). */
kn_tensor *lm_loss(lm *m, kn_tensor *ids, kn_tensor *targets);

/* Saves the weights in the transformers naming (config.json is not written). */
kn_status lm_save_weights(lm *m, const char *path);

#endif
