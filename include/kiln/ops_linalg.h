/* Matrix products, through BLAS. */
#ifndef KILN_OPS_LINALG_H
#define KILN_OPS_LINALG_H

#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* torch.matmul: 1-d operands are promoted to matrices and the added dim removed after;
 * batch dims broadcast. */
KN_API kn_tensor *kn_matmul(kn_tensor *a, kn_tensor *b);
/* Batched [B, M, K] x [B, K, N]; no broadcasting. */
KN_API kn_tensor *kn_bmm(kn_tensor *a, kn_tensor *b);
/* beta * input + alpha * (a @ b), a and b 2-d, input broadcast to [M, N]. */
KN_API kn_tensor *kn_addmm(kn_tensor *input, kn_tensor *a, kn_tensor *b, double beta, double alpha);
/* x @ weight^T + bias (weight [out, in], bias [out] or NULL), x of any leading dims. */
KN_API kn_tensor *kn_linear(kn_tensor *x, kn_tensor *weight, kn_tensor *bias);
/* a[i] * b[j] for 1-d a, b. */
KN_API kn_tensor *kn_outer(kn_tensor *a, kn_tensor *b);

#ifdef __cplusplus
}
#endif
#endif
