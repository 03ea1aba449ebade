/* Dropout: active in training mode only. */
#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *dropout_forward(void *m, kn_tensor *x) { return kn_nn_dropout_forward(m, x); }

kn_nn_dropout *kn_nn_dropout_new(double p) {
    if (!(p >= 0 && p <= 1)) return kn_error_null(KN_ERR_ARG, "Dropout: p must be in [0, 1], not %g", p);
    kn_nn_dropout *d = kn_module_alloc(sizeof *d, "Dropout");
    if (!d) return NULL;
    d->base.forward = dropout_forward;
    d->p = p;
    return d;
}

kn_tensor *kn_nn_dropout_forward(kn_nn_dropout *d, kn_tensor *x) {
    if (!d) return kn_error_null_input("Dropout", 0), NULL;
    nn_enter(d);
    return nn_leave(kn_dropout(x, d->p, d->base.training));
}
