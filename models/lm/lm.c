/* lm.h over the two implementations (models/gpt2 and lm/llama.c): loading, the KV cache,
 * and the per-call step (positions, padding mask, rotary tables) both forwards share. */
#include "lm/lm.h"

#include <kiln/hf.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2/gpt2.h"
#include "lm/llama.h"
#include "lm/lm_step.h"

struct lm {
    lm_config cfg;
    void *root;          /* gpt2 * or llama *: the module tree */
    float *inv_freq;     /* head_dim / 2 rotary frequencies (Llama family; dynamic rope recomputes) */
    double rope_factor;  /* attention factor the tables are scaled by */
};

struct lm_cache {
    lm *m;
    int64_t batch, capacity, len;
    int64_t *pad;        /* left padding of each row */
    bool padded;         /* some row has padding */
    kn_tensor **k, **v;  /* per layer [B, Hkv, capacity, D] */
};

static gpt2_config to_gpt2(const lm_config *c) {
    return (gpt2_config){.n_layer = c->n_layers, .n_head = c->n_heads, .n_embd = c->hidden_size,
                         .vocab_size = c->vocab_size, .n_positions = c->max_position_embeddings,
                         .n_inner = c->intermediate_size, .layer_norm_epsilon = c->norm_eps,
                         .dropout = c->dropout, .tie_word_embeddings = c->tie_word_embeddings};
}

static void free_root(lm_family family, void *root) {
    if (family == LM_GPT2) gpt2_free(root);
    else llama_free(root);
}

static lm *wrap(const lm_config *c, void *root) {
    if (!root) return NULL;
    lm *m = calloc(1, sizeof *m);
    float *inv_freq = c->family != LM_GPT2 ? malloc(sizeof *inv_freq * (size_t)(c->head_dim / 2)) : NULL;
    if (!m || (c->family != LM_GPT2 && !inv_freq)) {
        kn_set_error(KN_ERR_OOM, "lm: out of host memory");
        free_root(c->family, root);
        free(m);
        free(inv_freq);
        return NULL;
    }
    *m = (lm){.cfg = *c, .root = root, .inv_freq = inv_freq, .rope_factor = 1};
    kn_module_train(root, false);   /* as from_pretrained: no dropout until a trainer asks for it */
    if (inv_freq) lm_rope_frequencies(c, 0, inv_freq, &m->rope_factor);
    return m;
}

static void *new_root(const lm_config *c, kn_dtype dtype) {
    if (c->family != LM_GPT2) return llama_new(c, dtype);
    if (dtype != KN_F32) return kn_set_error(KN_ERR_DTYPE, "gpt2: new models are f32 (load a file for other dtypes)"), NULL;
    gpt2_config g = to_gpt2(c);
    return gpt2_new(&g);
}

lm *lm_new(const lm_config *c, kn_dtype dtype) { return wrap(c, new_root(c, dtype)); }

void lm_free(lm *m) {
    if (!m) return;
    free_root(m->cfg.family, m->root);
    free(m->inv_freq);
    free(m);
}

const lm_config *lm_config_of(const lm *m) { return &m->cfg; }
void *lm_module(lm *m) { return m->root; }

static kn_tensor *embedding(const lm *m) {
    return m->cfg.family == LM_GPT2 ? ((gpt2 *)m->root)->wte : ((llama *)m->root)->embed;
}
kn_dtype lm_dtype(const lm *m) { return kn_dtype_of(embedding(m)); }

/* ---- loading ------------------------------------------------------------------------------- */

/* GPT-2 files name tensors with or without "transformer."; the Llama family as the module does. */
static const char *gpt2_file_name(void *ctx, const char *name, char *buf, size_t n) {
    kn_hf_weights *w = ctx;
    const char *prefix = "transformer.";
    size_t len = strlen(prefix);
    if (kn_hf_weights_find(w, name) < 0 && strncmp(name, prefix, len) == 0 && kn_hf_weights_find(w, name + len) >= 0)
        name += len;
    snprintf(buf, n, "%s", name);
    return buf;
}

