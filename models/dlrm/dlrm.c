/* DLRM: the module tree, the reference's init, and the forward pass (dlrm.h). */
#include "dlrm/dlrm.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

kn_status dlrm_config_check(const dlrm_config *c) {
    if (c->n_tables < 1 || c->n_tables > DLRM_MAX_TABLES)
        return kn_set_error(KN_ERR_ARG, "dlrm: %d sparse features (between 1 and %d)", c->n_tables, DLRM_MAX_TABLES);
    if (c->n_bot < 2 || c->n_bot > DLRM_MAX_LAYERS + 1 || c->n_top < 1 || c->n_top > DLRM_MAX_LAYERS)
        return kn_set_error(KN_ERR_ARG, "dlrm: %d bottom widths and %d top layers (at most %d layers each)", c->n_bot,
                            c->n_top, DLRM_MAX_LAYERS);
    if (c->emb_dim < 1) return kn_set_error(KN_ERR_ARG, "dlrm: emb_dim %lld must be positive", (long long)c->emb_dim);
    for (int k = 0; k < c->n_tables; k++)
        if (c->table_sizes[k] < 1)
            return kn_set_error(KN_ERR_ARG, "dlrm: table %d has %lld rows", k, (long long)c->table_sizes[k]);
    for (int i = 0; i < c->n_bot; i++)
        if (c->bot[i] < 1) return kn_set_error(KN_ERR_ARG, "dlrm: bottom width %d is %lld", i, (long long)c->bot[i]);
    for (int i = 0; i < c->n_top; i++)
        if (c->top[i] < 1) return kn_set_error(KN_ERR_ARG, "dlrm: top width %d is %lld", i, (long long)c->top[i]);
    if (c->bot[c->n_bot - 1] != c->emb_dim)
        return kn_set_error(KN_ERR_ARG, "dlrm: the bottom MLP ends at width %lld, not emb_dim %lld (the dot interaction needs both equal)",
                            (long long)c->bot[c->n_bot - 1], (long long)c->emb_dim);
    if (c->top[c->n_top - 1] != 1)
        return kn_set_error(KN_ERR_ARG, "dlrm: the top MLP ends at width %lld, not 1 (one click logit)",
                            (long long)c->top[c->n_top - 1]);
    return KN_OK;
}

int64_t dlrm_interaction_width(const dlrm_config *c) {
    int64_t f = c->n_tables + 1;
    return c->emb_dim + f * (f - 1) / 2;
}

/* A Linear layer with the reference's init, added to `seq` under the name 2 * index. */
static kn_nn_linear *mlp_layer(kn_module *seq, int index, int64_t in, int64_t out) {
    kn_nn_linear *l = kn_nn_linear_new(in, out, true, KN_F32);
    if (l && (kn_init_normal_(l->weight, 0, sqrt(2.0 / (double)(in + out))) != KN_OK ||
              kn_init_normal_(l->bias, 0, sqrt(1.0 / (double)out)) != KN_OK)) {
        kn_module_free(l);
        l = NULL;
    }
    char name[16];
    snprintf(name, sizeof name, "%d", 2 * index);
    return kn_module_add(seq, name, l);
}

