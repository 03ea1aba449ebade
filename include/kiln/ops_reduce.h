/* Reductions over a set of dims (KN_DIMS(...); KN_ALL_DIMS for every dim; negative dims
 * count from the end). keepdim keeps the reduced dims as size 1. Over zero-size dims, sum
 * gives 0, prod 1, mean NaN, all true, any false; the extremes (amax, max, max_dim, argmax
 * and their min twins) fail with KN_ERR_SHAPE, having no identity. */
#ifndef KILN_OPS_REDUCE_H
#define KILN_OPS_REDUCE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Integer and bool inputs sum to i64; floats keep their dtype (accumulated in f64). */
KN_API kn_tensor *kn_sum(kn_tensor *x, kn_shape dims, bool keepdim);
KN_API kn_tensor *kn_mean(kn_tensor *x, kn_shape dims, bool keepdim);
/* Integer and bool inputs multiply in i64. */
KN_API kn_tensor *kn_prod(kn_tensor *x, kn_shape dims, bool keepdim);
/* Largest / smallest values over dims (NaN propagates). */
KN_API kn_tensor *kn_amax(kn_tensor *x, kn_shape dims, bool keepdim);
KN_API kn_tensor *kn_amin(kn_tensor *x, kn_shape dims, bool keepdim);
/* Over all elements, as a 0-d tensor. */
KN_API kn_tensor *kn_max(kn_tensor *x);
KN_API kn_tensor *kn_min(kn_tensor *x);
/* Along one dim: the values and their (first) indices, i64. Either output may be NULL. */
KN_API kn_status kn_max_dim(kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values, kn_tensor **indices);
KN_API kn_status kn_min_dim(kn_tensor *x, int64_t dim, bool keepdim, kn_tensor **values, kn_tensor **indices);
/* Index (i64) of the first largest / smallest value along dim; *_all over the flattened tensor. */
KN_API kn_tensor *kn_argmax(kn_tensor *x, int64_t dim, bool keepdim);
KN_API kn_tensor *kn_argmin(kn_tensor *x, int64_t dim, bool keepdim);
KN_API kn_tensor *kn_argmax_all(kn_tensor *x);
KN_API kn_tensor *kn_argmin_all(kn_tensor *x);
/* Variance and standard deviation with Bessel's correction term (1 = unbiased, 0 = biased):
 * the squared deviations are divided by max(0, N - correction). Float inputs only. */
KN_API kn_tensor *kn_var(kn_tensor *x, kn_shape dims, double correction, bool keepdim);
KN_API kn_tensor *kn_std(kn_tensor *x, kn_shape dims, double correction, bool keepdim);
/* Vector p-norm over dims: p = 2, 1, INFINITY (max |x|), -INFINITY (min |x|), 0 (count of
 * nonzeros) or any other positive p. */
KN_API kn_tensor *kn_norm(kn_tensor *x, double p, kn_shape dims, bool keepdim);
/* log(sum(exp(x))) over dims, computed stably (only -inf gives -inf). Float inputs only. */
KN_API kn_tensor *kn_logsumexp(kn_tensor *x, kn_shape dims, bool keepdim);
/* Whether all / any elements are nonzero; bool output. */
KN_API kn_tensor *kn_all(kn_tensor *x, kn_shape dims, bool keepdim);
KN_API kn_tensor *kn_any(kn_tensor *x, kn_shape dims, bool keepdim);
/* Running sum / product along dim (integers in i64), from 0 / 1 as in PyTorch (a leading -0.0
 * sums to +0.0). */
KN_API kn_tensor *kn_cumsum(kn_tensor *x, int64_t dim);
KN_API kn_tensor *kn_cumprod(kn_tensor *x, int64_t dim);
/* Softmax and its logarithm along dim, stable for large inputs (a row of only -inf gives
 * NaN, as in PyTorch). Float inputs only. */
KN_API kn_tensor *kn_softmax(kn_tensor *x, int64_t dim);
KN_API kn_tensor *kn_log_softmax(kn_tensor *x, int64_t dim);
/* Their gradients (autograd's formulas, one kernel): from g, the gradient of y = softmax(x,
 * dim) (or log_softmax), and y itself, both of one shape, the gradient of x: y * (g -
 * sum(g * y)) (or g - exp(y) * sum(g)) along dim. f64 when either is f64, else f32. */
KN_API kn_tensor *kn_softmax_backward(kn_tensor *g, kn_tensor *y, int64_t dim);
KN_API kn_tensor *kn_log_softmax_backward(kn_tensor *g, kn_tensor *y, int64_t dim);

#ifdef __cplusplus
}
#endif
#endif