lm *lm_load(const char *dir, const lm_load_options *opts) {
    lm_load_options o_default = {.device = KN_CPU, .dtype = KN_DTYPE_COUNT};
    const lm_load_options *o = opts ? opts : &o_default;
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    lm_config c;
    if (lm_config_load(path, &c) != KN_OK) return NULL;
    kn_hf_weights *w = kn_hf_weights_open(dir);
    if (!w) return NULL;
    if (lm_check_weights(&c, path, w) != KN_OK) {
        kn_hf_weights_close(w);
        return NULL;
    }
    /* GPT-2 unties its head when the file has one */
    if (c.family == LM_GPT2 && kn_hf_weights_find(w, "lm_head.weight") >= 0) c.tie_word_embeddings = false;
    /* built on the meta device: nothing is allocated or drawn before the file's tensors take their places */
    kn_device was = kn_default_device();
    kn_set_default_device(KN_META);
    lm *m = lm_new(&c, c.family == LM_GPT2 ? KN_F32 : (o->dtype == KN_DTYPE_COUNT ? c.torch_dtype : o->dtype));
    kn_set_default_device(was);
    kn_hf_load_opts lo = {.device = o->device, .dtype = o->dtype};
    if (c.family == LM_GPT2) lo.rename = gpt2_file_name, lo.rename_ctx = w;
    if (m && kn_hf_load_module(m->root, w, &lo, NULL) != KN_OK) lm_free(m), m = NULL;
    kn_hf_weights_close(w);
    return m;
}

kn_status lm_save_weights(lm *m, const char *path) {
    kn_named_tensors list;
    if (kn_module_named(m->root, KN_STATE, &list) != KN_OK) return kn_last_status();
    kn_status st = kn_safetensors_save(path, list.count, (const char *const *)list.names, list.tensors, NULL, NULL, 0);
    kn_named_tensors_free(&list);
    return st;
}

/* ---- cache --------------------------------------------------------------------------------- */

lm_cache *lm_cache_new(lm *m, int64_t batch, int64_t max_len) {
    const lm_config *c = &m->cfg;
    if (batch < 1 || max_len < 1) {
        kn_set_error(KN_ERR_ARG, "lm_cache_new: batch %lld and max_len %lld must be positive", (long long)batch,
                     (long long)max_len);
        return NULL;
    }
    lm_cache *k = calloc(1, sizeof *k);
    if (k) {
        k->pad = calloc((size_t)batch, sizeof *k->pad);
        k->k = calloc((size_t)c->n_layers, sizeof *k->k);
        k->v = calloc((size_t)c->n_layers, sizeof *k->v);
    }
    if (!k || !k->pad || !k->k || !k->v) {
        lm_cache_free(k);
        kn_set_error(KN_ERR_OOM, "lm_cache_new: out of host memory");
        return NULL;
    }
    *k = (lm_cache){.m = m, .batch = batch, .capacity = max_len, .pad = k->pad, .k = k->k, .v = k->v};
    kn_tensor *e = embedding(m);
    kn_device was = kn_default_device();
    kn_set_default_device(kn_device_of(e));
    kn_shape shape = KN_SHAPE(batch, c->n_kv_heads, max_len, c->head_dim);
    bool ok = true;
    for (int l = 0; ok && l < c->n_layers; l++) {
        k->k[l] = kn_zeros(shape, kn_dtype_of(e));
        k->v[l] = kn_zeros(shape, kn_dtype_of(e));
        ok = k->k[l] && k->v[l];
    }
    kn_set_default_device(was);
    if (!ok) lm_cache_free(k), k = NULL;
    return k;
}

void lm_cache_free(lm_cache *c) {
    if (!c) return;
    for (int l = 0; c->k && l < c->m->cfg.n_layers; l++) kn_release(c->k[l]), kn_release(c->v[l]);
    free(c->k);
    free(c->v);
    free(c->pad);
    free(c);
}

