/* Conv2d and ConvTranspose2d with square kernels. */
#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *conv_forward(void *m, kn_tensor *x) { return kn_nn_conv2d_forward(m, x); }
static kn_tensor *conv_transpose_forward(void *m, kn_tensor *x) { return kn_nn_conv_transpose2d_forward(m, x); }

/* weight [w0, w1, k, k]: Conv2d [out, in/groups], ConvTranspose2d [in, out/groups]. */
static kn_nn_conv2d *conv_new(const char *type, int64_t in, int64_t out, int64_t kernel, kn_conv_opts opts, bool bias,
                              kn_dtype dtype, bool transposed) {
    int64_t groups = opts.groups ? opts.groups : 1;
    if (in <= 0 || out <= 0 || kernel <= 0 || groups <= 0 || in % groups || out % groups)
        return kn_error_null(KN_ERR_ARG,
                             "%s: channels %lld -> %lld and kernel %lld must be positive, channels multiples of "
                             "groups %lld",
                             type, (long long)in, (long long)out, (long long)kernel, (long long)groups);
    kn_nn_conv2d *c = kn_module_alloc(sizeof *c, type);
    if (!c) return NULL;
    c->base.forward = transposed ? conv_transpose_forward : conv_forward;
    c->in_channels = in, c->out_channels = out, c->kernel = kernel, c->opts = opts;
    kn_shape shape = transposed ? KN_SHAPE(in, out / groups, kernel, kernel) : KN_SHAPE(out, in / groups, kernel, kernel);
    c->weight = nn_new_param(c, "weight", shape, dtype);
    if (bias) c->bias = nn_new_param(c, "bias", KN_SHAPE(out), dtype);
    if (c->weight && nn_init_linear_default(c->weight, c->bias) != KN_OK) c->base.failed = true;
    return kn_module_check(c);
}

kn_nn_conv2d *kn_nn_conv2d_new(int64_t in_channels, int64_t out_channels, int64_t kernel, kn_conv_opts opts,
                               bool bias, kn_dtype dtype) {
    return conv_new("Conv2d", in_channels, out_channels, kernel, opts, bias, dtype, false);
}

kn_nn_conv2d *kn_nn_conv_transpose2d_new(int64_t in_channels, int64_t out_channels, int64_t kernel,
                                         kn_conv_opts opts, bool bias, kn_dtype dtype) {
    return conv_new("ConvTranspose2d", in_channels, out_channels, kernel, opts, bias, dtype, true);
}

kn_tensor *kn_nn_conv2d_forward(kn_nn_conv2d *c, kn_tensor *x) {
    if (!c) return kn_error_null_input("Conv2d", 0), NULL;
    nn_enter(c);
    return nn_leave(kn_conv2d(x, c->weight, c->bias, c->opts));
}

kn_tensor *kn_nn_conv_transpose2d_forward(kn_nn_conv2d *c, kn_tensor *x) {
    if (!c) return kn_error_null_input("ConvTranspose2d", 0), NULL;
    nn_enter(c);
    return nn_leave(kn_conv_transpose2d(x, c->weight, c->bias, c->opts));
}
