/* Optimizer update ops: one step of an optimizer on existing tensors, in place. Autograd
 * neither records them nor refuses their writes into parameters that require grad, so they
 * need no kn_no_grad_push. The optimizers (kiln/optim.h, which includes this) call them. */
#ifndef KILN_OPS_OPTIM_H
#define KILN_OPS_OPTIM_H

#include <stdbool.h>
#include <stdint.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One AdamW step (step >= 1, the param's count of updates including this one) on param,
 * its moments and grad (param's shape and dtype). Moments have param's dtype, or f32 for
 * f16/bf16 params (the math then runs in f32 and param is rounded once per step). */
KN_API kn_status kn_adamw_update(kn_tensor *param, kn_tensor *grad, kn_tensor *exp_avg, kn_tensor *exp_avg_sq, double lr,
                                 double beta1, double beta2, double eps, double weight_decay, int64_t step);
/* One SGD step. momentum_buffer (param's shape and dtype) is NULL when momentum is 0; on the
 * first step it is set to the (weight-decayed) grad, as torch clones it. */
KN_API kn_status kn_sgd_update(kn_tensor *param, kn_tensor *grad, kn_tensor *momentum_buffer, double lr, double momentum,
                               double dampening, double weight_decay, bool nesterov, bool first_step);

#ifdef __cplusplus
}
#endif

#endif
