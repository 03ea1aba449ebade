/* Private pieces of the CPU nn kernels (k_nn*.c): per-file kernels and shared helpers. */
#ifndef KILN_BACKENDS_CPU_K_NN_H
#define KILN_BACKENDS_CPU_K_NN_H

#include "backends/cpu/cpu_kernels.h"

/* The dtype nn kernels compute in: f64 stays f64, every other float dtype widens to f32. */
static inline kn_dtype kn_nn_compute_dtype(kn_dtype d) { return d == KN_F64 ? KN_F64 : KN_F32; }
/* t itself (a new internal reference) when it is contiguous in dtype, else a contiguous
 * copy in dtype; NULL on OOM. */
kn_tensor *kn_nn_work(kn_tensor *t, kn_dtype dtype);
/* A tensor to compute out in: out itself when it has dtype, else fresh scratch. */
kn_tensor *kn_nn_work_out(kn_tensor *out, kn_dtype dtype);
/* Narrows work into out (when they differ) and drops work. */
kn_status kn_nn_finish(kn_tensor *out, kn_tensor *work, kn_status st);
/* The values of a 1-d tensor of any float dtype and stride as a malloc'd double array
 * (or `fill` repeated n times when t is NULL); NULL on OOM. */
double *kn_nn_read_vector(kn_tensor *t, int64_t n, double fill);
/* Writes v into the 1-d tensor t (any float dtype and stride). */
kn_status kn_nn_write_vector(kn_tensor *t, const double *v);
/* The malloc'd double vector v (taken over) as a malloc'd array of n values of the compute
 * dtype ct (float or double); NULL when v is NULL or on OOM. */
void *kn_nn_narrow_vector(double *v, int64_t n, kn_dtype ct);

kn_status kn_nn_layer_norm_kernel(kn_node *n);
kn_status kn_nn_rms_norm_kernel(kn_node *n);
kn_status kn_nn_group_norm_kernel(kn_node *n);
kn_status kn_nn_batch_norm_kernel(kn_node *n);
kn_status kn_nn_conv2d_kernel(kn_node *n);
kn_status kn_nn_conv_transpose2d_kernel(kn_node *n);
kn_status kn_nn_max_pool2d_kernel(kn_node *n);
kn_status kn_nn_avg_pool2d_kernel(kn_node *n);
kn_status kn_nn_adaptive_avg_pool2d_kernel(kn_node *n);
kn_status kn_nn_upsample_nearest2d_kernel(kn_node *n);
kn_status kn_nn_upsample_bilinear2d_kernel(kn_node *n);
kn_status kn_nn_layer_norm_backward_kernel(kn_node *n);
kn_status kn_nn_rms_norm_backward_kernel(kn_node *n);
kn_status kn_nn_batch_norm_backward_kernel(kn_node *n);
kn_status kn_nn_conv2d_backward_weight_kernel(kn_node *n);

#endif
