/* The API function of custom ops: checks a call against its registered definition and records
 * one `custom` node, which every mode then runs like any other op. */
#include <stdio.h>

#include "exec/dispatch.h"
#include "kiln/ops.h"
#include "ops/custom_registry.h"
#include "ops/ops_internal.h"

/* An error about a call before a node exists: "name(f32[2, 3]): msg". */
static kn_status call_error(const char *name, int n_in, kn_tensor *const *in, kn_status code, const char *msg) {
    char inputs[320] = "";
    size_t len = 0;
    for (int i = 0; i < n_in && len + 1 < sizeof inputs; i++) {
        char d[96];
        len += (size_t)snprintf(inputs + len, sizeof inputs - len, i ? ", %s" : "%s", kn_describe(in[i], d, sizeof d));
    }
    return kn_error(code, "%s(%s): %s", name, inputs, msg);
}

/* The checks kn_op_begin would make, named after the op rather than `custom`. */
static kn_status check_inputs(const kn_custom_entry *e, int n_in, kn_tensor *const *in) {
    const char *name = e->def.name;
    if (n_in != e->def.n_inputs || (n_in && !in)) {
        char msg[96];
        snprintf(msg, sizeof msg, "takes %d input%s, given %d", e->def.n_inputs, e->def.n_inputs == 1 ? "" : "s", n_in);
        return call_error(name, 0, NULL, KN_ERR_ARG, msg);
    }
    for (int i = 0; i < n_in; i++)
        if (!in[i]) {
            kn_error_null_input(name, i);
            return kn_last_status();
        }
    for (int i = 1; i < n_in; i++) {
        kn_device a = kn_device_of(in[0]), b = kn_device_of(in[i]);
        if (a.type != b.type || a.index != b.index) {
            char msg[128];
            snprintf(msg, sizeof msg, "input %d is on %s:%d but input 0 is on %s:%d", i, kn_device_type_name(b.type),
                     b.index, kn_device_type_name(a.type), a.index);
            return call_error(name, n_in, in, KN_ERR_DEVICE, msg);
        }
    }
    return KN_OK;
}

/* Elementwise ops: the inputs cast and expanded to the rule's shape and dtype (as the
 * built-in elementwise ops do), so kernels see one shape. */
static bool prepare_elementwise(kn_opctx *c, const kn_op_infer *r) {
    kn_node *n = c->node;
    for (int i = 0; i < n->n_in; i++) {
        kn_tensor *t = n->in[i];
        kn_tensor *cast = t->dtype == r->compute ? kn_retain(t) : kn_cast(t, r->compute);
        kn_tensor *wide = cast ? kn_expand(cast, r->shape[0]) : NULL;
        kn_release(cast);
        if (!wide) {
            char msg[512];
            snprintf(msg, sizeof msg, "%s", kn_last_error());
            return kn_op_fail(c, kn_last_status(), "preparing input %d: %s", i, msg) != NULL;
        }
        kn_op_set_input(c, i, wide);
        kn_release(wide);
    }
    return true;
}

kn_status kn_custom_call(int id, int n_in, kn_tensor *const *in, const kn_custom_attrs *attrs, kn_tensor **out) {
    const kn_custom_entry *e = kn_custom_get(id);
    if (!e) return kn_error(KN_ERR_ARG, "kn_custom_call: no custom op has id %d", id);
    if (!out) return kn_error(KN_ERR_NULL, "%s: the output array is NULL", e->def.name);
    for (int j = 0; j < e->def.n_outputs; j++) out[j] = NULL;
    kn_status st = check_inputs(e, n_in, in);
    if (st != KN_OK) return st;
    static const kn_custom_attrs zero;
    if (!attrs) attrs = &zero;

    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_custom, n_in, in)) return kn_last_status();
    *KN_ATTRS(c.node, custom) = (kn_attrs_custom){.id = id, .call = *attrs};
    kn_device_type device = c.device.type;
    bool use_source = !e->def.kernels[device] && e->def.source;
    if (c.backend->holds_values && !e->def.kernels[device] && !(use_source && c.backend->kernels->custom_prepare)) {
        kn_op_fail(&c, KN_ERR_UNSUPPORTED, "the %s backend has no kernel for custom op %s", c.backend->name,
                   e->def.name);
        return KN_ERR_UNSUPPORTED;
    }
    kn_op_infer r; /* the table's rule, kn_infer_custom: the user's infer or the elementwise one */
    if (!kn_op_infer_node(&c, &r) || (!e->def.infer && !prepare_elementwise(&c, &r)) || !kn_op_add_outputs(&c, &r))
        return kn_last_status();
    if (use_source && c.backend->holds_values && (st = c.backend->kernels->custom_prepare(id, r.out[0])) != KN_OK) {
        char msg[1024];
        snprintf(msg, sizeof msg, "%s", kn_last_error());
        kn_op_fail(&c, st, "%s", msg);
        return st;
    }
    /* Autograd's interposer refuses history for an op without backward, and records none for
     * one with only integer or bool outputs (src/autograd/record.c). */
    kn_tensor *outs[KN_NODE_MAX_OUT] = {0};
    if ((st = kn_op_run_multi(&c, outs)) != KN_OK) return st;
    for (int j = 0; j < e->def.n_outputs; j++) out[j] = outs[j];
    return KN_OK;
}

kn_tensor *kn_custom_call1(int id, int n_in, kn_tensor *const *in, const kn_custom_attrs *attrs) {
    kn_tensor *out[KN_CUSTOM_MAX_OUTPUTS] = {0};
    if (kn_custom_call(id, n_in, in, attrs, out) != KN_OK) return NULL;
    for (int j = 1; j < KN_CUSTOM_MAX_OUTPUTS; j++) kn_release(out[j]);
    return out[0];
}
