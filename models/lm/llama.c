/* Llama, Mistral, Qwen2, Qwen3: RMSNorm, rotary embeddings from each token's position,
 * grouped-query attention over the KV cache (Mistral's sliding window is lm.c's mask), SwiGLU MLP. The decode step is kept to few ops: projections are
 * plain matmuls on views, rotate_half is a strided view, the cache is written in place. */
#include "lm/llama.h"

#include <stdlib.h>

static kn_tensor *linear(void *parent, const char *name, int64_t in, int64_t out, bool bias, kn_dtype dt,
                         kn_tensor **b) {
    kn_nn_linear *l = kn_module_add(parent, name, kn_nn_linear_new(in, out, bias, dt));
    if (b) *b = l ? l->bias : NULL;
    return l ? l->weight : NULL;
}

static kn_tensor *rms_norm(void *parent, const char *name, int64_t dim, double eps, kn_dtype dt) {
    kn_nn_rms_norm *n = kn_module_add(parent, name, kn_nn_rms_norm_new(KN_SHAPE(dim), eps, dt));
    return n ? n->weight : NULL;
}

static void make_layer(llama *m, void *list, int l, kn_dtype dt) {
    const lm_config *c = &m->cfg;
    int64_t C = c->hidden_size, D = c->head_dim, H = c->n_heads, Hkv = c->n_kv_heads;
    bool qkv_bias = c->attention_bias, o_bias = c->attention_bias && c->family != LM_QWEN2;
    llama_layer *y = &m->layers[l];
    void *layer = kn_module_add(list, NULL, kn_module_alloc(sizeof(kn_module), "DecoderLayer"));
    void *attn = kn_module_add(layer, "self_attn", kn_module_alloc(sizeof(kn_module), "Attention"));
    y->wq = linear(attn, "q_proj", C, H * D, qkv_bias, dt, &y->bq);
    y->wk = linear(attn, "k_proj", C, Hkv * D, qkv_bias, dt, &y->bk);
    y->wv = linear(attn, "v_proj", C, Hkv * D, qkv_bias, dt, &y->bv);
    y->wo = linear(attn, "o_proj", H * D, C, o_bias, dt, &y->bo);
    if (c->qk_norm) {
        y->q_norm = rms_norm(attn, "q_norm", D, c->norm_eps, dt);
        y->k_norm = rms_norm(attn, "k_norm", D, c->norm_eps, dt);
    }
    void *mlp = kn_module_add(layer, "mlp", kn_module_alloc(sizeof(kn_module), "MLP"));
    y->gate = linear(mlp, "gate_proj", C, c->intermediate_size, false, dt, NULL);
    y->up = linear(mlp, "up_proj", C, c->intermediate_size, false, dt, NULL);
    y->down = linear(mlp, "down_proj", c->intermediate_size, C, false, dt, NULL);
    y->input_norm = rms_norm(layer, "input_layernorm", C, c->norm_eps, dt);
    y->post_norm = rms_norm(layer, "post_attention_layernorm", C, c->norm_eps, dt);
}

llama *llama_new(const lm_config *c, kn_dtype dtype) {
    if (c->n_layers < 1 || c->hidden_size < 1 || c->n_heads < 1 || c->n_kv_heads < 1 || c->head_dim < 2 ||
        c->vocab_size < 1 || c->intermediate_size < 1 || c->n_heads % c->n_kv_heads || c->head_dim % 2) {
        kn_set_error(KN_ERR_ARG, "%s: layers %d, width %d, heads %d/%d, head_dim %d, vocab %d, intermediate %d do not "
                     "make a model", lm_family_name(c->family), c->n_layers, c->hidden_size, c->n_heads, c->n_kv_heads,
                     c->head_dim, c->vocab_size, c->intermediate_size);
        return NULL;
    }
    llama *m = kn_module_alloc(sizeof *m, "ForCausalLM");
    llama_layer *layers = calloc((size_t)c->n_layers, sizeof *layers);
    if (!m || !layers) {
        kn_module_free(m);
        free(layers);
        kn_set_error(KN_ERR_OOM, "%s: out of host memory", lm_family_name(c->family));
        return NULL;
    }
    m->cfg = *c;
    m->layers = layers;
    kn_no_grad_push();
    void *model = kn_module_add(m, "model", kn_module_alloc(sizeof(kn_module), "Model"));
    kn_nn_embedding *e = kn_module_add(model, "embed_tokens", kn_nn_embedding_new(c->vocab_size, c->hidden_size, dtype));
    m->embed = e ? e->weight : NULL;
    void *list = kn_module_add(model, "layers", kn_module_alloc(sizeof(kn_module), "ModuleList"));
    for (int l = 0; l < c->n_layers; l++) make_layer(m, list, l, dtype);
    m->norm = rms_norm(model, "norm", c->hidden_size, c->norm_eps, dtype);
    m->lm_head = c->tie_word_embeddings ? m->embed : linear(m, "lm_head", c->hidden_size, c->vocab_size, false, dtype, NULL);
    kn_no_grad_pop();
    if (!kn_module_check(m)) {
        free(layers);
        return NULL;
    }
    return m;
}

