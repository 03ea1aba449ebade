/* Helpers the loss family's API files share (src/ops/loss.c, src/ops/attention.c). */
#ifndef KILN_OPS_LOSS_INTERNAL_H
#define KILN_OPS_LOSS_INTERNAL_H

#include "exec/dispatch.h"
#include "ops/ops_internal.h"

/* Makes input i of the node t cast to dtype and, if shape is not NULL, expanded to it. On
 * failure the node is failed with an error naming the op and `what`, and false returned. */
bool kn_loss_set_input(kn_opctx *c, int i, kn_tensor *t, kn_dtype dtype, const kn_shape *shape, const char *what);

/* The backward ops the gradient formulas call (src/ops/loss_backward.c; layouts in loss.def). */

/* d loss / d scores of a cross_entropy node (nll: of an nll_loss node, whose attributes are
 * cross_entropy's) from the loss gradient g, given the node's scores, targets, weight (or
 * NULL) and attributes. */
kn_tensor *kn_cross_entropy_backward(kn_tensor *scores, kn_tensor *target, kn_tensor *weight, kn_tensor *g,
                                     const kn_attrs_cross_entropy *a, bool nll);
/* The gradients of a scaled_dot_product_attention node: in = {q, k, v, out, out's gradient,
 * log-sum-exp, mask or NULL}, out and its gradient shaped [B..., H, Tq, Dv]; attrs and the
 * Philox state as the forward's. *dmask (the float mask's gradient) is made when dmask is not
 * NULL. */
kn_status kn_sdpa_backward(kn_tensor *const in[7], const kn_attrs_scaled_dot_product_attention *a, uint64_t seed,
                           uint64_t offset,
                           kn_tensor **dq, kn_tensor **dk, kn_tensor **dv, kn_tensor **dmask);
/* Dropout of x with p and the Philox state (seed, offset) a forward drew from: the same mask
 * and scale, which is dropout's own gradient. */
kn_tensor *kn_dropout_replay(kn_tensor *x, double p, uint64_t seed, uint64_t offset);

#endif
