/* Applying an op's shape and dtype rule to a node being recorded, and the rules several
 * families share. */
#include "ops/ops_internal.h"
#include "ops/op_rules.h"

kn_status kn_op_apply_rule(kn_op_id op, int n_in, kn_tensor *const *in, const kn_attrs *at, kn_op_infer *r,
                           char *why, size_t why_size) {
    *r = (kn_op_infer){0};
    if (!kn_op_table[op].infer) KN_RULE_FAIL(KN_ERR_INTERNAL, "no shape rule: the kernel allocates the outputs");
    return kn_op_table[op].infer(op, n_in, in, at, r, why, why_size);
}

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

KN_RULE(kn_infer_like_first) {
    kn_infer_out(r, in[0]->dtype, in[0]->shape, in[0]->ndim);
    r->compute = in[0]->dtype;
    return KN_OK;
}
