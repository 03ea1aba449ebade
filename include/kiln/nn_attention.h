/* Multi-head causal self-attention with grouped-query heads, rotary embeddings and a KV cache. */
#ifndef KILN_NN_ATTENTION_H
#define KILN_NN_ATTENTION_H

#include "kiln/nn_layers.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rotary position embedding of x [..., T, D] (D even) at positions offset .. offset+T-1, in
 * the rotate-half convention of Hugging Face's Llama: x * cos + rotate_half(x) * sin with
 * frequencies theta^(-2i/D), computed in f32 (f64 for f64 x) and cast to x's dtype. */
KN_API kn_tensor *kn_nn_rope(kn_tensor *x, int64_t offset, double theta);

typedef struct kn_nn_attention_cfg {
    int64_t dim;          /* model width C */
    int64_t n_heads;
    int64_t n_kv_heads;   /* 0: n_heads; otherwise it must divide n_heads */
    int64_t head_dim;     /* 0: dim / n_heads */
    bool qkv_bias;        /* biases on q_proj, k_proj, v_proj (Qwen2: true, Llama: false) */
    bool out_bias;        /* bias on o_proj */
    double rope_theta;    /* 0: no rotary embedding; Llama: 10000 */
    double dropout;       /* attention-probability dropout, in training mode only */
    kn_dtype dtype;
} kn_nn_attention_cfg;

/* Children q_proj [H*D, C], k_proj and v_proj [Hkv*D, C], o_proj [C, H*D] (Linear). */
typedef struct kn_nn_attention {
    kn_module base;
    kn_nn_attention_cfg cfg;   /* with n_kv_heads and head_dim filled in */
    kn_nn_linear *q_proj, *k_proj, *v_proj, *o_proj;
} kn_nn_attention;
/* NULL with KN_ERR_ARG for sizes that do not fit (n_heads not a multiple of n_kv_heads, ...). */
KN_API kn_nn_attention *kn_nn_attention_new(kn_nn_attention_cfg cfg);

/* Keys and values of past positions for one attention layer, for generation: k and v are
 * [B, Hkv, max_len, D] buffers of which the first len positions are filled. Inference only:
 * appending copies values and keeps no gradient history. */
typedef struct kn_kv_cache {
    kn_tensor *k, *v;
    int64_t batch, max_len, len;
} kn_kv_cache;
KN_API kn_kv_cache *kn_kv_cache_new(const kn_nn_attention *a, int64_t batch, int64_t max_len);
KN_API void kn_kv_cache_reset(kn_kv_cache *c);   /* len = 0 */
KN_API void kn_kv_cache_free(kn_kv_cache *c);

/* x [B, T, C] -> [B, T, C], causal, positions 0 .. T-1. */
KN_API kn_tensor *kn_nn_attention_forward(kn_nn_attention *a, kn_tensor *x);
/* The same at positions cache->len .. cache->len+T-1: appends this step's keys and values to
 * the cache and attends over all cached positions (causally within the step). The cache
 * advances only when the call succeeds; a step past max_len is an error. cache NULL is
 * kn_nn_attention_forward. */
KN_API kn_tensor *kn_nn_attention_forward_cached(kn_nn_attention *a, kn_tensor *x, kn_kv_cache *cache);

#ifdef __cplusplus
}
#endif
#endif
