/* Optimizer update ops (src/ops/defs/optim.def): argument checks and the in-place nodes. */
#include <math.h>
#include <stdio.h>

#include "exec/dispatch.h"
#include "kiln/ops_optim.h"
#include "ops/op_rules.h"
#include "ops/ops_internal.h"
#include "ops/optim_check.h"

/* Writes "what is v; it must be rule" into buf and returns true when ok is false. */
static bool bad(bool ok, char *buf, size_t size, const char *what, double v, const char *rule) {
    if (!ok) snprintf(buf, size, "%s is %g; it must be %s", what, v, rule);
    return !ok;
}

static bool bad_common(double lr, double weight_decay, char *buf, size_t size) {
    return bad(lr >= 0 && isfinite(lr), buf, size, "lr", lr, "finite and >= 0") ||
           bad(weight_decay >= 0 && isfinite(weight_decay), buf, size, "weight_decay", weight_decay,
               "finite and >= 0");
}

const char *kn_adamw_check(double lr, double beta1, double beta2, double eps, double weight_decay, char *buf,
                           size_t size) {
    bool e = bad_common(lr, weight_decay, buf, size) ||
             bad(beta1 >= 0 && beta1 < 1, buf, size, "beta1", beta1, "in [0, 1)") ||
             bad(beta2 >= 0 && beta2 < 1, buf, size, "beta2", beta2, "in [0, 1)") ||
             bad(eps >= 0 && isfinite(eps), buf, size, "eps", eps, "finite and >= 0");
    return e ? buf : NULL;
}

const char *kn_sgd_check(double lr, double momentum, double dampening, double weight_decay, bool nesterov, char *buf,
                         size_t size) {
    bool e = bad_common(lr, weight_decay, buf, size) ||
             bad(momentum >= 0 && isfinite(momentum), buf, size, "momentum", momentum, "finite and >= 0") ||
             bad(isfinite(dampening), buf, size, "dampening", dampening, "finite");
    if (!e && nesterov && (momentum <= 0 || dampening != 0)) {
        snprintf(buf, size, "nesterov needs momentum > 0 and dampening 0 (got %g and %g)", momentum, dampening);
        e = true;
    }
    return e ? buf : NULL;
}

/* Operand t must have param's shape and the dtype want; in-place operands must not repeat
 * elements (stride-0 dims). */
static kn_status operand_why(const kn_tensor *p, const kn_tensor *t, const char *what, kn_dtype want, bool in_place,
                             char *why, size_t why_size) {
    bool same = t->ndim == p->ndim;
    for (int d = 0; same && d < p->ndim; d++) same = t->shape[d] == p->shape[d];
    if (!same) KN_RULE_FAIL(KN_ERR_SHAPE, "%s must have param's shape", what);
    if (t->dtype != want)
        KN_RULE_FAIL(KN_ERR_DTYPE, "%s has dtype %s; it must be %s", what, kn_dtype_name(t->dtype), kn_dtype_name(want));
    for (int d = 0; in_place && d < t->ndim; d++)
        if (t->stride[d] == 0 && t->shape[d] > 1)
            KN_RULE_FAIL(KN_ERR_VIEW, "%s has broadcast (stride 0) dims; it cannot be updated in place", what);
    return KN_OK;
}

/* adamw_update and sgd_update: every operand shaped like param, moments in f32 (f64 for f64
 * params), the rest in param's dtype; the outputs are the updated operands themselves
 * (all but grad). */
KN_RULE(kn_infer_optim_update) {
    const kn_param *p = kn_op_params(op);
    int grad_slot = op == KN_OP_adamw_update ? KN_SLOT(adamw_update, grad) : KN_SLOT(sgd_update, grad);
    kn_dtype pd = in[0]->dtype, md = op == KN_OP_adamw_update && pd != KN_F64 ? KN_F32 : pd;
    for (int slot = 0; slot < kn_op_input_slots(op); slot++) {
        int pos = kn_input_pos(at, slot);
        if (pos < 0) continue;
        bool moment = slot != 0 && slot != grad_slot;
        kn_status st = operand_why(in[0], in[pos], p[slot].name, moment ? md : pd, slot != grad_slot, why, why_size);
        if (st != KN_OK) return st;
        if (slot != grad_slot) kn_infer_in_place(r, in, pos);
    }
    return KN_OK;
}

