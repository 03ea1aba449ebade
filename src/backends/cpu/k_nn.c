/* CPU kernels of the nn family (see src/ops/defs/nn.def): the registration list and the
 * helpers the k_nn_*.c files share. */
#include <stdlib.h>
#include <string.h>

#include "backends/cpu/k_nn.h"
#include "core/error.h"

kn_tensor *kn_nn_work(kn_tensor *t, kn_dtype dtype) {
    if (t->dtype == dtype && kn_tensor_is_contiguous(t)) return kn_tensor_incref(t);
    kn_tensor *w = kn_tensor_alloc("nn", dtype, t->shape, t->ndim, t->storage->device);
    if (w && kn_cpu_copy_into(w, t) != KN_OK) {
        kn_tensor_decref(w);
        return NULL;
    }
    return w;
}

kn_tensor *kn_nn_work_out(kn_tensor *out, kn_dtype dtype) {
    if (out->dtype == dtype) return kn_tensor_incref(out);
    return kn_tensor_alloc("nn", dtype, out->shape, out->ndim, out->storage->device);
}

kn_status kn_nn_finish(kn_tensor *out, kn_tensor *work, kn_status st) {
    if (st == KN_OK && work && work != out) st = kn_cpu_copy_into(out, work);
    if (work) kn_tensor_decref(work);
    return st;
}

double *kn_nn_read_vector(kn_tensor *t, int64_t n, double fill) {
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    if (!v) return NULL;
    if (!t) {
        for (int64_t i = 0; i < n; i++) v[i] = fill;
        return v;
    }
    kn_tensor *d = kn_nn_work(t, KN_F64);
    if (!d) {
        free(v);
        return NULL;
    }
    if (n) memcpy(v, kn_tensor_data(d), sizeof(double) * (size_t)n);
    kn_tensor_decref(d);
    return v;
}

kn_status kn_nn_write_vector(kn_tensor *t, const double *v) {
    kn_tensor *d = kn_tensor_alloc("nn", KN_F64, t->shape, t->ndim, t->storage->device);
    if (!d) return kn_last_status();
    if (t->shape[0]) memcpy(kn_tensor_data(d), v, sizeof(double) * (size_t)t->shape[0]);
    kn_status st = kn_cpu_copy_into(t, d);
    kn_tensor_decref(d);
    return st;
}

void *kn_nn_narrow_vector(double *v, int64_t n, kn_dtype ct) {
    if (!v || ct == KN_F64) return v;
    float *f = malloc(sizeof(float) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; f && i < n; i++) f[i] = (float)v[i];
    free(v);
    return f;
}

const kn_kernel_reg kn_cpu_kernels_nn[] = {
    {KN_OP_layer_norm, kn_nn_layer_norm_kernel, KN_DTS_FLOAT},
    {KN_OP_rms_norm, kn_nn_rms_norm_kernel, KN_DTS_FLOAT},
    {KN_OP_group_norm, kn_nn_group_norm_kernel, KN_DTS_FLOAT},
    {KN_OP_batch_norm, kn_nn_batch_norm_kernel, KN_DTS_FLOAT},
    {KN_OP_conv2d, kn_nn_conv2d_kernel, KN_DTS_FLOAT},
    {KN_OP_conv_transpose2d, kn_nn_conv_transpose2d_kernel, KN_DTS_FLOAT},
    {KN_OP_max_pool2d, kn_nn_max_pool2d_kernel, KN_DTS_FLOAT},
    {KN_OP_avg_pool2d, kn_nn_avg_pool2d_kernel, KN_DTS_FLOAT},
    {KN_OP_adaptive_avg_pool2d, kn_nn_adaptive_avg_pool2d_kernel, KN_DTS_FLOAT},
    {KN_OP_upsample_nearest2d, kn_nn_upsample_nearest2d_kernel, KN_DTS_FLOAT},
    {KN_OP_upsample_bilinear2d, kn_nn_upsample_bilinear2d_kernel, KN_DTS_FLOAT},
    {KN_OP_layer_norm_backward, kn_nn_layer_norm_backward_kernel, KN_DTS_FLOAT},
    {KN_OP_rms_norm_backward, kn_nn_rms_norm_backward_kernel, KN_DTS_FLOAT},
    {KN_OP_batch_norm_backward, kn_nn_batch_norm_backward_kernel, KN_DTS_FLOAT},
    {KN_OP_conv2d_backward_weight, kn_nn_conv2d_backward_weight_kernel, KN_DTS_FLOAT},
    {0},
};
