/* Autocast: mixed-precision compute without changing model code, PyTorch's autocast rules.
 * While it is on, the matrix products (matmul and what is built on it: bmm, linear, addmm),
 * conv2d, conv_transpose2d and scaled_dot_product_attention cast their f32/f16/bf16 inputs to
 * the autocast dtype and produce it; the ops that need range or precision (softmax,
 * log_softmax, the losses, the norms, sum/mean-type reductions, exp/log/pow...) cast bf16/f16
 * inputs up to f32; every other op computes in its inputs' widest dtype, as always. f64 is
 * never cast. The casts are ordinary recorded ops, so autograd sees them: the gradient of an
 * f32 parameter used under autocast arrives in f32. Backward runs with autocast off.
 *
 *     kn_autocast_push(KN_BF16);
 *     kn_tensor *loss = model_forward(m, x, y);   // matmuls in bf16, loss in f32
 *     kn_autocast_pop();
 *     kn_backward(loss);                          // parameters and gradients stay f32
 *
 * The setting is per thread and scoped: pushes nest, each pop restores what was on before. */
#ifndef KILN_AUTOCAST_H
#define KILN_AUTOCAST_H

#include "kiln/dtype.h"
#include "kiln/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Turns autocast on with dtype (KN_BF16 or KN_F16) until the matching pop, or off (KN_F32)
 * for a region inside an autocast one. KN_ERR_DTYPE for any other dtype, KN_ERR_ARG when
 * pushes nest deeper than 64. */
KN_API kn_status kn_autocast_push(kn_dtype dtype);
/* Restores the setting before the last push; KN_ERR_ARG (nothing changed) without one. */
KN_API kn_status kn_autocast_pop(void);
/* The current autocast dtype: KN_BF16 or KN_F16 while on, KN_F32 while off. */
KN_API kn_dtype kn_autocast_dtype(void);

#ifdef __cplusplus
}
#endif
#endif
