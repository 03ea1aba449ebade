/* Running an op's shape and dtype rule, and the rules several families share. */
#include "ops/op_rules.h"

kn_status kn_op_apply_rule(kn_op_id op, int n_in, kn_tensor *const *in, const kn_attrs *at, kn_op_infer *r,
                           char *why, size_t why_size) {
    r->n_out = 0; /* not a memset: the struct is large and this runs on every op */
    r->compute = n_in ? in[0]->dtype : KN_F32;
    if (!kn_op_table[op].infer) KN_RULE_FAIL(KN_ERR_INTERNAL, "no shape rule: the kernel allocates the outputs");
    return kn_op_table[op].infer(op, n_in, in, at, r, why, why_size);
}

KN_RULE(kn_infer_like_first) {
    kn_infer_out(r, in[0]->dtype, in[0]->shape, in[0]->ndim);
    r->compute = in[0]->dtype;
    return KN_OK;
}
