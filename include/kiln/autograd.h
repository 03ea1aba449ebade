/* Autograd: gradients of any computation made of kiln ops.
 *
 * Marking a float tensor with kn_requires_grad makes it a leaf. While grad mode is on (the
 * default), every op with an input that requires grad records a backward node, whose
 * formula comes from the op table (src/ops/defs/grad.def) and is itself written with kiln
 * ops. kn_backward(loss) walks those nodes in reverse and adds each leaf's gradient into
 * its .grad (gradients accumulate over calls until kn_zero_grad).
 *
 *     kn_requires_grad(w, true);
 *     kn_tensor *loss = kn_mse_loss(kn_matmul(x, w), y, KN_REDUCTION_MEAN);
 *     kn_backward(loss);
 *     kn_tensor *g = kn_grad(w);          // w's accumulated gradient, a new handle
 *
 * Grad mode and no-grad scopes are per thread. Backward runs on the calling thread and
 * records nothing (higher-order gradients are not supported). */
#ifndef KILN_AUTOGRAD_H
#define KILN_AUTOGRAD_H

#include <stdbool.h>

#include "kiln/status.h"
#include "kiln/tensor.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Marks t (a float tensor made without grad history: a leaf) as needing gradients, or
 * clears the mark. Returns t, or NULL with an error for an integer dtype or a non-leaf.
 * The mark is shared by every handle of t (kn_retain) but not by views of it, which are
 * ordinary results with history. */
KN_API kn_tensor *kn_requires_grad(kn_tensor *t, bool requires);
/* Whether t requires grad: a marked leaf, or a result computed from one in grad mode. */
KN_API bool kn_needs_grad(const kn_tensor *t);
/* Whether t is a leaf (it has no backward node). */
KN_API bool kn_is_leaf(const kn_tensor *t);

/* The gradient accumulated in a leaf (a new handle, adopted into the current scope), or
 * NULL with no error set when none has been computed (check kn_last_status for NULL t). */
KN_API kn_tensor *kn_grad(kn_tensor *t);
/* Replaces t's gradient with g (same shape and dtype; NULL clears it). For optimizers,
 * gradient clipping and tests. */
KN_API kn_status kn_set_grad(kn_tensor *t, kn_tensor *g);
/* Forgets t's gradient (the next backward starts it from zero). */
KN_API kn_status kn_zero_grad(kn_tensor *t);

/* A handle of t's values with no history: it never requires grad. */
KN_API kn_tensor *kn_detach(kn_tensor *t);

/* Backpropagates from a one-element loss (seed gradient 1). The graph's saved tensors are
 * freed afterwards; backward through it again is an error naming the op. */
KN_API kn_status kn_backward(kn_tensor *loss);
/* The general form: root of any shape with its seed gradient (root's shape and dtype; NULL
 * for a one-element root means 1), and retain_graph to keep the graph for another pass. */
KN_API kn_status kn_backward_ex(kn_tensor *root, kn_tensor *seed, bool retain_graph);

/* Grad mode of this thread: when off, ops record no history (inference, optimizer steps).
 * kn_set_grad_enabled returns the previous setting, so a block can restore it. */
KN_API bool kn_set_grad_enabled(bool enabled);
KN_API bool kn_is_grad_enabled(void);
/* No-grad scopes, which nest: push turns grad mode off, pop restores what push found. */
KN_API void kn_no_grad_push(void);
KN_API void kn_no_grad_pop(void);

/* dst becomes a handle to src's storage, dtype, device, offset and strides (PyTorch's
 * `param.data = src`). Shapes must be equal; dst must not have gradient history (a leaf that
 * requires grad keeps requiring it; a gradient of another dtype is dropped). Pending work that
 * reads or writes dst finishes first. Loaders use it to put a file's weights into a module
 * built on the meta device. */
KN_API kn_status kn_tensor_assign_(kn_tensor *dst, kn_tensor *src);

/* Statistics for tests and tools: backward nodes alive now (recorded and not yet freed). */
KN_API int64_t kn_autograd_live_nodes(void);

#ifdef __cplusplus
}
#endif
#endif
