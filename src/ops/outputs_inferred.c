/* The dispatcher-side step of recording an op: its table rule applied to the node being
 * recorded (ops/ops_internal.h). */
#include "ops/op_rules.h"
#include "ops/ops_internal.h"

bool kn_op_infer_node(kn_opctx *c, kn_op_infer *r) {
    kn_node *n = c->node;
    char why[600];
    kn_status st = kn_op_apply_rule(n->op, n->n_in, n->in, &n->attrs, r, why, sizeof why);
    return st == KN_OK || kn_op_fail(c, st, "%s", why) != NULL;
}

bool kn_op_add_outputs(kn_opctx *c, const kn_op_infer *r) {
    kn_node *n = c->node;
    for (int i = 0; i < r->n_out; i++) {
        if (r->in_place[i]) n->out[n->n_out++] = kn_tensor_incref(n->in[r->in_place[i] - 1]);
        else if (!kn_op_output(c, r->out[i], r->shape[i].v, r->shape[i].n)) return false;
    }
    return true;
}

bool kn_op_outputs_inferred(kn_opctx *c) {
    kn_op_infer r;
    return kn_op_infer_node(c, &r) && kn_op_add_outputs(c, &r);
}
