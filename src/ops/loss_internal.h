/* Helpers the loss family's API files share (src/ops/loss.c, src/ops/attention.c). */
#ifndef KILN_OPS_LOSS_INTERNAL_H
#define KILN_OPS_LOSS_INTERNAL_H

#include "exec/dispatch.h"

/* Makes input i of the node t cast to dtype and, if shape is not NULL, expanded to it. On
 * failure the node is failed with an error naming the op and `what`, and false returned. */
bool kn_loss_set_input(kn_opctx *c, int i, kn_tensor *t, kn_dtype dtype, const kn_shape *shape, const char *what);

#endif
