/* The window of fused mode (exec/window.h): nodes recorded but not launched, flushed into the
 * fused scheduler at a read, a sync, a mode change or when $KILN_FUSED_WINDOW (1024) wait. */
#include <stdlib.h>

#include "exec/fused.h"
#include "exec/scheduler.h"
#include "exec/window.h"

enum { DEFAULT_WINDOW = 1024 };

static int window_limit(void) {
    const char *s = getenv("KILN_FUSED_WINDOW");
    int v = s ? atoi(s) : 0;
    return v > 0 ? v : DEFAULT_WINDOW;
}

static kn_window window = KN_WINDOW_INIT(kn_fused_schedule, window_limit);

static kn_status fused_submit(kn_backend *b, kn_node *n) { return kn_window_submit(&window, b, n); }

/* Schedules and launches every waiting node: every read and sync comes here (kn_realize). */
static kn_status fused_realize(void) { return kn_window_flush(&window); }

const kn_scheduler kn_fused_scheduler = {"fused", fused_submit, fused_realize, true};
