/* Hyperparameter checks shared by the update ops and the optimizers that call them, and the
 * updates with a gradient scale, which only the optimizers call. */
#ifndef KILN_OPS_OPTIM_CHECK_H
#define KILN_OPS_OPTIM_CHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kiln/tensor.h"

/* NULL when the values are valid, else buf holding what is wrong ("beta2 is 1; it must be
 * in [0, 1)"). */
const char *kn_adamw_check(double lr, double beta1, double beta2, double eps, double weight_decay, char *buf,
                           size_t size);
const char *kn_sgd_check(double lr, double momentum, double dampening, double weight_decay, bool nesterov, char *buf,
                         size_t size);

/* kn_adamw_update and kn_sgd_update reading grad * grad_scale, rounded to grad's dtype (the
 * value kn_mul_scalar(grad, grad_scale) holds) without writing it: clipping folded into the
 * step (kn_optimizer_step_scaled). */
kn_status kn_adamw_update_scaled(kn_tensor *param, kn_tensor *grad, kn_tensor *exp_avg, kn_tensor *exp_avg_sq,
                                 double lr, double beta1, double beta2, double eps, double weight_decay, int64_t step,
                                 double grad_scale);
kn_status kn_sgd_update_scaled(kn_tensor *param, kn_tensor *grad, kn_tensor *momentum_buffer, double lr,
                               double momentum, double dampening, double weight_decay, bool nesterov, bool first_step,
                               double grad_scale);

#endif