/* Submits the node, its outputs the updated operands by the rule (KN_OPF_NO_GRAD: autograd lets
 * it write into parameters and records nothing). */
static kn_status run_in_place(kn_opctx *c) {
    if (!kn_op_outputs_inferred(c)) return kn_last_status();
    return kn_op_run_inplace(c);
}

kn_status kn_adamw_update(kn_tensor *param, kn_tensor *grad, kn_tensor *exp_avg, kn_tensor *exp_avg_sq, double lr,
                          double beta1, double beta2, double eps, double weight_decay, int64_t step) {
    return kn_adamw_update_scaled(param, grad, exp_avg, exp_avg_sq, lr, beta1, beta2, eps, weight_decay, step, 1);
}

kn_status kn_adamw_update_scaled(kn_tensor *param, kn_tensor *grad, kn_tensor *exp_avg, kn_tensor *exp_avg_sq,
                                 double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step,
                                 double grad_scale) {
    kn_opctx c;
    if (!kn_op_begin(&c, KN_OP_adamw_update, 4, (kn_tensor *[]){param, exp_avg, exp_avg_sq, grad}))
        return kn_last_status();
    char why[160];
    const char *e = kn_adamw_check(lr, beta1, beta2, eps, weight_decay, why, sizeof why);
    if (e) return kn_op_fail(&c, KN_ERR_ARG, "%s", e), kn_last_status();
    if (step < 1) return kn_op_fail(&c, KN_ERR_ARG, "step is %lld; it must be >= 1", (long long)step), kn_last_status();
    /* torch.optim.AdamW's scalars, in double as Python computes them */
    *KN_ATTRS(c.node, adamw_update) = (kn_attrs_adamw_update){
        .decay = 1 - lr * weight_decay,
        .beta1_weight = 1 - beta1,
        .beta2 = beta2,
        .one_minus_beta2 = 1 - beta2,
        .step_size = lr / (1 - pow(beta1, (double)step)),
        .bias_correction2_sqrt = sqrt(1 - pow(beta2, (double)step)),
        .eps = eps,
        .grad_scale = grad_scale,
    };
    return run_in_place(&c);
}

kn_status kn_sgd_update(kn_tensor *param, kn_tensor *grad, kn_tensor *momentum_buffer, double lr, double momentum,
                        double dampening, double weight_decay, bool nesterov, bool first_step) {
    return kn_sgd_update_scaled(param, grad, momentum_buffer, lr, momentum, dampening, weight_decay, nesterov,
                                first_step, 1);
}

kn_status kn_sgd_update_scaled(kn_tensor *param, kn_tensor *grad, kn_tensor *momentum_buffer, double lr,
                               double momentum, double dampening, double weight_decay, bool nesterov, bool first_step,
                               double grad_scale) {
    kn_opctx c;
    bool has_buf = momentum != 0;
    if (!has_buf && momentum_buffer) {
        kn_error(KN_ERR_ARG, "sgd_update: a momentum_buffer was given but momentum is 0");
        return kn_last_status();
    }
    /* the buffer is required when momentum is not 0 (kn_op_begin refuses a NULL input) */
    if (!kn_op_begin(&c, KN_OP_sgd_update, has_buf ? 3 : 2, (kn_tensor *[]){param, grad, momentum_buffer}))
        return kn_last_status();
    char why[160];
    const char *e = kn_sgd_check(lr, momentum, dampening, weight_decay, nesterov, why, sizeof why);
    if (e) return kn_op_fail(&c, KN_ERR_ARG, "%s", e), kn_last_status();
    if (!has_buf) c.node->attrs.absent = 1u << KN_SLOT(sgd_update, momentum_buffer);
    *KN_ATTRS(c.node, sgd_update) = (kn_attrs_sgd_update){.lr = lr, .momentum = momentum, .dampening = dampening,
                                                           .weight_decay = weight_decay, .nesterov = nesterov,
                                                           .first_step = first_step, .grad_scale = grad_scale};
    return run_in_place(&c);
}
