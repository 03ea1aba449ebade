/* Escape analysis by reference counts (graph/escape.h). */
#include "graph/escape.h"

#include "core/tensor_impl.h"

/* Uses of handle t as an input inside nodes[first .. first + count). */
static int uses_within(kn_node *const *nodes, int first, int count, const kn_tensor *t) {
    int uses = 0;
    for (int j = first; j < first + count; j++)
        for (int i = 0; i < nodes[j]->n_in; i++) uses += nodes[j]->in[i] == t;
    return uses;
}

/* Whether input i of node j is the first use of its handle inside the group. */
static bool first_use(kn_node *const *nodes, int first, int j, int i) {
    const kn_tensor *h = nodes[j]->in[i];
    for (int q = first; q <= j; q++)
        for (int k = 0; k < (q == j ? i : nodes[q]->n_in); k++)
            if (nodes[q]->in[k] == h) return false;
    return true;
}

/* Counts t's references and the other headers on its storage against the uses inside. */
bool kn_value_escapes(kn_node *const *nodes, int first, int count, kn_tensor *t) {
    if (atomic_load(&t->refs) > 1 + uses_within(nodes, first, count, t)) return true;
    int headers = 1; /* t's */
    for (int j = first; j < first + count; j++)
        for (int i = 0; i < nodes[j]->n_in; i++) {
            kn_tensor *h = nodes[j]->in[i];
            if (h == t || h->storage != t->storage || !first_use(nodes, first, j, i)) continue;
            if (!kn_tensor_same_view(h, t) || atomic_load(&h->refs) > uses_within(nodes, first, count, h)) return true;
            headers++;
        }
    return atomic_load(&t->storage->refs) > headers;
}
