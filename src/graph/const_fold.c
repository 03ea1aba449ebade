/* Constant folding (graph/const_fold.h). One walk in program order: a storage made by a `fill`
 * (or by a folded node) is uniform with its value until a node writes it in place. */
#include "graph/const_fold.h"

#include <stdlib.h>

#include "core/tensor_impl.h"
#include "graph/ptr_map.h"

/* An elementwise op of its inputs' values alone, into a fresh output. */
static bool foldable(const kn_node *x) {
    const kn_op_def *def = &kn_op_table[x->op];
    return def->kind == KN_KIND_ELEMENTWISE && def->expr && x->n_in >= 1 && x->n_out == 1 && kn_node_is_pure(x);
}

/* A fill node writing x's output (whose reference it takes over) with `value`. */
static kn_node *fill_for(kn_node *x, double value) {
    kn_node *f = kn_node_make(KN_OP_fill, 0);
    if (!f) return NULL;
    kn_tensor *t = x->out[0];
    *KN_ATTRS(f, creation) = (kn_creation_attrs){.shape = kn_shape_of(t), .dtype = t->dtype};
    KN_ATTRS(f, fill)->a = value;
    f->n_out = 1;
    f->fresh_out = 1;
    f->out[0] = t;
    f->stream = x->stream;
    f->origin = x->origin;
    x->out[0] = NULL;
    x->origin = NULL;
    return f;
}

int kn_const_fold(kn_node **nodes, int n, kn_fold_eval_fn eval, void *ctx) {
    int outputs = 0;
    for (int j = 0; j < n; j++) outputs += nodes[j] ? nodes[j]->n_out : 0;
    kn_ptr_map uniform = {0}; /* storage -> index into value, or -1 once written in place */
    double *value = malloc((size_t)(outputs ? outputs : 1) * sizeof *value);
    if (!value || !kn_ptr_map_init(&uniform, (size_t)outputs)) {
        free(value);
        kn_ptr_map_free(&uniform);
        return 0; /* no memory to fold: nothing changes */
    }
    int n_values = 0, folded = 0;
    for (int j = 0; j < n; j++) {
        kn_node *x = nodes[j];
        if (!x) continue;
        for (int k = 0; k < x->n_out; k++)
            if (!(x->fresh_out & (1u << k))) *kn_ptr_map_at(&uniform, x->out[k]->storage, -1) = -1;
        double in[3], out;
        bool all_uniform = foldable(x) && x->n_in <= 3;
        for (int i = 0; all_uniform && i < x->n_in; i++) {
            int v = kn_ptr_map_get(&uniform, x->in[i]->storage);
            all_uniform = v >= 0;
            if (all_uniform) in[i] = value[v];
        }
        if (all_uniform && eval(x, in, &out, ctx)) {
            kn_node *f = fill_for(x, out);
            if (!f) continue;
            kn_node_free(x);
            nodes[j] = x = f;
            folded++;
        }
        if (x->op == KN_OP_fill && x->fresh_out == 1) {
            value[n_values] = KN_ATTRS(x, fill)->a;
            *kn_ptr_map_at(&uniform, x->out[0]->storage, 0) = n_values++;
        }
    }
    free(value);
    kn_ptr_map_free(&uniform);
    return folded;
}
