/* GPT-2: parameters, seeded init and the forward pass, written with kiln's public API. */
#include "gpt2/gpt2.h"
#include "lm/lm_step.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

gpt2_config gpt2_config_124m(void) {
    return (gpt2_config){.n_layer = 12, .n_head = 12, .n_embd = 768, .vocab_size = 50257, .n_positions = 1024,
                         .layer_norm_epsilon = 1e-5, .tie_word_embeddings = true};
}

kn_status gpt2_config_check(const gpt2_config *c) {
    if (c->n_layer < 1 || c->n_head < 1 || c->n_embd < 1 || c->vocab_size < 1 || c->n_positions < 1 || c->n_inner < 0)
        return kn_set_error(KN_ERR_ARG, "gpt2: n_layer %d, n_head %d, n_embd %d, vocab %d, n_positions %d must all be positive",
                            c->n_layer, c->n_head, c->n_embd, c->vocab_size, c->n_positions);
    int inner;
    if (!c->n_inner && __builtin_mul_overflow(c->n_embd, 4, &inner))
        return kn_set_error(KN_ERR_ARG, "gpt2: n_embd %d is too large: the MLP's width, 4 * n_embd, overflows an int",
                            c->n_embd);
    if (c->n_embd % c->n_head)
        return kn_set_error(KN_ERR_ARG, "gpt2: n_embd %d is not a multiple of n_head %d", c->n_embd, c->n_head);
    if (!(c->layer_norm_epsilon > 0))
        return kn_set_error(KN_ERR_ARG, "gpt2: layer_norm_epsilon must be positive");
    if (!(c->dropout >= 0 && c->dropout < 1)) return kn_set_error(KN_ERR_ARG, "gpt2: dropout must be in [0, 1)");
    return KN_OK;
}

/* A module holding parameters only (its children hold the rest). */
static void *holder(void *parent, const char *name, const char *type) {
    return kn_module_add(parent, name, kn_module_alloc(sizeof(kn_module), type));
}

static kn_tensor *normal(kn_shape shape, double std) { return kn_mul_scalar(kn_randn(shape, KN_F32), std); }

/* A Conv1D or LayerNorm-like holder with weight and bias. */
static bool affine(void *parent, const char *name, const char *type, kn_tensor *w, kn_tensor *b, kn_tensor **wslot,
                   kn_tensor **bslot) {
    void *mod = holder(parent, name, type);
    *wslot = kn_module_param(mod, "weight", w);
    *bslot = kn_module_param(mod, "bias", b);
    return *wslot && *bslot;
}

/* The random draws happen in a fixed order (wte, wpe, blocks, ln_f, lm_head): seeded runs
 * of `kiln train gpt2` depend on it. */
static bool make_block(gpt2 *m, void *h, int l) {
    int64_t C = m->cfg.n_embd, I = m->cfg.n_inner;
    double proj_std = 0.02 / sqrt(2.0 * m->cfg.n_layer);
    gpt2_block *b = &m->h[l];
    void *blk = holder(h, NULL, "GPT2Block");
    bool ok = affine(blk, "ln_1", "LayerNorm", kn_ones(KN_SHAPE(C), KN_F32), kn_zeros(KN_SHAPE(C), KN_F32), &b->ln_1_w,
                     &b->ln_1_b);
    void *attn = holder(blk, "attn", "GPT2Attention");
    ok = ok && affine(attn, "c_attn", "Conv1D", normal(KN_SHAPE(C, 3 * C), 0.02), kn_zeros(KN_SHAPE(3 * C), KN_F32),
                      &b->attn_w, &b->attn_b);
    ok = ok && affine(attn, "c_proj", "Conv1D", normal(KN_SHAPE(C, C), proj_std), kn_zeros(KN_SHAPE(C), KN_F32),
                      &b->attn_proj_w, &b->attn_proj_b);
    ok = ok && affine(blk, "ln_2", "LayerNorm", kn_ones(KN_SHAPE(C), KN_F32), kn_zeros(KN_SHAPE(C), KN_F32), &b->ln_2_w,
                      &b->ln_2_b);
    void *mlp = holder(blk, "mlp", "GPT2MLP");
    ok = ok && affine(mlp, "c_fc", "Conv1D", normal(KN_SHAPE(C, I), 0.02), kn_zeros(KN_SHAPE(I), KN_F32), &b->fc_w,
                      &b->fc_b);
    return ok && affine(mlp, "c_proj", "Conv1D", normal(KN_SHAPE(I, C), proj_std), kn_zeros(KN_SHAPE(C), KN_F32),
                        &b->mlp_proj_w, &b->mlp_proj_b);
}

