/* Public introspection of the op table and the backends' kernel coverage. */
#include "backends/backend.h"
#include "core/runtime_impl.h"
#include "kiln/optable.h"

int kn_op_count(void) { return KN_OP_COUNT; }

bool kn_op_get_info(int index, kn_op_info *out) {
    static const char *const kinds[] = {"elementwise", "reduction", "opaque", "creation"};
    if (index < 0 || index >= KN_OP_COUNT || !out) return false;
    const kn_op_def *d = &kn_op_table[index];
    out->name = d->name;
    out->kind = kinds[d->kind];
    out->expr = d->expr;
    out->accepted = d->dtypes;
    return true;
}

uint32_t kn_op_kernel_dtypes(int index, kn_device_type device) {
    if (index < 0 || index >= KN_OP_COUNT || !kn_runtime_ready()) return 0;
    kn_backend *b = kn_backend_for(device);
    if (!b || !b->kernels->op[index].fn) return 0;
    return b->kernels->op[index].dtypes;
}
