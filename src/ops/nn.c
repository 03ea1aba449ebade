/* Shared argument handling of the nn ops (normalization, convolution, pooling). */
#include "ops/nn_common.h"
#include "ops/ops_internal.h"

bool kn_nn_begin(kn_opctx *c, kn_op_id op, int n_slots, kn_tensor *const *slots) {
    /* x in the dtype the node took it in (autocast may have cast it) */
    return kn_op_begin_slots(c, op, n_slots, slots) && kn_nn_prepare_input(c, 0, c->node->in[0]->dtype);
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

kn_status kn_nn_vector_why(const kn_tensor *t, int64_t n, const char *what, char *why, size_t why_size) {
    if (!t || (t->ndim == 1 && t->shape[0] == n)) return KN_OK;
    char d[96];
    snprintf(why, why_size, "%s must be [%lld], got %s", what, (long long)n, kn_describe(t, d, sizeof d));
    return KN_ERR_SHAPE;
}
