/* A window of recorded nodes that have not been launched, in record order: the lazy modes'
 * scheduler state (fused mode's window, compiled mode's program being traced). Nodes of one
 * window run on one stream: a node for another stream flushes what waits first. */
#ifndef KILN_EXEC_WINDOW_H
#define KILN_EXEC_WINDOW_H

#include <pthread.h>

#include "backends/backend.h"

typedef struct kn_window {
    /* Launches nodes[0..n) (consumed; the arrays may be reordered); the first error. */
    kn_status (*flush)(kn_node **nodes, kn_backend **backends, int n);
    /* The most nodes it waits with before flushing by itself (read once); 0: no limit. */
    int (*limit)(void);
    pthread_mutex_t lock;
    kn_node **nodes;
    kn_backend **backends;
    int count, cap, max;
} kn_window;

#define KN_WINDOW_INIT(flush_fn, limit_fn) {.flush = flush_fn, .limit = limit_fn, .lock = PTHREAD_MUTEX_INITIALIZER}

/* Takes node n (whose kernel b has) into w, flushing w first or after as the rules say. */
kn_status kn_window_submit(kn_window *w, kn_backend *b, kn_node *n);
/* Flushes everything w holds. */
kn_status kn_window_flush(kn_window *w);

/* Drops the NULL slots a pass left in nodes[0..n), moving backends along (order kept); the
 * new count. */
int kn_nodes_compact(kn_node **nodes, kn_backend **backends, int n);

#endif
