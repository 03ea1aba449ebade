/* Neural-network modules: the module tree, initializers, layers and attention.
 *
 *     kn_manual_seed(0);
 *     kn_nn_linear *fc = kn_nn_linear_new(784, 10, true, KN_F32);   // PyTorch's default init
 *     kn_tensor *y = kn_nn_linear_forward(fc, x);
 *     kn_named_tensors params;
 *     kn_module_named(fc, KN_PARAMS, &params);                     // "weight", "bias"
 *     ...
 *     kn_named_tensors_free(&params);
 *     kn_module_free(fc);
 */
#ifndef KILN_NN_H
#define KILN_NN_H

#include "kiln/nn_module.h"
#include "kiln/nn_init.h"
#include "kiln/nn_layers.h"
#include "kiln/nn_attention.h"

#endif
