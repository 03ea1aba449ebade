/* GPT-2: parameters, seeded init and the forward pass, written with kiln's public API. */
#include "gpt2/gpt2.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gpt2_config gpt2_config_124m(void) {
    return (gpt2_config){.n_layer = 12, .n_head = 12, .n_embd = 768, .vocab_size = 50257, .n_positions = 1024,
                         .layer_norm_epsilon = 1e-5, .tie_word_embeddings = true};
}

kn_status gpt2_config_check(const gpt2_config *c) {
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->vocab_size < 1 || c->n_positions < 1)
        return kn_set_error(KN_ERR_ARG, "gpt2: n_layer %d, n_head %d, n_embd %d, vocab %d, n_positions %d must all be positive",
                            c->n_layer, c->n_head, c->n_embd, c->vocab_size, c->n_positions);
    if (c->n_embd % c->n_head)
        return kn_set_error(KN_ERR_ARG, "gpt2: n_embd %d is not a multiple of n_head %d", c->n_embd, c->n_head);
    if (!(c->layer_norm_epsilon > 0))
        return kn_set_error(KN_ERR_ARG, "gpt2: layer_norm_epsilon must be positive");
    if (!(c->dropout >= 0 && c->dropout < 1)) return kn_set_error(KN_ERR_ARG, "gpt2: dropout must be in [0, 1)");
    return KN_OK;
}

/* A parameter from a tensor made in the caller's scope: the model keeps its own handle. */
static kn_tensor *add_param(gpt2 *m, const char *name, kn_tensor *value) {
    if (!value) return NULL;
    kn_tensor *p = kn_requires_grad(kn_retain(value), true);
    char *copy = p ? strdup(name) : NULL;
    if (!copy) {
        kn_release(p);
        return NULL;
    }
    m->names[m->n_params] = copy;
    m->params[m->n_params++] = p;
    return p;
}

static kn_tensor *normal(kn_shape shape, double std) { return kn_mul_scalar(kn_randn(shape, KN_F32), std); }

static bool make_block(gpt2 *m, int l) {
    int64_t C = m->cfg.n_embd;
    double proj_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    gpt2_block *b = &m->h[l];
    char name[96];
#define P(slot, suffix, value) \
    (snprintf(name, sizeof name, "transformer.h.%d.%s", l, suffix), (b->slot = add_param(m, name, value)) != NULL)
    return P(ln_1_w, "ln_1.weight", kn_ones(KN_SHAPE(C), KN_F32)) && P(ln_1_b, "ln_1.bias", kn_zeros(KN_SHAPE(C), KN_F32)) &&
           P(attn_w, "attn.c_attn.weight", normal(KN_SHAPE(C, 3 * C), 0.02)) &&
           P(attn_b, "attn.c_attn.bias", kn_zeros(KN_SHAPE(3 * C), KN_F32)) &&
           P(attn_proj_w, "attn.c_proj.weight", normal(KN_SHAPE(C, C), proj_std)) &&
           P(attn_proj_b, "attn.c_proj.bias", kn_zeros(KN_SHAPE(C), KN_F32)) &&
           P(ln_2_w, "ln_2.weight", kn_ones(KN_SHAPE(C), KN_F32)) && P(ln_2_b, "ln_2.bias", kn_zeros(KN_SHAPE(C), KN_F32)) &&
           P(fc_w, "mlp.c_fc.weight", normal(KN_SHAPE(C, 4 * C), 0.02)) &&
           P(fc_b, "mlp.c_fc.bias", kn_zeros(KN_SHAPE(4 * C), KN_F32)) &&
           P(mlp_proj_w, "mlp.c_proj.weight", normal(KN_SHAPE(4 * C, C), proj_std)) &&
           P(mlp_proj_b, "mlp.c_proj.bias", kn_zeros(KN_SHAPE(C), KN_F32));
#undef P
}

gpt2 *gpt2_new(const gpt2_config *cfg) {
    if (gpt2_config_check(cfg) != KN_OK) return NULL;
    gpt2 *m = calloc(1, sizeof *m);
    int max_params = 12 * cfg->n_layer + 5;
    if (m) {
        m->cfg = *cfg;
        m->h = calloc((size_t)cfg->n_layer, sizeof *m->h);
        m->names = calloc((size_t)max_params, sizeof *m->names);
        m->params = calloc((size_t)max_params, sizeof *m->params);
    }
    if (!m || !m->h || !m->names || !m->params) {
        gpt2_free(m);
        kn_set_error(KN_ERR_OOM, "gpt2: out of host memory");
        return NULL;
    }
    int64_t C = cfg->n_embd;
    m->training = true;
    kn_no_grad_push();
    kn_scope_push();
    bool ok = (m->wte = add_param(m, "transformer.wte.weight", normal(KN_SHAPE(cfg->vocab_size, C), 0.02))) &&
              (m->wpe = add_param(m, "transformer.wpe.weight", normal(KN_SHAPE(cfg->n_positions, C), 0.02)));
    for (int l = 0; ok && l < cfg->n_layer; l++) ok = make_block(m, l);
    ok = ok && (m->ln_f_w = add_param(m, "transformer.ln_f.weight", kn_ones(KN_SHAPE(C), KN_F32))) &&
         (m->ln_f_b = add_param(m, "transformer.ln_f.bias", kn_zeros(KN_SHAPE(C), KN_F32)));
    if (ok && !cfg->tie_word_embeddings)
        ok = (m->lm_head = add_param(m, "lm_head.weight", normal(KN_SHAPE(cfg->vocab_size, C), 0.02))) != NULL;
    kn_scope_pop();
    kn_no_grad_pop();
    if (!ok) {
        gpt2_free(m);
        return NULL;
    }
    return m;
}

