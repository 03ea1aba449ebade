/* DLRM (Facebook's deep learning recommendation model) as a kn_module tree with the names of
 * the reference implementation (facebookresearch/dlrm, dlrm_s_pytorch.py):
 *
 *     emb_l.K.weight          one EmbeddingBag per sparse feature (sum pooling)
 *     bot_l.{0,2,..}.weight   bottom MLP over the dense features (ReLU between, and after the last)
 *     top_l.{0,2,..}.weight   top MLP over [bottom output, pairwise dots] (ReLU between; the
 *                             last layer gives the click logit, sigmoid left to the loss)
 *
 * Interaction ("dot"): the bottom output x and the pooled embeddings e_1..e_K (all of width
 * emb_dim) are stacked into T [B, F, D] (F = K + 1), Z = T T^T, and the strictly lower
 * triangle of Z in the reference's order (row i, then column j < i) is concatenated after x.
 * The indices in layer names skip by two because the reference's nn.Sequential holds the
 * activations between the Linear layers. */
#ifndef KILN_MODELS_DLRM_H
#define KILN_MODELS_DLRM_H

#include <kiln/kiln.h>

#define DLRM_MAX_TABLES 26
#define DLRM_MAX_LAYERS 8

typedef struct dlrm_config {
    int n_tables;
    int64_t table_sizes[DLRM_MAX_TABLES];
    int64_t emb_dim;
    /* Widths of the bottom MLP, input first: bot[0] dense features, bot[n_bot - 1] == emb_dim. */
    int n_bot;
    int64_t bot[DLRM_MAX_LAYERS + 1];
    /* Output widths of the top MLP's layers (its input width follows from the interaction);
     * the last is 1. */
    int n_top;
    int64_t top[DLRM_MAX_LAYERS];
} dlrm_config;

typedef struct dlrm {
    kn_module base;
    dlrm_config cfg;
    kn_nn_embedding_bag *emb[DLRM_MAX_TABLES];
    kn_nn_linear *bot[DLRM_MAX_LAYERS], *top[DLRM_MAX_LAYERS];
} dlrm;

/* Checks the widths chain together; KN_ERR_ARG naming the first that does not. */
kn_status dlrm_config_check(const dlrm_config *c);
/* Width of the interaction's output (the top MLP's input): emb_dim + F (F - 1) / 2. */
int64_t dlrm_interaction_width(const dlrm_config *c);
/* A model with the reference's seeded init (the current Philox seed): Linear weights
 * N(0, sqrt(2 / (in + out))), biases N(0, sqrt(1 / out)), embeddings U(+-sqrt(1 / rows)).
 * Free with kn_module_free. NULL with an error on a bad config. */
dlrm *dlrm_new(const dlrm_config *cfg);

/* Click logits [B] for dense features [B, bot[0]] (f32) and, per table k, bag indices
 * indices[k] ([B, L] i64, or 1-d with offsets[k] [B]; offsets itself may be NULL for all
 * 2-d bags). */
kn_tensor *dlrm_forward(dlrm *m, kn_tensor *dense, kn_tensor *const *indices, kn_tensor *const *offsets);
/* The dot interaction alone: x [B, D] and n_emb pooled embeddings [B, D] -> [B, D + F(F-1)/2]. */
kn_tensor *dlrm_interact(kn_tensor *x, kn_tensor *const *emb, int n_emb);
/* Mean binary cross-entropy of the logits against 0/1 labels [B] (f32). */
kn_tensor *dlrm_loss(kn_tensor *logits, kn_tensor *labels);

#endif
