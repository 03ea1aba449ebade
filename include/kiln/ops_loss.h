/* Losses, dropout and attention. */
#ifndef KILN_OPS_LOSS_H
#define KILN_OPS_LOSS_H

#include "kiln/op_enums.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* kn_reduction and kn_causal_align are in kiln/op_enums.h. */

/* Cross-entropy options (PyTorch's defaults: KN_CE_OPTS_DEFAULT). weight: per-class [C] or NULL. */
typedef struct kn_ce_opts {
    kn_reduction reduction;
    int64_t ignore_index;
    double label_smoothing;
    kn_tensor *weight;
} kn_ce_opts;
#define KN_CE_OPTS_DEFAULT ((kn_ce_opts){.reduction = KN_REDUCTION_MEAN, .ignore_index = -100})

/* logits [N, C] or [N, C, d...]; target class indices (i32/i64) [N] or [N, d...], or class
 * probabilities (float, logits' shape). The mean is over non-ignored targets (weighted). */
KN_API kn_tensor *kn_cross_entropy(kn_tensor *logits, kn_tensor *target, kn_ce_opts opts);
/* Negative log-likelihood of log-probabilities [N, C(, d...)] with class-index targets. */
KN_API kn_tensor *kn_nll_loss(kn_tensor *log_probs, kn_tensor *target, kn_ce_opts opts);
KN_API kn_tensor *kn_mse_loss(kn_tensor *x, kn_tensor *y, kn_reduction reduction);
KN_API kn_tensor *kn_l1_loss(kn_tensor *x, kn_tensor *y, kn_reduction reduction);
KN_API kn_tensor *kn_smooth_l1_loss(kn_tensor *x, kn_tensor *y, kn_reduction reduction, double beta);
/* Binary cross-entropy of probabilities p against targets y (log clamped at -100, as PyTorch);
 * weight (broadcast to p) may be NULL. */
KN_API kn_tensor *kn_bce_loss(kn_tensor *p, kn_tensor *y, kn_tensor *weight, kn_reduction reduction);
/* The same from logits, stably; pos_weight [C] (broadcast over the last dim) may be NULL. */
KN_API kn_tensor *kn_bce_with_logits(kn_tensor *x, kn_tensor *y, kn_tensor *weight, kn_tensor *pos_weight,
                              kn_reduction reduction);

/* Zeroes each element with probability p in [0, 1] (Philox: the same seed gives the same mask
 * in every mode and layout) and scales the rest by 1/(1-p); p = 1 gives zeros. When not
 * training or p is 0, a new handle to x's values (sharing its storage). */
KN_API kn_tensor *kn_dropout(kn_tensor *x, double p, bool training);

/* Attention options; scale 0 means 1/sqrt(D); causal_align matters only with causal. */
typedef struct kn_sdpa_opts {
    bool causal;
    double scale;
    double dropout_p;
    kn_causal_align causal_align;
} kn_sdpa_opts;
/* softmax(q k^T * scale + mask) v for q [..., H, Tq, D], k [..., Hkv, Tk, D], v [..., Hkv, Tk, Dv]
 * (Hkv divides H: grouped-query heads share k and v). mask broadcasts to [..., H, Tq, Tk]: bool
 * (true = attend) or float (added), or NULL; causal masks keys past the diagonal that
 * causal_align places. A query with no allowed key (a bool mask row of false, a float row of
 * -inf, causal bottom-right with Tq > Tk) gives zeros and passes no gradient, as PyTorch's
 * scaled_dot_product_attention does; so does Tk = 0. NULL with an error on bad shapes, dtypes,
 * dropout_p, scale or causal_align. The CPU kernel works in blocks with an online softmax and
 * never builds the Tq x Tk matrix. */
KN_API kn_tensor *kn_scaled_dot_product_attention(kn_tensor *q, kn_tensor *k, kn_tensor *v, kn_tensor *mask,
                                           kn_sdpa_opts opts);

#ifdef __cplusplus
}
#endif
#endif
