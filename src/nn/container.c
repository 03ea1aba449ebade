/* Composition: Sequential and pre-norm residual connections. */
#include "core/error.h"
#include "nn/nn_internal.h"

static kn_tensor *sequential_forward(void *module, kn_tensor *x) {
    kn_module *m = module;
    if (!x) return kn_error_null_input("Sequential", 1), NULL;
    if (!m->n_children) return kn_view(x, kn_shape_of(x)); /* the identity, as a new handle */
    kn_scope_push();
    for (int i = 0; i < m->n_children && x; i++) x = kn_module_forward(m->children[i], x);
    return kn_scope_pop_keep(x);
}

kn_module *kn_nn_sequential_new(void) {
    kn_module *m = kn_module_alloc(sizeof *m, "Sequential");
    if (m) m->forward = sequential_forward;
    return m;
}

kn_tensor *kn_nn_residual(kn_tensor *x, void *norm, void *f) {
    kn_scope_push();
    kn_tensor *h = norm ? kn_module_forward(norm, x) : x;
    return kn_scope_pop_keep(kn_add(x, kn_module_forward(f, h)));
}