dlrm *dlrm_new(const dlrm_config *cfg) {
    if (dlrm_config_check(cfg) != KN_OK) return NULL;
    dlrm *m = kn_module_alloc(sizeof *m, "DLRM_Net");
    if (!m) return NULL;
    m->cfg = *cfg;
    kn_module *emb_l = kn_module_add(m, "emb_l", kn_module_alloc(sizeof(kn_module), "ModuleList"));
    kn_module *bot_l = kn_module_add(m, "bot_l", kn_module_alloc(sizeof(kn_module), "Sequential"));
    kn_module *top_l = kn_module_add(m, "top_l", kn_module_alloc(sizeof(kn_module), "Sequential"));
    if (!emb_l || !bot_l || !top_l) return kn_module_check(m);
    for (int k = 0; k < cfg->n_tables; k++) {
        int64_t n = cfg->table_sizes[k];
        kn_nn_embedding_bag *e = kn_nn_embedding_bag_new(n, cfg->emb_dim, KN_BAG_SUM, KN_F32);
        if (e && kn_init_uniform_(e->weight, -sqrt(1.0 / (double)n), sqrt(1.0 / (double)n)) != KN_OK) {
            kn_module_free(e);
            e = NULL;
        }
        m->emb[k] = kn_module_add(emb_l, NULL, e);
    }
    for (int i = 0; i + 1 < cfg->n_bot; i++) m->bot[i] = mlp_layer(bot_l, i, cfg->bot[i], cfg->bot[i + 1]);
    int64_t in = dlrm_interaction_width(cfg);
    for (int i = 0; i < cfg->n_top; i++) {
        m->top[i] = mlp_layer(top_l, i, in, cfg->top[i]);
        in = cfg->top[i];
    }
    return kn_module_check(m);
}

kn_tensor *dlrm_interact(kn_tensor *x, kn_tensor *const *emb, int n_emb) {
    if (!x) return NULL;
    if (n_emb < 0 || n_emb > DLRM_MAX_TABLES) {
        kn_set_error(KN_ERR_ARG, "dlrm_interact: %d embeddings (at most %d)", n_emb, DLRM_MAX_TABLES);
        return NULL;
    }
    int f = n_emb + 1;
    int64_t B = kn_size(x, 0), pairs[DLRM_MAX_TABLES * (DLRM_MAX_TABLES + 1) / 2];
    int n_pairs = 0;
    for (int i = 0; i < f; i++)
        for (int j = 0; j < i; j++) pairs[n_pairs++] = (int64_t)i * f + j;
    kn_tensor *rows[DLRM_MAX_TABLES + 1] = {x};
    for (int k = 0; k < n_emb; k++) rows[k + 1] = emb[k];
    kn_scope_push();
    kn_tensor *t = kn_stack(rows, f, 1);                                      /* [B, F, D] */
    kn_tensor *z = kn_reshape(kn_bmm(t, kn_transpose(t, 1, 2)), KN_SHAPE(B, (int64_t)f * f));
    kn_tensor *index = kn_from_host(pairs, KN_I64, KN_SHAPE(n_pairs), kn_device_of(x));
    kn_tensor *parts[2] = {x, kn_index_select(z, 1, index)};
    return kn_scope_pop_keep(kn_cat(parts, 2, 1));
}

kn_tensor *dlrm_forward(dlrm *m, kn_tensor *dense, kn_tensor *const *indices, kn_tensor *const *offsets) {
    if (!m || !dense || !indices) {
        if (!kn_last_status()) kn_set_error(KN_ERR_ARG, "dlrm_forward: NULL model, dense features or indices");
        return NULL;
    }
    const dlrm_config *c = &m->cfg;
    kn_scope_push();
    kn_tensor *x = dense;
    for (int i = 0; i + 1 < c->n_bot; i++) x = kn_relu(kn_nn_linear_forward(m->bot[i], x));
    kn_tensor *emb[DLRM_MAX_TABLES];
    for (int k = 0; k < c->n_tables; k++)
        emb[k] = kn_nn_embedding_bag_forward(m->emb[k], indices[k], offsets ? offsets[k] : NULL, NULL);
    kn_tensor *h = dlrm_interact(x, emb, c->n_tables);
    for (int i = 0; i < c->n_top; i++) {
        h = kn_nn_linear_forward(m->top[i], h);
        if (i + 1 < c->n_top) h = kn_relu(h);
    }
    return kn_scope_pop_keep(kn_squeeze(h, 1));
}

kn_tensor *dlrm_loss(kn_tensor *logits, kn_tensor *labels) {
    return kn_bce_with_logits(logits, labels, NULL, NULL, KN_REDUCTION_MEAN);
}
