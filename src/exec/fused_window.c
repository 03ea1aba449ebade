/* The window of fused mode: nodes recorded but not launched, in record order. */
#include <pthread.h>
#include <stdlib.h>

#include "core/error.h"
#include "exec/dispatch.h"
#include "exec/fused.h"
#include "exec/scheduler.h"

enum { DEFAULT_WINDOW = 1024 };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static kn_node **nodes;
static kn_backend **backends;
static int count, cap, limit;

static int window_limit(void) {
    if (!limit) {
        const char *s = getenv("KILN_FUSED_WINDOW");
        int v = s ? atoi(s) : 0;
        limit = v > 0 ? v : DEFAULT_WINDOW;
    }
    return limit;
}

/* Launches what waits; the lock is held. */
static kn_status flush_locked(void) {
    if (!count) return KN_OK;
    int n = count;
    count = 0;
    return kn_fused_schedule(nodes, backends, n);
}

/* Takes a node into the window; flushes when the window is full. */
static kn_status fused_submit(kn_backend *b, kn_node *n) {
    pthread_mutex_lock(&lock);
    kn_status st = KN_OK;
    if (count == cap) {
        int grown = cap ? 2 * cap : 256;
        kn_node **nn = realloc(nodes, (size_t)grown * sizeof *nn);
        if (nn) nodes = nn;
        kn_backend **bb = nn ? realloc(backends, (size_t)grown * sizeof *bb) : NULL;
        if (bb) backends = bb;
        if (!nn || !bb) { /* no room to wait: run it now, after what waits */
            st = flush_locked();
            pthread_mutex_unlock(&lock);
            kn_node_launch(n);
            return st;
        }
        cap = grown;
    }
    if (count && nodes[count - 1]->stream != n->stream) st = flush_locked(); /* a window runs on one stream */
    nodes[count] = n;
    backends[count++] = b;
    if (count >= window_limit()) st = flush_locked();
    pthread_mutex_unlock(&lock);
    return st;
}

/* Schedules and launches every waiting node: every read and sync comes here (kn_realize). */
static kn_status fused_realize(void) {
    pthread_mutex_lock(&lock);
    kn_status st = flush_locked();
    pthread_mutex_unlock(&lock);
    return st;
}

const kn_scheduler kn_fused_scheduler = {"fused", fused_submit, fused_realize, true};
