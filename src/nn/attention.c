/* Multi-head causal self-attention (grouped-query heads, RoPE) and its KV cache. */
#include <stdlib.h>

#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *attention_forward(void *m, kn_tensor *x) { return kn_nn_attention_forward(m, x); }

kn_nn_attention *kn_nn_attention_new(kn_nn_attention_cfg cfg) {
    if (cfg.n_kv_heads == 0) cfg.n_kv_heads = cfg.n_heads;
    if (cfg.dim <= 0 || cfg.n_heads <= 0 || cfg.n_kv_heads < 0 || cfg.head_dim < 0)
        return kn_error_null(KN_ERR_ARG, "Attention: dim %lld, n_heads %lld, n_kv_heads %lld must be positive",
                             (long long)cfg.dim, (long long)cfg.n_heads, (long long)cfg.n_kv_heads);
    if (cfg.n_heads % cfg.n_kv_heads)
        return kn_error_null(KN_ERR_ARG, "Attention: n_heads %lld is not a multiple of n_kv_heads %lld",
                             (long long)cfg.n_heads, (long long)cfg.n_kv_heads);
    if (cfg.head_dim == 0) {
        if (cfg.dim % cfg.n_heads)
            return kn_error_null(KN_ERR_ARG, "Attention: dim %lld is not a multiple of n_heads %lld (set head_dim)",
                                 (long long)cfg.dim, (long long)cfg.n_heads);
        cfg.head_dim = cfg.dim / cfg.n_heads;
    }
    if (cfg.rope_theta < 0 || (cfg.rope_theta > 0 && cfg.head_dim % 2))
        return kn_error_null(KN_ERR_ARG, "Attention: rotary embeddings need an even head_dim (%lld) and theta > 0",
                             (long long)cfg.head_dim);
    if (!(cfg.dropout >= 0 && cfg.dropout <= 1))
        return kn_error_null(KN_ERR_ARG, "Attention: dropout must be in [0, 1], not %g", cfg.dropout);
    kn_nn_attention *a = kn_module_alloc(sizeof *a, "Attention");
    if (!a) return NULL;
    a->base.forward = attention_forward;
    a->cfg = cfg;
    int64_t C = cfg.dim, q_width = cfg.n_heads * cfg.head_dim, kv_width = cfg.n_kv_heads * cfg.head_dim;
    a->q_proj = kn_module_add(a, "q_proj", kn_nn_linear_new(C, q_width, cfg.qkv_bias, cfg.dtype));
    a->k_proj = kn_module_add(a, "k_proj", kn_nn_linear_new(C, kv_width, cfg.qkv_bias, cfg.dtype));
    a->v_proj = kn_module_add(a, "v_proj", kn_nn_linear_new(C, kv_width, cfg.qkv_bias, cfg.dtype));
    a->o_proj = kn_module_add(a, "o_proj", kn_nn_linear_new(q_width, C, cfg.out_bias, cfg.dtype));
    return kn_module_check(a);
}

kn_kv_cache *kn_kv_cache_new(const kn_nn_attention *a, int64_t batch, int64_t max_len) {
    if (!a) return kn_error_null_input("kv_cache_new", 0), NULL;
    if (batch <= 0 || max_len <= 0)
        return kn_error_null(KN_ERR_ARG, "kv_cache_new: batch %lld and max_len %lld must be positive", (long long)batch,
                             (long long)max_len);
    kn_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return kn_error_null(KN_ERR_OOM, "kv_cache_new: out of host memory");
    c->batch = batch, c->max_len = max_len;
    kn_shape shape = KN_SHAPE(batch, a->cfg.n_kv_heads, max_len, a->cfg.head_dim);
    kn_scope_push();
    c->k = kn_retain(kn_zeros(shape, a->cfg.dtype));
    c->v = kn_retain(kn_zeros(shape, a->cfg.dtype));
    kn_scope_pop();
    if (!c->k || !c->v) return kn_kv_cache_free(c), NULL;
    return c;
}

void kn_kv_cache_reset(kn_kv_cache *c) {
    if (c) c->len = 0;
}

void kn_kv_cache_free(kn_kv_cache *c) {
    if (!c) return;
    kn_release(c->k), kn_release(c->v);
    free(c);
}

/* [B, T, heads * D] -> [B, heads, T, D] (a view). */
static kn_tensor *split_heads(kn_tensor *t, int64_t B, int64_t T, int64_t heads, int64_t D) {
    return kn_transpose(kn_view(t, KN_SHAPE(B, T, heads, D)), 1, 2);
}

kn_tensor *kn_nn_attention_forward(kn_nn_attention *a, kn_tensor *x) {
    return kn_nn_attention_forward_cached(a, x, NULL);
}

kn_tensor *kn_nn_attention_forward_cached(kn_nn_attention *a, kn_tensor *x, kn_kv_cache *cache) {
    if (!a || !x) return kn_error_null_input("Attention", a ? 1 : 0), NULL;
    const kn_nn_attention_cfg *cfg = &a->cfg;
    char desc[96];
    if (kn_ndim(x) != 3 || kn_size(x, 2) != cfg->dim)
        return kn_error_null(KN_ERR_SHAPE, "Attention: x must be [B, T, %lld], not %s", (long long)cfg->dim,
                             kn_describe(x, desc, sizeof desc));
    int64_t B = kn_size(x, 0), T = kn_size(x, 1), H = cfg->n_heads, Hkv = cfg->n_kv_heads, D = cfg->head_dim;
    int64_t pos = cache ? cache->len : 0;
    if (cache && (cache->batch != B || pos + T > cache->max_len))
        return kn_error_null(KN_ERR_SHAPE, "Attention: a step of %lld positions for batch %lld does not fit a cache "
                             "holding %lld of %lld positions for batch %lld",
                             (long long)T, (long long)B, (long long)pos, (long long)cache->max_len,
                             (long long)cache->batch);
    nn_enter(a);
    kn_scope_push();
    kn_tensor *q = split_heads(kn_nn_linear_forward(a->q_proj, x), B, T, H, D);
    kn_tensor *k = split_heads(kn_nn_linear_forward(a->k_proj, x), B, T, Hkv, D);
    kn_tensor *v = split_heads(kn_nn_linear_forward(a->v_proj, x), B, T, Hkv, D);
    if (cfg->rope_theta > 0) q = kn_nn_rope(q, pos, cfg->rope_theta), k = kn_nn_rope(k, pos, cfg->rope_theta);
    bool stored = true;
    if (cache) {
        stored = nn_assign(kn_narrow(cache->k, 2, pos, T), k) == KN_OK &&
                 nn_assign(kn_narrow(cache->v, 2, pos, T), v) == KN_OK;
        k = kn_narrow(cache->k, 2, 0, pos + T), v = kn_narrow(cache->v, 2, 0, pos + T);
    }
    /* causal masks are aligned bottom-right, so the step's queries see every cached key */
    kn_sdpa_opts opts = {.causal = true, .dropout_p = a->base.training ? cfg->dropout : 0.0};
    kn_tensor *y = stored ? kn_scaled_dot_product_attention(q, k, v, NULL, opts) : NULL;
    y = kn_reshape(kn_transpose(y, 1, 2), KN_SHAPE(B, T, H * D));
    kn_tensor *out = nn_leave(kn_scope_pop_keep(kn_nn_linear_forward(a->o_proj, y)));
    if (out && cache) cache->len = pos + T;
    return out;
}
