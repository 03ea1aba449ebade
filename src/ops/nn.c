/* Shared argument handling of the nn ops (normalization, convolution, pooling). */
#include "ops/nn_common.h"

bool kn_nn_begin(kn_opctx *c, kn_op_id op, kn_tensor *x, kn_tensor *const *opt, const int *slot_attr, int n_opt) {
    kn_tensor *in[KN_NODE_MAX_IN] = {x};
    int n_in = 1, slots[KN_NODE_MAX_IN];
    for (int k = 0; k < n_opt; k++) {
        slots[k] = opt[k] ? n_in : -1;
        if (opt[k]) in[n_in++] = opt[k];
    }
    if (!kn_op_begin(c, op, n_in, in)) return false;
    for (int k = 0; k < n_opt; k++) c->node->attrs.i[slot_attr[k]] = slots[k];
    return kn_nn_prepare_input(c, 0, x->dtype);
}

bool kn_nn_prepare_input(kn_opctx *c, int i, kn_dtype dtype) {
    kn_tensor *t = c->node->in[i];
    if (t->dtype == dtype && kn_is_contiguous(t)) return true;
    kn_tensor *cast = t->dtype == dtype ? kn_retain(t) : kn_cast(t, dtype);
    kn_tensor *contig = cast ? kn_contiguous(cast) : NULL;
    kn_release(cast);
    if (!contig) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        return kn_op_fail(c, kn_last_status(), "preparing input %d: %s", i, msg) != NULL;
    }
    kn_op_set_input(c, i, contig);
    kn_release(contig);
    return true;
}

bool kn_nn_check_vector(kn_opctx *c, const kn_tensor *t, int64_t n, const char *what) {
    if (!t || (t->ndim == 1 && t->shape[0] == n)) return true;
    char d[96];
    return kn_op_fail(c, KN_ERR_SHAPE, "%s must be [%lld], got %s", what, (long long)n, kn_describe(t, d, sizeof d)) !=
           NULL;
}
