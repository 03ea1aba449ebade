/* Copies between devices. Values travel through host memory; the meta device takes shapes
 * only and has no values to give back. */
#include <stdlib.h>

#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/ops_internal.h"

kn_tensor *kn_to_device(kn_tensor *t, kn_device device) {
    if (!t) {
        kn_error_null_input("to_device", 0);
        return NULL;
    }
    kn_device from = t->storage->device;
    if (from.type == device.type && from.index == device.index) return kn_scope_adopt(kn_retain(t));
    kn_backend *dst = kn_backend_get(device);
    if (!dst) return NULL;
    if (!dst->holds_values) return kn_empty_on(kn_shape_of(t), t->dtype, device);
    char desc[96];
    if (!t->storage->backend->holds_values)
        return kn_error_null(KN_ERR_DEVICE, "to_device(%s): a %s tensor has no values to copy to %s",
                             kn_describe(t, desc, sizeof desc), t->storage->backend->name, dst->name);
    size_t bytes = (size_t)kn_numel(t) * kn_dtype_size(t->dtype);
    void *staging = malloc(bytes ? bytes : 1);
    if (!staging)
        return kn_error_null(KN_ERR_OOM, "to_device(%s): out of host memory staging %zu bytes",
                             kn_describe(t, desc, sizeof desc), bytes);
    kn_tensor *out = NULL;
    if (kn_to_host(t, staging, bytes) == KN_OK) out = kn_from_host(staging, t->dtype, kn_shape_of(t), device);
    free(staging);
    return out;
}
