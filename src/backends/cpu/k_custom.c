/* The CPU kernel of custom ops (src/ops/defs/custom.def): calls the registered op's C
 * function with host views of the node's tensors, or runs its compiled source kernel. */
#include <stdio.h>

#include "backends/cpu/cpu_kernels.h"
#include "backends/cpu/custom_source.h"
#include "core/error.h"
#include "graph/node.h"
#include "ops/custom_registry.h"

static kn_custom_tensor view_of(const kn_tensor *t) {
    kn_custom_tensor v = {.data = kn_tensor_data(t), .dtype = t->dtype, .ndim = t->ndim, .numel = kn_numel(t)};
    for (int d = 0; d < t->ndim; d++) {
        v.shape[d] = t->shape[d];
        v.strides[d] = t->stride[d];
    }
    if (v.numel == 0) v.data = NULL;
    return v;
}

/* The user's error, prefixed like an op's: "my_op(f32[2, 3]): ...". */
static kn_status kernel_error(const kn_custom_entry *e, const kn_node *n, kn_status st) {
    char inputs[320], msg[512];
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    snprintf(msg, sizeof msg, "%s", kn_last_status() != KN_OK ? kn_last_error() : "its kernel failed");
    return kn_error(st, "%s(%s): %s", e->def.name, inputs, msg);
}

/* A source kernel over the elementwise engine (the API function prepared it for this dtype
 * and broadcast the inputs to the output's shape). */
static kn_status run_source(const kn_custom_entry *e, kn_node *n) {
    if (kn_ew_run(n, kn_cpu_custom_source_fn(e->id, n->out[0]->dtype))) {
        kn_error(KN_ERR_ARG, "its source kernel reported a domain error (it set `bad`)");
        return kernel_error(e, n, KN_ERR_ARG);
    }
    return KN_OK;
}

static kn_status custom_kernel(kn_node *n) {
    const kn_custom_entry *e = kn_custom_of(&n->attrs);
    if (!e->def.kernels[KN_DEVICE_CPU]) return run_source(e, n);
    kn_custom_tensor in[KN_CUSTOM_MAX_INPUTS], out[KN_CUSTOM_MAX_OUTPUTS];
    for (int i = 0; i < n->n_in; i++) in[i] = view_of(n->in[i]);
    for (int j = 0; j < n->n_out; j++) out[j] = view_of(n->out[j]);
    kn_clear_error();
    kn_status st = e->def.kernels[KN_DEVICE_CPU](in, n->n_in, out, n->n_out, &KN_ATTRS(n, custom)->call, e->def.user);
    return st == KN_OK ? KN_OK : kernel_error(e, n, st);
}

const kn_kernel_reg kn_cpu_kernels_custom[] = {
    {KN_OP_custom, custom_kernel, KN_DTS_ALL},
    {0},
};
