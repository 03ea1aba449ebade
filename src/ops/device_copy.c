/* Copies between devices. Within one backend the backend copies storage to storage on the
 * source's stream (cpu:0 -> cpu:1 is one memcpy, no staging); the destination's stream waits
 * for it through an event. Between backends with no direct path the values travel through
 * host memory. The meta device takes shapes only and has no values to give back. */
#include <stdlib.h>

#include "exec/dispatch.h"
#include "exec/scheduler.h"
#include "kiln/ops.h"
#include "kiln/stream.h"
#include "ops/ops_internal.h"

/* Copies c's values into out (a fresh contiguous tensor on device, same backend). */
static kn_status copy_within(kn_backend *b, kn_tensor *c, kn_tensor *out, kn_device device) {
    kn_status st = kn_realize(c); /* c may still wait in fused mode's window */
    if (st != KN_OK) return st;
    kn_stream *from = kn_stream_of(c->storage->device), *to = kn_stream_of(device);
    size_t bytes = (size_t)kn_numel(c) * kn_dtype_size(c->dtype);
    st = b->copy_device(from, out->storage, 0, c->storage, (size_t)c->offset * kn_dtype_size(c->dtype), bytes);
    if (st != KN_OK || from == to) return st;
    kn_event *e = kn_event_new();
    if (!e) return kn_last_status();
    if ((st = kn_event_record(e, from)) == KN_OK) st = kn_stream_wait_event(to, e);
    kn_event_free(e); /* the wait still sees it fire */
    return st;
}

/* Through a host buffer: for backend pairs with no direct copy. */
static kn_tensor *copy_staged(kn_tensor *t, kn_device device) {
    char desc[96];
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
    if (t->storage->backend != dst) return copy_staged(t, device);
    kn_tensor *c = kn_contiguous(t);
    kn_tensor *out = c ? kn_tensor_alloc("to_device", t->dtype, t->shape, t->ndim, device) : NULL;
    kn_status st = out ? copy_within(dst, c, out, device) : kn_last_status();
    kn_release(c);
    if (st != KN_OK) {
        kn_tensor_decref(out);
        return NULL;
    }
    return kn_scope_adopt(out);
}
