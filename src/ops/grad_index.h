/* Helpers the index family's gradient formulas share (grad_index.c, grad_index_put.c). */
#ifndef KILN_OPS_GRAD_INDEX_H
#define KILN_OPS_GRAD_INDEX_H

#include "kiln/tensor.h"

/* g (an index-shaped gradient) zero-padded at the end of each dim to shape, for sources
 * larger than their index. */
kn_tensor *kn_grad_fit(kn_tensor *g, kn_shape shape);
/* 0, 1, 2, ... (i64) in row-major order of shape: position ids for finding last writes. */
kn_tensor *kn_grad_ids(kn_shape shape);

#endif
