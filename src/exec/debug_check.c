/* Debug mode's NaN/Inf check, an interposer (exec/interpose.h): an op that turns finite
 * inputs into NaN or Inf is an error naming it. Values are read through kn_to_host, so the
 * check needs no op of its own and works on every backend that holds values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "core/error.h"
#include "core/host_values.h"
#include "exec/dispatch.h"
#include "exec/interpose.h"
#include "ops/custom_registry.h"

/* Number of NaN/Inf values in a float tensor, or -1 if that could not be found out. */
static int64_t count_nonfinite(kn_tensor *t) {
    if (!kn_dtype_is_float(t->dtype) || kn_numel(t) == 0) return 0;
    double *v = kn_read_f64("debug mode", t);
    if (!v) return -1;
    int64_t bad = 0;
    for (int64_t i = 0, n = kn_numel(t); i < n; i++) bad += !isfinite(v[i]);
    free(v);
    return bad;
}

static bool inputs_finite(const kn_node *n) {
    if (!kn_attrs_finite(n->op, &n->attrs)) return false;
    for (int i = 0; i < n->n_in; i++)
        if (count_nonfinite(n->in[i]) != 0) return false;
    return true;
}

/* The state: the op's call ("gelu(f32[4, 8])") for the error, made before it runs. */
static kn_status check_record(const kn_node *n, const kn_backend *b, void **state) {
    if (!b->holds_values || (kn_op_table[n->op].flags & (KN_OPF_NOCHECK | KN_OPF_SYNC)) || !inputs_finite(n))
        return KN_OK;
    char inputs[320], *call = malloc(400);
    if (!call) return kn_error(KN_ERR_OOM, "debug mode: out of host memory checking %s", kn_op_name(n->op));
    kn_op_describe_inputs(n, inputs, sizeof inputs);
    snprintf(call, 400, "%s(%s)", kn_op_name_in(n->op, &n->attrs), inputs);
    *state = call;
    return KN_OK;
}

static kn_status check_done(void *state, kn_status st, kn_tensor *const *outs, int n_out) {
    const char *call = state;
    for (int i = 0; i < n_out && st == KN_OK; i++) {
        int64_t bad = count_nonfinite(outs[i]);
        if (bad > 0) {
            char d[96];
            st = kn_error(KN_ERR_NUMERIC,
                          "debug mode: %s produced %lld NaN/Inf value%s in output %d (%s) from finite inputs", call,
                          (long long)bad, bad == 1 ? "" : "s", i, kn_describe(outs[i], d, sizeof d));
        }
    }
    free(state);
    return st;
}

const kn_interposer kn_debug_check_interposer = {
    .name = "debug_check",
    .order = KN_ORDER_DEBUG_CHECK,
    .modes = KN_MODE_BIT(KN_MODE_DEBUG),
    .record = check_record,
    .done = check_done,
};
