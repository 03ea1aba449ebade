/* Dead-code elimination (graph/dce.h). A node holds one reference to each output and each
 * input, so an output whose header and storage hold only the producer's reference is read by
 * no one; walking backwards, freeing a dead node drops its references to its inputs, which can
 * make their producers dead in turn. */
#include "graph/dce.h"

#include "core/tensor_impl.h"

static bool unread(const kn_tensor *t) { return atomic_load(&t->refs) == 1 && atomic_load(&t->storage->refs) == 1; }

int kn_dce(kn_node **nodes, int n) {
    int freed = 0;
    for (int j = n - 1; j >= 0; j--) {
        kn_node *x = nodes[j];
        if (!x || !kn_node_is_pure(x)) continue;
        bool dead = true;
        for (int o = 0; o < x->n_out && dead; o++) dead = unread(x->out[o]);
        if (!dead) continue;
        kn_node_free(x);
        nodes[j] = NULL;
        freed++;
    }
    return freed;
}
