/* Linear: y = x weight^T + bias. */
#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *linear_forward(void *m, kn_tensor *x) { return kn_nn_linear_forward(m, x); }

kn_nn_linear *kn_nn_linear_new(int64_t in_features, int64_t out_features, bool bias, kn_dtype dtype) {
    if (in_features <= 0 || out_features <= 0)
        return kn_error_null(KN_ERR_ARG, "Linear: sizes must be positive, not in %lld, out %lld",
                             (long long)in_features, (long long)out_features);
    kn_nn_linear *l = kn_module_alloc(sizeof *l, "Linear");
    if (!l) return NULL;
    l->base.forward = linear_forward;
    l->in_features = in_features, l->out_features = out_features;
    l->weight = nn_new_param(l, "weight", KN_SHAPE(out_features, in_features), dtype);
    if (bias) l->bias = nn_new_param(l, "bias", KN_SHAPE(out_features), dtype);
    if (l->weight && nn_init_linear_default(l->weight, l->bias) != KN_OK) l->base.failed = true;
    return kn_module_check(l);
}

kn_tensor *kn_nn_linear_forward(kn_nn_linear *l, kn_tensor *x) {
    if (!l || !x) return kn_error_null_input("Linear", l ? 1 : 0), NULL;
    if (kn_ndim(x) < 1 || kn_size(x, -1) != l->in_features) {
        char desc[96];
        return kn_error_null(KN_ERR_SHAPE, "Linear(%lld -> %lld): x %s must have %lld features in its last dim",
                             (long long)l->in_features, (long long)l->out_features, kn_describe(x, desc, sizeof desc),
                             (long long)l->in_features);
    }
    nn_enter(l);
    return nn_leave(kn_linear(x, l->weight, l->bias));
}
