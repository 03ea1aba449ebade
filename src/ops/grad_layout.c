/* Gradients of layout ops. */
#include "kiln/ops.h"
#include "ops/grad.h"

/* cat: each input's gradient is its stretch of the output's along the dim. */
kn_status kn_grad_cat(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    int64_t dim = c->attrs->i[0], at = 0;
    for (int i = 0; i < c->n_in; i++) {
        const kn_shape *s = &c->in_shape[i];
        if (s->n == 1 && s->v[0] == 0 && kn_ndim(gout[0]) != 1) continue; /* skipped by the forward */
        int64_t len = s->v[dim];
        if (c->needs[i] && !(gin[i] = kn_narrow(gout[0], dim, at, len))) return kn_last_status();
        at += len;
    }
    return KN_OK;
}
