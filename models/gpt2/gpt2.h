/* GPT-2 in the Hugging Face layout: a module tree with the same state_dict names as
 * GPT2LMHeadModel (files may also drop the "transformer." prefix), Conv1D weights stored
 * [in, out], lm_head tied to wte unless a separate lm_head.weight is loaded, gelu_new (the
 * tanh form). models/lm runs it as the GPT-2 family of lm.h (KV cache, left padding). */
#ifndef KILN_MODELS_GPT2_H
#define KILN_MODELS_GPT2_H

#include <kiln/kiln.h>

typedef struct gpt2_config {
    int n_layer, n_head, n_embd;
    int vocab_size, n_positions;
    int n_inner;              /* MLP width; 0: 4 * n_embd (HF's n_inner = None) */
    double layer_norm_epsilon;
    double dropout;           /* resid, embd and attn dropout (HF's *_pdrop; 0 in the fixtures) */
    bool tie_word_embeddings; /* false: a separate lm_head.weight [V, C] */
} gpt2_config;

/* GPT-2 small's shape (124M parameters). */
gpt2_config gpt2_config_124m(void);
/* Reads a Hugging Face config.json (model_type gpt2); errors name the file and the key. */
kn_status gpt2_config_load(const char *path, gpt2_config *out);
kn_status gpt2_config_check(const gpt2_config *c);
/* Writes c as config.json in transformers' GPT2Config form (model_type gpt2, GPT2LMHeadModel,
 * f32), atomically, so that `kiln generate`, --config and transformers load it. The other keys
 * of base (the config.json the model was made from, or NULL) are kept: the token ids above
 * all. Without them bos and eos are GPT-2's <|endoftext|> (50256) when the vocabulary has it,
 * null otherwise. */
kn_status gpt2_config_save(const gpt2_config *c, const char *base, const char *path);

typedef struct gpt2_block {
    kn_tensor *ln_1_w, *ln_1_b;
    kn_tensor *attn_w, *attn_b;     /* c_attn: [C, 3C], [3C] */
    kn_tensor *attn_proj_w, *attn_proj_b;
    kn_tensor *ln_2_w, *ln_2_b;
    kn_tensor *fc_w, *fc_b;         /* c_fc: [C, 4C] */
    kn_tensor *mlp_proj_w, *mlp_proj_b;
} gpt2_block;

/* The root module ("transformer" and, when untied, "lm_head" below it). */
typedef struct gpt2 {
    kn_module base;
    gpt2_config cfg;
    kn_tensor *wte, *wpe, *ln_f_w, *ln_f_b;
    kn_tensor *lm_head; /* NULL when tied to wte */
    gpt2_block *h;
    /* Every parameter with its state_dict name ("transformer.h.0.ln_1.weight"), in the
     * tree's order (the module's kn_module_named(KN_PARAMS), kept for the trainers). */
    int n_params;
    char **names;
    kn_tensor **params;
    kn_named_tensors list;
} gpt2;

/* A model with seeded random weights (the current Philox seed): normal(0, 0.02) for weights
 * and embeddings, 0.02/sqrt(2 n_layer) for the residual projections, zero biases, unit norms
 * (GPT-2's and nanoGPT's init). Parameters require grad. NULL with an error on bad config. */
gpt2 *gpt2_new(const gpt2_config *cfg);
void gpt2_free(gpt2 *m);
int64_t gpt2_num_params(const gpt2 *m);

/* Loads weights from a safetensors file whose names match with or without "transformer.";
 * lm_head.weight, if present, unties the head. Errors name the file and the first tensor that
 * is missing or of the wrong shape or dtype (f16/bf16 files convert to the model's f32). */
kn_status gpt2_load_weights(gpt2 *m, const char *path);
/* Gives the model its own lm_head.weight, initialized from wte (a no-op when it has one). */
kn_status gpt2_untie_head(gpt2 *m);
/* Saves the weights in GPT2LMHeadModel's naming (without the tied lm_head). */
kn_status gpt2_save_weights(const gpt2 *m, const char *path);

/* Logits [B, T, V] for token ids idx [B, T] (i64); dropout in training mode
 * (kn_module_train). */
kn_tensor *gpt2_forward(gpt2 *m, kn_tensor *idx);
struct lm_step;
/* The final layer norm's output [B, T, C] for one step of lm.h's cached forward. */
kn_tensor *gpt2_hidden(gpt2 *m, kn_tensor *idx, const struct lm_step *s);
/* Logits of hidden states x [..., C]. */
kn_tensor *gpt2_head(gpt2 *m, kn_tensor *x);
/* Mean token cross-entropy of the logits against targets [B, T] (ignore_index -1). */
kn_tensor *gpt2_loss(gpt2 *m, kn_tensor *idx, kn_tensor *targets);

#endif
