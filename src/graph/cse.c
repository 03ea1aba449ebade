/* Common-subexpression elimination (graph/cse.h). A window or program is a piece of the graph
 * seen whole before anything in it runs, so a node that recomputes an earlier node's values (the same pure op
 * and attributes over the same input views: kn_node_same, found through kn_node_hash) need
 * not run, provided that
 *   - nothing in between writes in place into a storage it reads (the inputs' values are
 *     then the same), and nothing after the earlier node writes into either node's outputs;
 *   - no one outside the window can see its values (they are intermediates: a handle the
 *     user or autograd holds could later be written in place, and must not share memory).
 * Its readers in the window then read the earlier node's outputs: every header on its output
 * storage is held by the window's nodes, so moving those headers onto the earlier output is
 * seen by no one else. Its own outputs, deferred, never get memory. */
#include "graph/cse.h"

#include <stdlib.h>

#include "core/tensor_impl.h"
#include "graph/escape.h"

/* Whether some node in nodes[from, to) writes in place into storage s. */
static bool written_in(kn_node *const *nodes, int from, int to, const kn_storage *s) {
    for (int k = from; k < to; k++)
        for (int o = 0; o < nodes[k]->n_out; o++)
            if (!(nodes[k]->fresh_out & (1u << o)) && nodes[k]->out[o]->storage == s) return true;
    return false;
}

/* Whether nodes[j] may be replaced by nodes[i] (i < j, kn_node_same) in a window of n. */
static bool replaceable(kn_node *const *nodes, int n, int i, int j) {
    const kn_node *a = nodes[i], *b = nodes[j];
    for (int x = 0; x < b->n_in; x++)
        if (written_in(nodes, i + 1, j, b->in[x]->storage)) return false;
    for (int o = 0; o < b->n_out; o++)
        if (written_in(nodes, i + 1, n, a->out[o]->storage) || written_in(nodes, j + 1, n, b->out[o]->storage) ||
            kn_value_escapes(nodes, 0, n, b->out[o]))
            return false;
    return true;
}

/* Moves every header on `from` held by nodes[j..n) onto `to` (same geometry: both are fresh
 * contiguous outputs of one shape and dtype). */
static void move_readers(kn_node *const *nodes, int j, int n, kn_storage *from, kn_storage *to) {
    for (int k = j; k < n; k++) {
        kn_tensor **ts = k == j ? nodes[k]->out : nodes[k]->in;
        int count = k == j ? nodes[k]->n_out : nodes[k]->n_in;
        for (int x = 0; x < count; x++)
            if (ts[x]->storage == from) {
                kn_storage_retain(to);
                ts[x]->storage = to;
                kn_storage_release(from);
            }
    }
}

typedef struct slot {
    uint64_t hash;
    int index; /* into nodes; -1: empty */
} slot;

int kn_cse(kn_node **nodes, int n) {
    int cap = 16;
    while (cap < 2 * n) cap *= 2;
    slot *table = malloc((size_t)cap * sizeof *table);
    bool *dropped = calloc((size_t)(n ? n : 1), sizeof *dropped);
    if (!table || !dropped) { /* without memory for the bookkeeping, everything runs */
        free(table);
        free(dropped);
        return 0;
    }
    for (int s = 0; s < cap; s++) table[s].index = -1;
    /* A dropped node stays in the array until the end, holding its references, so that every
     * check sees the window as it was recorded. */
    for (int j = 0; j < n; j++) {
        kn_node *b = nodes[j];
        if (!kn_node_is_pure(b)) continue;
        uint64_t h = kn_node_hash(b);
        size_t s = (size_t)h & (size_t)(cap - 1);
        int match = -1;
        for (; table[s].index >= 0 && match < 0; s = (s + 1) & (size_t)(cap - 1))
            if (table[s].hash == h && kn_node_same(nodes[table[s].index], b) && replaceable(nodes, n, table[s].index, j))
                match = table[s].index;
        if (match < 0) {
            table[s] = (slot){h, j};
            continue;
        }
        for (int o = 0; o < b->n_out; o++) move_readers(nodes, j, n, b->out[o]->storage, nodes[match]->out[o]->storage);
        dropped[j] = true;
    }
    int merged = 0;
    for (int j = 0; j < n; j++)
        if (dropped[j]) {
            kn_node_free(nodes[j]);
            nodes[j] = NULL;
            merged++;
        }
    free(table);
    free(dropped);
    return merged;
}