void gpt2_free(gpt2 *m) {
    if (!m) return;
    for (int i = 0; i < m->n_params; i++) {
        kn_release(m->params[i]);
        free(m->names[i]);
    }
    free(m->params);
    free(m->names);
    free(m->h);
    free(m);
}

kn_status gpt2_untie_head(gpt2 *m) {
    if (m->lm_head) return KN_OK;
    kn_no_grad_push();
    kn_scope_push();
    m->lm_head = add_param(m, "lm_head.weight", kn_clone(m->wte));
    kn_scope_pop();
    kn_no_grad_pop();
    if (!m->lm_head) return kn_last_status();
    m->cfg.tie_word_embeddings = false;
    return KN_OK;
}

int64_t gpt2_num_params(const gpt2 *m) {
    int64_t n = 0;
    for (int i = 0; i < m->n_params; i++) n += kn_numel(m->params[i]);
    return n;
}

/* ---- forward ------------------------------------------------------------------------------ */

/* HF Conv1D: x @ w + b with w stored [in, out]. */
static kn_tensor *conv1d(kn_tensor *x, kn_tensor *w, kn_tensor *b) { return kn_add(kn_matmul(x, w), b); }

static kn_tensor *dropout(const gpt2 *m, kn_tensor *x) { return kn_dropout(x, m->cfg.dropout, m->training); }

/* [B, T, C] -> [B, H, T, D]. */
static kn_tensor *heads(kn_tensor *x, int64_t H) {
    int64_t B = kn_size(x, 0), T = kn_size(x, 1), C = kn_size(x, 2);
    return kn_transpose(kn_view(x, KN_SHAPE(B, T, H, C / H)), 1, 2);
}

static kn_tensor *attention(const gpt2 *m, const gpt2_block *b, kn_tensor *x) {
    int64_t C = m->cfg.n_embd, B = kn_size(x, 0), T = kn_size(x, 1);
    kn_tensor *qkv = conv1d(x, b->attn_w, b->attn_b);
    kn_tensor *q = heads(kn_narrow(qkv, 2, 0, C), m->cfg.n_head);
    kn_tensor *k = heads(kn_narrow(qkv, 2, C, C), m->cfg.n_head);
    kn_tensor *v = heads(kn_narrow(qkv, 2, 2 * C, C), m->cfg.n_head);
    kn_sdpa_opts opts = {.causal = true, .dropout_p = m->training ? m->cfg.dropout : 0};
    kn_tensor *y = kn_scaled_dot_product_attention(q, k, v, NULL, opts);
    y = kn_reshape(kn_transpose(y, 1, 2), KN_SHAPE(B, T, C));
    return dropout(m, conv1d(y, b->attn_proj_w, b->attn_proj_b));
}

static kn_tensor *mlp(const gpt2 *m, const gpt2_block *b, kn_tensor *x) {
    kn_tensor *h = kn_gelu_tanh(conv1d(x, b->fc_w, b->fc_b));
    return dropout(m, conv1d(h, b->mlp_proj_w, b->mlp_proj_b));
}

static kn_tensor *block(const gpt2 *m, const gpt2_block *b, kn_tensor *x) {
    kn_shape C = KN_SHAPE(m->cfg.n_embd);
    double eps = m->cfg.layer_norm_epsilon;
    x = kn_add(x, attention(m, b, kn_layer_norm(x, C, b->ln_1_w, b->ln_1_b, eps)));
    return kn_add(x, mlp(m, b, kn_layer_norm(x, C, b->ln_2_w, b->ln_2_b, eps)));
}

kn_tensor *gpt2_forward(gpt2 *m, kn_tensor *idx) {
    if (!idx) return NULL;
    int64_t T = kn_size(idx, -1);
    if (kn_ndim(idx) != 2 || T < 1 || T > m->cfg.n_positions) {
        char desc[96];
        kn_set_error(KN_ERR_SHAPE, "gpt2: token ids %s must be [B, T] with 1 <= T <= n_positions (%d)",
                     kn_describe(idx, desc, sizeof desc), m->cfg.n_positions);
        return NULL;
    }
    kn_scope_push();
    kn_tensor *x = kn_add(kn_embedding(m->wte, idx), kn_narrow(m->wpe, 0, 0, T));
    x = dropout(m, x);
    for (int l = 0; l < m->cfg.n_layer; l++) x = block(m, &m->h[l], x);
    x = kn_layer_norm(x, KN_SHAPE(m->cfg.n_embd), m->ln_f_w, m->ln_f_b, m->cfg.layer_norm_epsilon);
    kn_tensor *logits = kn_matmul(x, kn_transpose(m->lm_head ? m->lm_head : m->wte, 0, 1));
    return kn_scope_pop_keep(logits);
}

kn_tensor *gpt2_loss(gpt2 *m, kn_tensor *idx, kn_tensor *targets) {
    kn_scope_push();
    kn_tensor *logits = gpt2_forward(m, idx);
    kn_ce_opts opts = KN_CE_OPTS_DEFAULT;
    opts.ignore_index = -1;
    kn_tensor *loss = kn_cross_entropy(kn_reshape(logits, KN_SHAPE(-1, m->cfg.vocab_size)),
                                       kn_reshape(targets, KN_SHAPE(-1)), opts);
    return kn_scope_pop_keep(loss);
}