/* The flat parameter list the trainers read, from the tree. */
static kn_status refresh_list(gpt2 *m) {
    kn_named_tensors list;
    if (kn_module_named(m, KN_PARAMS, &list) != KN_OK) return kn_last_status();
    kn_named_tensors_free(&m->list);
    m->list = list;
    m->n_params = list.count;
    m->names = list.names;
    m->params = list.tensors;
    return KN_OK;
}

static kn_tensor *add_head(gpt2 *m, kn_tensor *value) {
    void *head = holder(m, "lm_head", "Linear");
    return kn_module_param(head, "weight", value);
}

gpt2 *gpt2_new(const gpt2_config *cfg) {
    if (gpt2_config_check(cfg) != KN_OK) return NULL;
    gpt2 *m = kn_module_alloc(sizeof *m, "GPT2LMHeadModel");
    gpt2_block *h = calloc((size_t)cfg->n_layer, sizeof *h);
    if (!m || !h) {
        kn_module_free(m);
        free(h);
        kn_set_error(KN_ERR_OOM, "gpt2: out of host memory");
        return NULL;
    }
    m->cfg = *cfg;
    if (!m->cfg.n_inner) m->cfg.n_inner = 4 * cfg->n_embd;
    m->h = h;
    int64_t C = cfg->n_embd;
    kn_no_grad_push();
    kn_scope_push();
    void *tr = holder(m, "transformer", "GPT2Model");
    m->wte = kn_module_param(holder(tr, "wte", "Embedding"), "weight", normal(KN_SHAPE(cfg->vocab_size, C), 0.02));
    m->wpe = kn_module_param(holder(tr, "wpe", "Embedding"), "weight", normal(KN_SHAPE(cfg->n_positions, C), 0.02));
    void *blocks = holder(tr, "h", "ModuleList");
    bool ok = m->wte && m->wpe;
    for (int l = 0; ok && l < cfg->n_layer; l++) ok = make_block(m, blocks, l);
    ok = ok && affine(tr, "ln_f", "LayerNorm", kn_ones(KN_SHAPE(C), KN_F32), kn_zeros(KN_SHAPE(C), KN_F32), &m->ln_f_w,
                      &m->ln_f_b);
    if (ok && !cfg->tie_word_embeddings) ok = (m->lm_head = add_head(m, normal(KN_SHAPE(cfg->vocab_size, C), 0.02)));
    kn_scope_pop();
    kn_no_grad_pop();
    if (!ok) kn_module_free(m);
    if (!ok || !kn_module_check(m)) {   /* kn_module_check frees a failed tree itself */
        free(h);
        return NULL;
    }
    if (refresh_list(m) != KN_OK) gpt2_free(m), m = NULL;
    return m;
}

void gpt2_free(gpt2 *m) {
    if (!m) return;
    kn_named_tensors_free(&m->list);
    free(m->h);
    kn_module_free(m);
}

kn_status gpt2_untie_head(gpt2 *m) {
    if (m->lm_head) return KN_OK;
    kn_no_grad_push();
    kn_scope_push();
    m->lm_head = add_head(m, kn_clone(m->wte));
    kn_scope_pop();
    kn_no_grad_pop();
    if (!m->lm_head) return kn_last_status();
    m->cfg.tie_word_embeddings = false;
    return refresh_list(m);
}

int64_t gpt2_num_params(const gpt2 *m) { return kn_module_num_params((void *)m); }

/* ---- forward ------------------------------------------------------------------------------ */

/* HF Conv1D: x @ w + b with w stored [in, out]. The bias joins the product in its dtype (an
 * addmm, as PyTorch's autocast keeps it): under bf16 autocast an f32 bias would turn every
 * projection's output back to f32. */
