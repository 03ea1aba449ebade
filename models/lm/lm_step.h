/* What one forward call of a language model shares across its layers: where the new tokens
 * sit (positions, cache slots), which keys each query may see, and the KV cache. Internal to
 * models/ (GPT-2 and the Llama family attend through it). */
#ifndef KILN_MODELS_LM_STEP_H
#define KILN_MODELS_LM_STEP_H

#include <kiln/kiln.h>

typedef struct lm_step {
    int64_t B, T;
    int64_t start;              /* cache slots already filled; the new tokens go to start .. start+T-1 */
    kn_tensor *positions;       /* [B, T] i64 position of each token; NULL: start .. start+T-1 in every row */
    kn_tensor *mask;            /* bool [B or 1, 1, T, start+T]: causality, padding, sliding window; NULL: causal only */
    kn_tensor *cos, *sin;       /* rotary tables [B or 1, T, 1, D] (Llama family), sin with rotate_half's sign */
    kn_tensor *const *k_cache;  /* per layer [B, Hkv, capacity, D]; NULL: no cache */
    kn_tensor *const *v_cache;
    double dropout;             /* attention-probability dropout (training only) */
} lm_step;

/* softmax(q k^T / sqrt(D)) v for q [B, T, H, D] and this step's k, v [B, T, Hkv, D], which are
 * first written into the layer's cache slots: [B, T, H * D]. */
kn_tensor *lm_attend(const lm_step *s, int layer, kn_tensor *q, kn_tensor *k, kn_tensor *v);

#endif
