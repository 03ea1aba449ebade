/* Hyperparameter checks shared by the update ops and the optimizers that call them. */
#ifndef KILN_OPS_OPTIM_CHECK_H
#define KILN_OPS_OPTIM_CHECK_H

#include <stdbool.h>
#include <stddef.h>

/* NULL when the values are valid, else buf holding what is wrong ("beta2 is 1; it must be
 * in [0, 1)"). */
const char *kn_adamw_check(double lr, double beta1, double beta2, double eps, double weight_decay, char *buf,
                           size_t size);
const char *kn_sgd_check(double lr, double momentum, double dampening, double weight_decay, bool nesterov, char *buf,
                         size_t size);

#endif
