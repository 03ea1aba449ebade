/* Debug mode's per-op checks: NaN/Inf from finite inputs, then the shadow (exec/shadow.h). The
 * checks are themselves made of ops (isfinite, sum, copies), so they work on every backend
 * that holds values; a thread-local flag keeps them from checking themselves. */
#include "exec/debug_check.h"

#include <math.h>
#include <stdio.h>

#include "exec/dispatch.h"
#include "exec/shadow.h"
#include "kiln/ops.h"
#include "ops/custom_registry.h"

static _Thread_local bool checking;

/* Number of NaN/Inf values in a float tensor, or -1 if that could not be found out. */
static int64_t count_nonfinite(kn_tensor *t) {
    if (!kn_dtype_is_float(t->dtype) || kn_numel(t) == 0) return 0;
    kn_tensor *finite = kn_isfinite(t);
    kn_tensor *count = kn_sum(finite, KN_ALL_DIMS, false);
    double v = 0;
    kn_status st = kn_item(count, &v);
    kn_release(count);
    kn_release(finite);
    return st == KN_OK ? kn_numel(t) - (int64_t)v : -1;
}

static bool inputs_finite(kn_node *n) {
    if (!kn_attrs_finite(n->op, &n->attrs)) return false;
    for (int i = 0; i < n->n_in; i++)
        if (count_nonfinite(n->in[i]) != 0) return false;
    return true;
}

kn_status kn_debug_run(kn_backend *b, kn_node *n) {
    bool check = !checking && b->holds_values && !(kn_op_table[n->op].flags & KN_OPF_NOCHECK);
    bool finite_in = false;
    kn_shadow *shadow = NULL;
    if (!checking) {
        checking = true;
        finite_in = check && inputs_finite(n);
        kn_status st = kn_shadow_begin(b, n, &shadow); /* before n can write its in-place outputs */
        checking = false;
        if (st != KN_OK) {
            kn_node_free(n);
            return st;
        }
    }
    /* Keep the node's outputs alive past the launch, which frees the node. */
    const char *name = kn_op_name_in(n->op, &n->attrs);
    char inputs[320], attrs[160] = "";
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    if (n->op != KN_OP_custom) kn_attrs_format(n->op, &n->attrs, attrs, sizeof attrs); /* a custom op's are its own */
    int n_out = n->n_out;
    kn_tensor *outs[KN_NODE_MAX_OUT];
    for (int i = 0; i < n_out; i++) outs[i] = kn_tensor_incref(n->out[i]);

    b->launch(n);
    kn_status st = b->sync();
    if (st == KN_OK && check && finite_in) {
        checking = true;
        for (int i = 0; i < n_out && st == KN_OK; i++) {
            int64_t bad = count_nonfinite(outs[i]);
            if (bad > 0) {
                char d[96];
                st = kn_error(KN_ERR_NUMERIC, "debug mode: %s(%s) produced %lld NaN/Inf value%s in output %d (%s) from finite inputs",
                              name, inputs, (long long)bad, bad == 1 ? "" : "s", i,
                              kn_describe(outs[i], d, sizeof d));
            }
        }
        checking = false;
    }
    if (shadow) {
        char call[512];
        snprintf(call, sizeof call, "%s(%s%s%s)", name, inputs, *attrs ? "; " : "", attrs);
        checking = true;
        st = kn_shadow_end(shadow, st, call);
        checking = false;
    }
    for (int i = 0; i < n_out; i++) kn_tensor_decref(outs[i]);
    return st;
}
