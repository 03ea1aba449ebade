/* The lazy modes' window (exec/window.h). */
#include "exec/window.h"

#include <stdlib.h>

#include "exec/dispatch.h"

/* Launches what waits; the lock is held. */
static kn_status flush_locked(kn_window *w) {
    if (!w->count) return KN_OK;
    int n = w->count;
    w->count = 0;
    return w->flush(w->nodes, w->backends, n);
}

kn_status kn_window_submit(kn_window *w, kn_backend *b, kn_node *n) {
    pthread_mutex_lock(&w->lock);
    if (!w->max) w->max = w->limit ? w->limit() : 0;
    if (w->max <= 0) w->max = -1; /* no limit */
    kn_status st = KN_OK;
    if (w->count == w->cap) {
        int grown = w->cap ? 2 * w->cap : 256;
        kn_node **nn = realloc(w->nodes, (size_t)grown * sizeof *nn);
        if (nn) w->nodes = nn;
        kn_backend **bb = nn ? realloc(w->backends, (size_t)grown * sizeof *bb) : NULL;
        if (bb) w->backends = bb;
        if (!nn || !bb) { /* no room to wait: run it now, after what waits */
            st = flush_locked(w);
            pthread_mutex_unlock(&w->lock);
            kn_node_launch(n);
            return st;
        }
        w->cap = grown;
    }
    if (w->count && w->nodes[w->count - 1]->stream != n->stream) st = flush_locked(w);
    w->nodes[w->count] = n;
    w->backends[w->count++] = b;
    if (w->max > 0 && w->count >= w->max) {
        kn_status f = flush_locked(w);
        if (st == KN_OK) st = f;
    }
    pthread_mutex_unlock(&w->lock);
    return st;
}

kn_status kn_window_flush(kn_window *w) {
    pthread_mutex_lock(&w->lock);
    kn_status st = flush_locked(w);
    pthread_mutex_unlock(&w->lock);
    return st;
}

int kn_nodes_compact(kn_node **nodes, kn_backend **backends, int n) {
    int kept = 0;
    for (int j = 0; j < n; j++)
        if (nodes[j]) backends[kept] = backends[j], nodes[kept++] = nodes[j];
    return kept;
}
