/* Layout ops: joining, splitting, padding, reordering and repeating tensors. */
#ifndef KILN_OPS_LAYOUT_H
#define KILN_OPS_LAYOUT_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Joins n tensors along dim (same dtype after promotion, same sizes elsewhere). */
KN_API kn_tensor *kn_cat(kn_tensor *const *tensors, int n, int64_t dim);
/* Joins n same-shaped tensors along a new dim. */
KN_API kn_tensor *kn_stack(kn_tensor *const *tensors, int n, int64_t dim);
/* Views of x in pieces of split_size along dim (the last may be smaller). Writes at most
 * max_out handles to out and the count to *n_out; fails if more pieces would be needed. */
KN_API kn_status kn_split(kn_tensor *x, int64_t split_size, int64_t dim, kn_tensor **out, int max_out, int *n_out);
/* Views of x in pieces of the given sizes (which must add up to the dim's size). */
KN_API kn_status kn_split_sizes(kn_tensor *x, const int64_t *sizes, int n, int64_t dim, kn_tensor **out);
/* Views of x in `chunks` near-equal pieces (torch.chunk: fewer if the dim is short; an empty
 * dim gives `chunks` empty pieces). out must hold `chunks` handles. */
KN_API kn_status kn_chunk(kn_tensor *x, int chunks, int64_t dim, kn_tensor **out, int *n_out);

typedef enum kn_pad_mode { KN_PAD_CONSTANT = 0, KN_PAD_REFLECT, KN_PAD_REPLICATE } kn_pad_mode;
/* torch.nn.functional.pad: pads[0], pads[1] are the (before, after) amounts of the last dim,
 * pads[2], pads[3] of the one before, and so on (n_pads even, at most 2 * ndim). Negative
 * amounts crop (constant mode). */
KN_API kn_tensor *kn_pad(kn_tensor *x, const int64_t *pads, int n_pads, kn_pad_mode mode, double value);
/* Reverses the order of elements along each dim in dims. */
KN_API kn_tensor *kn_flip(kn_tensor *x, kn_shape dims);
/* Rolls elements by shifts[i] along dims.v[i]; with KN_ALL_DIMS, rolls the flattened tensor by
 * shifts[0] and restores the shape. */
KN_API kn_tensor *kn_roll(kn_tensor *x, const int64_t *shifts, kn_shape dims);
/* Tiles x repeats.v[d] times along each dim (repeats may have more dims than x). */
KN_API kn_tensor *kn_repeat(kn_tensor *x, kn_shape repeats);
/* Repeats each element `repeats` times along dim. */
KN_API kn_tensor *kn_repeat_interleave(kn_tensor *x, int64_t repeats, int64_t dim);
/* Keeps the lower (tril) or upper (triu) triangle of the last two dims, relative to diagonal. */
KN_API kn_tensor *kn_tril(kn_tensor *x, int64_t diagonal);
KN_API kn_tensor *kn_triu(kn_tensor *x, int64_t diagonal);
/* i64 one-hot vectors along a new last dim from i32/i64 indices; num_classes -1 uses
 * max(indices) + 1. Waits for the indices (the checks and the shape need their values). */
KN_API kn_tensor *kn_one_hot(kn_tensor *indices, int64_t num_classes);
/* Coordinate grids from n 1-d tensors: "ij" indexing, or "xy" (first two dims swapped). */
KN_API kn_status kn_meshgrid(kn_tensor *const *tensors, int n, bool xy_indexing, kn_tensor **out);

#ifdef __cplusplus
}
#endif
#endif
