/* Normalization layers: LayerNorm, RMSNorm, GroupNorm, BatchNorm2d. */
#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *layer_norm_forward(void *m, kn_tensor *x) { return kn_nn_layer_norm_forward(m, x); }
static kn_tensor *rms_norm_forward(void *m, kn_tensor *x) { return kn_nn_rms_norm_forward(m, x); }
static kn_tensor *group_norm_forward(void *m, kn_tensor *x) { return kn_nn_group_norm_forward(m, x); }
static kn_tensor *batch_norm_forward(void *m, kn_tensor *x) { return kn_nn_batch_norm2d_forward(m, x); }

/* Registers weight (ones) and, with bias, bias (zeros) of `shape`. */
static void affine_params(kn_module *m, kn_shape shape, bool bias, kn_dtype dtype, kn_tensor **w, kn_tensor **b) {
    *w = nn_new_param(m, "weight", shape, dtype);
    if (*w && kn_init_ones_(*w) != KN_OK) m->failed = true;
    if (!bias) return;
    *b = nn_new_param(m, "bias", shape, dtype);
    if (*b && kn_init_zeros_(*b) != KN_OK) m->failed = true;
}

static bool check_shape(const char *type, kn_shape shape) {
    bool ok = shape.n >= 1 && shape.n <= KN_MAX_DIMS;
    for (int i = 0; ok && i < shape.n; i++) ok = shape.v[i] > 0;
    if (!ok) kn_error(KN_ERR_ARG, "%s: normalized shape must have 1 to %d positive sizes", type, KN_MAX_DIMS);
    return ok;
}

kn_nn_layer_norm *kn_nn_layer_norm_new(kn_shape shape, double eps, bool affine, kn_dtype dtype) {
    if (!check_shape("LayerNorm", shape)) return NULL;
    kn_nn_layer_norm *n = kn_module_alloc(sizeof *n, "LayerNorm");
    if (!n) return NULL;
    n->base.forward = layer_norm_forward;
    n->shape = shape, n->eps = eps;
    if (affine) affine_params(&n->base, shape, true, dtype, &n->weight, &n->bias);
    return kn_module_check(n);
}

kn_tensor *kn_nn_layer_norm_forward(kn_nn_layer_norm *n, kn_tensor *x) {
    if (!n) return kn_error_null_input("LayerNorm", 0), NULL;
    nn_enter(n);
    return nn_leave(kn_layer_norm(x, n->shape, n->weight, n->bias, n->eps));
}

kn_nn_rms_norm *kn_nn_rms_norm_new(kn_shape shape, double eps, kn_dtype dtype) {
    if (!check_shape("RMSNorm", shape)) return NULL;
    kn_nn_rms_norm *n = kn_module_alloc(sizeof *n, "RMSNorm");
    if (!n) return NULL;
    n->base.forward = rms_norm_forward;
    n->shape = shape, n->eps = eps;
    affine_params(&n->base, shape, false, dtype, &n->weight, NULL);
    return kn_module_check(n);
}

kn_tensor *kn_nn_rms_norm_forward(kn_nn_rms_norm *n, kn_tensor *x) {
    if (!n) return kn_error_null_input("RMSNorm", 0), NULL;
    nn_enter(n);
    return nn_leave(kn_rms_norm(x, n->shape, n->weight, n->eps));
}

kn_nn_group_norm *kn_nn_group_norm_new(int64_t groups, int64_t channels, double eps, bool affine, kn_dtype dtype) {
    if (groups <= 0 || channels <= 0 || channels % groups)
        return kn_error_null(KN_ERR_ARG, "GroupNorm: %lld groups must divide %lld channels (both positive)",
                             (long long)groups, (long long)channels);
    kn_nn_group_norm *n = kn_module_alloc(sizeof *n, "GroupNorm");
    if (!n) return NULL;
    n->base.forward = group_norm_forward;
    n->groups = groups, n->channels = channels, n->eps = eps;
    if (affine) affine_params(&n->base, KN_SHAPE(channels), true, dtype, &n->weight, &n->bias);
    return kn_module_check(n);
}

kn_tensor *kn_nn_group_norm_forward(kn_nn_group_norm *n, kn_tensor *x) {
    if (!n) return kn_error_null_input("GroupNorm", 0), NULL;
    nn_enter(n);
    return nn_leave(kn_group_norm(x, n->groups, n->weight, n->bias, n->eps));
}

kn_nn_batch_norm2d *kn_nn_batch_norm2d_new(int64_t channels, double eps, double momentum, bool affine,
                                           kn_dtype dtype) {
    if (channels <= 0) return kn_error_null(KN_ERR_ARG, "BatchNorm2d: channels must be positive, not %lld", (long long)channels);
    if (!kn_dtype_is_float(dtype))
        return kn_error_null(KN_ERR_DTYPE, "BatchNorm2d: dtype must be a float type, not %s", kn_dtype_name(dtype));
    kn_nn_batch_norm2d *n = kn_module_alloc(sizeof *n, "BatchNorm2d");
    if (!n) return NULL;
    n->base.forward = batch_norm_forward;
    n->channels = channels, n->eps = eps, n->momentum = momentum;
    if (affine) affine_params(&n->base, KN_SHAPE(channels), true, dtype, &n->weight, &n->bias);
    n->running_mean = nn_new_buffer(n, "running_mean", KN_SHAPE(channels), 0.0, dtype);
    n->running_var = nn_new_buffer(n, "running_var", KN_SHAPE(channels), 1.0, dtype);
    n->num_batches_tracked = nn_new_buffer(n, "num_batches_tracked", KN_SHAPE0, 0.0, KN_I64);
    return kn_module_check(n);
}

kn_tensor *kn_nn_batch_norm2d_forward(kn_nn_batch_norm2d *n, kn_tensor *x) {
    if (!n || !x) return kn_error_null_input("BatchNorm2d", n ? 1 : 0), NULL;
    if (kn_ndim(x) != 4) {
        char desc[96];
        return kn_error_null(KN_ERR_SHAPE, "BatchNorm2d: x must be [N, C, H, W], not %s", kn_describe(x, desc, sizeof desc));
    }
    bool training = n->base.training;
    nn_enter(n);
    kn_tensor *y = kn_batch_norm(x, n->running_mean, n->running_var, n->weight, n->bias, training, n->momentum, n->eps);
    if (y && training) {
        kn_scope_push();
        kn_status st = nn_assign(n->num_batches_tracked, kn_add_scalar_int(n->num_batches_tracked, 1));
        kn_scope_pop();
        if (st != KN_OK) kn_release(y), y = NULL;
    }
    return nn_leave(y);
}
