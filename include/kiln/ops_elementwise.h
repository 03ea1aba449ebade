/* Elementwise ops. Binary and ternary ops broadcast their inputs and promote dtypes
 * (bool < int < float; 0-d tensors do not widen within a category). Ops of the FLOAT class
 * (exp, div, ...) compute integer inputs in f32. */
#ifndef KILN_OPS_ELEMENTWISE_H
#define KILN_OPS_ELEMENTWISE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Unary. */
KN_API kn_tensor *kn_neg(kn_tensor *x);
KN_API kn_tensor *kn_abs(kn_tensor *x);
KN_API kn_tensor *kn_sign(kn_tensor *x);       /* -1, 0 or 1; 0 for NaN; bool stays bool (itself) */
KN_API kn_tensor *kn_exp(kn_tensor *x);
KN_API kn_tensor *kn_expm1(kn_tensor *x);
KN_API kn_tensor *kn_log(kn_tensor *x);
KN_API kn_tensor *kn_log1p(kn_tensor *x);
KN_API kn_tensor *kn_log2(kn_tensor *x);
KN_API kn_tensor *kn_sqrt(kn_tensor *x);
KN_API kn_tensor *kn_rsqrt(kn_tensor *x);
KN_API kn_tensor *kn_reciprocal(kn_tensor *x);
KN_API kn_tensor *kn_sin(kn_tensor *x);
KN_API kn_tensor *kn_cos(kn_tensor *x);
KN_API kn_tensor *kn_tanh(kn_tensor *x);
KN_API kn_tensor *kn_sigmoid(kn_tensor *x);
KN_API kn_tensor *kn_relu(kn_tensor *x);
KN_API kn_tensor *kn_leaky_relu(kn_tensor *x, double negative_slope);
KN_API kn_tensor *kn_gelu(kn_tensor *x);        /* erf form */
KN_API kn_tensor *kn_gelu_tanh(kn_tensor *x);   /* tanh approximation (GPT-2's gelu_new) */
KN_API kn_tensor *kn_silu(kn_tensor *x);
KN_API kn_tensor *kn_softplus(kn_tensor *x, double beta, double threshold);  /* torch: beta 1, threshold 20 */
KN_API kn_tensor *kn_erf(kn_tensor *x);
/* Rounding to integral values; an integer tensor is returned unchanged (same dtype), bool is
 * refused (as PyTorch does). */
KN_API kn_tensor *kn_floor(kn_tensor *x);
KN_API kn_tensor *kn_ceil(kn_tensor *x);
KN_API kn_tensor *kn_round(kn_tensor *x);       /* halves to even */
KN_API kn_tensor *kn_trunc(kn_tensor *x);
/* PyTorch's clamp, min(max(x, min), max): pass -INFINITY or INFINITY for a one-sided clamp.
 * A NaN in x or in a bound gives NaN; min > max gives max everywhere. The bounds are floats,
 * so an integer or bool tensor is clamped in f32 (PyTorch's `clamp(int_tensor, 0.5)`). */
KN_API kn_tensor *kn_clamp(kn_tensor *x, double min, double max);
/* Clamp with integer bounds (INT64_MIN / INT64_MAX for no bound on that side): an integer
 * tensor keeps its dtype, bool becomes i64, a float tensor is clamped as by kn_clamp. */
KN_API kn_tensor *kn_clamp_int(kn_tensor *x, int64_t min, int64_t max);
KN_API kn_tensor *kn_bitwise_not(kn_tensor *x);
KN_API kn_tensor *kn_logical_not(kn_tensor *x);
KN_API kn_tensor *kn_isnan(kn_tensor *x);
KN_API kn_tensor *kn_isinf(kn_tensor *x);
KN_API kn_tensor *kn_isfinite(kn_tensor *x);

