/* Attention over the cache: this step's keys and values are copied into their slots of the
 * preallocated [B, Hkv, capacity, D] buffers, and the queries attend over the filled prefix. */
#include "lm/lm_step.h"

kn_tensor *lm_attend(const lm_step *s, int layer, kn_tensor *q, kn_tensor *k, kn_tensor *v) {
    kn_tensor *kh = kn_transpose(k, 1, 2), *vh = kn_transpose(v, 1, 2);
    if (s->k_cache) {
        kn_tensor *kc = s->k_cache[layer], *vc = s->v_cache[layer];
        if (kn_copy_(kn_narrow(kc, 2, s->start, s->T), kh) != KN_OK ||
            kn_copy_(kn_narrow(vc, 2, s->start, s->T), vh) != KN_OK)
            return NULL;
        kh = kn_narrow(kc, 2, 0, s->start + s->T);
        vh = kn_narrow(vc, 2, 0, s->start + s->T);
    }
    kn_sdpa_opts opts = {.causal = s->mask == NULL, .dropout_p = s->dropout};
    kn_tensor *y = kn_scaled_dot_product_attention(kn_transpose(q, 1, 2), kh, vh, s->mask, opts);
    return kn_reshape(kn_transpose(y, 1, 2), KN_SHAPE(s->B, s->T, -1));
}