kn_status lm_cache_set_padding(lm_cache *c, const int64_t *pad) {
    if (c->len) return kn_set_error(KN_ERR_ARG, "lm_cache_set_padding: the cache already holds %lld positions", (long long)c->len);
    c->padded = false;
    for (int64_t b = 0; b < c->batch; b++) {
        int64_t p = pad ? pad[b] : 0;
        if (p < 0 || p >= c->capacity)
            return kn_set_error(KN_ERR_ARG, "lm_cache_set_padding: row %lld's padding %lld is outside [0, %lld)",
                                (long long)b, (long long)p, (long long)c->capacity);
        c->pad[b] = p;
        c->padded |= p > 0;
    }
    return KN_OK;
}

int64_t lm_cache_len(const lm_cache *c) { return c->len; }
int64_t lm_cache_capacity(const lm_cache *c) { return c->capacity; }
void lm_cache_reset(lm_cache *c) { c->len = 0; }

/* ---- forward ------------------------------------------------------------------------------- */

/* A tensor of host values on dev; on the meta device only its shape (nothing holds values there). */
static kn_tensor *upload(const void *data, kn_dtype dtype, kn_shape shape, kn_device dev) {
    if (dev.type != KN_DEVICE_META) return kn_from_host(data, dtype, shape, dev);
    kn_device was = kn_default_device();
    kn_set_default_device(dev);
    kn_tensor *t = kn_empty(shape, dtype);
    kn_set_default_device(was);
    return t;
}

/* Rotary tables cos and sin [rows, T, 1, D] (sin negated on the first half: rotate_half's sign)
 * for positions pos [rows, T], in f32 as transformers computes them, cast to the model dtype. */
static bool rope_tables(lm *m, lm_step *s, const int64_t *pos, int64_t rows) {
    const lm_config *c = &m->cfg;
    int64_t T = s->T, D = c->head_dim, half = D / 2, n = rows * T, max_pos = 0;
    for (int64_t i = 0; i < n; i++) max_pos = pos[i] > max_pos ? pos[i] : max_pos;
    if (c->rope_scaling.type == LM_ROPE_DYNAMIC) lm_rope_frequencies(c, max_pos + 1, m->inv_freq, &m->rope_factor);
    float *cs = malloc(sizeof *cs * (size_t)(2 * n * D));
    if (!cs) return kn_set_error(KN_ERR_OOM, "lm: out of host memory"), false;
    float *sn = cs + n * D, scale = (float)m->rope_factor;
    for (int64_t i = 0; i < n; i++)
        for (int64_t j = 0; j < half; j++) {
            float angle = (float)pos[i] * m->inv_freq[j];
            float co = (float)cos((double)angle) * scale, si = (float)sin((double)angle) * scale;
            cs[i * D + j] = cs[i * D + j + half] = co;
            sn[i * D + j] = -si;
            sn[i * D + j + half] = si;
        }
    kn_device dev = kn_device_of(embedding(m));
    kn_dtype dt = lm_dtype(m);
    s->cos = upload(cs, KN_F32, KN_SHAPE(rows, T, 1, D), dev);
    s->sin = upload(sn, KN_F32, KN_SHAPE(rows, T, 1, D), dev);
    if (dt != KN_F32) s->cos = kn_cast(s->cos, dt), s->sin = kn_cast(s->sin, dt);
    free(cs);
    return s->cos && s->sin;
}

