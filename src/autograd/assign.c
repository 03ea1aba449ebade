/* kn_tensor_assign_: a handle takes over another tensor's data (PyTorch's `param.data = t`).
 * Loaders build a module on the meta device and then point its parameters at a file's tensors,
 * so nothing is allocated or initialized only to be overwritten. */
#include "autograd/autograd_impl.h"
#include "core/error.h"
#include "core/tensor_impl.h"
#include "kiln/autograd.h"
#include "kiln/runtime.h"

kn_status kn_tensor_assign_(kn_tensor *dst, kn_tensor *src) {
    if (!dst || !src) return kn_error_null_input("tensor_assign_", dst ? 1 : 0), kn_last_status();
    char a[96], b[96];
    bool same_shape = dst->ndim == src->ndim;
    for (int d = 0; same_shape && d < dst->ndim; d++) same_shape = dst->shape[d] == src->shape[d];
    if (!same_shape)
        return kn_error(KN_ERR_SHAPE, "tensor_assign_(%s, %s): shapes differ", kn_describe(dst, a, sizeof a),
                        kn_describe(src, b, sizeof b));
    if (dst->ag && dst->ag->grad_fn)
        return kn_error(KN_ERR_ARG, "tensor_assign_(%s, %s): the destination has gradient history; only a leaf "
                        "can take over another tensor's data", kn_describe(dst, a, sizeof a), kn_describe(src, b, sizeof b));
    if (dst == src || (dst->storage == src->storage && dst->offset == src->offset && dst->dtype == src->dtype)) {
        bool same = true;
        for (int d = 0; same && d < dst->ndim; d++) same = dst->stride[d] == src->stride[d];
        if (same) return KN_OK;
    }
    /* Queued or windowed work may still read or write dst's old storage through dst. */
    kn_status st = kn_sync();
    if (st != KN_OK) return st;
    if (dst->ag && dst->ag->grad && dst->dtype != src->dtype) { /* a gradient of the old dtype is stale */
        kn_release(dst->ag->grad);
        dst->ag->grad = NULL;
    }
    kn_storage_retain(src->storage);
    kn_storage_release(dst->storage);
    dst->storage = src->storage;
    dst->offset = src->offset;
    dst->dtype = src->dtype;
    for (int d = 0; d < dst->ndim; d++) dst->stride[d] = src->stride[d];
    return KN_OK;
}
