/* Beginning a node from its declared input slots, optional ones NULL where absent. */
#include "ops/ops_internal.h"

bool kn_op_begin_slots(kn_opctx *c, kn_op_id op, int n_slots, kn_tensor *const *slots) {
    kn_tensor *in[32];
    int n_in = 0;
    uint32_t absent = 0;
    const kn_param *p = kn_op_params(op);
    for (int s = 0; s < n_slots && s < 32; s++) {
        if (!slots[s] && p[s].name && p[s].kind == KN_PARAM_OPT) absent |= 1u << s;
        else in[n_in++] = slots[s]; /* a required NULL is kn_op_begin's error */
    }
    if (!kn_op_begin(c, op, n_in, in)) return false;
    c->node->attrs.absent = absent;
    return true;
}
