/* Neural-network ops: normalization, convolution, pooling, resampling. Inputs are NCHW. */
#ifndef KILN_OPS_NN_H
#define KILN_OPS_NN_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Normalizes over the trailing dims of normalized_shape; weight and bias (that shape) may be NULL. */
KN_API kn_tensor *kn_layer_norm(kn_tensor *x, kn_shape normalized_shape, kn_tensor *weight, kn_tensor *bias, double eps);
/* x / sqrt(mean(x^2) + eps) * weight over the trailing dims; weight may be NULL. */
KN_API kn_tensor *kn_rms_norm(kn_tensor *x, kn_shape normalized_shape, kn_tensor *weight, double eps);
/* x [N, C, *] normalized within each of `groups` groups of channels; weight, bias [C] or NULL. */
KN_API kn_tensor *kn_group_norm(kn_tensor *x, int64_t groups, kn_tensor *weight, kn_tensor *bias, double eps);
/* x [N, C, *]. Training: normalizes with the batch's statistics and, when running_mean and
 * running_var are given, updates them in place (momentum, unbiased variance, as PyTorch).
 * Inference: normalizes with the running statistics (required then). weight, bias [C] or NULL. */
KN_API kn_tensor *kn_batch_norm(kn_tensor *x, kn_tensor *running_mean, kn_tensor *running_var, kn_tensor *weight,
                         kn_tensor *bias, bool training, double momentum, double eps);

/* Convolution options; a zero field takes PyTorch's default (stride 1, padding 0,
 * dilation 1, output_padding 0, groups 1). conv1d uses the [0] entries. */
typedef struct kn_conv_opts {
    int64_t stride[2], padding[2], dilation[2], output_padding[2];
    int64_t groups;
} kn_conv_opts;
/* x [N, C_in, L], weight [C_out, C_in/groups, K], bias [C_out] or NULL. */
KN_API kn_tensor *kn_conv1d(kn_tensor *x, kn_tensor *weight, kn_tensor *bias, kn_conv_opts opts);
/* x [N, C_in, H, W], weight [C_out, C_in/groups, KH, KW], bias [C_out] or NULL. */
KN_API kn_tensor *kn_conv2d(kn_tensor *x, kn_tensor *weight, kn_tensor *bias, kn_conv_opts opts);
/* x [N, C_in, H, W], weight [C_in, C_out/groups, KH, KW] (PyTorch's layout), bias [C_out] or NULL. */
KN_API kn_tensor *kn_conv_transpose2d(kn_tensor *x, kn_tensor *weight, kn_tensor *bias, kn_conv_opts opts);

/* Pooling options; a zero stride means the kernel size, zero dilation means 1.
 * exclude_pad: avg_pool2d divides by the window's elements inside the input only
 * (count_include_pad=False); the default counts the padding as PyTorch does. */
typedef struct kn_pool_opts {
    int64_t kernel[2], stride[2], padding[2], dilation[2];
    bool ceil_mode, exclude_pad;
} kn_pool_opts;
KN_API kn_tensor *kn_max_pool2d(kn_tensor *x, kn_pool_opts opts);
/* Also the flat index (i64, into each H*W plane) of each maximum: the first of equal maxima, and
 * the last NaN of a window that holds NaN (NaN is the maximum), as in PyTorch. */
KN_API kn_status kn_max_pool2d_with_indices(kn_tensor *x, kn_pool_opts opts, kn_tensor **out, kn_tensor **indices);
KN_API kn_tensor *kn_avg_pool2d(kn_tensor *x, kn_pool_opts opts);
KN_API kn_tensor *kn_adaptive_avg_pool2d(kn_tensor *x, int64_t out_h, int64_t out_w);
/* Resizing [N, C, H, W] to [N, C, out_h, out_w]. */
KN_API kn_tensor *kn_upsample_nearest2d(kn_tensor *x, int64_t out_h, int64_t out_w);
KN_API kn_tensor *kn_upsample_bilinear2d(kn_tensor *x, int64_t out_h, int64_t out_w, bool align_corners);

#ifdef __cplusplus
}
#endif
#endif
