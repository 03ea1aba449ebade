/* Initializers (torch.nn.init) drawing from the Philox generator, and the helpers that make
 * parameters and buffers for module constructors. */
#include <math.h>

#include "core/error.h"
#include "nn/nn_internal.h"

static bool check_float(kn_tensor *t, const char *op) {
    if (!t) {
        kn_error_null_input(op, 0);
        return false;
    }
    if (!kn_dtype_is_float(kn_dtype_of(t))) {
        char desc[96];
        kn_error(KN_ERR_DTYPE, "%s: %s is not a float tensor", op, kn_describe(t, desc, sizeof desc));
        return false;
    }
    return true;
}

kn_status nn_assign(kn_tensor *t, kn_tensor *values) {
    kn_no_grad_push();
    kn_status st = kn_copy_(t, values);
    kn_no_grad_pop();
    return st;
}

/* Fills t with a fresh draw (made in the current scope) and releases the draw. */
static kn_status fill(kn_tensor *t, kn_tensor *values) {
    kn_status st = nn_assign(t, values);
    kn_release(values);
    return st;
}

double kn_init_gain(kn_nonlinearity nl, double param) {
    switch (nl) {
    case KN_NL_TANH: return 5.0 / 3.0;
    case KN_NL_RELU: return sqrt(2.0);
    case KN_NL_LEAKY_RELU: return sqrt(2.0 / (1.0 + param * param));
    case KN_NL_SELU: return 0.75;
    default: return 1.0;
    }
}

kn_status kn_init_fans(kn_tensor *t, int64_t *fan_in, int64_t *fan_out) {
    if (!t) {
        kn_error_null_input("init_fans", 0);
        return kn_last_status();
    }
    char desc[96];
    if (kn_ndim(t) < 2)
        return kn_error(KN_ERR_SHAPE, "init_fans: %s has fewer than 2 dims, so it has no fan in and fan out",
                        kn_describe(t, desc, sizeof desc));
    int64_t receptive = 1;
    for (int d = 2; d < kn_ndim(t); d++) receptive *= kn_size(t, d);
    if (fan_in) *fan_in = kn_size(t, 1) * receptive;
    if (fan_out) *fan_out = kn_size(t, 0) * receptive;
    return KN_OK;
}

kn_status kn_init_constant_(kn_tensor *t, double value) {
    if (!check_float(t, "init_constant_")) return kn_last_status();
    return fill(t, kn_full(kn_shape_of(t), value, kn_dtype_of(t)));
}

kn_status kn_init_zeros_(kn_tensor *t) { return kn_init_constant_(t, 0.0); }
kn_status kn_init_ones_(kn_tensor *t) { return kn_init_constant_(t, 1.0); }

kn_status kn_init_uniform_(kn_tensor *t, double low, double high) {
    if (!check_float(t, "init_uniform_")) return kn_last_status();
    if (!(low <= high)) return kn_error(KN_ERR_ARG, "init_uniform_: low %g is above high %g", low, high);
    return fill(t, kn_uniform(kn_shape_of(t), low, high, kn_dtype_of(t)));
}

kn_status kn_init_normal_(kn_tensor *t, double mean, double std) {
    if (!check_float(t, "init_normal_")) return kn_last_status();
    if (!(std >= 0)) return kn_error(KN_ERR_ARG, "init_normal_: std %g is negative", std);
    return fill(t, kn_normal(kn_shape_of(t), mean, std, kn_dtype_of(t)));
}

/* The standard deviation of a He initialization; false (with an error) without fans. */
static bool kaiming_std(kn_tensor *t, const char *op, double a, kn_fan_mode mode, kn_nonlinearity nl, double *std) {
    int64_t fan_in, fan_out;
    if (!check_float(t, op) || kn_init_fans(t, &fan_in, &fan_out) != KN_OK) return false;
    int64_t fan = mode == KN_FAN_OUT ? fan_out : fan_in;
    if (fan == 0) {
        kn_error(KN_ERR_SHAPE, "%s: the fan is 0 (a tensor with no elements)", op);
        return false;
    }
    *std = kn_init_gain(nl, a) / sqrt((double)fan);
    return true;
}

kn_status kn_init_kaiming_uniform_(kn_tensor *t, double a, kn_fan_mode mode, kn_nonlinearity nl) {
    double std;
    if (!kaiming_std(t, "init_kaiming_uniform_", a, mode, nl, &std)) return kn_last_status();
    return kn_init_uniform_(t, -sqrt(3.0) * std, sqrt(3.0) * std);
}

kn_status kn_init_kaiming_normal_(kn_tensor *t, double a, kn_fan_mode mode, kn_nonlinearity nl) {
    double std;
    if (!kaiming_std(t, "init_kaiming_normal_", a, mode, nl, &std)) return kn_last_status();
    return kn_init_normal_(t, 0.0, std);
}

static bool xavier_std(kn_tensor *t, const char *op, double gain, double *std) {
    int64_t fan_in, fan_out;
    if (!check_float(t, op) || kn_init_fans(t, &fan_in, &fan_out) != KN_OK) return false;
    if (fan_in + fan_out == 0) {
        kn_error(KN_ERR_SHAPE, "%s: the fans are 0 (a tensor with no elements)", op);
        return false;
    }
    *std = gain * sqrt(2.0 / (double)(fan_in + fan_out));
    return true;
}

kn_status kn_init_xavier_uniform_(kn_tensor *t, double gain) {
    double std;
    if (!xavier_std(t, "init_xavier_uniform_", gain, &std)) return kn_last_status();
    return kn_init_uniform_(t, -sqrt(3.0) * std, sqrt(3.0) * std);
}

kn_status kn_init_xavier_normal_(kn_tensor *t, double gain) {
    double std;
    if (!xavier_std(t, "init_xavier_normal_", gain, &std)) return kn_last_status();
    return kn_init_normal_(t, 0.0, std);
}

/* ---- for module constructors ------------------------------------------------------------ */

kn_tensor *nn_new_param(void *m, const char *name, kn_shape shape, kn_dtype dtype) {
    if (!kn_dtype_is_float(dtype)) {
        kn_error(KN_ERR_DTYPE, "%s: parameter %s must have a float dtype, not %s", ((kn_module *)m)->type, name,
                 kn_dtype_name(dtype));
        return kn_module_param(m, name, NULL);
    }
    kn_scope_push();
    kn_tensor *p = kn_module_param(m, name, kn_empty(shape, dtype));
    kn_scope_pop();
    return p;
}

kn_tensor *nn_new_buffer(void *m, const char *name, kn_shape shape, double value, kn_dtype dtype) {
    kn_scope_push();
    kn_tensor *b = kn_module_buffer(m, name, kn_full(shape, value, dtype));
    kn_scope_pop();
    return b;
}

kn_status nn_init_linear_default(kn_tensor *weight, kn_tensor *bias) {
    kn_status st = kn_init_kaiming_uniform_(weight, sqrt(5.0), KN_FAN_IN, KN_NL_LEAKY_RELU);
    if (st != KN_OK || !bias) return st;
    int64_t fan_in;
    kn_init_fans(weight, &fan_in, NULL);
    double bound = fan_in > 0 ? 1.0 / sqrt((double)fan_in) : 0.0;
    return kn_init_uniform_(bias, -bound, bound);
}
