/* Reduction plans: a zero-copy [outer, inner] view when the reduced dims are the innermost
 * and contiguous, else one strided copy with them moved last. */
#include "backends/cpu/reduce_plan.h"

#include "core/error.h"

kn_status kn_reduce_plan_make(kn_reduce_plan *p, kn_tensor *x, kn_shape reduced) {
    p->scratch = NULL;
    p->outer = 1;
    p->inner = 1;
    bool is_reduced[KN_MAX_DIMS] = {false};
    for (int i = 0; i < reduced.n; i++) is_reduced[reduced.v[i]] = true;
    for (int d = 0; d < x->ndim; d++) {
        if (is_reduced[d]) p->inner *= x->shape[d];
        else p->outer *= x->shape[d];
    }
    /* Reduced dims last and the whole tensor contiguous: read it in place. */
    bool trailing = true;
    for (int d = 0; d < x->ndim; d++)
        if (!is_reduced[d] && d > 0 && is_reduced[d - 1] && x->shape[d] != 1) trailing = false;
    if (trailing && kn_tensor_is_contiguous(x)) {
        p->data = kn_tensor_data(x);
        return KN_OK;
    }
    /* Otherwise copy into [kept..., reduced...] order. */
    int64_t shape[KN_MAX_DIMS], stride[KN_MAX_DIMS];
    int n = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!is_reduced[d]) shape[n] = x->shape[d], stride[n++] = x->stride[d];
    for (int d = 0; d < x->ndim; d++)
        if (is_reduced[d]) shape[n] = x->shape[d], stride[n++] = x->stride[d];
    kn_tensor *permuted = kn_tensor_view_of(x, shape, n, stride, x->offset);
    kn_tensor *copy = permuted ? kn_tensor_alloc("reduce", x->dtype, shape, n, x->storage->device) : NULL;
    kn_status st = copy ? kn_cpu_copy_into(copy, permuted) : kn_last_status();
    kn_tensor_decref(permuted);
    if (st != KN_OK) {
        kn_tensor_decref(copy);
        return st;
    }
    p->scratch = copy;
    p->data = kn_tensor_data(copy);
    return KN_OK;
}

void kn_reduce_plan_free(kn_reduce_plan *p) {
    kn_tensor_decref(p->scratch);
    p->scratch = NULL;
}