static kn_tensor *conv1d(kn_tensor *x, kn_tensor *w, kn_tensor *b) {
    kn_tensor *y = kn_matmul(x, w);
    if (!y || kn_dtype_of(y) == kn_dtype_of(b)) return kn_add(y, b);
    return kn_add(y, kn_cast(b, kn_dtype_of(y)));
}

static kn_tensor *dropout(const gpt2 *m, kn_tensor *x) {
    return kn_dropout(x, m->cfg.dropout, kn_module_is_training(m));
}

static kn_tensor *attention(const gpt2 *m, const gpt2_block *b, kn_tensor *x, const lm_step *s, int layer) {
    int64_t C = m->cfg.n_embd, H = m->cfg.n_head;
    kn_tensor *qkv = conv1d(x, b->attn_w, b->attn_b);
    kn_shape heads = KN_SHAPE(s->B, s->T, H, C / H);
    kn_tensor *q = kn_view(kn_narrow(qkv, 2, 0, C), heads);
    kn_tensor *k = kn_view(kn_narrow(qkv, 2, C, C), heads);
    kn_tensor *v = kn_view(kn_narrow(qkv, 2, 2 * C, C), heads);
    return dropout(m, conv1d(lm_attend(s, layer, q, k, v), b->attn_proj_w, b->attn_proj_b));
}

static kn_tensor *mlp(const gpt2 *m, const gpt2_block *b, kn_tensor *x) {
    kn_tensor *h = kn_gelu_tanh(conv1d(x, b->fc_w, b->fc_b));
    return dropout(m, conv1d(h, b->mlp_proj_w, b->mlp_proj_b));
}

static kn_tensor *block(const gpt2 *m, const gpt2_block *b, kn_tensor *x, const lm_step *s, int layer) {
    kn_shape C = KN_SHAPE(m->cfg.n_embd);
    double eps = m->cfg.layer_norm_epsilon;
    x = kn_add(x, attention(m, b, kn_layer_norm(x, C, b->ln_1_w, b->ln_1_b, eps), s, layer));
    return kn_add(x, mlp(m, b, kn_layer_norm(x, C, b->ln_2_w, b->ln_2_b, eps)));
}

kn_tensor *gpt2_hidden(gpt2 *m, kn_tensor *idx, const lm_step *s) {
    if (!idx) return NULL;
    if (kn_ndim(idx) != 2 || s->T < 1 || s->start + s->T > m->cfg.n_positions) {
        char desc[96];
        kn_set_error(KN_ERR_SHAPE, "gpt2: token ids %s after %lld cached positions exceed n_positions (%d)",
                     kn_describe(idx, desc, sizeof desc), (long long)s->start, m->cfg.n_positions);
        return NULL;
    }
    kn_scope_push();
    kn_tensor *pos = s->positions ? kn_embedding(m->wpe, s->positions) : kn_narrow(m->wpe, 0, s->start, s->T);
    kn_tensor *x = dropout(m, kn_add(kn_embedding(m->wte, idx), pos));
    for (int l = 0; l < m->cfg.n_layer; l++) x = block(m, &m->h[l], x, s, l);
    x = kn_layer_norm(x, KN_SHAPE(m->cfg.n_embd), m->ln_f_w, m->ln_f_b, m->cfg.layer_norm_epsilon);
    return kn_scope_pop_keep(x);
}

kn_tensor *gpt2_head(gpt2 *m, kn_tensor *x) {
    return kn_matmul(x, kn_transpose(m->lm_head ? m->lm_head : m->wte, 0, 1));
}

kn_tensor *gpt2_forward(gpt2 *m, kn_tensor *idx) {
    if (!idx) return NULL;
    if (kn_ndim(idx) != 2) {
        char desc[96];
        kn_set_error(KN_ERR_SHAPE, "gpt2: token ids %s must be [B, T]", kn_describe(idx, desc, sizeof desc));
        return NULL;
    }
    lm_step s = {.B = kn_size(idx, 0), .T = kn_size(idx, 1), .dropout = kn_module_is_training(m) ? m->cfg.dropout : 0};
    kn_scope_push();
    return kn_scope_pop_keep(gpt2_head(m, gpt2_hidden(m, idx, &s)));
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
