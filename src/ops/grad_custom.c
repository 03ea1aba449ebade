/* The gradient of custom ops: the registered op's backward function, written with kiln ops. */
#include "core/error.h"
#include "kiln/ops.h"
#include "ops/custom_registry.h"
#include "ops/grad.h"

kn_status kn_grad_custom(const kn_grad_ctx *c, kn_tensor *const *gout, kn_tensor **gin) {
    const kn_custom_entry *e = kn_custom_of(c->attrs);
    /* Outputs no gradient reached get zeros, so the user's formula needs no NULL checks. */
    kn_tensor *g[KN_CUSTOM_MAX_OUTPUTS];
    for (int j = 0; j < c->n_out; j++) {
        g[j] = gout[j] ? gout[j] : kn_zeros_like(c->out[j]);
        if (!g[j]) return kn_last_status();
    }
    kn_custom_grad_ctx uc = {.n_in = c->n_in, .n_out = c->n_out, .in = c->in, .out = c->out, .attrs = &c->attrs->custom.call,
                             .needs = c->needs, .user = e->def.user};
    kn_clear_error();
    kn_status st = e->def.backward(&uc, g, gin);
    if (st != KN_OK && kn_last_status() == KN_OK) return kn_error(st, "backward of %s failed", e->def.name);
    return st;
}
