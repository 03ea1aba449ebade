/* Creation ops: new tensors on the default device (kn_set_default_device). */
#ifndef KILN_OPS_CREATE_H
#define KILN_OPS_CREATE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

KN_API kn_tensor *kn_empty(kn_shape shape, kn_dtype dtype);   /* values undefined */
KN_API kn_tensor *kn_zeros(kn_shape shape, kn_dtype dtype);
KN_API kn_tensor *kn_ones(kn_shape shape, kn_dtype dtype);
KN_API kn_tensor *kn_full(kn_shape shape, double value, kn_dtype dtype);
/* The same shape, dtype and device as t. */
KN_API kn_tensor *kn_empty_like(kn_tensor *t);
KN_API kn_tensor *kn_zeros_like(kn_tensor *t);
KN_API kn_tensor *kn_ones_like(kn_tensor *t);
KN_API kn_tensor *kn_full_like(kn_tensor *t, double value);
/* A 0-d tensor holding value. */
KN_API kn_tensor *kn_scalar(double value, kn_dtype dtype);
/* start, start+step, ... below end (above, for a negative step). */
KN_API kn_tensor *kn_arange(double start, double end, double step, kn_dtype dtype);
/* count values from start to end inclusive. */
KN_API kn_tensor *kn_linspace(double start, double end, int64_t count, kn_dtype dtype);
KN_API kn_tensor *kn_eye(int64_t rows, int64_t cols, kn_dtype dtype);

/* Random draws from the global Philox generator (kn_manual_seed): the same seed gives the
 * same numbers on every backend and in every mode. */
KN_API kn_tensor *kn_rand(kn_shape shape, kn_dtype dtype);                 /* uniform [0, 1) */
KN_API kn_tensor *kn_uniform(kn_shape shape, double low, double high, kn_dtype dtype);
KN_API kn_tensor *kn_randn(kn_shape shape, kn_dtype dtype);                /* standard normal */
KN_API kn_tensor *kn_normal(kn_shape shape, double mean, double std, kn_dtype dtype);
KN_API kn_tensor *kn_randint(int64_t low, int64_t high, kn_shape shape, kn_dtype dtype); /* [low, high) */
/* 1 with probability p[i] (a float tensor of probabilities in [0, 1]), else 0; p's dtype. */
KN_API kn_tensor *kn_bernoulli(kn_tensor *p);
KN_API kn_tensor *kn_bernoulli_p(kn_shape shape, double p, kn_dtype dtype);
KN_API kn_tensor *kn_rand_like(kn_tensor *t);
KN_API kn_tensor *kn_randn_like(kn_tensor *t);

#ifdef __cplusplus
}
#endif
#endif
