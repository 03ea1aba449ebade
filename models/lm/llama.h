/* Llama 2 and 3, Mistral, Qwen2 and Qwen3 as one module tree with transformers' names
 * (model.embed_tokens, model.layers.N.self_attn.q_proj, ..., model.norm, lm_head). Internal to
 * models/lm: use it through lm.h. */
#ifndef KILN_MODELS_LLAMA_H
#define KILN_MODELS_LLAMA_H

#include "lm/lm.h"
#include "lm/lm_step.h"

typedef struct llama_layer {
    kn_tensor *input_norm, *post_norm;       /* input_layernorm, post_attention_layernorm */
    kn_tensor *wq, *wk, *wv, *wo, *bq, *bk, *bv, *bo;
    kn_tensor *q_norm, *k_norm;              /* Qwen3 */
    kn_tensor *gate, *up, *down;
} llama_layer;

typedef struct llama {
    kn_module base;
    lm_config cfg;
    kn_tensor *embed, *norm, *lm_head;       /* lm_head is embed when tied */
    llama_layer *layers;
} llama;

/* Random weights (PyTorch's default init) in dtype on the default device. */
llama *llama_new(const lm_config *c, kn_dtype dtype);
void llama_free(llama *m);
/* The final norm's output [B, T, C] for one step. */
kn_tensor *llama_hidden(llama *m, kn_tensor *ids, const lm_step *s);
kn_tensor *llama_head(llama *m, kn_tensor *x);

#endif
