/* Indexing ops: gathering, scattering, masking, sorting and sampling. Functional: ops that
 * "write" return a new tensor and leave their input unchanged. Index tensors are i32 or i64;
 * an index out of range is an error (KN_ERR_INDEX naming the op, the value, the dim and its
 * size; in strict mode reported at the next sync, in debug mode by the op itself). As in
 * PyTorch, negative indices are out of range everywhere except kn_index_put, which wraps them
 * (-1 is the last). Where duplicate indices write one element, kn_scatter, kn_scatter_value
 * and kn_index_put (without accumulate) keep the last write in row-major order of the index;
 * the accumulating forms combine them all, deterministically. Accumulation runs in f32 for
 * f32/f16/bf16, f64 for f64 and wrapping i64 for integers and bool. */
#ifndef KILN_OPS_INDEX_H
#define KILN_OPS_INDEX_H

#include "kiln/op_enums.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

KN_API kn_tensor *kn_index_select(kn_tensor *x, int64_t dim, kn_tensor *index);
KN_API kn_tensor *kn_gather(kn_tensor *x, int64_t dim, kn_tensor *index);
/* x with out[index[i][j]][j] = src[i][j] (dim 0; likewise for other dims). */
KN_API kn_tensor *kn_scatter(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src);
KN_API kn_tensor *kn_scatter_value(kn_tensor *x, int64_t dim, kn_tensor *index, double value);
KN_API kn_tensor *kn_scatter_add(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src);
/* op: kn_scatter_reduce_op (kiln/op_enums.h). */
/* include_self false leaves x's values out of the reduction at the positions written; mean
 * of integers rounds down (floor division). NaN propagates through amax/amin. */
KN_API kn_tensor *kn_scatter_reduce(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src, kn_scatter_reduce_op op,
                             bool include_self);
/* x with out.select(dim, index[i]) += alpha * src.select(dim, i). */
KN_API kn_tensor *kn_index_add(kn_tensor *x, int64_t dim, kn_tensor *index, kn_tensor *src, double alpha);
/* x with x[indices[0], ..., indices[n-1]] = values (or += with accumulate): advanced indexing
 * over the first n dims, the index tensors broadcast together, values broadcast to the result. */
KN_API kn_tensor *kn_index_put(kn_tensor *x, kn_tensor *const *indices, int n, kn_tensor *values, bool accumulate);
/* Index tensors must be i32/i64 (for a bool mask use kn_nonzero first). */
/* x where mask is false, value where it is true (mask broadcasts to x). */
KN_API kn_tensor *kn_masked_fill(kn_tensor *x, kn_tensor *mask, double value);
/* The elements of x where mask is true, as a 1-d tensor (waits for its inputs). */
KN_API kn_tensor *kn_masked_select(kn_tensor *x, kn_tensor *mask);
/* [count, ndim] i64 coordinates of the nonzero elements, in row-major order (waits). */
KN_API kn_tensor *kn_nonzero(kn_tensor *x);
/* Rows of weight [V, D] picked by integer indices of any shape: out [..., D]. */
KN_API kn_tensor *kn_embedding(kn_tensor *weight, kn_tensor *indices);
/* The gradient of kn_embedding's weight [num_weights, D] from grad [..., D] (indices' shape
 * then D): each grad row added into its index's row of zeros, in one pass (duplicates add up
 * in row-major order). f32 for f32/f16/bf16 grads, f64 for f64. */
KN_API kn_tensor *kn_embedding_backward(kn_tensor *grad, kn_tensor *indices, int64_t num_weights);
/* Reductions of bags of rows (kn_bag_mode, kiln/op_enums.h): with offsets, indices is 1-d
 * and bag b is indices[offsets[b] .. offsets[b+1]) (the last bag runs to the end, or
 * include_last_offset says offsets has one extra, final entry); without (NULL), indices is
 * [B, L]. Optional per_sample_weights (sum mode only) scale each row. Empty bags give zeros.
 * Max keeps a bag's first maximum, as PyTorch: a later row replaces it only when greater (so
 * NaN only from a bag's first row), and the gradient goes to that row alone. */
KN_API kn_tensor *kn_embedding_bag(kn_tensor *weight, kn_tensor *indices, kn_tensor *offsets, kn_bag_mode mode,
                            kn_tensor *per_sample_weights, bool include_last_offset);
/* The k largest (or smallest) along dim; indices i64. Always sorted (`sorted` false is
 * allowed and sorts too), NaN counting as the largest value; equal values (-0.0 and 0.0 are
 * equal) keep the lower index first, where PyTorch's order among ties is unspecified. */
KN_API kn_status kn_topk(kn_tensor *x, int64_t k, int64_t dim, bool largest, bool sorted, kn_tensor **values,
                  kn_tensor **indices);
/* Stable sort along dim; NaN sorts as the largest value. Either output may be NULL. */
KN_API kn_status kn_sort(kn_tensor *x, int64_t dim, bool descending, kn_tensor **values, kn_tensor **indices);
KN_API kn_tensor *kn_argsort(kn_tensor *x, int64_t dim, bool descending);
/* The distinct values of the flattened x in ascending order, and optionally (non-NULL) the
 * index of each element's value (x's shape) and each value's count (waits for its input). As
 * in PyTorch, each NaN is a value of its own (count 1), after the numbers in the order the NaNs
 * appear; -0.0 and 0.0 are one value, shown with the sign of its first occurrence. */
KN_API kn_status kn_unique(kn_tensor *x, kn_tensor **values, kn_tensor **inverse, kn_tensor **counts);
/* num_samples draws of category indices (i64) per row of non-negative weights [C] or [N, C],
 * from the Philox generator (the same seed gives the same draws); without replacement,
 * num_samples <= C. Negative, infinite or NaN weights, an all-zero row, or too few nonzero
 * weights without replacement are data errors (KN_ERR_ARG) reported like index errors. */
KN_API kn_tensor *kn_multinomial(kn_tensor *probs, int64_t num_samples, bool replacement);

#ifdef __cplusplus
}
#endif
#endif
