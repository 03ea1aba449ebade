/* Reductions over a set of dims (KN_DIMS(...); KN_ALL_DIMS for every dim). keepdim keeps
 * the reduced dims as size 1. */
#ifndef KILN_OPS_REDUCE_H
#define KILN_OPS_REDUCE_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Integer and bool inputs sum to i64; floats keep their dtype (accumulated in f64). */
kn_tensor *kn_sum(kn_tensor *x, kn_shape dims, bool keepdim);
kn_tensor *kn_mean(kn_tensor *x, kn_shape dims, bool keepdim);

#ifdef __cplusplus
}
#endif
#endif
