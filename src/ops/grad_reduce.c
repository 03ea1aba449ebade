/* Gradients of reductions: the output gradient spread back over the reduced dims. */
#include "kiln/ops.h"
#include "ops/grad.h"

/* g (the reduced shape, or the kept shape when keepdim) with the reduced dims restored as
 * size 1, ready to broadcast against the input. */
static kn_tensor *unreduce(const kn_grad_ctx *c, kn_tensor *g) {
    kn_shape kept = c->in_shape[0];
    const kn_shape *dims = &c->attrs->s[0];
    for (int i = 0; i < dims->n; i++) kept.v[dims->v[i]] = 1;
    return kn_reshape(g, kept);
}

static int64_t reduced_count(const kn_grad_ctx *c) {
    int64_t n = 1;
    for (int i = 0; i < c->attrs->s[0].n; i++) n *= c->in_shape[0].v[c->attrs->s[0].v[i]];
    return n;
}

kn_status kn_grad_sum(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    gin[0] = kn_expand(unreduce(c, gout[0]), c->in_shape[0]);
    return gin[0] ? KN_OK : kn_last_status();
}

kn_status kn_grad_mean(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    kn_tensor *g = kn_div_scalar(unreduce(c, gout[0]), (double)reduced_count(c));
    gin[0] = kn_expand(g, c->in_shape[0]);
    return gin[0] ? KN_OK : kn_last_status();
}
