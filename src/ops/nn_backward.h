/* Backward ops of the nn family, for the gradient formulas (src/ops/grad_nn_*.c): one kernel
 * each where a composition of ops would be much slower. Not public API. */
#ifndef KILN_OPS_NN_BACKWARD_H
#define KILN_OPS_NN_BACKWARD_H

#include "kiln/tensor.h"

/* layer_norm (rms: rms_norm) over the last `inner` elements of x, given the output's
 * gradient gy (x's shape): writes dx, dweight = sum(gy * xhat) and, for layer_norm,
 * dbias = sum(gy) over rows ([inner] each; NULL destinations are not handed out).
 * weight [inner] or NULL. */
kn_status kn_norm_backward(kn_tensor *gy, kn_tensor *x, kn_tensor *weight, int64_t inner, double eps, bool rms,
                           kn_tensor **dx, kn_tensor **dweight, kn_tensor **dbias);
/* batch_norm over x [N, C, *] with per-channel statistics, given the output's gradient gy
 * (x's shape): writes dx, dweight = sum(gy * xhat) and dbias = sum(gy) over every dim but C
 * ([C] each; NULL destinations are not handed out). Training recomputes the batch statistics
 * from x (running_mean and running_var NULL); inference takes the running ones (required).
 * weight [C] or NULL. */
kn_status kn_batch_norm_backward(kn_tensor *gy, kn_tensor *x, kn_tensor *weight, kn_tensor *running_mean,
                                 kn_tensor *running_var, bool training, double eps, kn_tensor **dx,
                                 kn_tensor **dweight, kn_tensor **dbias);
/* The gradient of conv2d's weight [gy.C, x.C/groups, kh, kw] from its output's gradient gy
 * [N, Cout, OH, OW] and input x [N, C, H, W] (opts with defaults filled in). */
kn_tensor *kn_conv2d_backward_weight(kn_tensor *gy, kn_tensor *x, int64_t kh, int64_t kw, const int64_t stride[2],
                                     const int64_t padding[2], const int64_t dilation[2], int64_t groups);

#endif