/* Positions, mask and tables for T new tokens of a batch of B after what the cache holds. */
static bool make_step(lm *m, lm_cache *cache, int64_t B, int64_t T, lm_step *s) {
    *s = (lm_step){.B = B, .T = T, .start = cache ? cache->len : 0};
    if (cache) s->k_cache = cache->k, s->v_cache = cache->v;
    bool padded = cache && cache->padded;
    int64_t rows = padded ? B : 1, start = s->start, keys = start + T, window = m->cfg.sliding_window;
    /* causal attention needs no mask; padding does, and so does a window some query reaches past */
    bool masked = padded || (window > 0 && keys > window);
    int64_t *pos = malloc(sizeof *pos * (size_t)(rows * T));
    bool *mask = masked ? malloc(sizeof *mask * (size_t)(rows * T * keys)) : NULL;
    if (!pos || (masked && !mask)) {
        free(pos);
        free(mask);
        return kn_set_error(KN_ERR_OOM, "lm: out of host memory"), false;
    }
    for (int64_t b = 0; b < rows; b++)
        for (int64_t t = 0; t < T; t++) {
            int64_t p = start + t - (padded ? cache->pad[b] : 0);
            pos[b * T + t] = p > 0 ? p : 0;
        }
    /* A query sees the row's real keys up to itself, within the window (the last `window`
     * keys, itself included, as transformers' sliding_window_overlay); a padding query sees
     * only itself, so that no row of the softmax is empty (its output is never used). */
    for (int64_t b = 0; masked && b < rows; b++)
        for (int64_t t = 0; t < T; t++)
            for (int64_t j = 0; j < keys; j++) {
                int64_t q = start + t, first = padded ? cache->pad[b] : 0;
                mask[(b * T + t) * keys + j] = j <= q && (j >= first || j == q) && (!window || j > q - window);
            }
    kn_device dev = kn_device_of(embedding(m));
    bool ok = true;
    if (padded) ok = (s->positions = upload(pos, KN_I64, KN_SHAPE(B, T), dev)) != NULL;
    if (ok && masked) ok = (s->mask = upload(mask, KN_BOOL, KN_SHAPE(rows, 1, T, keys), dev)) != NULL;
    if (ok && m->cfg.family != LM_GPT2) ok = rope_tables(m, s, pos, rows);
    free(pos);
    free(mask);
    return ok;
}

static kn_tensor *forward(lm *m, kn_tensor *ids, lm_cache *cache, bool last) {
    if (!ids) return NULL;
    char desc[96];
    if (kn_ndim(ids) != 2 || kn_dtype_of(ids) != KN_I64 || kn_size(ids, 1) < 1) {
        kn_set_error(KN_ERR_SHAPE, "lm_forward: token ids %s must be i64 [B, T] with T >= 1", kn_describe(ids, desc, sizeof desc));
        return NULL;
    }
    int64_t B = kn_size(ids, 0), T = kn_size(ids, 1);
    if (cache && (cache->m != m || cache->batch != B || cache->len + T > cache->capacity)) {
        kn_set_error(KN_ERR_SHAPE, "lm_forward: %lld new positions for a batch of %lld do not fit the cache "
                     "(%lld of %lld positions used, batch %lld)", (long long)T, (long long)B, (long long)cache->len,
                     (long long)cache->capacity, (long long)cache->batch);
        return NULL;
    }
    kn_scope_push();
    if (cache) kn_no_grad_push();
    lm_step s;
    kn_tensor *logits = NULL;
    if (make_step(m, cache, B, T, &s)) {
        bool gpt = m->cfg.family == LM_GPT2;
        if (!cache && kn_module_is_training(m->root)) s.dropout = m->cfg.dropout;
        kn_tensor *x = gpt ? gpt2_hidden(m->root, ids, &s) : llama_hidden(m->root, ids, &s);
        if (last) x = kn_select(x, 1, T - 1);
        logits = gpt ? gpt2_head(m->root, x) : llama_head(m->root, x);
        if (logits && kn_dtype_of(logits) != KN_F32) logits = kn_cast(logits, KN_F32);
    }
    if (cache) kn_no_grad_pop();
    logits = kn_scope_pop_keep(logits);
    if (logits && cache) cache->len += T;
    return logits;
}

kn_tensor *lm_forward(lm *m, kn_tensor *ids, lm_cache *cache) { return forward(m, ids, cache, false); }
kn_tensor *lm_forward_last(lm *m, kn_tensor *ids, lm_cache *cache) { return forward(m, ids, cache, true); }

kn_tensor *lm_loss(lm *m, kn_tensor *ids, kn_tensor *targets) {
    kn_scope_push();
    kn_tensor *logits = lm_forward(m, ids, NULL);
    kn_ce_opts opts = KN_CE_OPTS_DEFAULT;
    opts.ignore_index = -1;
    kn_tensor *loss = kn_cross_entropy(kn_reshape(logits, KN_SHAPE(-1, m->cfg.vocab_size)),
                                       kn_reshape(targets, KN_SHAPE(-1)), opts);
    return kn_scope_pop_keep(loss);
}