void llama_free(llama *m) {
    if (!m) return;
    free(m->layers);
    kn_module_free(m);
}

/* x * cos + rotate_half(x) * sin for x [B, T, heads, D]: rotate_half's halves swapped by a
 * view with a negative stride, its sign folded into the sin table. */
static kn_tensor *rope(kn_tensor *x, const lm_step *s) {
    int64_t B = kn_size(x, 0), T = kn_size(x, 1), H = kn_size(x, 2), D = kn_size(x, 3);
    kn_tensor *halves = kn_view(x, KN_SHAPE(B, T, H, 2, D / 2));
    kn_tensor *swapped = kn_slice(halves, 3, 1, -3, -1);   /* [x2, x1]: from index 1 down past 0 */
    kn_tensor *sin = kn_view(s->sin, KN_SHAPE(kn_size(s->sin, 0), T, 1, 2, D / 2));
    return kn_add(kn_mul(x, s->cos), kn_view(kn_mul(swapped, sin), KN_SHAPE(B, T, H, D)));
}

static kn_tensor *attention(llama *m, const llama_layer *y, kn_tensor *h, const lm_step *s, int l) {
    const lm_config *c = &m->cfg;
    kn_tensor *q = kn_view(kn_linear(h, y->wq, y->bq), KN_SHAPE(s->B, s->T, c->n_heads, c->head_dim));
    kn_tensor *k = kn_view(kn_linear(h, y->wk, y->bk), KN_SHAPE(s->B, s->T, c->n_kv_heads, c->head_dim));
    kn_tensor *v = kn_view(kn_linear(h, y->wv, y->bv), KN_SHAPE(s->B, s->T, c->n_kv_heads, c->head_dim));
    if (c->qk_norm) {
        q = kn_rms_norm(q, KN_SHAPE(c->head_dim), y->q_norm, c->norm_eps);
        k = kn_rms_norm(k, KN_SHAPE(c->head_dim), y->k_norm, c->norm_eps);
    }
    return kn_linear(lm_attend(s, l, rope(q, s), rope(k, s), v), y->wo, y->bo);
}

static kn_tensor *mlp(const llama_layer *y, kn_tensor *h) {
    return kn_linear(kn_mul(kn_silu(kn_linear(h, y->gate, NULL)), kn_linear(h, y->up, NULL)), y->down, NULL);
}

kn_tensor *llama_hidden(llama *m, kn_tensor *ids, const lm_step *s) {
    const lm_config *c = &m->cfg;
    kn_shape C = KN_SHAPE(c->hidden_size);
    kn_scope_push();
    kn_tensor *x = kn_embedding(m->embed, ids);
    for (int l = 0; l < c->n_layers; l++) {
        const llama_layer *y = &m->layers[l];
        x = kn_add(x, attention(m, y, kn_rms_norm(x, C, y->input_norm, c->norm_eps), s, l));
        x = kn_add(x, mlp(y, kn_rms_norm(x, C, y->post_norm, c->norm_eps)));
    }
    return kn_scope_pop_keep(kn_rms_norm(x, C, m->norm, c->norm_eps));
}

kn_tensor *llama_head(llama *m, kn_tensor *x) { return kn_linear(x, m->lm_head, NULL); }