/* Binary. */
KN_API kn_tensor *kn_add(kn_tensor *a, kn_tensor *b);          /* of two bools: or (bool) */
KN_API kn_tensor *kn_sub(kn_tensor *a, kn_tensor *b);          /* refuses two bools, as PyTorch does */
KN_API kn_tensor *kn_mul(kn_tensor *a, kn_tensor *b);          /* of two bools: and (bool) */
KN_API kn_tensor *kn_div(kn_tensor *a, kn_tensor *b);          /* true division */
/* Python's a // b (PyTorch's algorithm for floats: inf // finite is NaN, x // 0 is x / 0). */
KN_API kn_tensor *kn_floor_divide(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_remainder(kn_tensor *a, kn_tensor *b);    /* takes the divisor's sign */
/* Integers to a negative power give 1 for base 1, +-1 for base -1 and 0 otherwise (PyTorch). */
KN_API kn_tensor *kn_pow(kn_tensor *a, kn_tensor *b);
/* NaN propagates; of -0.0 and 0.0 the first operand; of two bools: or (maximum), and (minimum). */
KN_API kn_tensor *kn_maximum(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_minimum(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_eq(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_ne(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_lt(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_le(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_gt(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_ge(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_logical_and(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_logical_or(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_logical_xor(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_bitwise_and(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_bitwise_or(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_bitwise_xor(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_bitwise_left_shift(kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_bitwise_right_shift(kn_tensor *a, kn_tensor *b);

/* With a C number as operand, computed as PyTorch computes a tensor with a Python number, to
 * the bit on f16, bf16, f32 and f64 (docs/semantics.md lists the exceptions: where PyTorch's
 * vectorized loop takes pow from SLEEF or sqrt from MKL, kiln gives its scalar loop's value).
 * A double is a float operand whatever its value (`x + 2.0`): a float tensor keeps its dtype,
 * an integer or bool tensor gives f32. f16/bf16 tensors compute in f32 with the number in
 * f32, except that add and sub round it to the tensor's dtype first, as PyTorch does.
 * kn_sub_scalar of a bool tensor is an error (PyTorch refuses it too). */
KN_API kn_tensor *kn_add_scalar(kn_tensor *a, double b);
KN_API kn_tensor *kn_sub_scalar(kn_tensor *a, double b);
KN_API kn_tensor *kn_mul_scalar(kn_tensor *a, double b);
KN_API kn_tensor *kn_div_scalar(kn_tensor *a, double b);
/* Exponents 0.5, -0.5, -1 are sqrt, rsqrt, reciprocal and 2, 3, -2 products rounded at each
 * step (x*x*x), as in PyTorch, except on f16; any other exponent is pow, in f64 for f32
 * tensors, in f32 with the exponent rounded to the dtype for f16 and bf16 (an exponent beyond
 * that dtype's range is an error, as in PyTorch). */
KN_API kn_tensor *kn_pow_scalar(kn_tensor *a, double b);
/* An integer operand (`x + 2`): an integer tensor keeps its dtype, the number wrapped to it
 * (int32 + 2**32 adds 0); bool gives i64; a float tensor keeps its dtype. kn_pow_scalar_int of an integer tensor refuses a negative exponent and,
 * for i32, one above INT32_MAX (as PyTorch does). There is no div form: division is true
 * division, kn_div_scalar. */
KN_API kn_tensor *kn_add_scalar_int(kn_tensor *a, int64_t b);
KN_API kn_tensor *kn_sub_scalar_int(kn_tensor *a, int64_t b);
KN_API kn_tensor *kn_mul_scalar_int(kn_tensor *a, int64_t b);
KN_API kn_tensor *kn_pow_scalar_int(kn_tensor *a, int64_t b);

/* Ternary. */
KN_API kn_tensor *kn_where(kn_tensor *cond, kn_tensor *a, kn_tensor *b);   /* cond ? a : b */
/* lerp and addcmul round once (a fused multiply-add), as PyTorch's CPU kernels do. */
KN_API kn_tensor *kn_lerp(kn_tensor *start, kn_tensor *end, kn_tensor *weight);
/* start + weight (end - start) from the nearer end in one fused multiply-add, as PyTorch;
 * the weight in f32 for f16/bf16/f32 tensors. */
KN_API kn_tensor *kn_lerp_scalar(kn_tensor *start, kn_tensor *end, double weight);
KN_API kn_tensor *kn_addcmul(kn_tensor *self, kn_tensor *t1, kn_tensor *t2, double value);
KN_API kn_tensor *kn_addcdiv(kn_tensor *self, kn_tensor *t1, kn_tensor *t2, double value);

/* Backward helpers: the derivatives autograd applies, one kernel each. grad is the output's
 * gradient; the result is the gradient of the input named in the comment. */
KN_API kn_tensor *kn_relu_backward(kn_tensor *grad, kn_tensor *out);     /* out = relu(x); 0 at x = 0 */
KN_API kn_tensor *kn_leaky_relu_backward(kn_tensor *grad, kn_tensor *x, double negative_slope);
/* grad where min < x < max (an infinite bound: no bound), else 0 (at a bound too: PyTorch 2.15) */
KN_API kn_tensor *kn_clamp_backward(kn_tensor *grad, kn_tensor *x, double min, double max);
KN_API kn_tensor *kn_softplus_backward(kn_tensor *grad, kn_tensor *x, double beta, double threshold);
KN_API kn_tensor *kn_sigmoid_backward(kn_tensor *grad, kn_tensor *out);  /* out = sigmoid(x) */
KN_API kn_tensor *kn_tanh_backward(kn_tensor *grad, kn_tensor *out);     /* out = tanh(x) */
KN_API kn_tensor *kn_gelu_backward(kn_tensor *grad, kn_tensor *x);
KN_API kn_tensor *kn_gelu_tanh_backward(kn_tensor *grad, kn_tensor *x);
KN_API kn_tensor *kn_silu_backward(kn_tensor *grad, kn_tensor *x);
KN_API kn_tensor *kn_erf_backward(kn_tensor *grad, kn_tensor *x);
/* pow(base, exponent): d/dbase, and d/dexponent (0 where base == 0 <= exponent). */
KN_API kn_tensor *kn_pow_backward(kn_tensor *grad, kn_tensor *base, kn_tensor *exponent);
KN_API kn_tensor *kn_pow_backward_exponent(kn_tensor *grad, kn_tensor *base, kn_tensor *exponent);
/* maximum(a, b) / minimum(a, b): d/da (swap a and b for d/db); ties give each half. */
KN_API kn_tensor *kn_maximum_backward(kn_tensor *grad, kn_tensor *a, kn_tensor *b);
KN_API kn_tensor *kn_minimum_backward(kn_tensor *grad, kn_tensor *a, kn_tensor *b);

/* Conversion to another dtype (a new tensor; round-to-nearest-even for f16/bf16). */
KN_API kn_tensor *kn_cast(kn_tensor *x, kn_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
