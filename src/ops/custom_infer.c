/* The op table's shape rule of the custom op: whatever the registered op says. */
#include "ops/custom_registry.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

/* custom: the registered op's infer rule, its results checked; without one (elementwise and
 * source kernels) the inputs' broadcast shape and result dtype (floats for source kernels)
 * for every output. */
KN_RULE(kn_infer_custom) {
    const kn_custom_entry *e = kn_custom_of(at);
    if (!e) KN_RULE_FAIL(KN_ERR_ARG, "no custom op has id %lld", (long long)at->custom.id);
    if (!e->def.infer) {
        kn_shape shape = kn_shape_of(in[0]);
        for (int i = 1; i < n_in; i++) {
            kn_shape next;
            if (!kn_broadcast_shapes(e->def.name, shape, kn_shape_of(in[i]), &next))
                KN_RULE_FAIL(KN_ERR_SHAPE, "shapes do not broadcast (%s)", kn_last_error());
            shape = next;
        }
        r->compute = kn_result_dtype(in, n_in);
        if (e->def.source && !kn_dtype_is_float(r->compute)) r->compute = KN_F32; /* source kernels compute in floats */
        for (int j = 0; j < e->def.n_outputs; j++) kn_infer_out(r, r->compute, shape.v, shape.n);
        return KN_OK;
    }
    kn_shape shapes[KN_CUSTOM_MAX_OUTPUTS];
    kn_dtype dtypes[KN_CUSTOM_MAX_OUTPUTS];
    for (int j = 0; j < e->def.n_outputs; j++) dtypes[j] = KN_DTYPE_COUNT;
    kn_clear_error();
    kn_status st = e->def.infer(in, n_in, &at->custom.call, shapes, dtypes, e->def.user);
    if (st != KN_OK)
        KN_RULE_FAIL(st, "%s", kn_last_status() != KN_OK ? kn_last_error() : "its infer rule refused the inputs");
    for (int j = 0; j < e->def.n_outputs; j++) {
        bool ok = shapes[j].n >= 0 && shapes[j].n <= KN_MAX_DIMS && dtypes[j] >= 0 && dtypes[j] < KN_DTYPE_COUNT;
        for (int d = 0; ok && d < shapes[j].n; d++) ok = shapes[j].v[d] >= 0;
        if (!ok) KN_RULE_FAIL(KN_ERR_ARG, "its infer rule gave output %d no valid shape and dtype", j);
        kn_infer_out(r, dtypes[j], shapes[j].v, shapes[j].n);
    }
    r->compute = n_in ? in[0]->dtype : dtypes[0];
    return KN_OK;
}
