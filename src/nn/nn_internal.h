/* Helpers shared by the module constructors in src/nn/. */
#ifndef KILN_NN_INTERNAL_H
#define KILN_NN_INTERNAL_H

#include "kiln/autograd.h"
#include "kiln/nn.h"
#include "kiln/ops.h"
#include "kiln/runtime.h"

/* A new, uninitialized parameter `name` of module m (NULL, marking m failed, for a non-float
 * dtype or on failure); the caller initializes it. */
kn_tensor *nn_new_param(void *m, const char *name, kn_shape shape, kn_dtype dtype);
/* The same for a buffer, filled with value (any dtype). */
kn_tensor *nn_new_buffer(void *m, const char *name, kn_shape shape, double value, kn_dtype dtype);
/* PyTorch's reset_parameters of Linear and Conv: weight kaiming_uniform(a = sqrt(5)), bias
 * (may be NULL) U(+-1/sqrt(fan_in)). */
kn_status nn_init_linear_default(kn_tensor *weight, kn_tensor *bias);
/* Copies values into t without grad history (in-place updates of parameters and buffers). */
kn_status nn_assign(kn_tensor *t, kn_tensor *values);

/* Brackets a module's forward: while it runs, debug mode's errors name the module
 * (core/call_site.h). nn_leave passes the forward's result through:
 *     nn_enter(l);
 *     return nn_leave(kn_linear(x, l->weight, l->bias)); */
void nn_enter(const void *module);
kn_tensor *nn_leave(kn_tensor *result);

#endif
